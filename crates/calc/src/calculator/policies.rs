//! Every policy of the cluster by its selector: which apply to a local endpoint, evaluating only
//! the selectors its labels leave open (see [`SelectorIndex`]) instead of all 2,000.

use std::collections::BTreeSet;

use calico_model::policy::Policy;
use calico_model::selector::Selector;

use super::ids::{FxMap, Slots};
use super::selectors::SelectorIndex;
use crate::desired::PolicyId;
use crate::labels::Effective;

#[derive(Debug)]
struct Entry {
    id: PolicyId,
    selector: Selector,
    untracked: bool,
}

#[derive(Debug, Default)]
pub(super) struct Policies {
    numbers: FxMap<PolicyId, u32>,
    entries: Slots<Entry>,
    selectors: SelectorIndex,
}

impl Policies {
    /// Records a policy as the cluster now has it (`None`: gone).
    pub fn set(&mut self, id: &PolicyId, policy: Option<&Policy>) {
        let number = self.numbers.get(id).copied();
        match (number, policy) {
            (Some(number), Some(policy)) => {
                let entry = &mut self.entries[number];
                entry.untracked = policy.untracked;
                if entry.selector != policy.selector {
                    entry.selector = policy.selector.clone();
                    self.selectors.insert(number, &policy.selector);
                }
            }
            (None, Some(policy)) => {
                let number = self.entries.insert(Entry {
                    id: id.clone(),
                    selector: policy.selector.clone(),
                    untracked: policy.untracked,
                });
                self.numbers.insert(id.clone(), number);
                self.selectors.insert(number, &policy.selector);
            }
            (Some(number), None) => {
                self.numbers.remove(id);
                self.entries.remove(number);
                self.selectors.remove(number);
            }
            (None, None) => {}
        }
    }

    /// The policies that apply to an endpoint with these labels (untracked ones only to host
    /// endpoints), as [`crate::desired::applies`] decides.
    pub fn matching(&self, labels: &Effective, host: bool) -> BTreeSet<PolicyId> {
        let mut numbers = Vec::new();
        let evaluate = |number| self.entries[number].selector.evaluate(labels);
        self.selectors
            .matching(labels.iter(), evaluate, &mut numbers);
        numbers
            .into_iter()
            .map(|number| &self.entries[number])
            .filter(|entry| host || !entry.untracked)
            .map(|entry| entry.id.clone())
            .collect()
    }
}
