//! IP pools: `/calico/v1/ipam/v4/pool/<CIDR>` and `/calico/v1/ipam/v6/pool/<CIDR>`.
//!
//! The seeds define `cidr`, `ipip` (the tunnel device, IPv4 only) and `masquerade` (default
//! false). `ipam` and `disabled` are read as the later libcalico-go pools wrote them, so a pool
//! written by a newer tool is not refused. `vxlan_mode` is this project's own (see
//! docs/data-model.md): VXLAN encapsulation of traffic to the pool's workloads on other hosts.

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use crate::endpoint::validate_interface_name;
use crate::error::{Validate, ValidationError};
use crate::rule::IpVersion;

/// A range workloads take addresses from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IpPool {
    pub cidr: IpNet,
    /// The IPIP device (usually `tunl0`) when traffic to this pool is tunnelled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipip: Option<String>,
    /// NAT outgoing traffic from this pool to destinations outside every pool.
    #[serde(default)]
    pub masquerade: bool,
    /// Whether IPAM hands out addresses from this pool (true when missing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipam: Option<bool>,
    /// A disabled pool keeps its routes but gives out no new addresses.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub disabled: bool,
    /// Whether traffic to this pool's workloads on other hosts is VXLAN-encapsulated.
    #[serde(default, skip_serializing_if = "VxlanMode::is_never")]
    pub vxlan_mode: VxlanMode,
}

/// When a pool's traffic between hosts is VXLAN-encapsulated.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum VxlanMode {
    /// Routed as it is (BGP).
    #[default]
    Never,
    /// To every other host.
    Always,
    /// Only to hosts on another subnet of the underlying network.
    CrossSubnet,
}

impl VxlanMode {
    pub fn is_never(&self) -> bool {
        *self == VxlanMode::Never
    }
}

impl IpPool {
    /// A pool with no options set.
    pub fn new(cidr: IpNet) -> IpPool {
        IpPool {
            cidr,
            ipip: None,
            masquerade: false,
            ipam: None,
            disabled: false,
            vxlan_mode: VxlanMode::Never,
        }
    }

    /// The IP version of the pool.
    pub fn version(&self) -> IpVersion {
        IpVersion::of_net(&self.cidr)
    }

    /// Whether IPAM may assign addresses from this pool.
    pub fn assigns_addresses(&self) -> bool {
        self.ipam.unwrap_or(true) && !self.disabled
    }
}

impl Validate for IpPool {
    fn validate(&mut self) -> Result<(), ValidationError> {
        if self.cidr.trunc() != self.cidr {
            let reason = format!(
                "{} has host bits set; the network is {}",
                self.cidr,
                self.cidr.trunc()
            );
            return Err(ValidationError::new("cidr", reason));
        }
        if let Some(device) = &self.ipip {
            if self.version() == IpVersion::V6 {
                return Err(ValidationError::new(
                    "ipip",
                    "IPIP is only supported on IPv4 pools",
                ));
            }
            validate_interface_name(device).map_err(|e| e.within("ipip"))?;
        }
        if !self.vxlan_mode.is_never() {
            if self.version() == IpVersion::V6 {
                return Err(ValidationError::new(
                    "vxlan_mode",
                    "VXLAN is only supported on IPv4 pools",
                ));
            }
            if self.ipip.is_some() {
                return Err(ValidationError::new(
                    "vxlan_mode",
                    "a pool is tunnelled by IPIP or by VXLAN, not both: remove \"ipip\" or set \"vxlan_mode\": \"never\"",
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::from_json;

    #[test]
    fn masquerade_defaults_to_false() {
        let pool: IpPool = from_json(r#"{"cidr": "10.65.0.0/16"}"#).unwrap();
        assert!(!pool.masquerade);
        assert!(pool.assigns_addresses());
    }
}
