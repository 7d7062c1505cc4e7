//! What the firewall tells the flow logs: with flow logs on (`FlowLogsEnabled`), every rule that
//! takes an action on a packet (a policy's or profile's `allow`, `deny` or `next-tier`, the end
//! of a tier, a missing profile, no profile matched) also logs the packet to NFLOG group
//! [`NFLOG_GROUP`] with a prefix that says which step it was. Felix reads the group and puts
//! the steps of each new connection together into its policy trail.
//!
//! ```text
//!   prefix:  <action><direction>|<step><id>|<rule>
//!   action:     A allow │ D deny │ N next-tier
//!   direction:  I inbound (the endpoint's ingress) │ O outbound
//!   step:       p policy │ s staged policy │ t end of tier │ r profile rule │
//!               m missing profile │ n no profile matched
//!   id:         16 hex digits of FNV-1a over tier/policy, tier, or profile (none for n)
//!   rule:       the rule's index (0-based) in its direction, for p, s and r
//!   e.g.  AI|p6e2b94a2cb45a51d|2   DO|t04d6c3e5a0f1b237|   DI|n|
//! ```
//!
//! The prefix stays under iptables' 64 bytes whatever the names; [`Decoder`] maps the hashes
//! back to names from the desired state.

use std::collections::HashMap;
use std::hash::Hasher;

use calico_calc::DesiredState;
use fnv::FnvHasher;

/// The NFLOG group the firewall logs flow steps to.
pub const NFLOG_GROUP: u16 = 32_100;

/// A step's action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StepAction {
    Allow,
    Deny,
    NextTier,
}

/// Which step of the evaluation logged.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Step {
    Policy {
        tier: String,
        name: String,
        rule: u32,
    },
    StagedPolicy {
        tier: String,
        name: String,
        rule: u32,
    },
    EndOfTier {
        tier: String,
    },
    Profile {
        name: String,
        rule: u32,
    },
    MissingProfile {
        name: String,
    },
    NoProfileMatched,
}

/// Whose rule it is, for both renderers: in a profile, `next-tier` means allow; a staged
/// policy's rule only logs.
#[derive(Debug, Clone, Copy)]
pub enum RuleOwner<'a> {
    Policy { tier: &'a str, name: &'a str },
    StagedPolicy { tier: &'a str, name: &'a str },
    Profile(&'a str),
}

impl RuleOwner<'_> {
    pub fn is_profile(self) -> bool {
        matches!(self, RuleOwner::Profile(_))
    }

    pub fn is_staged(self) -> bool {
        matches!(self, RuleOwner::StagedPolicy { .. })
    }

    /// The step its rule `rule` (0-based in its direction) is in the flow logs.
    pub fn step(self, rule: u32) -> Step {
        match self {
            RuleOwner::Policy { tier, name } => Step::Policy {
                tier: tier.to_owned(),
                name: name.to_owned(),
                rule,
            },
            RuleOwner::StagedPolicy { tier, name } => Step::StagedPolicy {
                tier: tier.to_owned(),
                name: name.to_owned(),
                rule,
            },
            RuleOwner::Profile(name) => Step::Profile {
                name: name.to_owned(),
                rule,
            },
        }
    }
}

/// One logged step: the step, its action, and whether it was the endpoint's inbound
/// evaluation.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Logged {
    pub step: Step,
    pub action: StepAction,
    pub inbound: bool,
}

fn hash(text: &str) -> u64 {
    let mut hasher = FnvHasher::default();
    hasher.write(text.as_bytes());
    hasher.finish()
}

/// The prefix for a step.
pub fn prefix(step: &Step, action: StepAction, inbound: bool) -> String {
    let a = match action {
        StepAction::Allow => 'A',
        StepAction::Deny => 'D',
        StepAction::NextTier => 'N',
    };
    let d = if inbound { 'I' } else { 'O' };
    let (kind, id, rule) = match step {
        Step::Policy { tier, name, rule } => ('p', Some(format!("{tier}/{name}")), Some(rule)),
        Step::StagedPolicy { tier, name, rule } => {
            ('s', Some(format!("{tier}/{name}")), Some(rule))
        }
        Step::EndOfTier { tier } => ('t', Some(tier.clone()), None),
        Step::Profile { name, rule } => ('r', Some(name.clone()), Some(rule)),
        Step::MissingProfile { name } => ('m', Some(name.clone()), None),
        Step::NoProfileMatched => ('n', None, None),
    };
    let id = id
        .map(|text| format!("{:016x}", hash(&text)))
        .unwrap_or_default();
    let rule = rule.map(u32::to_string).unwrap_or_default();
    format!("{a}{d}|{kind}{id}|{rule}")
}

/// Turns prefixes back into steps, knowing the names of the policies, staged policies, tiers
/// and profiles in the desired state (a prefix whose hash names nothing known, e.g. of a
/// policy deleted since, decodes to `None`).
#[derive(Debug, Default)]
pub struct Decoder {
    policies: HashMap<u64, (String, String)>,
    staged: HashMap<u64, (String, String)>,
    tiers: HashMap<u64, String>,
    profiles: HashMap<u64, String>,
}

impl Decoder {
    /// The names of `state`'s policies (tracked, untracked and staged), their tiers, and every
    /// profile its endpoints name.
    pub fn of(state: &DesiredState) -> Decoder {
        let mut decoder = Decoder::default();
        for id in state.policies.keys() {
            decoder.add_policy(&id.tier, &id.name);
        }
        for id in state.staged_policies.keys() {
            decoder.add_staged_policy(&id.tier, &id.name);
        }
        for program in state.endpoints.values() {
            for tier in program.tiers.iter().chain(&program.untracked_tiers) {
                decoder.tiers.insert(hash(&tier.name), tier.name.clone());
            }
            for profile in &program.profiles {
                decoder.profiles.insert(hash(profile), profile.clone());
            }
        }
        for profile in state.profiles.keys() {
            decoder.profiles.insert(hash(profile), profile.clone());
        }
        decoder
    }

    pub fn add_policy(&mut self, tier: &str, name: &str) {
        let key = hash(&format!("{tier}/{name}"));
        self.policies
            .insert(key, (tier.to_owned(), name.to_owned()));
        self.tiers.insert(hash(tier), tier.to_owned());
    }

    pub fn add_staged_policy(&mut self, tier: &str, name: &str) {
        let key = hash(&format!("{tier}/{name}"));
        self.staged.insert(key, (tier.to_owned(), name.to_owned()));
        self.tiers.insert(hash(tier), tier.to_owned());
    }

    /// The step a prefix names.
    pub fn decode(&self, prefix: &str) -> Option<Logged> {
        let mut parts = prefix.split('|');
        let head = parts.next()?;
        let (step, rule) = (parts.next()?, parts.next()?);
        let mut head = head.chars();
        let action = match head.next()? {
            'A' => StepAction::Allow,
            'D' => StepAction::Deny,
            'N' => StepAction::NextTier,
            _ => return None,
        };
        let inbound = match head.next()? {
            'I' => true,
            'O' => false,
            _ => return None,
        };
        let kind = step.chars().next()?;
        let id = || u64::from_str_radix(step.get(1..)?, 16).ok();
        let rule = || rule.parse::<u32>().ok();
        let step = match kind {
            'p' => {
                let (tier, name) = self.policies.get(&id()?)?.clone();
                let rule = rule()?;
                Step::Policy { tier, name, rule }
            }
            's' => {
                let (tier, name) = self.staged.get(&id()?)?.clone();
                let rule = rule()?;
                Step::StagedPolicy { tier, name, rule }
            }
            't' => Step::EndOfTier {
                tier: self.tiers.get(&id()?)?.clone(),
            },
            'r' => Step::Profile {
                name: self.profiles.get(&id()?)?.clone(),
                rule: rule()?,
            },
            'm' => Step::MissingProfile {
                name: self.profiles.get(&id()?)?.clone(),
            },
            'n' => Step::NoProfileMatched,
            _ => return None,
        };
        Some(Logged {
            step,
            action,
            inbound,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_fit_iptables_and_decode_back_to_their_step() {
        let long = "x".repeat(253);
        let mut decoder = Decoder::default();
        decoder.add_policy(&long, &long);
        decoder.add_staged_policy("default", "lockdown");
        decoder.profiles.insert(hash("web"), "web".to_owned());
        let steps = [
            (
                Step::Policy {
                    tier: long.clone(),
                    name: long.clone(),
                    rule: 12,
                },
                StepAction::NextTier,
                true,
            ),
            (
                Step::EndOfTier { tier: long.clone() },
                StepAction::Deny,
                false,
            ),
            (
                Step::Profile {
                    name: "web".to_owned(),
                    rule: 0,
                },
                StepAction::Allow,
                true,
            ),
            (Step::NoProfileMatched, StepAction::Deny, false),
            (
                Step::StagedPolicy {
                    tier: "default".to_owned(),
                    name: "lockdown".to_owned(),
                    rule: 0,
                },
                StepAction::Deny,
                true,
            ),
        ];
        for (step, action, inbound) in steps {
            let text = prefix(&step, action, inbound);
            assert!(text.len() < 64, "{text}");
            let logged = decoder.decode(&text).unwrap();
            assert_eq!(
                logged,
                Logged {
                    step,
                    action,
                    inbound
                }
            );
        }
        assert_eq!(
            decoder.decode("AI|p0000000000000000|1"),
            None,
            "unknown policy"
        );
        assert_eq!(decoder.decode("calico-drop: "), None, "not ours");
        let staged = Step::StagedPolicy {
            tier: long.clone(),
            name: long.clone(),
            rule: 0,
        };
        assert_eq!(
            decoder.decode(&prefix(&staged, StepAction::Deny, true)),
            None,
            "a policy's name is not a staged policy's"
        );
    }
}
