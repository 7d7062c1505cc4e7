//! What exists of an attachment, as the plans need it read: whether the container already has
//! the interface (before ADD), and for DEL the container side's source rules, whether the host
//! side is there, and the workload endpoint with the holders of its addresses.

use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;

use calico_datastore::Datastore;
use calico_ipam::Ipam;
use calico_linux::{Family, Netlink, Netns};
use calico_model::endpoint::WorkloadEndpoint;
use calico_model::from_json;
use calico_plumbing::routes::{self, SourceRule};
use ipnet::IpNet;

use crate::config::NetConf;
use crate::ipam_plugin::{connect, ipam_error};
use crate::plan::{Request, Stored};
use crate::spec::CniError;

/// Whether the container has an interface `ifname`.
pub async fn has_interface(netns: &Netns, ifname: &str) -> Result<bool, CniError> {
    let container = Netlink::connect(netns)?;
    Ok(container.link_by_name(ifname).await?.is_some())
}

/// What DEL finds in the kernel: the source rules from the addresses of the container's
/// `ifname` when the namespace exists and has it, and whether the host side `veth` exists.
pub async fn kernel(
    netns: &str,
    ifname: &str,
    veth: &str,
) -> Result<(Option<Vec<SourceRule>>, bool), CniError> {
    let host = Netlink::connect(&Netns::current())?;
    let host_side = host.link_by_name(veth).await?.is_some();
    Ok((container_side(netns, ifname).await?, host_side))
}

async fn container_side(netns: &str, ifname: &str) -> Result<Option<Vec<SourceRule>>, CniError> {
    if netns.is_empty() || !Path::new(netns).exists() {
        return Ok(None);
    }
    let container = Netlink::connect(&Netns::at_path(netns))?;
    let Some(link) = container.link_by_name(ifname).await? else {
        return Ok(None);
    };
    let addresses: Vec<IpAddr> = container
        .addresses(link.index)
        .await?
        .iter()
        .map(IpNet::addr)
        .collect();
    let mut rules = Vec::new();
    for family in [Family::V4, Family::V6] {
        if addresses
            .iter()
            .any(|ip| ip.is_ipv4() == (family == Family::V4))
        {
            let read = routes::read_rules(&container, family).await?;
            rules.extend(read.into_iter().filter(|r| addresses.contains(&r.from)));
        }
    }
    Ok(Some(rules))
}

/// The call's connection, and the workload endpoint with who holds each of its addresses in
/// Calico IPAM (none for an endpoint that does not parse).
pub async fn stored(
    conf: &NetConf,
    request: &Request,
) -> Result<(Arc<dyn Datastore>, Stored), CniError> {
    let store = connect(conf).await?;
    let ipam = Ipam::new(store.clone());
    let mut stored = Stored::default();
    let current = store
        .get(&request.key())
        .await
        .map_err(|e| conf.etcd_error(e))?;
    if let Some(pair) = current {
        stored.revision = Some(pair.mod_revision);
        if let Ok(endpoint) = from_json::<WorkloadEndpoint>(&pair.value) {
            for net in endpoint.ipv4_nets.iter().chain(&endpoint.ipv6_nets) {
                let holder = ipam.ip_info(net.addr()).await.map_err(ipam_error)?;
                stored
                    .holders
                    .push((net.addr(), holder.and_then(|a| a.primary)));
            }
        }
    }
    Ok((store, stored))
}
