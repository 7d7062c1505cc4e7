//! The policy trail of a flow: the steps that took an action on it, in evaluation order, ending
//! in the one that decided — as `calicoctl policy explain` would walk them (`calc::explain`).
//!
//! | kind | tier | name | rule_index | action | decides |
//! | --- | --- | --- | --- | --- | --- |
//! | `policy` | yes | the policy | yes | `allow`, `deny`, `next-tier` | unless `next-tier` |
//! | `staged-policy` (pending trail only) | yes | the staged policy | yes | `allow`, `deny`, `next-tier` | unless `next-tier` |
//! | `end-of-tier` | yes | optional: the first policy of the tier that applied | no | `deny` | yes |
//! | `profile` | no | the profile | yes | `allow`, `deny`, `next-tier` (= allow in a profile) | yes |
//! | `missing-profile` | no | the profile the endpoint names | no | `deny` | yes |
//! | `no-profile-matched` | no | no | no | `deny` | yes |
//!
//! `rule_index` counts from 0 in the reporting endpoint's inbound (ingress) or outbound (egress)
//! rules, as upstream's `rule_index` and `calc::explain`'s `Reason::Rule::index` do; people see
//! it as "rule N+1", as `calicoctl policy explain` prints it. `log` rules never decide, so they
//! are not steps.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::Verdict;
use crate::error::{Validate, ValidationError};
use crate::names::{validate_policy_id, validate_profile_id, validate_tier_name};
use crate::rule::Action;

/// The most steps one trail may have.
pub const MAX_TRAIL_STEPS: usize = 64;

/// Which kind of step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HitKind {
    Policy,
    StagedPolicy,
    EndOfTier,
    Profile,
    MissingProfile,
    NoProfileMatched,
}

impl HitKind {
    pub fn as_str(self) -> &'static str {
        match self {
            HitKind::Policy => "policy",
            HitKind::StagedPolicy => "staged-policy",
            HitKind::EndOfTier => "end-of-tier",
            HitKind::Profile => "profile",
            HitKind::MissingProfile => "missing-profile",
            HitKind::NoProfileMatched => "no-profile-matched",
        }
    }

    /// Which fields the kind has: (tier, name, rule_index); `None` = optional.
    fn fields(self) -> (Option<bool>, Option<bool>, Option<bool>) {
        match self {
            HitKind::Policy | HitKind::StagedPolicy => (Some(true), Some(true), Some(true)),
            HitKind::EndOfTier => (Some(true), None, Some(false)),
            HitKind::Profile => (Some(false), Some(true), Some(true)),
            HitKind::MissingProfile => (Some(false), Some(true), Some(false)),
            HitKind::NoProfileMatched => (Some(false), Some(false), Some(false)),
        }
    }
}

/// One step of a trail.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PolicyHit {
    pub kind: HitKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<String>,
    /// The policy or profile (for `end-of-tier`: the policy that made the tier apply).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule_index: Option<u32>,
    pub action: Action,
}

impl PolicyHit {
    /// A rule of a tiered policy.
    pub fn policy(tier: &str, policy: &str, rule_index: u32, action: Action) -> PolicyHit {
        PolicyHit::step(
            HitKind::Policy,
            Some(tier),
            Some(policy),
            Some(rule_index),
            action,
        )
    }

    /// A rule of a staged policy (pending trails only).
    pub fn staged(tier: &str, policy: &str, rule_index: u32, action: Action) -> PolicyHit {
        let kind = HitKind::StagedPolicy;
        PolicyHit::step(kind, Some(tier), Some(policy), Some(rule_index), action)
    }

    /// A tier whose policies applied and none decided.
    pub fn end_of_tier(tier: &str, trigger: Option<&str>) -> PolicyHit {
        PolicyHit::step(HitKind::EndOfTier, Some(tier), trigger, None, Action::Deny)
    }

    /// A rule of a profile.
    pub fn profile(profile: &str, rule_index: u32, action: Action) -> PolicyHit {
        PolicyHit::step(
            HitKind::Profile,
            None,
            Some(profile),
            Some(rule_index),
            action,
        )
    }

    /// A profile the endpoint names that does not exist.
    pub fn missing_profile(profile: &str) -> PolicyHit {
        PolicyHit::step(
            HitKind::MissingProfile,
            None,
            Some(profile),
            None,
            Action::Deny,
        )
    }

    /// No rule of the endpoint's profiles matched.
    pub fn no_profile_matched() -> PolicyHit {
        PolicyHit::step(HitKind::NoProfileMatched, None, None, None, Action::Deny)
    }

    fn step(
        kind: HitKind,
        tier: Option<&str>,
        name: Option<&str>,
        rule_index: Option<u32>,
        action: Action,
    ) -> PolicyHit {
        PolicyHit {
            kind,
            tier: tier.map(str::to_owned),
            name: name.map(str::to_owned),
            rule_index,
            action,
        }
    }

    /// The verdict this step gave, or `None` when it passed on (`next-tier` in a policy).
    pub fn verdict(&self) -> Option<Verdict> {
        match (self.kind, self.action) {
            (HitKind::Policy | HitKind::StagedPolicy, Action::NextTier) => None,
            (_, Action::Allow | Action::NextTier) => Some(Verdict::Allow),
            _ => Some(Verdict::Deny),
        }
    }

    fn check_fields(&self, staged_allowed: bool) -> Result<(), ValidationError> {
        let kind = self.kind.as_str();
        if self.kind == HitKind::StagedPolicy && !staged_allowed {
            return Err(ValidationError::new(
                "kind",
                "staged policies do not enforce: staged-policy steps belong in the pending trail",
            ));
        }
        let (tier, name, rule) = self.kind.fields();
        for (field, wanted, present) in [
            ("tier", tier, self.tier.is_some()),
            ("name", name, self.name.is_some()),
            ("rule_index", rule, self.rule_index.is_some()),
        ] {
            match (wanted, present) {
                (Some(true), false) => {
                    let reason = format!("a {kind} step needs its {field}");
                    return Err(ValidationError::new(field, reason));
                }
                (Some(false), true) => {
                    let reason = format!("a {kind} step has no {field}");
                    return Err(ValidationError::new(field, reason));
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn check_names(&self) -> Result<(), ValidationError> {
        if let Some(tier) = &self.tier {
            validate_tier_name(tier).map_err(|e| e.within("tier"))?;
        }
        if let Some(name) = &self.name {
            let checked = match self.kind {
                HitKind::Profile | HitKind::MissingProfile => validate_profile_id(name),
                _ => validate_policy_id(name),
            };
            checked.map_err(|e| e.within("name"))?;
        }
        Ok(())
    }

    fn check_action(&self) -> Result<(), ValidationError> {
        let allowed: &[Action] = match self.kind {
            HitKind::Policy | HitKind::StagedPolicy | HitKind::Profile => {
                &[Action::Allow, Action::Deny, Action::NextTier]
            }
            _ => &[Action::Deny],
        };
        if allowed.contains(&self.action) {
            return Ok(());
        }
        let reason = match self.action {
            Action::Log => "log rules do not decide a flow: leave them out of the trail".to_owned(),
            other => format!(
                "a {} step's action is deny, not {other}",
                self.kind.as_str()
            ),
        };
        Err(ValidationError::new("action", reason))
    }
}

impl fmt::Display for PolicyHit {
    /// "tier default policy web rule 2: deny", numbering rules from 1 as people read them.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tier = self.tier.as_deref().unwrap_or_default();
        let name = self.name.as_deref().unwrap_or_default();
        let rule = self.rule_index.map_or(0, |r| u64::from(r) + 1);
        match self.kind {
            HitKind::Policy => write!(f, "tier {tier} policy {name} rule {rule}"),
            HitKind::StagedPolicy => write!(f, "tier {tier} staged policy {name} rule {rule}"),
            HitKind::EndOfTier if name.is_empty() => write!(f, "end of tier {tier}"),
            HitKind::EndOfTier => write!(f, "end of tier {tier} (policy {name} applied)"),
            HitKind::Profile => write!(f, "profile {name} rule {rule}"),
            HitKind::MissingProfile => write!(f, "missing profile {name}"),
            HitKind::NoProfileMatched => f.write_str("no profile rule matched"),
        }?;
        write!(f, ": {}", self.action)
    }
}

/// The trail that decided (`enforced`) and, when staged policies changed it, the trail as it
/// would be with them enforced (`pending`; empty when it is the same).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PolicyTrail {
    pub enforced: Vec<PolicyHit>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending: Vec<PolicyHit>,
}

impl PolicyTrail {
    /// The verdict of the enforced trail's last step.
    pub fn enforced_verdict(&self) -> Option<Verdict> {
        self.enforced.last().and_then(PolicyHit::verdict)
    }

    /// The verdict of the pending trail, if there is one.
    pub fn pending_verdict(&self) -> Option<Verdict> {
        self.pending.last().and_then(PolicyHit::verdict)
    }

    /// Every step of both trails.
    pub fn steps(&self) -> impl Iterator<Item = &PolicyHit> {
        self.enforced.iter().chain(&self.pending)
    }
}

impl Validate for PolicyTrail {
    fn validate(&mut self) -> Result<(), ValidationError> {
        if self.enforced.is_empty() {
            return Err(ValidationError::new(
                "enforced",
                "the trail must name at least the step that decided",
            ));
        }
        validate_steps(&self.enforced, false).map_err(|e| e.within("enforced"))?;
        if !self.pending.is_empty() {
            validate_steps(&self.pending, true).map_err(|e| e.within("pending"))?;
        }
        Ok(())
    }
}

fn validate_steps(steps: &[PolicyHit], staged_allowed: bool) -> Result<(), ValidationError> {
    if steps.len() > MAX_TRAIL_STEPS {
        let reason = format!("{} steps, the limit is {MAX_TRAIL_STEPS}", steps.len());
        return Err(ValidationError::object(reason));
    }
    let last = steps.len() - 1;
    for (i, step) in steps.iter().enumerate() {
        let at = format!("[{i}]");
        step.check_fields(staged_allowed)
            .map_err(|e| e.within(&at))?;
        step.check_names().map_err(|e| e.within(&at))?;
        step.check_action().map_err(|e| e.within(&at))?;
        match (i == last, step.verdict()) {
            (false, Some(_)) => {
                let reason = format!("step {i} ({step}) decided, so the trail ends there");
                return Err(ValidationError::new(format!("[{}]", i + 1), reason));
            }
            (true, None) => {
                let reason = format!("the last step ({step}) must decide: next-tier passes on");
                return Err(ValidationError::new(at, reason));
            }
            _ => {}
        }
    }
    Ok(())
}
