//! The interfaces dnsmasq serves from: one Linux bridge with no ports per served network
//! (`<prefix><n>`, see `render::interface_names`), holding that network's served subnets'
//! gateway addresses (see docs/openstack.md, "The interface").
//!
//! Why a bridge: upstream uses a dummy link, which this kind of kernel may lack; a bridge is in
//! every kernel that runs containers, is up with no ports, and needs no peer (a veth pair would
//! leave a second device to clean up). Why `noprefixroute`: the address carries the subnet's
//! prefix length (dnsmasq's DHCPv6 matches a range only from an address of that prefix), but
//! the kernel adds no connected route for it, so the subnet's traffic keeps following Felix's
//! per-VM routes through the TAPs and is never drawn to this port-less bridge. IPv6 addresses
//! are added `nodad`: a bridge without ports cannot run duplicate address detection. The
//! interface accepts no router advertisements (dnsmasq's own would add the prefix as on-link).

use std::collections::{BTreeMap, BTreeSet};

use calico_linux::Netns;
use ipnet::IpNet;

use super::DhcpError;

/// The interfaces named `<prefix><n>`, managed together ([`sync_all`]).
#[derive(Debug, Clone)]
pub struct Interfaces {
    pub prefix: String,
}

impl Interfaces {
    /// Makes the bridges `want` names exist with exactly their addresses, and removes the other
    /// bridges of the prefix (`<prefix><digits>`, and `<prefix>` itself, which earlier agents
    /// served every network from).
    pub fn sync_all(&self, want: &BTreeMap<String, BTreeSet<IpNet>>) -> Result<(), DhcpError> {
        for (name, addresses) in want {
            let interface = Interface { name: name.clone() };
            interface.ensure()?;
            interface.sync(addresses)?;
        }
        let text = ip(&["-j", "link", "show", "type", "bridge"])?;
        for name in bridge_names(&text) {
            if self.is_ours(&name) && !want.contains_key(&name) {
                ip(&["link", "del", "dev", &name])?;
            }
        }
        Ok(())
    }

    /// Whether `ip` runs and lists the bridges.
    pub fn check(&self) -> Result<(), DhcpError> {
        ip(&["-j", "link", "show", "type", "bridge"]).map(drop)
    }

    fn is_ours(&self, name: &str) -> bool {
        name.strip_prefix(self.prefix.as_str())
            .is_some_and(|rest| rest.chars().all(|c| c.is_ascii_digit()))
    }
}

/// The interface names of `ip -j link show` output.
fn bridge_names(json: &str) -> Vec<String> {
    let links: Vec<serde_json::Value> = serde_json::from_str(json).unwrap_or_default();
    links
        .iter()
        .filter_map(|l| l["ifname"].as_str().map(str::to_owned))
        .collect()
}

/// The interface named `name`, managed with iproute2's `ip`.
#[derive(Debug, Clone)]
pub struct Interface {
    pub name: String,
}

impl Interface {
    /// Creates the bridge unless it exists, and sets it up.
    pub fn ensure(&self) -> Result<(), DhcpError> {
        if ip(&["link", "show", "dev", &self.name]).is_err() {
            ip(&["link", "add", &self.name, "type", "bridge"])?;
        }
        self.refuse_router_advertisements()?;
        ip(&["link", "set", "dev", &self.name, "up"]).map(drop)
    }

    /// dnsmasq's own RAs reach the interface too; a host that is not forwarding (yet) would
    /// take the prefix as on-link through it and route the subnet to this port-less bridge.
    fn refuse_router_advertisements(&self) -> Result<(), DhcpError> {
        let path = format!("net/ipv6/conf/{}/accept_ra", self.name);
        // No IPv6 in the kernel: nothing to refuse.
        if !std::path::Path::new("/proc/sys").join(&path).exists() {
            return Ok(());
        }
        calico_linux::set_sysctl(&Netns::current(), &path, "0")
            .map(drop)
            .map_err(|e| DhcpError::Command {
                command: format!("sysctl {path}=0"),
                reason: e.reason,
            })
    }

    /// The global addresses it holds.
    pub fn addresses(&self) -> Result<BTreeSet<IpNet>, DhcpError> {
        let text = ip(&["-j", "addr", "show", "dev", &self.name])?;
        Ok(parse_addresses(&text))
    }

    /// Adds what `want` has and the interface lacks, removes the rest.
    pub fn sync(&self, want: &BTreeSet<IpNet>) -> Result<(), DhcpError> {
        let have = self.addresses()?;
        for net in want.difference(&have) {
            let text = net.to_string();
            let mut args = vec!["addr", "add", &text, "dev", &self.name, "noprefixroute"];
            if net.addr().is_ipv6() {
                args.push("nodad");
            }
            ip(&args)?;
        }
        for net in have.difference(want) {
            ip(&["addr", "del", &net.to_string(), "dev", &self.name])?;
        }
        Ok(())
    }
}

/// Global addresses of `ip -j addr show` output.
fn parse_addresses(json: &str) -> BTreeSet<IpNet> {
    let links: Vec<serde_json::Value> = serde_json::from_str(json).unwrap_or_default();
    let infos = links
        .iter()
        .filter_map(|l| l["addr_info"].as_array())
        .flatten();
    infos
        .filter(|a| a["scope"] == "global")
        .filter_map(|a| {
            let local = a["local"].as_str()?;
            let len = a["prefixlen"].as_u64()?;
            format!("{local}/{len}").parse().ok()
        })
        .collect()
}

/// Runs `ip args…`: its stdout, or an error with its stderr.
fn ip(args: &[&str]) -> Result<String, DhcpError> {
    let command = format!("ip {}", args.join(" "));
    // Through calico-linux, the one place that runs kernel tools.
    let out = Netns::current()
        .command("ip")
        .args(args)
        .output()
        .map_err(|e| DhcpError::Command {
            command: command.clone(),
            reason: format!("cannot run ip (iproute2): {e}"),
        })?;
    if !out.status.success() {
        return Err(DhcpError::Command {
            command,
            reason: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_prefix_and_its_numbered_bridges_are_the_agent_s() {
        let ours = Interfaces {
            prefix: "ns-calico".into(),
        };
        assert!(ours.is_ours("ns-calico") && ours.is_ours("ns-calico12"));
        assert!(!ours.is_ours("ns-calicox") && !ours.is_ours("br0"));
        let json = r#"[{"ifname":"ns-calico0"},{"ifname":"br0"}]"#;
        assert_eq!(bridge_names(json), ["ns-calico0", "br0"]);
    }

    #[test]
    fn global_addresses_are_read_from_ip_json() {
        let json = r#"[{"ifname":"ns-calico","addr_info":[
            {"family":"inet","local":"10.65.0.1","prefixlen":24,"scope":"global"},
            {"family":"inet6","local":"2001:db8::1","prefixlen":64,"scope":"global"},
            {"family":"inet6","local":"fe80::1","prefixlen":64,"scope":"link"}]}]"#;
        let got: Vec<String> = parse_addresses(json)
            .iter()
            .map(|n| n.to_string())
            .collect();
        assert_eq!(got, ["10.65.0.1/24", "2001:db8::1/64"]);
    }
}
