//! Pure: this host's endpoints (as etcd holds them) and Neutron's subnets → what dnsmasq serves.
//!
//! An endpoint's addresses carry no subnet id, so each address is matched to the Neutron subnet
//! whose cidr contains it. Only subnets that hold an address of this host's ports are served.
//! An address no subnet holds, or more than one (overlapping cidrs), or one in a subnet dnsmasq
//! cannot serve, is left out and named; so is an endpoint without a MAC. A port Neutron names
//! (`dns_assignment`, see `names`) gets its host name and domain in its lease and an address
//! record for each of its served addresses (SLAAC ones included).

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use calico_model::Key;
use calico_model::endpoint::WorkloadEndpoint;

use super::NotServed;
use super::names::{Names, PortName, port_name};
use super::subnet::{DhcpSubnet, Mode, Served, served};

/// One port's DHCP entry: its MAC and the addresses it is given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostEntry {
    pub port_id: String,
    pub mac: String,
    /// At most one IPv4 address (a DHCPv4 client takes one).
    pub ipv4: Option<IpAddr>,
    /// Addresses in `dhcpv6-stateful` subnets.
    pub ipv6: Vec<IpAddr>,
    /// Its host name and domain, when Neutron names it.
    pub name: Option<PortName>,
}

/// Everything dnsmasq serves, and what was left out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// By subnet id.
    pub subnets: BTreeMap<String, Served>,
    /// By port id.
    pub hosts: Vec<HostEntry>,
    pub left_out: Vec<NotServed>,
    /// Network id → the TAPs of this host's ports with an address served in it (SLAAC-only
    /// ports too: they hear the network's router advertisements).
    pub taps: BTreeMap<String, BTreeSet<String>>,
    /// Some address is in no subnet the agent knows: Neutron may have one it has not read yet.
    pub unknown_subnet: bool,
}

/// The plan for `endpoints` (etcd key → value) given Neutron's `subnets`, without names.
pub fn plan(endpoints: &BTreeMap<String, String>, subnets: &[DhcpSubnet]) -> Plan {
    plan_with_names(endpoints, subnets, &Names::new())
}

/// The plan for `endpoints` given Neutron's `subnets` and the ports' `names`.
pub fn plan_with_names(
    endpoints: &BTreeMap<String, String>,
    subnets: &[DhcpSubnet],
    names: &Names,
) -> Plan {
    let mut plan = Plan::default();
    let mut checked: BTreeMap<&str, Option<Served>> = BTreeMap::new();
    for (key, value) in endpoints {
        let (port_id, endpoint) = match parse(key, value) {
            Ok(parsed) => parsed,
            Err(e) => {
                plan.left_out.push(e);
                continue;
            }
        };
        let Some(mac) = endpoint.mac else {
            plan.left_out
                .push(NotServed::port(&port_id, "no mac: DHCP serves by MAC"));
            continue;
        };
        if !is_interface_name(&endpoint.name) {
            plan.left_out.push(NotServed::port(
                &port_id,
                format!(
                    "endpoint name {:?}: not an interface name (its TAP); DHCP and RAs are \
                     served on the VM's TAP",
                    endpoint.name
                ),
            ));
            continue;
        }
        let mut entry = HostEntry {
            port_id: port_id.clone(),
            mac: mac.to_string(),
            ipv4: None,
            ipv6: Vec::new(),
            name: None,
        };
        let mut served = Vec::new();
        let nets = endpoint.ipv4_nets.iter().chain(&endpoint.ipv6_nets);
        for addr in nets.map(|n| n.addr()) {
            match subnet_of(addr, subnets, &mut checked, &mut plan) {
                Ok(subnet) => {
                    served.push(addr);
                    let taps = plan.taps.entry(subnet.network.clone()).or_default();
                    taps.insert(endpoint.name.clone());
                    add(&mut entry, addr, subnet, &mut plan.left_out);
                }
                Err(reason) => plan.left_out.push(NotServed::port(
                    &port_id,
                    format!("address {addr}: {reason}"),
                )),
            }
        }
        if let Some(assignments) = names.get(&port_id) {
            match port_name(&port_id, assignments, &served) {
                Ok(name) => entry.name = name,
                Err(e) => plan.left_out.push(e),
            }
        }
        // A port served by SLAAC only still has its name in DNS.
        if entry.ipv4.is_some() || !entry.ipv6.is_empty() || entry.name.is_some() {
            plan.hosts.push(entry);
        }
    }
    plan.hosts.sort_by(|a, b| a.port_id.cmp(&b.port_id));
    plan
}

/// A Linux interface name dnsmasq can take in a list: 1 to 15 characters, no `,`, `*`, `/`,
/// blank or `:`.
fn is_interface_name(name: &str) -> bool {
    (1..=15).contains(&name.len()) && !name.contains([',', '*', '/', ' ', ':'])
}

/// The port id and endpoint of an etcd key and value.
fn parse(key: &str, value: &str) -> Result<(String, WorkloadEndpoint), NotServed> {
    let id = match Key::parse(key) {
        Ok(Key::WorkloadEndpoint(id)) => id,
        Ok(_) => return Err(NotServed::new("key", key, "not a workload endpoint")),
        Err(e) => return Err(NotServed::new("key", key, e.to_string())),
    };
    let endpoint = serde_json::from_str(value)
        .map_err(|e| NotServed::port(&id.endpoint, format!("endpoint value: {e}")))?;
    Ok((id.endpoint, endpoint))
}

/// The served subnet holding `addr`, or why there is none. Each subnet is checked once; one
/// that cannot be served is named once in `plan.left_out`.
fn subnet_of<'a>(
    addr: IpAddr,
    subnets: &'a [DhcpSubnet],
    checked: &mut BTreeMap<&'a str, Option<Served>>,
    plan: &mut Plan,
) -> Result<Served, String> {
    let holding: Vec<&DhcpSubnet> = subnets
        .iter()
        .filter(|s| {
            s.cidr
                .parse::<ipnet::IpNet>()
                .is_ok_and(|n| n.contains(&addr))
        })
        .collect();
    let subnet = match holding.as_slice() {
        [] => {
            plan.unknown_subnet = true;
            return Err("in no Neutron subnet".into());
        }
        [one] => *one,
        [a, b, ..] => {
            return Err(format!(
                "in subnets {} and {} (overlapping cidrs): cannot tell which",
                a.id, b.id
            ));
        }
    };
    let served = checked
        .entry(&subnet.id)
        .or_insert_with(|| match served(subnet) {
            Ok((served, partial)) => {
                plan.left_out.extend(partial);
                plan.subnets.insert(served.id.clone(), served.clone());
                Some(served)
            }
            Err(e) => {
                plan.left_out.push(e);
                None
            }
        });
    served
        .clone()
        .ok_or_else(|| format!("subnet {} is not served", subnet.id))
}

/// Adds `addr` of `subnet` to `entry` where the subnet's mode gives addresses by DHCP.
fn add(entry: &mut HostEntry, addr: IpAddr, subnet: Served, left_out: &mut Vec<NotServed>) {
    match subnet.mode {
        Mode::V4 if entry.ipv4.is_none() => entry.ipv4 = Some(addr),
        Mode::V4 => left_out.push(NotServed::port(
            &entry.port_id,
            format!("address {addr}: a DHCPv4 client takes one address; it has one already"),
        )),
        Mode::Stateful => entry.ipv6.push(addr),
        // SLAAC: the VM makes the address from the advertised prefix and its MAC.
        Mode::Stateless | Mode::Slaac => {}
    }
}

#[cfg(test)]
mod tests;
