//! IP sets as `ipset restore` input. Each set is rebuilt in a temporary set and swapped in, so
//! a set is never seen half-filled; the temporary is destroyed afterwards.

use std::collections::BTreeSet;
use std::fmt::Write;
use std::net::IpAddr;

use calico_calc::DesiredState;

use super::{IpVersion, holds, ipset_name};

/// Room for the biggest selector a cluster may have.
const MAX_ELEMENTS: u32 = 1_048_576;

/// Every IP set of the state for one IP version (full rewrite).
pub fn render_ipsets(state: &DesiredState, version: IpVersion) -> String {
    let ids = state.ipsets.keys().map(String::as_str);
    render_ipset_updates(state, version, ids)
}

/// Only the sets named by `ids`: present ones are rebuilt, absent ones destroyed.
pub fn render_ipset_updates<'a>(
    state: &DesiredState,
    version: IpVersion,
    ids: impl IntoIterator<Item = &'a str>,
) -> String {
    let family = match version {
        IpVersion::V4 => "inet",
        IpVersion::V6 => "inet6",
    };
    let mut out = String::new();
    for id in ids {
        let name = ipset_name(version, id);
        let Some(set) = state.ipsets.get(id) else {
            writeln!(out, "destroy {name}").unwrap();
            continue;
        };
        let temp = format!(
            "cali{}t{id}",
            if version == IpVersion::V4 { '4' } else { '6' }
        );
        let create = format!("hash:ip family {family} maxelem {MAX_ELEMENTS}");
        writeln!(out, "create {name} {create} -exist").unwrap();
        writeln!(out, "create {temp} {create} -exist").unwrap();
        writeln!(out, "flush {temp}").unwrap();
        for member in set.members.iter().filter(|a| holds(version, a)) {
            writeln!(out, "add {temp} {member}").unwrap();
        }
        writeln!(out, "swap {name} {temp}").unwrap();
        writeln!(out, "destroy {temp}").unwrap();
    }
    out
}

/// The members of set `id` for one IP version (empty when the state has no such set).
pub fn ipset_members(state: &DesiredState, version: IpVersion, id: &str) -> BTreeSet<IpAddr> {
    let members = state.ipsets.get(id).map(|set| &set.members);
    members
        .into_iter()
        .flatten()
        .filter(|a| holds(version, a))
        .copied()
        .collect()
}

/// Brings an existing set from `old` to `new` members: only the members that differ are added
/// or deleted (a one-member change writes one line, not the whole set).
pub fn render_ipset_delta(
    version: IpVersion,
    id: &str,
    old: &BTreeSet<IpAddr>,
    new: &BTreeSet<IpAddr>,
) -> String {
    let name = ipset_name(version, id);
    let mut out = String::new();
    for member in old.difference(new) {
        writeln!(out, "del {name} {member}").unwrap();
    }
    for member in new.difference(old) {
        writeln!(out, "add {name} {member}").unwrap();
    }
    out
}
