//! The kernel side of `Join` and `Leave`: a veth pair in the driver's own namespace (dockerd's),
//! the host side set up for Calico routing (proxy ARP, forwarding: Felix adds the route to the
//! container's address), the other end left for libnetwork to move into the container.
//!
//! `create` undoes itself: if a step after the veth fails, the pair is deleted again.

use std::net::{IpAddr, Ipv6Addr};

use calico_linux::{Family, Netlink, Netns, set_sysctl, workload_interface_sysctls};

use crate::error::DriverError;
use crate::names::VethNames;

/// Creates the pair, configures and raises the host side, and returns the container end's MAC
/// (set to `mac` when given). A host side left by an earlier attempt is replaced.
pub async fn create(
    netlink: &Netlink,
    names: &VethNames,
    mac: Option<[u8; 6]>,
    families: &[Family],
) -> Result<[u8; 6], DriverError> {
    for stale in [&names.host, &names.temp] {
        netlink.delete_link(stale).await?;
    }
    netlink
        .add_veth(&names.host, &names.temp, &Netns::current())
        .await?;
    match configure(netlink, names, mac, families).await {
        Ok(mac) => Ok(mac),
        Err(e) => {
            if let Err(undo) = netlink.delete_link(&names.host).await {
                tracing::error!("undo: cannot delete veth {}: {undo}", names.host);
            }
            Err(e)
        }
    }
}

async fn configure(
    netlink: &Netlink,
    names: &VethNames,
    mac: Option<[u8; 6]>,
    families: &[Family],
) -> Result<[u8; 6], DriverError> {
    let here = Netns::current();
    for family in families {
        for (path, value) in workload_interface_sysctls(&names.host, *family) {
            set_sysctl(&here, &path, value)?;
        }
    }
    let host = link(netlink, &names.host).await?;
    netlink.set_up(host.index).await?;
    let temp = link(netlink, &names.temp).await?;
    if let Some(mac) = mac {
        netlink.set_mac(temp.index, mac).await?;
        return Ok(mac);
    }
    temp.mac.ok_or_else(|| DriverError::UnknownEndpoint {
        endpoint: names.temp.clone(),
        reason: "the new veth end has no MAC address".to_owned(),
    })
}

async fn link(netlink: &Netlink, name: &str) -> Result<calico_linux::Link, DriverError> {
    netlink
        .link_by_name(name)
        .await?
        .ok_or_else(|| DriverError::UnknownEndpoint {
            endpoint: name.to_owned(),
            reason: "the veth vanished right after it was created".to_owned(),
        })
}

/// Deletes the pair by its host side; a pair already gone (the container's namespace took
/// its end with it) is fine.
pub async fn delete(netlink: &Netlink, names: &VethNames) -> Result<(), DriverError> {
    netlink.delete_link(&names.host).await?;
    Ok(())
}

/// The host side's IPv6 link-local address: the container's IPv6 gateway, as for CNI
/// workloads. At `Join` the container end is not up yet, so the veth has no carrier and the
/// kernel has not added the address: it is then derived from the host side's MAC as the kernel
/// will (EUI-64, the default `addr_gen_mode`).
pub async fn host_link_local(
    netlink: &Netlink,
    names: &VethNames,
) -> Result<Ipv6Addr, DriverError> {
    let host = link(netlink, &names.host).await?;
    let addresses = netlink.addresses(host.index).await?;
    let found = addresses.iter().find_map(|a| match a.addr() {
        IpAddr::V6(v6) if v6.segments()[0] & 0xffc0 == 0xfe80 => Some(v6),
        _ => None,
    });
    found
        .or(host.mac.map(eui64_link_local))
        .ok_or_else(|| DriverError::UnknownEndpoint {
            endpoint: names.host.clone(),
            reason: "the host side has no link-local address and no MAC".to_owned(),
        })
}

/// The EUI-64 link-local address of a MAC.
pub fn eui64_link_local(mac: [u8; 6]) -> Ipv6Addr {
    let [a, b, c, d, e, f] = mac;
    Ipv6Addr::new(
        0xfe80,
        0,
        0,
        0,
        u16::from_be_bytes([a ^ 0x02, b]),
        u16::from_be_bytes([c, 0xff]),
        u16::from_be_bytes([0xfe, d]),
        u16::from_be_bytes([e, f]),
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_link_local_address_follows_the_mac() {
        let ll = super::eui64_link_local([0xee, 0xee, 0xee, 0xee, 0xee, 0xee]);
        assert_eq!(ll.to_string(), "fe80::ecee:eeff:feee:eeee");
    }
}
