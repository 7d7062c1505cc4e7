//! Address spaces (seed 000 §7.1, issue 34): tenants whose IPv4 ranges overlap, each in its
//! own space, carried between hosts as `<prefix>:<ID>::W.X.Y.Z` (ours, not in the seeds' data
//! model; docs/data-model.md § Address spaces).
//!
//! | key | type |
//! | --- | --- |
//! | `/calico/v1/address_space/config` | [`SpaceConfig`]: the cluster's translation prefix |
//! | `/calico/v1/address_space/space/<space>` | [`AddressSpace`]: a private space and its ID |
//! | `/calico/v1/address_space/network/<id>`, `.../project/<id>` | [`SpaceMapping`]: the space of a Neutron network or project |
//! | `/calico/v1/ipam/space/<space>/v4/pool/<CIDR>` | `pool::IpPool`, checked by [`check_space_pool`] |
//!
//! The shared space is the model as it was: it has no object, no key and no ID, and its pools
//! stay at `/calico/v1/ipam/vX/pool/<CIDR>`. An endpoint without `address_space` is in it.
//! Rules about one object are checked here (`Validate`, `parse_value`); rules between objects
//! (two pools overlapping, a space that must exist) in [`rules`], which calicoctl runs.

pub mod prefix;
pub mod rules;

use serde::{Deserialize, Serialize};

use crate::error::{Validate, ValidationError};
use crate::names::{self, SHARED};
use crate::pool::IpPool;
use crate::rule::IpVersion;

pub use prefix::TranslationPrefix;

/// A private address space: its ID is the `<ID>` of its translated addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AddressSpace {
    /// 1 to the room the translation prefix leaves (checked against it by `rules`).
    pub id: u32,
}

impl Validate for AddressSpace {
    fn validate(&mut self) -> Result<(), ValidationError> {
        if self.id == 0 {
            return Err(ValidationError::new(
                "id",
                "0 is not a space ID: IDs start at 1 (the shared space has no ID and is not \
                 translated)",
            ));
        }
        Ok(())
    }
}

/// The cluster-wide settings of address spaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpaceConfig {
    /// The IPv6 prefix every private space's addresses are translated into.
    pub translation_prefix: TranslationPrefix,
}

impl Validate for SpaceConfig {
    fn validate(&mut self) -> Result<(), ValidationError> {
        self.translation_prefix
            .check()
            .map_err(|reason| ValidationError::new("translation_prefix", reason))
    }
}

/// Which space a Neutron network's (or project's) ports are in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpaceMapping {
    /// A space's name, or `shared`.
    pub address_space: String,
}

impl Validate for SpaceMapping {
    fn validate(&mut self) -> Result<(), ValidationError> {
        validate_reference(&self.address_space).map_err(|e| e.within("address_space"))
    }
}

/// What a mapping maps: a Neutron network or a Neutron project.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MappingScope {
    Network,
    Project,
}

impl MappingScope {
    /// The key segment (`network`, `project`).
    pub fn as_str(self) -> &'static str {
        match self {
            MappingScope::Network => "network",
            MappingScope::Project => "project",
        }
    }

    pub fn from_segment(segment: &str) -> Option<MappingScope> {
        [MappingScope::Network, MappingScope::Project]
            .into_iter()
            .find(|scope| scope.as_str() == segment)
    }
}

/// A space named by another object: a space name, or `shared`.
pub fn validate_reference(name: &str) -> Result<(), ValidationError> {
    names::validate_space_name(name)
}

/// The name of a space object: a space name other than `shared`.
pub fn validate_space_object_name(name: &str) -> Result<(), ValidationError> {
    names::validate_space_name(name)?;
    if name == SHARED {
        return Err(ValidationError::object(format!(
            "{SHARED:?} is the shared space's name: it has no object (and no ID); name a \
             private space otherwise"
        )));
    }
    Ok(())
}

/// A private space's pool: IPv4 (only IPv4 ranges overlap), and nothing that moves or rewrites
/// its packets as IPv4 between hosts: they cross the fabric translated to IPv6.
pub fn check_space_pool(pool: &IpPool) -> Result<(), ValidationError> {
    if pool.version() != IpVersion::V4 {
        return Err(ValidationError::new(
            "cidr",
            format!(
                "{} is IPv6: a private space holds IPv4 pools (IPv6 addresses do not overlap; \
                 they are in the shared space)",
                pool.cidr
            ),
        ));
    }
    let translated = "a private space's traffic crosses the fabric translated to IPv6";
    if pool.ipip.is_some() {
        let reason = format!("not in a private space: {translated}, not tunnelled; remove ipip");
        return Err(ValidationError::new("ipip", reason));
    }
    if !pool.vxlan_mode.is_never() {
        let reason =
            format!("not in a private space: {translated}, not tunnelled; remove vxlan_mode");
        return Err(ValidationError::new("vxlan_mode", reason));
    }
    if pool.masquerade {
        return Err(ValidationError::new(
            "masquerade",
            "not in a private space yet: Felix does not masquerade a private space's traffic \
             (a workload reaches outside through a floating IP, ipv4_nat); remove masquerade",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
