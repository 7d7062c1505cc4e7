//! A host's VXLAN tunnel endpoint (VTEP): `/calico/v1/host/<hostname>/vxlan_tunnel`.
//!
//! Not in the seeds (Calico 1.4 had only IPIP); designed here so that workloads can be reached
//! across networks that do not route their addresses. `calico-node` writes it for its host
//! when some pool has VXLAN: the tunnel device's address (assigned by IPAM from a VXLAN pool,
//! under the handle `vxlan-tunnel-addr-<hostname>`), its MAC, and the host's own address and
//! network on the underlying network, which the other hosts send the encapsulated packets to.
//! Felix on every host reads them all.

use std::net::Ipv4Addr;

use ipnet::Ipv4Net;
use serde::{Deserialize, Serialize};

use crate::error::{Validate, ValidationError};
use crate::mac::MacAddr;

/// One host's VXLAN tunnel endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VxlanTunnel {
    /// The tunnel device's address (inside a VXLAN pool).
    pub address: Ipv4Addr,
    /// The tunnel device's MAC.
    pub mac: MacAddr,
    /// The host's address on the underlying network, with that network's prefix length
    /// (`10.99.0.11/24`): where VXLAN packets for this host go, and which hosts share its
    /// subnet (`cross-subnet` pools encapsulate only to the others).
    pub parent_address: Ipv4Net,
}

impl Validate for VxlanTunnel {
    fn validate(&mut self) -> Result<(), ValidationError> {
        if self.mac.0[0] & 1 == 1 {
            return Err(ValidationError::new(
                "mac",
                format!("{} is a multicast MAC", self.mac),
            ));
        }
        if self.parent_address.addr().is_unspecified() {
            return Err(ValidationError::new(
                "parent_address",
                "the host's address on the underlying network cannot be 0.0.0.0",
            ));
        }
        Ok(())
    }
}

impl VxlanTunnel {
    /// The MAC of a host's tunnel device: locally administered, unicast, from a hash of the
    /// hostname, so it is the same every time the host registers.
    pub fn mac_for(hostname: &str) -> MacAddr {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for byte in hostname.bytes() {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
        let b = hash.to_be_bytes();
        MacAddr([0x66 | 0x02, b[1], b[2], b[3], b[4], b[5]])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::from_json;

    #[test]
    fn parses_and_validates() {
        let tunnel: VxlanTunnel = from_json(
            r#"{"address": "10.65.0.1", "mac": "66:aa:bb:cc:dd:ee", "parent_address": "10.99.0.11/24"}"#,
        )
        .unwrap();
        assert_eq!(tunnel.parent_address.prefix_len(), 24);
        let error = from_json::<VxlanTunnel>(
            r#"{"address": "10.65.0.1", "mac": "01:aa:bb:cc:dd:ee", "parent_address": "10.99.0.11/24"}"#,
        )
        .unwrap_err();
        assert_eq!(error.field, "mac");
        let error = from_json::<VxlanTunnel>(
            r#"{"address": "10.65.0.1", "mac": "66:aa:bb:cc:dd:ee", "parent_address": "10.99.0.11"}"#,
        )
        .unwrap_err();
        assert!(error.to_string().contains("parent_address"), "{error}");
    }

    #[test]
    fn the_mac_is_stable_local_and_unicast() {
        let mac = VxlanTunnel::mac_for("host1");
        assert_eq!(mac, VxlanTunnel::mac_for("host1"));
        assert_ne!(mac, VxlanTunnel::mac_for("host2"));
        assert_eq!(mac.0[0] & 0b11, 0b10, "locally administered unicast");
    }
}
