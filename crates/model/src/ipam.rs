//! IPAM: allocation blocks (`/calico/ipam/v2/assignment/ipvX/block/<CIDR>`), allocation handles
//! (`/calico/ipam/v2/handle/<handle_id>`) and host affinities
//! (`/calico/ipam/v2/host/<hostname>/ipvX/block/<CIDR>`, no value).
//!
//! A block's `allocations` has one entry per address of the block: `null` when free, else the
//! index into `attributes` of what the address was assigned with. Blocks and the config are read
//! in both dialects found in etcd, Calico 1.4's and ours (`dialect`), and written in ours.

mod dialect;

use std::collections::BTreeMap;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use crate::error::{Validate, ValidationError};

/// Blocks bigger than this are refused: every address has an entry in `allocations`.
pub const MAX_BLOCK_ADDRESSES: u64 = 1 << 16;

/// What an allocation was made for. Read from `primary` (ours) or `handle_id` (Calico 1.4,
/// libcalico-go); written as `primary`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct AllocationAttribute {
    /// The handle the allocation belongs to (released together by handle).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub primary: Option<String>,
    /// Free-form details (container id, hostname, ...); values that are not strings in the JSON
    /// (Calico 1.4's `"rack": 1`) are held as their JSON text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secondary: Option<BTreeMap<String, String>>,
}

/// A block of addresses, usually affine to one host. Read in both dialects (`dialect`): no
/// affinity as `""`, `null` or absent; the strict flag as `strict_affinity` or `strictAffinity`.
/// Written in ours: `"affinity": null`, `strictAffinity` only when true.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AllocationBlock {
    pub cidr: IpNet,
    /// `host:<hostname>`, or `None` for a block no host owns.
    pub affinity: Option<String>,
    /// Only the affine host may assign from this block.
    #[serde(rename = "strictAffinity", skip_serializing_if = "std::ops::Not::not")]
    pub strict_affinity: bool,
    pub allocations: Vec<Option<usize>>,
    /// The free ordinals in the order they will be handed out (libcalico 0.15 and later);
    /// optional.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unallocated: Option<Vec<usize>>,
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

/// Cluster-wide IPAM settings at `/calico/ipam/v2/config`, as Calico 1.4 writes them:
/// `{"auto_allocate_blocks": true, "strict_affinity": false}`. A missing field (or key) takes
/// the default; unknown fields and non-booleans are refused (`dialect`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct IpamConfig {
    /// Hosts claim new blocks during auto-assignment; when false they only assign from blocks
    /// claimed for them, and borrow. Default true.
    pub auto_allocate_blocks: bool,
    /// Hosts assign only from blocks affine to them: no borrowing from other hosts' blocks,
    /// so every workload address is covered by its own host's block route. Default false.
    pub strict_affinity: bool,
}

impl Default for IpamConfig {
    fn default() -> IpamConfig {
        IpamConfig {
            auto_allocate_blocks: true,
            strict_affinity: false,
        }
    }
}

impl IpamConfig {
    /// Calico 1.4's rule: a host must be able to either claim a block or borrow.
    pub fn check(&self) -> Result<(), ValidationError> {
        if !self.strict_affinity && !self.auto_allocate_blocks {
            return Err(ValidationError::new(
                "auto_allocate_blocks",
                "cannot be false while strict_affinity is false (a host could neither claim \
                 a block nor borrow); set one of them to true",
            ));
        }
        Ok(())
    }
}

impl Validate for IpamConfig {
    fn validate(&mut self) -> Result<(), ValidationError> {
        self.check()
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

    fn refusal<T: serde::de::DeserializeOwned + Validate + std::fmt::Debug>(json: &str) -> String {
        match from_json::<T>(json) {
            Ok(value) => panic!("accepted {json} as {value:?}"),
            Err(err) => err.to_string(),
        }
    }

    const NO_HOST: &str = r#"{"cidr": "10.0.0.0/31", "allocations": [null, null]"#;

    #[test]
    fn no_affinity_is_empty_null_or_absent() {
        for affinity in [r#", "affinity": """#, r#", "affinity": null"#, ""] {
            let block: AllocationBlock = from_json(&format!("{NO_HOST}{affinity}}}")).unwrap();
            assert_eq!(
                (block.affinity.as_deref(), block.host()),
                (None, None),
                "{affinity}"
            );
        }
        let json = format!(r#"{NO_HOST}, "affinity": "host:"}}"#);
        assert_eq!(
            refusal::<AllocationBlock>(&json),
            r#"affinity: "host:" is not of the form host:<hostname>"#
        );
        let json = format!(r#"{NO_HOST}, "affinity": 7}}"#);
        assert!(refusal::<AllocationBlock>(&json).starts_with("affinity: invalid type"));
    }

    #[test]
    fn the_strict_flag_is_read_in_either_spelling_and_both_must_agree() {
        let strict = |flags: &str| {
            let json = format!("{NO_HOST}, {flags}}}");
            from_json::<AllocationBlock>(&json).map(|b| b.strict_affinity)
        };
        assert_eq!(strict(r#""strict_affinity": true"#), Ok(true));
        assert_eq!(strict(r#""strictAffinity": true"#), Ok(true));
        assert_eq!(strict(r#""strict_affinity": false"#), Ok(false));
        assert_eq!(
            strict(r#""strict_affinity": true, "strictAffinity": true"#),
            Ok(true)
        );
        assert_eq!(
            strict(r#""strict_affinity": null, "strictAffinity": true"#),
            Ok(true)
        );
        let err = strict(r#""strict_affinity": true, "strictAffinity": false"#).unwrap_err();
        assert_eq!(
            err.to_string(),
            "strictAffinity: is false but strict_affinity is true; remove the one that is wrong"
        );
        let err = strict(r#""strictAffinity": false, "strict_affinity": true"#).unwrap_err();
        assert_eq!(
            err.to_string(),
            "strict_affinity: is true but strictAffinity is false; remove the one that is wrong"
        );
        let err = strict(r#""strict_affinity": "yes""#).unwrap_err();
        assert_eq!(err.field, "strict_affinity");
    }

    #[test]
    fn an_attribute_names_its_handle_either_way_and_both_must_agree() {
        let attribute = |fields: &str| {
            let json = format!(r#"{NO_HOST}, "attributes": [{{{fields}}}]}}"#);
            from_json::<AllocationBlock>(&json).map(|mut b| b.attributes.remove(0))
        };
        let read = attribute(r#""handle_id": null, "primary": "h""#).unwrap();
        assert_eq!(read.primary.as_deref(), Some("h"));
        let read = attribute(r#""handle_id": "h", "primary": "h""#).unwrap();
        assert_eq!(read.primary.as_deref(), Some("h"));
        let err = attribute(r#""handle_id": "a", "primary": "b""#).unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"attributes[0].primary: is "b" but handle_id is "a"; remove the one that is wrong"#
        );
        let read = attribute(r#""secondary": {"rack": 1, "up": true, "name": "x"}"#).unwrap();
        let details = read.secondary.unwrap();
        assert_eq!((&details["rack"][..], &details["up"][..]), ("1", "true"));
        assert_eq!(details["name"], "x");
        let err = attribute(r#""secondary": [1]"#).unwrap_err();
        assert_eq!(err.field, "attributes[0].secondary");
    }

    #[test]
    fn a_block_is_written_in_our_dialect() {
        let json = r#"{"cidr": "10.0.0.0/31", "affinity": "", "strict_affinity": true,
            "allocations": [0, null], "unallocated": [1],
            "attributes": [{"handle_id": "h", "secondary": {"rack": 1}}]}"#;
        let block: AllocationBlock = from_json(json).unwrap();
        assert_eq!(
            serde_json::to_string(&block).unwrap(),
            r#"{"cidr":"10.0.0.0/31","affinity":null,"strictAffinity":true,"allocations":[0,null],"unallocated":[1],"attributes":[{"primary":"h","secondary":{"rack":"1"}}]}"#
        );
    }

    #[test]
    fn the_config_takes_defaults_and_refuses_what_calico_1_4_refused() {
        let config: IpamConfig = from_json("{}").unwrap();
        assert_eq!(config, IpamConfig::default());
        assert!(config.auto_allocate_blocks && !config.strict_affinity);
        let config: IpamConfig =
            from_json(r#"{"auto_allocate_blocks": false, "strict_affinity": true}"#).unwrap();
        assert!(!config.auto_allocate_blocks && config.strict_affinity);
        assert_eq!(
            serde_json::to_string(&config).unwrap(),
            r#"{"auto_allocate_blocks":false,"strict_affinity":true}"#
        );
        assert_eq!(
            refusal::<IpamConfig>(r#"{"auto_allocate_blocks": false, "strict_affinity": false}"#),
            "auto_allocate_blocks: cannot be false while strict_affinity is false (a host could \
             neither claim a block nor borrow); set one of them to true"
        );
        assert_eq!(
            refusal::<IpamConfig>(r#"{"auto_allocate_blocks": false}"#),
            refusal::<IpamConfig>(r#"{"auto_allocate_blocks": false, "strict_affinity": false}"#)
        );
        assert_eq!(
            refusal::<IpamConfig>(r#"{"strictAffinity": true}"#),
            "strictAffinity: unknown field; the IPAM config has strict_affinity and \
             auto_allocate_blocks"
        );
        assert_eq!(
            refusal::<IpamConfig>(r#"{"strict_affinity": null}"#),
            "strict_affinity: expected true or false, found null"
        );
        assert!(refusal::<IpamConfig>("[]").starts_with("invalid type: sequence"));
    }
}
