//! CHECK: what exists compared with what ADD made, as the spec asks — the addresses in IPAM
//! (the IPAM plugin's CHECK), the host side up, the container side with the MAC, addresses
//! and routes of the ADD result, and the workload endpoint listing them. Each part is read,
//! then compared by a pure function (`compare_*`); the first difference is error 103 naming
//! what is missing.

use std::net::IpAddr;
use std::path::Path;

use calico_ipam::Ipam;
use calico_linux::{Family, Link, Netlink, Netns};
use calico_model::endpoint::WorkloadEndpoint;
use calico_model::{MacAddr, from_json};
use calico_plumbing::routes::{self, ContainerRoute, FIRST_METRIC, MAIN_TABLE, SourceRule};
use calico_plumbing::{LINK_LOCAL_WAIT, host_link_local};
use ipnet::IpNet;

use crate::delegate::{self, IpamPlugin};
use crate::execute::Call;
use crate::ipam_plugin::{self, connect};
use crate::plan::unknown_container;
use crate::spec::{CniError, CniResult, code};

fn failed(msg: String) -> CniError {
    CniError::new(code::CHECK_FAILED, msg)
}

/// One CHECK of the attachment `CNI_IFNAME`.
pub async fn check(call: &Call<'_>) -> Result<(), CniError> {
    let (env, conf, request) = (call.env, call.conf, &call.request);
    let prev = conf.prev_result()?.ok_or_else(|| {
        CniError::new(
            code::INVALID_CONFIG,
            "prevResult: CHECK needs the ADD result",
        )
    })?;
    // Calico IPAM's CHECK uses the connection the endpoint's check needs; another IPAM
    // plugin's runs first, and the connection is made for the endpoint.
    let store = match &call.ipam {
        IpamPlugin::InProcess => {
            let store = connect(conf).await?;
            ipam_plugin::check(&Ipam::new(store.clone()), env, conf).await?;
            Some(store)
        }
        IpamPlugin::Exec(plugin) => {
            delegate::call(plugin, &env.path, "CHECK", call.stdin)?;
            None
        }
    };
    let addresses: Vec<IpAddr> = prev.ips.iter().map(|ip| ip.address.addr()).collect();
    let host_gateway = check_host_side(&request.workload.veth_name(), &addresses).await?;
    check_container(
        &request.netns,
        &request.ifname,
        &prev,
        &addresses,
        host_gateway,
    )
    .await?;
    let store = match store {
        Some(store) => store,
        None => connect(conf).await?,
    };
    let key = request.key();
    let endpoint = store.get(&key).await.map_err(|e| conf.etcd_error(e))?;
    compare_endpoint(&key, endpoint.map(|pair| pair.value).as_deref(), &addresses)
}

/// The host side exists and is up; returns its link-local address (the IPv6 gateway) when
/// the workload has IPv6.
async fn check_host_side(veth: &str, addresses: &[IpAddr]) -> Result<Option<IpAddr>, CniError> {
    let host = Netlink::connect(&Netns::current())?;
    let link = host.link_by_name(veth).await?;
    let link = compare_host_side(veth, link)?;
    if !addresses.iter().any(IpAddr::is_ipv6) {
        return Ok(None);
    }
    Ok(Some(IpAddr::V6(
        host_link_local(&host, &link, LINK_LOCAL_WAIT).await?,
    )))
}

fn compare_host_side(veth: &str, link: Option<Link>) -> Result<Link, CniError> {
    link.filter(|l| l.up)
        .ok_or_else(|| failed(format!("the host side {veth} is missing or down")))
}

/// The container side: the interface, its MAC, every address of the result, and the routes
/// this attachment owns (`routes::owned`), on this interface.
async fn check_container(
    netns: &str,
    ifname: &str,
    prev: &CniResult,
    addresses: &[IpAddr],
    host_gateway: Option<IpAddr>,
) -> Result<(), CniError> {
    if !Path::new(netns).exists() {
        return Err(unknown_container(netns));
    }
    let container = Netlink::connect(&Netns::at_path(netns))?;
    let link = container.link_by_name(ifname).await?;
    let link = compare_interface(netns, ifname, prev, link)?;
    let present = container.addresses(link.index).await?;
    compare_addresses(ifname, addresses, &present)?;
    let (mut present, mut rules) = (Vec::new(), Vec::new());
    for (family, needed) in [
        (Family::V4, addresses.iter().any(IpAddr::is_ipv4)),
        (Family::V6, addresses.iter().any(IpAddr::is_ipv6)),
    ] {
        if needed {
            present.extend(routes::read(&container, family).await?);
            rules.extend(routes::read_rules(&container, family).await?);
        }
    }
    let seen = Routes {
        netns,
        dev: ifname,
        present: &present,
        rules: &rules,
    };
    seen.compare(addresses, host_gateway)
}

/// The interface is there, with the MAC of the ADD result (if it lists one).
fn compare_interface(
    netns: &str,
    ifname: &str,
    prev: &CniResult,
    link: Option<Link>,
) -> Result<Link, CniError> {
    let link = link.ok_or_else(|| failed(format!("{ifname} is missing in {netns}")))?;
    let listed = prev
        .interfaces
        .iter()
        .find(|i| i.name == ifname && i.sandbox.is_some());
    if let Some(want) = listed.and_then(|i| i.mac.as_deref()) {
        let have = link.mac.map(|m| MacAddr(m).to_string()).unwrap_or_default();
        if !want.eq_ignore_ascii_case(&have) {
            return Err(failed(format!(
                "{ifname} in the container has MAC {have}, the ADD result says {want}"
            )));
        }
    }
    Ok(link)
}

fn compare_addresses(
    ifname: &str,
    addresses: &[IpAddr],
    present: &[IpNet],
) -> Result<(), CniError> {
    match addresses
        .iter()
        .find(|ip| !present.iter().any(|a| a.addr() == **ip))
    {
        Some(missing) => Err(failed(format!(
            "{missing} is not on {ifname} in the container"
        ))),
        None => Ok(()),
    }
}

/// The container's routes and source rules as read, of the families the attachment has.
struct Routes<'a> {
    netns: &'a str,
    dev: &'a str,
    present: &'a [ContainerRoute],
    rules: &'a [SourceRule],
}

impl Routes<'_> {
    /// The routes this attachment owns (`routes::owned`) on its interface in the main table,
    /// and for a standby its source rules and the routes of its own table. A standby is known
    /// by its rules, or (when they are gone) by a default route metric above the first
    /// attachment's.
    fn compare(&self, addresses: &[IpAddr], host_gateway: Option<IpAddr>) -> Result<(), CniError> {
        self.owned(addresses, host_gateway, MAIN_TABLE)?;
        for ip in addresses {
            let metric = self.default_metric(ip);
            match self.rules.iter().find(|r| r.from == *ip) {
                Some(rule) => self.owned(&[*ip], host_gateway, rule.table)?,
                None if metric > FIRST_METRIC => {
                    let rule = SourceRule {
                        from: *ip,
                        table: metric,
                    };
                    return Err(failed(format!(
                        "the rule {rule} is missing in the container {}",
                        self.netns
                    )));
                }
                None => {}
            }
        }
        Ok(())
    }

    fn owned(
        &self,
        addresses: &[IpAddr],
        gateway: Option<IpAddr>,
        table: u32,
    ) -> Result<(), CniError> {
        let wanted = routes::owned(self.dev, addresses, gateway, table);
        match routes::first_missing(&wanted, self.present) {
            Some(missing) => Err(failed(format!(
                "the route {missing} is missing in the container {}",
                self.netns
            ))),
            None => Ok(()),
        }
    }

    /// The metric of this interface's default route of `ip`'s family in the main table.
    fn default_metric(&self, ip: &IpAddr) -> u32 {
        self.present
            .iter()
            .find(|r| {
                r.table == MAIN_TABLE
                    && r.dev == self.dev
                    && r.destination.prefix_len() == 0
                    && r.destination.addr().is_ipv4() == ip.is_ipv4()
            })
            .map_or(FIRST_METRIC, |r| r.metric)
    }
}

/// The workload endpoint exists and lists every address.
fn compare_endpoint(key: &str, value: Option<&str>, addresses: &[IpAddr]) -> Result<(), CniError> {
    let value = value.ok_or_else(|| failed(format!("the workload endpoint {key} is missing")))?;
    let endpoint: WorkloadEndpoint = from_json(value)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_must_exist_and_list_every_address() {
        let key = "/calico/v1/host/h/workload/cni/c/endpoint/eth0";
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let value = r#"{"state": "active", "name": "cali1", "profile_ids": ["n"],
            "ipv4_nets": ["10.0.0.5/32"], "ipv6_nets": []}"#;
        assert!(compare_endpoint(key, Some(value), &[ip("10.0.0.5")]).is_ok());
        let e = compare_endpoint(key, Some(value), &[ip("10.0.0.5"), ip("fd00::5")]).unwrap_err();
        assert_eq!(e.code, code::CHECK_FAILED);
        assert_eq!(
            e.msg,
            format!("fd00::5 is not in the workload endpoint {key}")
        );
        let e = compare_endpoint(key, None, &[]).unwrap_err();
        assert_eq!(e.msg, format!("the workload endpoint {key} is missing"));
    }

    #[test]
    fn a_standby_without_its_source_rule_is_named() {
        let ip = "10.0.0.5".parse::<IpAddr>().unwrap();
        let gateway = routes::owned("eth1", &[ip], None, MAIN_TABLE);
        let present: Vec<ContainerRoute> = gateway
            .iter()
            .map(|r| ContainerRoute {
                metric: FIRST_METRIC + 1,
                ..r.clone()
            })
            .collect();
        let seen = Routes {
            netns: "/run/netns/c",
            dev: "eth1",
            present: &present,
            rules: &[],
        };
        let e = seen.compare(&[ip], None).unwrap_err();
        assert_eq!(e.code, code::CHECK_FAILED);
        assert!(e.msg.starts_with("the rule from 10.0.0.5 "), "{}", e.msg);
        assert!(
            e.msg.ends_with("is missing in the container /run/netns/c"),
            "{}",
            e.msg
        );
        assert!(
            Routes {
                present: &[],
                ..seen
            }
            .compare(&[ip], None)
            .is_err()
        );
    }
}
