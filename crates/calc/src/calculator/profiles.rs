//! Which endpoints list each profile, and the labels an endpoint inherits from the profiles it
//! lists: merged once per distinct list of profiles, shared by every endpoint listing it, and
//! merged again only when one of the profiles' labels change. The lists themselves are shared
//! too (a cluster has far fewer distinct lists than endpoints).

use std::sync::Arc;

use super::endpoints::Endpoints;
use super::ids::{FxMap, IdSet};
use crate::cluster::{Cluster, ProfileList};
use crate::labels::LabelSet;

/// What a list of profiles gives an endpoint.
#[derive(Debug, Clone, Default)]
pub(super) struct Inherited {
    /// Their labels (of equal names, the first profile's).
    pub labels: LabelSet,
    /// Their tags.
    pub tags: Arc<[String]>,
}

#[derive(Debug, Default)]
pub(super) struct ProfileUsers {
    /// Profile id → the endpoints (numbers) listing it.
    users: FxMap<String, IdSet>,
    /// Every list endpoints hold → what it gives them (`None`: to be merged when asked for).
    lists: FxMap<ProfileList, Option<Inherited>>,
    /// The size of `lists` after its last purge.
    kept: usize,
}

impl ProfileUsers {
    /// The endpoints listing `profile`.
    pub fn of(&self, profile: &str) -> impl Iterator<Item = u32> + '_ {
        self.users.get(profile).into_iter().flat_map(IdSet::iter)
    }

    /// Records that endpoint `id` lists `profiles`; returns the lists before and after.
    pub fn set(
        &mut self,
        endpoints: &mut Endpoints,
        id: u32,
        profiles: &ProfileList,
    ) -> (ProfileList, ProfileList) {
        let new = self.list(profiles);
        let old = std::mem::replace(&mut endpoints[id].profiles, new.clone());
        for profile in old.iter() {
            if let Some(users) = self.users.get_mut(&**profile) {
                users.remove(id);
                if users.is_empty() {
                    self.users.remove(&**profile);
                }
            }
        }
        for profile in new.iter() {
            match self.users.get_mut(&**profile) {
                Some(users) => users.insert(id),
                None => self
                    .users
                    .entry(profile.to_string())
                    .or_default()
                    .insert(id),
            };
        }
        (old, new)
    }

    /// The shared copy of a list (the cluster shares them too; this keeps one copy should
    /// the cluster have made another since).
    fn list(&mut self, profiles: &ProfileList) -> ProfileList {
        if let Some((shared, _)) = self.lists.get_key_value(profiles) {
            return shared.clone();
        }
        if self.lists.len() > 2 * self.kept + 64 {
            // Lists no endpoint holds any more (the map holds the only copy).
            self.lists.retain(|list, _| Arc::strong_count(list) > 1);
            self.kept = self.lists.len();
        }
        self.lists.insert(profiles.clone(), None);
        profiles.clone()
    }

    /// What a list of profiles gives, as the cluster now has them.
    pub fn inherited(&mut self, profiles: &ProfileList, cluster: &Cluster) -> Inherited {
        if profiles.is_empty() {
            return Inherited::default();
        }
        if let Some(Some(inherited)) = self.lists.get(profiles) {
            return inherited.clone();
        }
        let found: Vec<_> = profiles
            .iter()
            .filter_map(|id| cluster.profiles.get(&**id))
            .collect();
        let layers: Vec<&LabelSet> = found.iter().map(|p| &p.labels).collect();
        let inherited = Inherited {
            labels: LabelSet::layered(&layers),
            tags: found.iter().flat_map(|p| p.tags.iter().cloned()).collect(),
        };
        self.lists.insert(profiles.clone(), Some(inherited.clone()));
        inherited
    }

    /// A profile's labels or tags changed: lists holding it are merged again when next asked
    /// for.
    pub fn profile_changed(&mut self, profile: &str) {
        for (list, inherited) in &mut self.lists {
            if list.iter().any(|p| **p == *profile) {
                *inherited = None;
            }
        }
    }
}
