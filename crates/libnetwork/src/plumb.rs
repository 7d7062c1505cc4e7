//! The kernel side of `Join` and `Leave`, through `calico_plumbing` (the plan and executor the
//! CNI plugin's ADD uses): `Join` runs its [`veth_plan`]: a veth pair in the driver's own
//! namespace (dockerd's), the host side set up for Calico routing (proxy ARP, forwarding: Felix
//! adds the route to the container's address), the other end left for dockerd to move into the
//! sandbox. The executor undoes the pair if a later step fails.

use std::net::{IpAddr, Ipv6Addr};
use std::time::Duration;

use calico_linux::{Link, Netlink, Netns};
use calico_model::MacAddr;
use calico_plumbing::{Attachment, Plumbed, RoutePlacement, execute, veth_plan};

use crate::error::DriverError;
use crate::names::VethNames;

/// Creates the pair (a host side left by an earlier attempt goes first), configures and raises
/// the host side, and sets the container end's MAC when one is asked; returns both ends.
pub async fn create(
    names: &VethNames,
    mac: Option<MacAddr>,
    addresses: &[IpAddr],
) -> Result<Plumbed, DriverError> {
    let joining = Attachment {
        host: names.host.clone(),
        container: names.temp.clone(),
        netns: Netns::current(),
        addresses: addresses.to_vec(),
        mtu: None,
        mac,
        routes: RoutePlacement::FIRST,
    };
    Ok(execute(&veth_plan(&joining)).await?)
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
/// will (EUI-64, the default `addr_gen_mode`), without waiting.
pub async fn host_link_local(netlink: &Netlink, host: &Link) -> Result<Ipv6Addr, DriverError> {
    Ok(calico_plumbing::host_link_local(netlink, host, Duration::ZERO).await?)
}
