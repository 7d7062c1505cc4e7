//! Forgetting the connections of an address (`conntrack -D`), so that a removed endpoint's
//! flows do not outlive it.

use std::net::IpAddr;

use crate::{CommandError, Netns};

/// Deletes every conntrack entry from or to `address`. Nothing to delete is fine.
pub fn flush_conntrack(netns: &Netns, address: IpAddr) -> Result<(), CommandError> {
    let family = if address.is_ipv4() { "ipv4" } else { "ipv6" };
    let address = address.to_string();
    for direction in ["--orig-src", "--orig-dst"] {
        match netns.run("conntrack", &["-D", "-f", family, direction, &address], "") {
            Ok(_) => {}
            // conntrack exits 1 when no entry matched.
            Err(e) if e.reason.contains("0 flow entries") => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
