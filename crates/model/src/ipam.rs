//! IPAM: allocation blocks (`/calico/ipam/v2/assignment/ipvX/block/<CIDR>`), allocation handles
//! (`/calico/ipam/v2/handle/<handle_id>`) and host affinities
//! (`/calico/ipam/v2/host/<hostname>/ipvX/block/<CIDR>`, no value).
//!
//! A block's `allocations` has one entry per address of the block: `null` when free, else the
//! index into `attributes` of what the address was assigned with. The seeds write the handle of
//! an attribute as `primary`; libcalico-go later wrote `handle_id`, which is read too.

use std::collections::BTreeMap;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use crate::error::{Validate, ValidationError};

/// Blocks bigger than this are refused: every address has an entry in `allocations`.
pub const MAX_BLOCK_ADDRESSES: u64 = 1 << 16;

/// What an allocation was made for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocationAttribute {
    /// The handle the allocation belongs to (released together by handle).
    #[serde(default, alias = "handle_id", skip_serializing_if = "Option::is_none")]
    pub primary: Option<String>,
    /// Free-form details (container id, hostname, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secondary: Option<BTreeMap<String, String>>,
}

/// A block of addresses, usually affine to one host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocationBlock {
    pub cidr: IpNet,
    /// `host:<hostname>`, or missing/null for a block no host owns.
    #[serde(default)]
    pub affinity: Option<String>,
    /// Only the affine host may assign from this block (libcalico-go's `strictAffinity`).
    #[serde(
        default,
        rename = "strictAffinity",
        skip_serializing_if = "std::ops::Not::not"
    )]
    pub strict_affinity: bool,
    pub allocations: Vec<Option<usize>>,
    /// The free ordinals in the order they will be handed out (libcalico-go); optional.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unallocated: Option<Vec<usize>>,
    #[serde(default)]
    pub attributes: Vec<AllocationAttribute>,
}

impl AllocationBlock {
    /// The number of addresses in the block.
    pub fn size(&self) -> u64 {
        address_count(&self.cidr)
    }

    /// The host this block is affine to, if any.
    pub fn host(&self) -> Option<&str> {
        self.affinity.as_deref()?.strip_prefix("host:")
    }
}

/// 2^(host bits), saturating for networks bigger than any block.
fn address_count(cidr: &IpNet) -> u64 {
    let host_bits = u32::from(cidr.max_prefix_len() - cidr.prefix_len());
    1u64.checked_shl(host_bits).unwrap_or(u64::MAX)
}

impl Validate for AllocationBlock {
    fn validate(&mut self) -> Result<(), ValidationError> {
        if self.cidr.trunc() != self.cidr {
            let reason = format!("{} has host bits set", self.cidr);
            return Err(ValidationError::new("cidr", reason));
        }
        let size = self.size();
        if size > MAX_BLOCK_ADDRESSES {
            let reason = format!("a block holds at most {MAX_BLOCK_ADDRESSES} addresses");
            return Err(ValidationError::new("cidr", reason));
        }
        if let Some(affinity) = &self.affinity
            && self.host().is_none_or(str::is_empty)
        {
            let reason = format!("{affinity:?} is not of the form host:<hostname>");
            return Err(ValidationError::new("affinity", reason));
        }
        if self.allocations.len() as u64 != size {
            let reason = format!(
                "has {} entries, but {} holds {size} addresses (one entry each)",
                self.allocations.len(),
                self.cidr
            );
            return Err(ValidationError::new("allocations", reason));
        }
        self.check_references()?;
        self.check_unallocated()
    }
}

impl AllocationBlock {
    /// Each allocation refers to an existing attribute.
    fn check_references(&self) -> Result<(), ValidationError> {
        let count = self.attributes.len();
        for (ordinal, entry) in self.allocations.iter().enumerate() {
            if let Some(index) = entry
                && *index >= count
            {
                let reason = format!("refers to attribute {index}, but there are {count}");
                return Err(ValidationError::new(
                    format!("allocations[{ordinal}]"),
                    reason,
                ));
            }
        }
        Ok(())
    }

    /// `unallocated` lists each free ordinal once, and only free ones.
    fn check_unallocated(&self) -> Result<(), ValidationError> {
        let Some(free) = &self.unallocated else {
            return Ok(());
        };
        let mut seen = vec![false; self.allocations.len()];
        for (index, &ordinal) in free.iter().enumerate() {
            let at = format!("unallocated[{index}]");
            let reason = match self.allocations.get(ordinal) {
                None => format!("ordinal {ordinal} is outside the block"),
                Some(Some(_)) => format!("ordinal {ordinal} is allocated"),
                Some(None) if seen[ordinal] => format!("ordinal {ordinal} is listed twice"),
                Some(None) => {
                    seen[ordinal] = true;
                    continue;
                }
            };
            return Err(ValidationError::new(at, reason));
        }
        Ok(())
    }
}

/// Cluster-wide IPAM settings at `/calico/ipam/v2/config` (all default when the key is absent).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IpamConfig {
    /// Hosts assign only from blocks affine to them: no borrowing from other hosts' blocks,
    /// so every workload address is covered by its own host's block route.
    #[serde(default)]
    pub strict_affinity: bool,
}

impl Validate for IpamConfig {
    fn validate(&mut self) -> Result<(), ValidationError> {
        Ok(())
    }
}

/// The allocations made under one handle, counted per block.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocationHandle {
    pub id: String,
    /// Block CIDR → number of addresses of this handle in that block.
    #[serde(default)]
    pub block: BTreeMap<IpNet, u64>,
}

impl Validate for AllocationHandle {
    fn validate(&mut self) -> Result<(), ValidationError> {
        crate::names::validate_handle_id(&self.id).map_err(|e| e.within("id"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::from_json;

    #[test]
    fn allocations_need_one_entry_per_address() {
        let json = r#"{"cidr": "10.0.0.0/30", "affinity": "host:a", "allocations": [null]}"#;
        let err = from_json::<AllocationBlock>(json).unwrap_err();
        assert_eq!(err.field, "allocations");
        assert!(err.reason.contains("holds 4 addresses"), "{err}");
    }

    #[test]
    fn the_libcalico_go_handle_field_is_read_as_primary() {
        let json = r#"{"cidr": "10.0.0.0/31", "allocations": [0, null],
                       "attributes": [{"handle_id": "h1"}]}"#;
        let block: AllocationBlock = from_json(json).unwrap();
        assert_eq!(block.attributes[0].primary.as_deref(), Some("h1"));
    }
}
