//! Pure: a [`Plan`] → dnsmasq's command line, its hosts file and its options file.
//!
//! The command line holds what dnsmasq reads only at start (the ranges: one per served subnet,
//! `static`, so only the MACs in the hosts file get addresses; the interfaces, one per served
//! network, and the TAPs aliased to each with `--bridge-interface`); the hosts file
//! (`--dhcp-hostsfile`), the options file (`--dhcp-optsfile`) and the names file
//! (`--addn-hosts`: the address records of the ports' host names) are re-read on SIGHUP. So a
//! port's addresses or names changing cost a SIGHUP, and a TAP or a subnet added or removed
//! restarts dnsmasq (the leases are in its lease file; a client retries meanwhile).
//!
//! DNS: dnsmasq answers on `dns_port` (53; 0 turns DNS off) the names of this host's ports and
//! nothing else (`--no-resolv`: no upstream, other names are refused); `--bind-dynamic` binds it
//! to the addresses of its interfaces only (the gateways, the TAPs' link-local addresses), so
//! it does not clash with a resolver of the host's own. A subnet without `dns_nameservers`
//! gets dnsmasq itself (its gateway address) as DNS server, as Neutron's DHCP agent gives its
//! own port.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::path::Path;
use std::time::Duration;

use ipnet::IpNet;

use super::plan::Plan;
use super::subnet::{Mode, Served};

/// Where dnsmasq runs: its interface, the TAP names, files and lease time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting<'a> {
    pub interface: &'a str,
    pub tap_prefix: &'a str,
    pub state_dir: &'a Path,
    pub lease_time: Duration,
    /// dnsmasq's DNS port; 0: no DNS service.
    pub dns_port: u16,
}

/// Everything dnsmasq is given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rendered {
    /// The command line (without the binary); a change means a restart.
    pub args: Vec<String>,
    /// `--dhcp-hostsfile`: one line per port.
    pub hosts: String,
    /// `--dhcp-optsfile`: router, DNS and routes per subnet, domains per port.
    pub opts: String,
    /// `--addn-hosts`: `address fqdn hostname` per named port's address.
    pub names: String,
    /// The interfaces, one per served network (see [`interface_names`]), and the addresses
    /// each holds: its network's served subnets' gateways with their prefix lengths.
    pub interfaces: BTreeMap<String, BTreeSet<IpNet>>,
}

pub const HOSTS_FILE: &str = "hosts";
pub const OPTS_FILE: &str = "opts";
pub const NAMES_FILE: &str = "names";
pub const LEASE_FILE: &str = "leases";
pub const PID_FILE: &str = "dnsmasq.pid";

/// What dnsmasq is given for `plan`.
pub fn render(plan: &Plan, setting: &Setting) -> Rendered {
    let by_network = interface_names(plan, setting.interface);
    let mut interfaces: BTreeMap<String, BTreeSet<IpNet>> = BTreeMap::new();
    for subnet in plan.subnets.values() {
        if let Some(name) = by_network.get(&subnet.network) {
            let addresses = interfaces.entry(name.clone()).or_default();
            addresses.insert(subnet.interface_address());
        }
    }
    Rendered {
        args: args(plan, setting, &by_network),
        hosts: hosts(plan),
        opts: opts(plan),
        names: names(plan),
        interfaces,
    }
}

/// Network id → the name of its interface: `<prefix><n>`, `n` counting the served networks
/// in the order of their ids from 0.
///
/// One interface per network, each TAP an alias of its own network's interface only: dnsmasq
/// sends a TAP the router advertisements (prefixes, RDNSS) of the subnets whose gateways its
/// interface holds, and answers DHCP on it from those subnets' ranges and options, so a VM
/// hears its own network only (one interface for all made every VM hear every network's
/// prefixes).
pub fn interface_names(plan: &Plan, prefix: &str) -> BTreeMap<String, String> {
    let networks: BTreeSet<&String> = plan.subnets.values().map(|s| &s.network).collect();
    networks
        .into_iter()
        .enumerate()
        .map(|(n, network)| (network.clone(), format!("{prefix}{n}")))
        .collect()
}

fn args(plan: &Plan, setting: &Setting, interfaces: &BTreeMap<String, String>) -> Vec<String> {
    let file = |name: &str| setting.state_dir.join(name).display().to_string();
    let taps = format!("{}*", setting.tap_prefix);
    let mut args = vec![
        "--keep-in-foreground".to_owned(),
        // Nothing from /etc/dnsmasq.conf, /etc/hosts or /etc/resolv.conf; no DNS service.
        "--conf-file=".to_owned(),
        "--no-hosts".to_owned(),
        "--no-resolv".to_owned(),
        format!("--port={}", setting.dns_port),
        "--log-facility=-".to_owned(),
        format!("--dhcp-hostsfile={}", file(HOSTS_FILE)),
        format!("--dhcp-optsfile={}", file(OPTS_FILE)),
        format!("--addn-hosts={}", file(NAMES_FILE)),
        format!("--dhcp-leasefile={}", file(LEASE_FILE)),
        // Names the dnsmasq of a previous run that was killed with its agent (see `dnsmasq`).
        format!("--pid-file={}", file(PID_FILE)),
    ];
    for interface in interfaces.values() {
        args.push(format!("--interface={interface}"));
    }
    // DHCPv6 and RS arrive on the TAPs' multicast groups, which dnsmasq joins only on
    // interfaces it listens on.
    args.push(format!("--interface={taps}"));
    args.push("--except-interface=lo".to_owned());
    for (network, interface) in interfaces {
        let Some(taps) = plan.taps.get(network).filter(|t| !t.is_empty()) else {
            continue;
        };
        let taps: Vec<&str> = taps.iter().map(String::as_str).collect();
        args.push(format!("--bridge-interface={interface},{}", taps.join(",")));
    }
    if setting.dns_port != 0 {
        args.push("--bind-dynamic".to_owned());
    }
    let lease = setting.lease_time.as_secs().max(120);
    for subnet in plan.subnets.values() {
        args.push(range(subnet, lease));
    }
    if plan.subnets.values().any(|s| s.router_advertisements) {
        args.push("--enable-ra".to_owned());
    }
    args
}

/// One subnet's range. IPv6 ranges are `off-link`: the router advertisements carry the prefix
/// without the on-link (L) flag, as networking-calico's dnsmasq does. Calico routes each VM as
/// a /128 through its own TAP, so nothing else of the prefix is on the VM's link: with the flag
/// the VM would look its peers up by neighbour discovery on its TAP, where nobody answers,
/// instead of sending to its router (the TAP's link-local address, from the same RAs).
fn range(subnet: &Served, lease: u64) -> String {
    let (tag, start) = (subnet.tag(), subnet.net.network());
    let shape = match subnet.mode {
        Mode::V4 => format!("static,{}", subnet.net.netmask()),
        Mode::Stateful => format!("static,off-link,{}", subnet.net.prefix_len()),
        Mode::Stateless => format!("ra-stateless,off-link,{}", subnet.net.prefix_len()),
        // RA only: the A flag, no DHCPv6 (dnsmasq's `slaac` would serve DHCPv6 too).
        Mode::Slaac => format!("ra-only,off-link,{}", subnet.net.prefix_len()),
    };
    format!("--dhcp-range=set:{tag},{start},{shape},{lease}s")
}

/// The tag of a named port's options (its domain).
fn port_tag(port_id: &str) -> String {
    format!("port-{port_id}")
}

fn hosts(plan: &Plan) -> String {
    let mut text = String::new();
    for host in &plan.hosts {
        let mut line = host.mac.clone();
        if host.name.as_ref().is_some_and(|n| n.domain.is_some()) {
            line += &format!(",set:{}", port_tag(&host.port_id));
        }
        if let Some(v4) = host.ipv4 {
            line += &format!(",{v4}");
        }
        for v6 in &host.ipv6 {
            line += &format!(",[{v6}]");
        }
        if let Some(name) = &host.name {
            line += &format!(",{}", name.hostname);
        }
        text += &line;
        text.push('\n');
    }
    text
}

fn names(plan: &Plan) -> String {
    let mut text = String::new();
    for name in plan.hosts.iter().filter_map(|h| h.name.as_ref()) {
        for (address, fqdn) in &name.records {
            text += &format!("{address} {fqdn} {}\n", name.hostname);
        }
    }
    text
}

fn opts(plan: &Plan) -> String {
    let mut text = String::new();
    for subnet in plan.subnets.values() {
        let tag = subnet.tag();
        let mut line = |option: &str, values: &[String]| {
            text += &format!("tag:{tag},{option},{}\n", values.join(","));
        };
        let dns: Vec<String> = subnet.dns.iter().map(|a| bracketed(*a)).collect();
        if subnet.mode == Mode::V4 {
            line("option:router", &[subnet.gateway.to_string()]);
            if !dns.is_empty() {
                line("option:dns-server", &dns);
            }
            if !subnet.routes.is_empty() {
                line("option:classless-static-route", &classless(subnet));
            }
        } else if !dns.is_empty() {
            // DHCPv6's option 23, and the RDNSS of the router advertisements (slaac too).
            line("option6:dns-server", &dns);
        }
    }
    for host in &plan.hosts {
        let Some(domain) = host.name.as_ref().and_then(|n| n.domain.as_ref()) else {
            continue;
        };
        let tag = port_tag(&host.port_id);
        text += &format!("tag:{tag},option:domain-name,{domain}\n");
        text += &format!("tag:{tag},option6:domain-search,{domain}\n");
    }
    text
}

/// Option 121: the host routes, then the default route via the gateway (a client that gets
/// option 121 ignores option 3, RFC 3442).
fn classless(subnet: &Served) -> Vec<String> {
    let mut values = Vec::new();
    for (destination, nexthop) in &subnet.routes {
        values.push(destination.to_string());
        values.push(nexthop.to_string());
    }
    if !subnet.routes.iter().any(|(d, _)| d.prefix_len() == 0) {
        values.push("0.0.0.0/0".to_owned());
        values.push(subnet.gateway.to_string());
    }
    values
}

fn bracketed(addr: IpAddr) -> String {
    match addr {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => format!("[{v6}]"),
    }
}

#[cfg(test)]
mod tests;
