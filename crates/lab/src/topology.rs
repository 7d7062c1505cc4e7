//! The lab's network: the fabric namespace with one bridge per host subnet (and routing between
//! subnets), the etcd members' namespaces (in a cluster), the hosts' namespaces with their fabric addresses, routes and static neighbours,
//! and finding a lab's namespaces again.

use anyhow::Context;

use crate::sh::{self, ip, ipl};
use crate::state::{EtcdMember, Host, Lab, subnet_gateway, subnet_gateway6};

/// The most host subnets `up --subnets` makes.
pub const MAX_SUBNETS: u32 = 8;

/// The subnet (from 1) of host `n` (from 1): hosts alternate between the subnets.
pub fn subnet_of(n: u32, subnets: u32) -> u32 {
    (n - 1) % subnets.max(1) + 1
}

/// The fabric namespace: a bridge `br<S - 1>` with the subnet's gateway addresses for each of
/// `subnets` host subnets; with more than one, the fabric routes between them.
pub fn add_fabric(lab: &Lab, subnets: u32) -> anyhow::Result<()> {
    let fabric = Lab::fabric_netns(&lab.name);
    add_netns(&fabric)?;
    // One bridge per subnet: br0 (10.99.0.1/24) for subnet 1, br1 (10.99.1.1/24) for 2, ...
    for subnet in 1..=subnets {
        let bridge = format!("br{}", subnet - 1);
        let (gateway, gateway6) = (subnet_gateway(subnet), subnet_gateway6(subnet));
        // No multicast snooping: IPv6 neighbour discovery must not wait for MLD reports.
        ipl(&format!(
            "-n {fabric} link add {bridge} type bridge mcast_snooping 0"
        ))?;
        ipl(&format!("-n {fabric} addr add {gateway}/24 dev {bridge}"))?;
        ipl(&format!(
            "-n {fabric} addr add {gateway6}/64 dev {bridge} nodad"
        ))?;
        ipl(&format!("-n {fabric} link set {bridge} up"))?;
    }
    if subnets > 1 {
        // The fabric is the router between the subnets: it routes the hosts' networks and
        // nothing else (no route to any pool: unencapsulated workload traffic between
        // subnets ends here).
        sh::sysctl(&fabric, "net.ipv4.ip_forward=1")?;
        sh::sysctl(&fabric, "net.ipv6.conf.all.forwarding=1")?;
    }
    Ok(())
}

/// Host `n` on subnet `subnet` (from 1): eth0 `10.99.<subnet - 1>.<10 + n>/24` and
/// `fd00:99:<subnet - 1>::<10 + n>/64` on the fabric's bridge `br<subnet - 1>`, default routes
/// through the fabric's address on that bridge.
pub fn add_host(lab: &Lab, n: u32, subnet: u32) -> anyhow::Result<Host> {
    let name = format!("host{n}");
    let netns = format!("{}.{name}", lab.name);
    let fabric = Lab::fabric_netns(&lab.name);
    let third = (subnet - 1) as u8;
    let host_ip = std::net::Ipv4Addr::new(10, 99, third, 10 + n as u8);
    let host_ip6 =
        std::net::Ipv6Addr::new(0xfd00, 0x99, u16::from(third), 0, 0, 0, 0, 0x10 + n as u16);
    let (gateway, gateway6) = (subnet_gateway(subnet), subnet_gateway6(subnet));
    add_netns(&netns)?;
    let port = format!("h{n}");
    ipl(&format!(
        "-n {netns} link add eth0 type veth peer name {port} netns {fabric}"
    ))?;
    ipl(&format!("-n {fabric} link set {port} master br{third} up"))?;
    ipl(&format!("-n {netns} addr add {host_ip}/24 dev eth0"))?;
    ipl(&format!("-n {netns} addr add {host_ip6}/64 dev eth0 nodad"))?;
    ipl(&format!("-n {netns} link set eth0 up"))?;
    ip(&[
        "-n",
        &netns,
        "route",
        "add",
        "default",
        "via",
        &gateway.to_string(),
    ])?;
    ip(&[
        "-n",
        &netns,
        "-6",
        "route",
        "add",
        "default",
        "via",
        &gateway6.to_string(),
    ])?;
    sh::sysctl(&netns, "net.ipv4.ip_forward=1")?;
    sh::sysctl(&netns, "net.ipv6.conf.all.forwarding=1")?;
    Ok(Host {
        name,
        netns,
        ip: host_ip,
        ip6: host_ip6,
        felix_pid: None,
        node_pid: None,
        subnet,
    })
}

/// The namespace of an etcd member of a cluster: eth0 with its address on the fabric's first
/// bridge `br0`, default routes through the fabric (hosts of other subnets reach it through the
/// fabric's router). A lone member lives in the fabric itself and needs none.
pub fn add_member(lab: &Lab, member: &EtcdMember, index: u32) -> anyhow::Result<()> {
    let (netns, fabric) = (&member.netns, Lab::fabric_netns(&lab.name));
    add_netns(netns)?;
    let port = format!("e{index}");
    ipl(&format!(
        "-n {netns} link add eth0 type veth peer name {port} netns {fabric}"
    ))?;
    ipl(&format!("-n {fabric} link set {port} master br0 up"))?;
    ipl(&format!("-n {netns} addr add {}/24 dev eth0", member.ip))?;
    ipl(&format!("-n {netns} link set eth0 up"))?;
    ipl(&format!(
        "-n {netns} route add default via {}",
        subnet_gateway(1)
    ))?;
    Ok(())
}

/// Hosts know each other's fabric MACs up front, so that the first packets between fresh
/// namespaces do not depend on neighbour discovery over the bridge (observed here: the first
/// IPv6 solicitation between new namespaces can go unanswered for over a second). Only hosts
/// on the same subnet are neighbours; the others are reached through the fabric's router.
pub fn static_fabric_neighbours(hosts: &[Host]) -> anyhow::Result<()> {
    let mut macs = Vec::new();
    for host in hosts {
        let out = ip(&["-n", &host.netns, "-j", "link", "show", "eth0"])?;
        let parsed: serde_json::Value = serde_json::from_str(&out)?;
        macs.push(
            parsed[0]["address"]
                .as_str()
                .context("no MAC on eth0")?
                .to_owned(),
        );
    }
    for host in hosts {
        let neighbours = hosts
            .iter()
            .zip(&macs)
            .filter(|(o, _)| o.name != host.name && o.subnet == host.subnet);
        for (other, mac) in neighbours {
            for address in [other.ip.to_string(), other.ip6.to_string()] {
                let args = [
                    "-n",
                    &host.netns,
                    "neigh",
                    "replace",
                    &address,
                    "lladdr",
                    mac,
                ];
                let mut args = args.to_vec();
                args.extend(["dev", "eth0", "nud", "permanent"]);
                ip(&args)?;
            }
        }
    }
    Ok(())
}

/// The namespaces named `<lab>.…` (lab names cannot contain dots, so no other lab's).
pub fn lab_namespaces(name: &str) -> anyhow::Result<Vec<String>> {
    let prefix = format!("{name}.");
    let mut list: Vec<String> = sh::namespaces()?
        .into_iter()
        .filter(|ns| ns.starts_with(&prefix))
        .collect();
    // Workloads before hosts before the fabric: veths go with the namespace that holds them.
    list.sort_by_key(|ns| (ns.ends_with(".fabric"), ns.matches('.').count() == 1));
    Ok(list)
}

/// The processes running in a namespace (none if it is gone).
pub fn netns_pids(ns: &str) -> Vec<i32> {
    ip(&["netns", "pids", ns])
        .map(|out| {
            out.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// A new namespace with its loopback up.
pub fn add_netns(name: &str) -> anyhow::Result<()> {
    ip(&["netns", "add", name])?;
    ip(&["-n", name, "link", "set", "lo", "up"]).map(drop)
}

/// Removes a namespace (what is left in it goes with it: veths, addresses, routes).
pub fn delete_netns(ns: &str) -> anyhow::Result<()> {
    ip(&["netns", "del", ns])
        .map(drop)
        .with_context(|| format!("cannot delete namespace {ns}"))
}
