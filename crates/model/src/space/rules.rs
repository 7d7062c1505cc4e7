//! The rules between the objects of address spaces, which no object can check alone:
//!
//! | rule | checked when |
//! | --- | --- |
//! | two pools of one space do not overlap (the shared space is one space too) | a pool is written |
//! | a private pool does not overlap a shared pool | either is written |
//! | a shared IPv6 pool does not overlap the translation prefix | either is written |
//! | a space's ID fits the prefix's room, and no other space has it | a space or the config is written |
//! | a space named by a pool, endpoint or mapping exists | the pool, endpoint or mapping is written, the space deleted |
//! | a private endpoint's IPv4 addresses are in no shared pool | the endpoint is written |
//! | the config is not deleted while spaces exist | the config is deleted |
//!
//! [`Spaces`] is the datastore as far as these rules look: calicoctl fills it from etcd, records
//! a change's writes with [`Spaces::record`], then asks [`Spaces::problems`] about each written
//! key, so a file may create a space and its pools together (docs/data-model.md § Address
//! spaces, "Where refusals happen").

use std::collections::{BTreeMap, BTreeSet};

use ipnet::IpNet;

use super::{AddressSpace, MappingScope, SpaceConfig};
use crate::key::{Key, WorkloadEndpointId};
use crate::names::SHARED;
use crate::value::Value;

/// What the rules look at: spaces, the config, every pool and the spaces endpoints name.
#[derive(Debug, Clone, Default)]
pub struct Spaces {
    pub config: Option<SpaceConfig>,
    pub spaces: BTreeMap<String, AddressSpace>,
    /// Every pool: its space (`None`: shared) and CIDR.
    pub pools: BTreeSet<(Option<String>, IpNet)>,
    /// The space each mapping names (`shared` included).
    pub mappings: BTreeMap<(MappingScope, String), String>,
    /// The private space of each endpoint in one (endpoints of the shared space are not held).
    pub endpoints: BTreeMap<WorkloadEndpointId, String>,
}

impl Spaces {
    /// Records the value now at `key` (`None`: deleted); keys the rules do not look at are
    /// ignored.
    pub fn record(&mut self, key: &Key, value: Option<&Value>) {
        match (key, value) {
            (Key::SpaceConfig, Some(Value::SpaceConfig(config))) => self.config = Some(*config),
            (Key::SpaceConfig, _) => self.config = None,
            (Key::AddressSpace { space }, Some(Value::AddressSpace(value))) => {
                self.spaces.insert(space.clone(), *value);
            }
            (Key::AddressSpace { space }, _) => _ = self.spaces.remove(space),
            (Key::Pool { cidr }, value) => self.record_pool(None, *cidr, value.is_some()),
            (Key::SpacePool { space, cidr }, value) => {
                self.record_pool(Some(space.clone()), *cidr, value.is_some());
            }
            (Key::SpaceMapping { scope, id }, Some(Value::SpaceMapping(mapping))) => {
                let space = mapping.address_space.clone();
                self.mappings.insert((*scope, id.clone()), space);
            }
            (Key::SpaceMapping { scope, id }, _) => _ = self.mappings.remove(&(*scope, id.clone())),
            (Key::WorkloadEndpoint(id), Some(Value::WorkloadEndpoint(endpoint))) => {
                match endpoint.private_space() {
                    Some(space) => _ = self.endpoints.insert(id.clone(), space.to_owned()),
                    None => _ = self.endpoints.remove(id),
                }
            }
            (Key::WorkloadEndpoint(id), _) => _ = self.endpoints.remove(id),
            _ => {}
        }
    }

    fn record_pool(&mut self, space: Option<String>, cidr: IpNet, present: bool) {
        match present {
            true => _ = self.pools.insert((space, cidr)),
            false => _ = self.pools.remove(&(space, cidr)),
        }
    }

    /// Why the value now at `key` (`None`: deleted) breaks a rule, one reason per problem.
    pub fn problems(&self, key: &Key, value: Option<&Value>) -> Vec<String> {
        match (key, value) {
            (Key::SpaceConfig, Some(Value::SpaceConfig(config))) => self.config_problems(config),
            (Key::SpaceConfig, None) => self.config_deleted(),
            (Key::AddressSpace { space }, Some(Value::AddressSpace(value))) => {
                self.space_problems(space, value)
            }
            (Key::AddressSpace { space }, None) => self.users_of(space),
            (Key::Pool { cidr }, Some(_)) => self.pool_problems(None, cidr),
            (Key::SpacePool { space, cidr }, Some(_)) => self.pool_problems(Some(space), cidr),
            (Key::SpaceMapping { .. }, Some(Value::SpaceMapping(mapping))) => {
                self.missing(&mapping.address_space).into_iter().collect()
            }
            (Key::WorkloadEndpoint(_), Some(Value::WorkloadEndpoint(endpoint))) => {
                let Some(space) = endpoint.private_space() else {
                    return Vec::new();
                };
                let mut problems: Vec<String> = self.missing(space).into_iter().collect();
                for net in &endpoint.ipv4_nets {
                    let shared = self.pools.iter().filter(|(s, _)| s.is_none());
                    if let Some((_, pool)) = shared.into_iter().find(|(_, p)| p.contains(net)) {
                        problems.push(format!(
                            "ipv4_nets: {} of space {space:?} is in the shared pool {pool}: an \
                             address of a private space must be outside every shared pool",
                            net.addr()
                        ));
                    }
                }
                problems
            }
            _ => Vec::new(),
        }
    }

    /// A space that a pool, endpoint or mapping names and that does not exist.
    fn missing(&self, space: &str) -> Option<String> {
        if space == SHARED || self.spaces.contains_key(space) {
            return None;
        }
        Some(format!(
            "address_space: no address space {space:?} exists (create it first, or name an \
             existing one; an endpoint is never put in the shared space instead)"
        ))
    }

    fn space_problems(&self, space: &str, value: &AddressSpace) -> Vec<String> {
        let mut problems = Vec::new();
        match &self.config {
            None => problems.push(
                "id: no translation prefix is configured (/calico/v1/address_space/config, \
                 calicoctl kind addressSpaceConfig): configure it first, it decides which IDs fit"
                    .to_owned(),
            ),
            Some(config) => {
                if let Err(reason) = config.translation_prefix.check_id(value.id) {
                    problems.push(format!("id: {reason}"));
                }
            }
        }
        let others = self.spaces.iter().filter(|(name, _)| *name != space);
        for (other, _) in others.filter(|(_, s)| s.id == value.id) {
            problems.push(format!(
                "id: {} is also the ID of space {other:?}: two spaces with one ID would be one",
                value.id
            ));
        }
        problems
    }

    fn config_problems(&self, config: &SpaceConfig) -> Vec<String> {
        let prefix = config.translation_prefix;
        let mut problems = Vec::new();
        for (space, value) in &self.spaces {
            if let Err(reason) = prefix.check_id(value.id) {
                problems.push(format!("translation_prefix: space {space:?}'s ID {reason}"));
            }
        }
        let net = IpNet::V6(prefix.net());
        for (_, pool) in self.pools.iter().filter(|(_, p)| overlap(p, &net)) {
            problems.push(format!(
                "translation_prefix: {prefix} overlaps the shared pool {pool}: translated \
                 addresses would be taken for workloads' own"
            ));
        }
        problems
    }

    fn config_deleted(&self) -> Vec<String> {
        if self.spaces.is_empty() {
            return Vec::new();
        }
        let names: Vec<&str> = self.spaces.keys().map(String::as_str).collect();
        vec![format!(
            "the translation prefix is still used by address spaces {}: delete them first",
            names.join(", ")
        )]
    }

    /// What still names a deleted space.
    fn users_of(&self, space: &str) -> Vec<String> {
        let mut users: Vec<String> = (self.pools.iter())
            .filter(|(s, _)| s.as_deref() == Some(space))
            .map(|(_, cidr)| format!("pool {cidr}"))
            .collect();
        users.extend(
            (self.mappings.iter())
                .filter(|(_, s)| *s == space)
                .map(|((scope, id), _)| format!("{} {id}", scope.as_str())),
        );
        users.extend(
            (self.endpoints.iter())
                .filter(|(_, s)| *s == space)
                .map(|(id, _)| format!("workload endpoint {id}")),
        );
        match users.is_empty() {
            true => Vec::new(),
            false => vec![format!(
                "address space {space:?} is still used by {}: delete or move them first",
                users.join(", ")
            )],
        }
    }

    fn pool_problems(&self, space: Option<&String>, cidr: &IpNet) -> Vec<String> {
        let mut problems: Vec<String> = space.and_then(|s| self.missing(s)).into_iter().collect();
        let describe = |s: &Option<String>, c: &IpNet| match s {
            None => format!("the shared pool {c}"),
            Some(s) => format!("pool {c} of space {s:?}"),
        };
        let this = describe(&space.cloned(), cidr);
        for (other_space, other) in &self.pools {
            if (other_space.as_ref(), other) == (space, cidr) || !overlap(cidr, other) {
                continue;
            }
            let other_desc = describe(other_space, other);
            if other_space.as_ref() == space {
                problems.push(format!(
                    "cidr: {this} overlaps {other_desc}: the pools of one space must not overlap"
                ));
            } else if space.is_none() || other_space.is_none() {
                problems.push(format!(
                    "cidr: {this} overlaps {other_desc}: an address of a private space must be \
                     outside every shared pool"
                ));
            }
        }
        if let (None, Some(config)) = (space, &self.config) {
            let prefix = config.translation_prefix;
            if overlap(cidr, &IpNet::V6(prefix.net())) {
                problems.push(format!(
                    "cidr: {this} overlaps the translation prefix {prefix}: its addresses are \
                     the private spaces' on the fabric"
                ));
            }
        }
        problems
    }
}

/// Whether two networks share an address.
pub fn overlap(a: &IpNet, b: &IpNet) -> bool {
    a.contains(b) || b.contains(a)
}

#[cfg(test)]
mod tests;
