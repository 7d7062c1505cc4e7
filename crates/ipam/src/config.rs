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

use calico_model::Key;
use calico_model::error::ValidationError;
use serde_json::{Map, Value};

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
        IpamSettings {
            strict_affinity: false,
            auto_allocate_blocks: true,
        }
    }
}

impl IpamSettings {
    /// Reads the config's JSON; unknown fields and wrong types are errors naming the field.
    pub fn parse(raw: &str) -> Result<IpamSettings, ValidationError> {
        let fields: Map<String, Value> = serde_json::from_str(raw)
            .map_err(|e| ValidationError::object(format!("invalid JSON object: {e}")))?;
        let mut settings = IpamSettings::default();
        for (name, value) in fields {
            let flag = match name.as_str() {
                "strict_affinity" => &mut settings.strict_affinity,
                "auto_allocate_blocks" => &mut settings.auto_allocate_blocks,
                _ => {
                    let reason = "unknown field; the IPAM config has strict_affinity and \
                                  auto_allocate_blocks";
                    return Err(ValidationError::new(name, reason));
                }
            };
            *flag = value.as_bool().ok_or_else(|| {
                ValidationError::new(&name, format!("expected true or false, found {value}"))
            })?;
        }
        settings.check()?;
        Ok(settings)
    }

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

    /// The JSON Calico 1.4 writes: both fields.
    pub fn to_json(&self) -> String {
        serde_json::json!({
            "auto_allocate_blocks": self.auto_allocate_blocks,
            "strict_affinity": self.strict_affinity,
        })
        .to_string()
    }
}

impl Ipam {
    /// The cluster's IPAM settings (defaults when unset); an invalid config is an error naming
    /// the key and field.
    pub async fn settings(&self) -> Result<IpamSettings, IpamError> {
        let key = Key::IpamConfig.to_string();
        let Some(pair) = self.store().get(&key).await? else {
            return Ok(IpamSettings::default());
        };
        IpamSettings::parse(&pair.value).map_err(|e| IpamError::Corrupt {
            key,
            reason: format!("{e}"),
        })
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
