//! CHECK: whether everything ADD made for this attachment is still there, as the spec asks —
//! the addresses in IPAM (the IPAM plugin's CHECK), the host side up, the container side with
//! the MAC, addresses and routes of the ADD result, and the workload endpoint listing them.
//! The first difference is error 103 naming what is missing.

use std::net::IpAddr;
use std::path::Path;

use calico_linux::{Family, Netlink, Netns};
use calico_model::endpoint::WorkloadEndpoint;
use calico_model::{MacAddr, from_json};

use crate::config::NetConf;
use std::sync::Arc;

use calico_datastore::Datastore;
use calico_ipam::Ipam;

use crate::delegate::{self, IpamPlugin};
use crate::ipam_plugin::{self, connect};
use crate::spec::{CniError, CniResult, Env, code};
use crate::workload::Workload;
use calico_plumbing::routes::{self, FIRST_METRIC, MAIN_TABLE, SourceRule};
use calico_plumbing::{LINK_LOCAL_WAIT, host_link_local};

fn failed(msg: String) -> CniError {
    CniError::new(code::CHECK_FAILED, msg)
}

/// One CHECK of the attachment `env.ifname`.
pub async fn check(
    env: &Env,
    conf: &NetConf,
    stdin: &[u8],
    workload: &Workload,
    ipam: &IpamPlugin,
) -> Result<(), CniError> {
    let prev = conf.prev_result()?.ok_or_else(|| {
        CniError::new(
            code::INVALID_CONFIG,
            "prevResult: CHECK needs the ADD result",
        )
    })?;
    // Calico IPAM's CHECK uses the connection the endpoint's check needs; another IPAM
    // plugin's runs first, and the connection is made for the endpoint.
    let store = match ipam {
        IpamPlugin::InProcess => {
            let store = connect(conf).await?;
            ipam_plugin::check(&Ipam::new(store.clone()), env, conf).await?;
            Some(store)
        }
        IpamPlugin::Exec(plugin) => {
            delegate::call(plugin, &env.path, "CHECK", stdin)?;
            None
        }
    };
    let addresses: Vec<IpAddr> = prev.ips.iter().map(|ip| ip.address.addr()).collect();
    let host_gateway = check_host_side(workload, &addresses).await?;
    check_container(env, &prev, &addresses, host_gateway).await?;
    let store = match store {
        Some(store) => store,
        None => connect(conf).await?,
    };
    check_endpoint(conf, &store, workload, &addresses).await
}

/// The host side exists and is up; returns its link-local address (the IPv6 gateway) when
/// the workload has IPv6.
async fn check_host_side(
    workload: &Workload,
    addresses: &[IpAddr],
) -> Result<Option<IpAddr>, CniError> {
    let veth = workload.veth_name();
    let host = Netlink::connect(&Netns::current())?;
    let link = host.link_by_name(&veth).await?;
    let Some(link) = link.filter(|l| l.up) else {
        return Err(failed(format!("the host side {veth} is missing or down")));
    };
    if !addresses.iter().any(IpAddr::is_ipv6) {
        return Ok(None);
    }
    Ok(Some(IpAddr::V6(
        host_link_local(&host, &link, LINK_LOCAL_WAIT).await?,
    )))
}

/// The container side: the interface, its MAC, every address of the result, and the routes
/// this attachment owns (`routes::owned`), on this interface.
async fn check_container(
    env: &Env,
    prev: &CniResult,
    addresses: &[IpAddr],
    host_gateway: Option<IpAddr>,
) -> Result<(), CniError> {
    if !Path::new(&env.netns).exists() {
        return Err(CniError::new(
            code::UNKNOWN_CONTAINER,
            format!("CNI_NETNS {}: no such namespace", env.netns),
        ));
    }
    let netns = Netns::at_path(&env.netns);
    let container = Netlink::connect(&netns)?;
    let link = container
        .link_by_name(&env.ifname)
        .await?
        .ok_or_else(|| failed(format!("{} is missing in {}", env.ifname, env.netns)))?;
    let listed = prev
        .interfaces
        .iter()
        .find(|i| i.name == env.ifname && i.sandbox.is_some());
    if let Some(want) = listed.and_then(|i| i.mac.as_deref()) {
        let have = link.mac.map(|m| MacAddr(m).to_string()).unwrap_or_default();
        if !want.eq_ignore_ascii_case(&have) {
            return Err(failed(format!(
                "{} in the container has MAC {have}, the ADD result says {want}",
                env.ifname
            )));
        }
    }
    let present = container.addresses(link.index).await?;
    if let Some(missing) = addresses
        .iter()
        .find(|ip| !present.iter().any(|a| a.addr() == **ip))
    {
        return Err(failed(format!(
            "{missing} is not on {} in the container",
            env.ifname
        )));
    }
    check_routes(&container, env, addresses, host_gateway).await
}

/// The routes this attachment owns (`routes::owned`) on its interface in the main table, and
/// for a standby its source rules and the routes of its own table. A standby is known by its
/// rules, or (when they are gone) by a default route metric above the first attachment's.
async fn check_routes(
    container: &Netlink,
    env: &Env,
    addresses: &[IpAddr],
    host_gateway: Option<IpAddr>,
) -> Result<(), CniError> {
    let dev = env.ifname.as_str();
    let (mut present, mut rules) = (Vec::new(), Vec::new());
    for (family, needed) in [
        (Family::V4, addresses.iter().any(IpAddr::is_ipv4)),
        (Family::V6, addresses.iter().any(IpAddr::is_ipv6)),
    ] {
        if needed {
            present.extend(routes::read(container, family).await?);
            rules.extend(routes::read_rules(container, family).await?);
        }
    }
    let missing_route = |route: &routes::ContainerRoute| {
        failed(format!(
            "the route {route} is missing in the container {}",
            env.netns
        ))
    };
    let wanted = routes::owned(dev, addresses, host_gateway, MAIN_TABLE);
    if let Some(missing) = routes::first_missing(&wanted, &present) {
        return Err(missing_route(missing));
    }
    for ip in addresses {
        let default_metric = present
            .iter()
            .find(|r| {
                r.table == MAIN_TABLE
                    && r.dev == dev
                    && r.destination.prefix_len() == 0
                    && r.destination.addr().is_ipv4() == ip.is_ipv4()
            })
            .map_or(FIRST_METRIC, |r| r.metric);
        match rules.iter().find(|r| r.from == *ip) {
            Some(rule) => {
                let wanted = routes::owned(dev, &[*ip], host_gateway, rule.table);
                if let Some(missing) = routes::first_missing(&wanted, &present) {
                    return Err(missing_route(missing));
                }
            }
            None if default_metric > FIRST_METRIC => {
                let rule = SourceRule {
                    from: *ip,
                    table: default_metric,
                };
                return Err(failed(format!(
                    "the rule {rule} is missing in the container {}",
                    env.netns
                )));
            }
            None => {}
        }
    }
    Ok(())
}

/// The workload endpoint exists and lists every address.
async fn check_endpoint(
    conf: &NetConf,
    store: &Arc<dyn Datastore>,
    workload: &Workload,
    addresses: &[IpAddr],
) -> Result<(), CniError> {
    let key = workload.key().to_string();
    let endpoint = store
        .get(&key)
        .await
        .map_err(|e| conf.etcd_error(e))?
        .ok_or_else(|| failed(format!("the workload endpoint {key} is missing")))?;
    let endpoint: WorkloadEndpoint = from_json(&endpoint.value)
        .map_err(|e| failed(format!("the workload endpoint {key} is invalid: {e}")))?;
    let listed: Vec<IpAddr> = endpoint
        .ipv4_nets
        .iter()
        .chain(&endpoint.ipv6_nets)
        .map(|n| n.addr())
        .collect();
    match addresses.iter().find(|ip| !listed.contains(ip)) {
        Some(missing) => Err(failed(format!(
            "{missing} is not in the workload endpoint {key}"
        ))),
        None => Ok(()),
    }
}
