//! The nat table: traffic from a masquerading pool to anywhere outside every pool leaves with
//! the host's address (`masquerade: true` on a pool). Two `hash:net` sets hold the pools; one
//! rule in `cali-POSTROUTING` does the rest. And the metadata path: workloads' TCP to
//! 169.254.169.254:80 goes to `MetadataAddr:MetadataPort` (one DNAT rule in `cali-PREROUTING`).
//! And workloads' 1:1 NAT mappings (`ipv4_nat` / `ipv6_nat`): `cali-fip-dnat` and
//! `cali-fip-snat`.

use std::fmt::Write;

use std::collections::BTreeSet;
use std::net::IpAddr;

use calico_calc::{DesiredState, EndpointKey};
use ipnet::IpNet;

use super::chain::{Chain, restore_text};
use super::{IpVersion, holds};
use crate::firewall::config::{METADATA_SERVICE, RenderConfig};

/// The set of every pool's CIDR.
pub fn all_pools_set(version: IpVersion) -> String {
    format!("cali{}-all-pools", version.number())
}

/// The set of the masquerading pools' CIDRs.
pub fn masquerade_pools_set(version: IpVersion) -> String {
    format!("cali{}-masq-pools", version.number())
}

/// The two pool sets as `ipset restore` input (rebuilt and swapped in, like the others).
pub fn render_pool_ipsets(state: &DesiredState, version: IpVersion) -> String {
    let family = match version {
        IpVersion::V4 => "inet",
        IpVersion::V6 => "inet6",
    };
    let mut out = String::new();
    let sets = [
        (all_pools_set(version), &state.pools),
        (masquerade_pools_set(version), &state.masquerade_pools),
    ];
    for (name, cidrs) in sets {
        let temp = format!("{name}-t");
        let create = format!("hash:net family {family}");
        writeln!(out, "create {name} {create} -exist").unwrap();
        writeln!(out, "create {temp} {create} -exist").unwrap();
        writeln!(out, "flush {temp}").unwrap();
        for cidr in cidrs.iter().filter(|c| is_version(c, version)) {
            writeln!(out, "add {temp} {cidr}").unwrap();
        }
        writeln!(out, "swap {name} {temp}").unwrap();
        writeln!(out, "destroy {temp}").unwrap();
    }
    out
}

fn is_version(cidr: &IpNet, version: IpVersion) -> bool {
    matches!(
        (cidr, version),
        (IpNet::V4(_), IpVersion::V4) | (IpNet::V6(_), IpVersion::V6)
    )
}

/// The nat table for one IP version, as `iptables-restore --noflush` input. The kernel's
/// PREROUTING, OUTPUT and POSTROUTING chains need jumps to `cali-PREROUTING`, `cali-OUTPUT` and
/// `cali-POSTROUTING` (see `kernel_jumps`). Rendered whole, from the configuration and the
/// local endpoints' NAT mappings; every chain is always declared, so that the kernel's jumps
/// always have a target and a rule from an earlier state is flushed.
///
/// `cali-PREROUTING` holds the metadata path: a workload's TCP to 169.254.169.254:80 (only from
/// workload interfaces) is DNATed to `MetadataAddr:MetadataPort`. It is IPv4 only, and absent
/// with `MetadataAddr=None`.
///
/// The 1:1 NAT mappings (`ipv4_nat` / `ipv6_nat`) of active local workloads: `cali-fip-dnat`
/// (from `cali-PREROUTING`, for forwarded traffic, and `cali-OUTPUT`, for the host's own)
/// DNATs connections to each `ext_ip` to its `int_ip`; `cali-fip-snat` (from
/// `cali-POSTROUTING`, before the masquerade rule) SNATs to `ext_ip` an endpoint's connection
/// to its own `ext_ip` (hairpin: after DNAT it goes back to the endpoint, from `int_ip` to
/// `int_ip`). Other connections from `int_ip` keep their source. An `ext_ip` mapped twice goes
/// to the first mapping (by endpoint key).
pub fn render_nat(state: &DesiredState, config: &RenderConfig, version: IpVersion) -> String {
    let chains = nat_chains(state, config, version);
    restore_text("nat", &chains.iter().collect::<Vec<_>>(), &[])
}

/// The nat table's chains for one IP version, in the order [`render_nat`] declares them: what
/// the driver writes and compares (with the kernel's, or with what it last wrote) as chains.
pub(crate) fn nat_chains(
    state: &DesiredState,
    config: &RenderConfig,
    version: IpVersion,
) -> Vec<Chain> {
    let masq = masquerade_pools_set(version);
    let all = all_pools_set(version);
    let mut prerouting = Chain::new("cali-PREROUTING");
    if let (IpVersion::V4, Some(to)) = (version, config.metadata) {
        for wl in config.interface_prefixes.wildcards() {
            prerouting.push(format!(
                "-i {wl} -d {}/32 -p tcp -m tcp --dport {} \
                 -m comment --comment metadata -j DNAT --to-destination {to}",
                METADATA_SERVICE.ip(),
                METADATA_SERVICE.port(),
            ));
        }
    }
    prerouting.push("-j cali-fip-dnat");
    let mut output = Chain::new("cali-OUTPUT");
    output.push("-j cali-fip-dnat");
    let mut postrouting = Chain::new("cali-POSTROUTING");
    postrouting.push("-j cali-fip-snat");
    postrouting.push(format!(
        "-m comment --comment \"masquerade pools\" \
         -m set --match-set {masq} src -m set ! --match-set {all} dst -j MASQUERADE"
    ));
    let mut dnat = Chain::new("cali-fip-dnat");
    let mut snat = Chain::new("cali-fip-snat");
    let mut mapped = BTreeSet::new();
    for (int, ext) in nat_mappings(state, version) {
        if !mapped.insert(ext) {
            continue;
        }
        let (int_net, ext_net) = (IpNet::from(int), IpNet::from(ext));
        dnat.push(format!("-d {ext_net} -j DNAT --to-destination {int}"));
        snat.push(format!(
            "-s {int_net} -d {int_net} -j SNAT --to-source {ext}"
        ));
    }
    vec![prerouting, output, postrouting, dnat, snat]
}

/// The NAT mappings `(int_ip, ext_ip)` of the active local workloads, of one IP version, in
/// endpoint-key order.
fn nat_mappings(
    state: &DesiredState,
    version: IpVersion,
) -> impl Iterator<Item = (IpAddr, IpAddr)> {
    state
        .endpoints
        .iter()
        .filter(|(key, program)| matches!(key, EndpointKey::Workload(_)) && program.active)
        .flat_map(|(_, program)| program.nat.iter().copied())
        .filter(move |(int, ext)| holds(version, int) && holds(version, ext))
}
