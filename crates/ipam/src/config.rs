//! The cluster's IPAM settings at `/calico/ipam/v2/config`, as Calico 1.4 writes them:
//! `{"auto_allocate_blocks": true, "strict_affinity": false}` (each optional here, with those
//! defaults; the key absent means both defaults).
//!
//! Calico 1.4 refused to change the settings while any block existed, because a block took its
//! strict flag from the config when it was created. We allow the change: every assignment
//! checks the config's `strict_affinity` as well as the block's own flag, so turning strict
//! affinity on applies to every block at once, and a block created strict stays strict (until
//! it is released) when it is turned off. `auto_allocate_blocks` only decides whether the next
//! auto-assignment may claim a block, so it never disagrees with a block.

use calico_model::error::ValidationError;
use calico_model::from_json;
use calico_model::ipam::IpamConfig;

/// The IPAM settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpamSettings {
    /// Hosts assign only from blocks affine to them: no borrowing, no explicit assignment in
    /// another host's block.
    pub strict_affinity: bool,
    /// Hosts claim new blocks during auto-assignment; when false they only use their own blocks
    /// (claimed with `calicoctl ipam block claim`) and borrow.
    pub auto_allocate_blocks: bool,
}

impl Default for IpamSettings {
    fn default() -> IpamSettings {
        IpamConfig::default().into()
    }
}

impl From<IpamConfig> for IpamSettings {
    fn from(config: IpamConfig) -> IpamSettings {
        IpamSettings {
            strict_affinity: config.strict_affinity,
            auto_allocate_blocks: config.auto_allocate_blocks,
        }
    }
}

impl From<IpamSettings> for IpamConfig {
    fn from(settings: IpamSettings) -> IpamConfig {
        IpamConfig {
            strict_affinity: settings.strict_affinity,
            auto_allocate_blocks: settings.auto_allocate_blocks,
        }
    }
}

impl IpamSettings {
    /// Reads the config's JSON with the model's [`IpamConfig`]: unknown fields, wrong types and
    /// Calico 1.4's forbidden combination are errors naming the field.
    pub fn parse(raw: &str) -> Result<IpamSettings, ValidationError> {
        from_json::<IpamConfig>(raw).map(IpamSettings::from)
    }

    /// Calico 1.4's rule ([`IpamConfig::check`]): a host must be able to either claim a block
    /// or borrow.
    pub fn check(&self) -> Result<(), ValidationError> {
        IpamConfig::from(*self).check()
    }

    /// The JSON Calico 1.4 writes: both fields.
    pub fn to_json(&self) -> String {
        serde_json::to_string(&IpamConfig::from(*self)).expect("two booleans serialise")
    }
}
