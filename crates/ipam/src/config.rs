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

use calico_datastore::Expect;
use calico_model::error::ValidationError;
use calico_model::ipam::IpamConfig;
use calico_model::{Key, from_json};

use crate::allocator::Ipam;
use crate::error::IpamError;

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

impl Ipam {
    /// The cluster's IPAM settings (defaults when unset); an invalid config is an error naming
    /// the key and field.
    pub async fn settings(&self) -> Result<IpamSettings, IpamError> {
        Ok(self.stored_settings().await?.0)
    }

    /// The settings and what their key was when read (absent, or its revision), remembered
    /// as a hint; an invalid config is forgotten.
    pub(crate) async fn stored_settings(&self) -> Result<(IpamSettings, Expect), IpamError> {
        let key = Key::IpamConfig.to_string();
        let read = self.store().get(&key).await?;
        let parsed = match &read {
            None => Ok((IpamSettings::default(), Expect::Absent)),
            Some(pair) => IpamSettings::parse(&pair.value)
                .map(|settings| (settings, Expect::ModRevision(pair.mod_revision)))
                .map_err(|e| IpamError::Corrupt {
                    key,
                    reason: format!("{e}"),
                }),
        };
        self.hints()
            .config(parsed.as_ref().ok().map(|(_, expect)| *expect));
        parsed
    }

    /// Writes the settings in Calico 1.4's JSON. Callers [`IpamSettings::check`] them first;
    /// settings that fail the check are refused here too, naming the key and field.
    pub async fn set_settings(&self, settings: &IpamSettings) -> Result<(), IpamError> {
        settings.check().map_err(|e| IpamError::Corrupt {
            key: Key::IpamConfig.to_string(),
            reason: e.to_string(),
        })?;
        let key = Key::IpamConfig.to_string();
        self.store().put(&key, &settings.to_json()).await?;
        Ok(())
    }
}
