//! The representative probes of `policy impact`: the packets each endpoint pair is judged with,
//! before and after a change. A rule decides only packets it matches, so a change of verdict
//! shows with the packets the changed rules name:
//!
//! | from each rule of the old and new versions (both directions) | probes |
//! | --- | --- |
//! | `protocol` (or, with `!protocol`, tcp or udp unless that is the one excluded; none: tcp) | that protocol |
//! | `dst_ports` / `!dst_ports` of a protocol with ports | the first and last port of each range; none named: the other port (below) |
//! | `src_ports` / `!src_ports` | the first port of each range as the source port; none named: the source port (below) |
//! | `icmp_type` / `!icmp_type` (and codes) | that type and code; none: echo request (8, or 128 for ICMPv6) |
//!
//! and always ICMP echo requests (v4 and v6) and TCP to the other port: the lowest port from
//! 1024 up that no rule's destination ranges contain, so that "everything else" is probed too.
//! Packets without a named source port come from the lowest port from 32768 up that no rule's
//! source ranges contain. Port 0 is never probed (ranges starting at 0 give 1).

use std::collections::BTreeSet;
use std::fmt;

use calico_model::rule::{IpVersion, PortRange, Protocol, Rule};

/// One packet shape: the addresses come from the pair it is sent between.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Probe {
    pub protocol: Protocol,
    pub src_port: Option<u16>,
    pub dst_port: Option<u16>,
    pub icmp_type: Option<u8>,
    pub icmp_code: Option<u8>,
}

impl Probe {
    /// The IP version the probe exists in (ICMP is IPv4's, ICMPv6 IPv6's), if only one.
    pub fn ip_version(&self) -> Option<IpVersion> {
        self.protocol.ip_version()
    }

    fn echo(protocol: Protocol) -> Probe {
        let echo = if protocol == Protocol::Icmpv6 { 128 } else { 8 };
        Probe::icmp(protocol, echo, Some(0))
    }

    fn icmp(protocol: Protocol, icmp_type: u8, icmp_code: Option<u8>) -> Probe {
        Probe {
            protocol,
            src_port: None,
            dst_port: None,
            icmp_type: Some(icmp_type),
            icmp_code,
        }
    }
}

impl fmt::Display for Probe {
    /// `tcp/5432`, `tcp/5432 from 53`, `icmp type 8 code 0`, `udp`, `47`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.protocol)?;
        if let Some(port) = self.dst_port {
            write!(f, "/{port}")?;
        }
        if let (Some(port), Some(_)) = (self.src_port, self.dst_port) {
            write!(f, " from {port}")?;
        }
        if let Some(icmp_type) = self.icmp_type {
            write!(f, " type {icmp_type}")?;
        }
        if let Some(code) = self.icmp_code {
            write!(f, " code {code}")?;
        }
        Ok(())
    }
}

/// The probes for `rules` (every rule of the old and new versions of what changes).
pub fn probes<'a>(rules: impl IntoIterator<Item = &'a Rule> + Clone) -> Vec<Probe> {
    let dst_other = unnamed(rules.clone(), 1024, |r| [&r.dst_ports, &r.not_dst_ports]);
    let src_other = unnamed(rules.clone(), 32768, |r| [&r.src_ports, &r.not_src_ports]);
    let mut set = BTreeSet::new();
    set.insert(Probe::echo(Protocol::Icmp));
    set.insert(Probe::echo(Protocol::Icmpv6));
    set.insert(ported(Protocol::Tcp, src_other, dst_other));
    for rule in rules {
        for protocol in protocols(rule) {
            set.extend(of_rule(rule, protocol, src_other, dst_other));
        }
    }
    set.into_iter().collect()
}

fn protocols(rule: &Rule) -> Vec<Protocol> {
    match (rule.protocol, rule.not_protocol) {
        (Some(protocol), _) => vec![protocol],
        (None, Some(Protocol::Tcp)) => vec![Protocol::Udp],
        (None, _) => vec![Protocol::Tcp],
    }
}

fn of_rule(rule: &Rule, protocol: Protocol, src_other: u16, dst_other: u16) -> Vec<Probe> {
    if protocol.is_icmp() {
        let types = [rule.icmp_type, rule.not_icmp_type];
        let codes = [rule.icmp_code, rule.not_icmp_code];
        return match types.iter().flatten().next() {
            Some(&icmp_type) => {
                let code = codes.iter().flatten().next().copied();
                vec![Probe::icmp(protocol, icmp_type, code)]
            }
            None => vec![Probe::echo(protocol)],
        };
    }
    if !protocol.has_ports() {
        let bare = Probe {
            protocol,
            src_port: None,
            dst_port: None,
            icmp_type: None,
            icmp_code: None,
        };
        return vec![bare];
    }
    let dst = ports([&rule.dst_ports, &rule.not_dst_ports], dst_other, true);
    let src = ports([&rule.src_ports, &rule.not_src_ports], src_other, false);
    let pairs = dst.iter().flat_map(|d| src.iter().map(move |s| (*s, *d)));
    pairs.map(|(s, d)| ported(protocol, s, d)).collect()
}

fn ported(protocol: Protocol, src: u16, dst: u16) -> Probe {
    Probe {
        protocol,
        src_port: Some(src),
        dst_port: Some(dst),
        icmp_type: None,
        icmp_code: None,
    }
}

/// The ports of `lists` (first, and last when `both`), or `other` when none is named.
fn ports(lists: [&Vec<PortRange>; 2], other: u16, both: bool) -> Vec<u16> {
    let mut ports = BTreeSet::new();
    for range in lists.into_iter().flatten() {
        ports.insert(range.first().max(1));
        if both {
            ports.insert(range.last().max(1));
        }
    }
    if ports.is_empty() {
        ports.insert(other);
    }
    ports.into_iter().collect()
}

/// The lowest port from `from` up in none of the ranges `lists` gives for any rule.
fn unnamed<'a, F>(rules: impl IntoIterator<Item = &'a Rule>, from: u16, lists: F) -> u16
where
    F: Fn(&'a Rule) -> [&'a Vec<PortRange>; 2],
{
    let ranges: Vec<PortRange> = rules
        .into_iter()
        .flat_map(|rule| lists(rule).into_iter().flatten().copied())
        .collect();
    (from..=u16::MAX)
        .chain(1..from)
        .find(|port| !ranges.iter().any(|r| r.contains(*port)))
        .unwrap_or(from)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(json: &str) -> Rule {
        serde_json::from_str(json).unwrap()
    }

    fn shown(probes: &[Probe]) -> Vec<String> {
        probes.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn probes_are_the_ports_and_types_the_rules_name_plus_the_rest() {
        let old =
            rule(r#"{"action": "allow", "protocol": "tcp", "dst_ports": [5432, "8000:8100"]}"#);
        let new = rule(
            r#"{"action": "deny", "protocol": "udp", "src_ports": [53], "dst_ports": [1024]}"#,
        );
        let ping = rule(r#"{"action": "allow", "protocol": "icmp", "icmp_type": 0}"#);
        let probes = probes([&old, &new, &ping]);
        assert_eq!(
            shown(&probes),
            [
                // 1024 is named, so "any other port" is 1025.
                "tcp/1025 from 32768",
                "tcp/5432 from 32768",
                "tcp/8000 from 32768",
                "tcp/8100 from 32768",
                "udp/1024 from 53",
                "icmp type 0",
                "icmp type 8 code 0",
                "icmpv6 type 128 code 0",
            ]
        );
    }

    #[test]
    fn a_rule_without_protocol_is_probed_with_tcp_and_no_rules_still_probe() {
        let any = rule(r#"{"action": "deny", "src_net": "10.0.0.0/8"}"#);
        assert_eq!(
            shown(&probes([&any])),
            [
                "tcp/1024 from 32768",
                "icmp type 8 code 0",
                "icmpv6 type 128 code 0"
            ]
        );
        let none: [&Rule; 0] = [];
        assert_eq!(probes(none).len(), 3);
        let not_tcp = rule(r#"{"action": "deny", "!protocol": "tcp"}"#);
        assert!(shown(&probes([&not_tcp])).contains(&"udp/1024 from 32768".to_owned()));
    }
}
