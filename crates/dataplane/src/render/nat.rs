//! The nat table: traffic from a masquerading pool to anywhere outside every pool leaves with
//! the host's address (`masquerade: true` on a pool). Two `hash:net` sets hold the pools; one
//! rule in `cali-POSTROUTING` does the rest. And the metadata path: workloads' TCP to
//! 169.254.169.254:80 goes to `MetadataAddr:MetadataPort` (one DNAT rule in `cali-PREROUTING`).

use std::fmt::Write;

use calico_calc::DesiredState;
use ipnet::IpNet;

use super::IpVersion;
use super::config::{METADATA_SERVICE, RenderConfig};

/// The set of every pool's CIDR.
pub fn all_pools_set(version: IpVersion) -> String {
    format!("cali{}-all-pools", version.digit())
}

/// The set of the masquerading pools' CIDRs.
pub fn masquerade_pools_set(version: IpVersion) -> String {
    format!("cali{}-masq-pools", version.digit())
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
/// PREROUTING and POSTROUTING chains need jumps to `cali-PREROUTING` and `cali-POSTROUTING`
/// (see `kernel_jumps`).
///
/// `cali-PREROUTING` holds the metadata path: a workload's TCP to 169.254.169.254:80 (only from
/// workload interfaces) is DNATed to `MetadataAddr:MetadataPort`. It is IPv4 only, and empty
/// with `MetadataAddr=None`; the chain is always declared, so that the kernel's jump always has
/// a target and a rule from an earlier configuration is flushed.
pub fn render_nat(config: &RenderConfig, version: IpVersion) -> String {
    let masq = masquerade_pools_set(version);
    let all = all_pools_set(version);
    let mut out = String::from("*nat\n:cali-PREROUTING - [0:0]\n:cali-POSTROUTING - [0:0]\n");
    if let (IpVersion::V4, Some(to)) = (version, config.metadata) {
        writeln!(
            out,
            "-A cali-PREROUTING -i {}+ -d {}/32 -p tcp -m tcp --dport {} \
             -m comment --comment metadata -j DNAT --to-destination {to}",
            config.interface_prefix,
            METADATA_SERVICE.ip(),
            METADATA_SERVICE.port(),
        )
        .unwrap();
    }
    writeln!(
        out,
        "-A cali-POSTROUTING -m comment --comment \"masquerade pools\" \
         -m set --match-set {masq} src -m set ! --match-set {all} dst -j MASQUERADE"
    )
    .unwrap();
    out.push_str("COMMIT\n");
    out
}
