//! IP set membership as the calculator sees it: a rule starting to use a set (filling a set
//! that just became active from the endpoints it could hold) or stopping; the index itself is
//! `ipsets.rs`.

use super::Calculator;
use super::ipsets::Out;
use crate::desired::IpSetSource;

impl Calculator {
    /// One more rule uses `source`; a set that just became active is filled from every
    /// endpoint it selects.
    pub(super) fn ipset_ref(&mut self, source: IpSetSource) {
        let out = Out {
            sets: &mut self.state.ipsets,
            changed: &mut self.changes.ipsets,
        };
        let Some(number) = self.ipsets.reference(&source, out) else {
            return;
        };
        let joining: Vec<u32> = self
            .candidate_endpoints(number)
            .into_iter()
            .filter(|&id| self.selects(number, id))
            .collect();
        for id in joining {
            let out = Out {
                sets: &mut self.state.ipsets,
                changed: &mut self.changes.ipsets,
            };
            self.ipsets.join(number, id, out);
        }
    }

    pub(super) fn ipset_unref(&mut self, id: &str) {
        let out = Out {
            sets: &mut self.state.ipsets,
            changed: &mut self.changes.ipsets,
        };
        self.ipsets.release(id, out);
    }

    /// The endpoints (numbers) that could be in a set: a superset of its members, each once.
    fn candidate_endpoints(&mut self, number: u32) -> Vec<u32> {
        for atom in self.ipsets.atoms(number).unwrap_or_default() {
            self.endpoints.index_name(&atom.name);
        }
        let mut ids: Vec<u32> = match self.ipsets.source(number) {
            IpSetSource::Tag(tag) => {
                let users = self
                    .cluster
                    .profiles
                    .iter()
                    .filter(|(_, p)| p.tags.contains(tag));
                users.flat_map(|(id, _)| self.users.of(id)).collect()
            }
            IpSetSource::Selector(_) => match self.ipsets.atoms(number) {
                Some(atoms) => atoms
                    .iter()
                    .flat_map(|a| self.endpoints.with_label(&a.name, a.values.as_deref()))
                    .collect(),
                None => self.endpoints.iter().map(|(id, _)| id).collect(),
            },
        };
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// Whether endpoint `id`, as last refreshed, belongs to set `number`.
    fn selects(&self, number: u32, id: u32) -> bool {
        let Some(slot) = self.endpoints.get(id) else {
            return false;
        };
        match self.ipsets.source(number) {
            IpSetSource::Tag(tag) => {
                let endpoint = self.cluster.endpoints.get_by_id(id);
                endpoint.is_some_and(|(_, e)| self.cluster.has_tag(e, tag))
            }
            IpSetSource::Selector(selector) => selector.evaluate(&slot.labels),
        }
    }
}
