//! The nat table: traffic from a masquerading pool to anywhere outside every pool leaves with
//! the host's address (`masquerade: true` on a pool). Two `hash:net` sets hold the pools; one
//! rule in `cali-POSTROUTING` does the rest.

use std::fmt::Write;

use calico_calc::DesiredState;
use ipnet::IpNet;

use super::IpVersion;

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
/// POSTROUTING chain needs a jump to `cali-POSTROUTING` (see `kernel_jumps`).
pub fn render_nat(version: IpVersion) -> String {
    let masq = masquerade_pools_set(version);
    let all = all_pools_set(version);
    format!(
        "*nat\n:cali-POSTROUTING - [0:0]\n\
         -A cali-POSTROUTING -m comment --comment \"masquerade pools\" \
         -m set --match-set {masq} src -m set ! --match-set {all} dst -j MASQUERADE\n\
         COMMIT\n"
    )
}
