//! IP sets as `ipset restore` input. Each set is rebuilt in a temporary set and swapped in, so
//! a set is never seen half-filled; the temporary is destroyed afterwards.

use std::fmt::Write;

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
