//! A connection's policy trails from the steps the firewall logged for it: the enforced trail
//! and, with staged policies, the pending one (pure; `Collector` calls it).

use calico_dataplane::flowlog::{Logged, Step, StepAction};
use calico_model::flow::{PolicyHit, PolicyTrail, Verdict};
use calico_model::rule::Action;

/// The verdict a step gives, if it decides. A staged policy's step never decides: it only
/// says what would happen.
pub(super) fn verdict_of(logged: &Logged) -> Option<Verdict> {
    match (&logged.step, logged.action) {
        (Step::StagedPolicy { .. }, _) => None,
        (Step::Policy { .. }, StepAction::NextTier) => None,
        (_, StepAction::Deny) => Some(Verdict::Deny),
        (_, StepAction::Allow | StepAction::NextTier) => Some(Verdict::Allow),
    }
}

/// The tier a step is in (a profile's steps are after every tier).
fn tier_of(step: &Step) -> Option<&str> {
    match step {
        Step::Policy { tier, .. } | Step::StagedPolicy { tier, .. } | Step::EndOfTier { tier } => {
            Some(tier)
        }
        Step::Profile { .. } | Step::MissingProfile { .. } | Step::NoProfileMatched => None,
    }
}

/// A connection's trails from its logged steps, in the order the firewall took them (a tier's
/// staged policies first, then its policies): `enforced`, the steps that decided, and
/// `pending`, the trail as it would be with the staged policies enforced. In a tier where a
/// staged policy's rule matched, that step takes the place of the tier's policies (its
/// `next-tier` goes on to the next tier); elsewhere the enforced steps stand. `pending` is
/// empty when no staged policy matched, or when the trail with them cannot be known (a staged
/// `next-tier` out of the tier where the enforced trail ended).
pub(super) fn trail_of(steps: &[Logged], trigger: impl Fn(&str) -> Option<String>) -> PolicyTrail {
    let hit = |logged: &Logged| hit(logged, &trigger);
    let staged = |logged: &&Logged| matches!(logged.step, Step::StagedPolicy { .. });
    let enforced = steps.iter().filter(|l| !staged(l)).map(hit).collect();
    if !steps.iter().any(|l| staged(&l)) {
        return PolicyTrail {
            enforced,
            pending: Vec::new(),
        };
    }
    let mut pending = Vec::new();
    // The tier a staged step decided for: the rest of its steps are not in `pending`.
    let mut replaced: Option<&str> = None;
    for logged in steps {
        let tier = tier_of(&logged.step);
        if tier.is_some() && tier == replaced {
            continue;
        }
        pending.push(hit(logged));
        match (&logged.step, logged.action) {
            (Step::StagedPolicy { .. }, StepAction::NextTier) => replaced = tier,
            (Step::StagedPolicy { .. }, _) => break,
            _ if verdict_of(logged).is_some() => break,
            _ => {}
        }
    }
    let decided = pending.last().is_some_and(|hit| hit.verdict().is_some());
    PolicyTrail {
        enforced,
        pending: if decided { pending } else { Vec::new() },
    }
}

fn action_of(action: StepAction) -> Action {
    match action {
        StepAction::Allow => Action::Allow,
        StepAction::Deny => Action::Deny,
        StepAction::NextTier => Action::NextTier,
    }
}

/// The step as a trail's hit; `trigger` names the policy of a tier that applied.
fn hit(logged: &Logged, trigger: &impl Fn(&str) -> Option<String>) -> PolicyHit {
    let action = action_of(logged.action);
    match &logged.step {
        Step::Policy { tier, name, rule } => PolicyHit::policy(tier, name, *rule, action),
        Step::StagedPolicy { tier, name, rule } => PolicyHit::staged(tier, name, *rule, action),
        Step::EndOfTier { tier } => PolicyHit::end_of_tier(tier, trigger(tier).as_deref()),
        Step::Profile { name, rule } => PolicyHit::profile(name, *rule, action),
        Step::MissingProfile { name } => PolicyHit::missing_profile(name),
        Step::NoProfileMatched => PolicyHit::no_profile_matched(),
    }
}
