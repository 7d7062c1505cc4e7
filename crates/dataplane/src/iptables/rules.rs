//! One rule of the model ([`crate::firewall::model::Rule`]) as iptables rules (without the
//! `-A <chain>` head).
//!
//! - Matches become `-p`, `-s`/`-d`, `-m set` (tags and selectors, through their IP sets),
//!   `-m multiport` (at most 15 ports per match, a range counting 2: longer positive lists become
//!   one rule per chunk, which ORs them; negated lists become several negated matches in one
//!   rule, which ANDs them) and `-m icmp`/`-m icmp6`.
//! - `allow` sets the accept mark and returns; `next-tier` sets the pass mark and returns (in a
//!   profile it means allow); `deny` drops (through `DropActionOverride`); `log` logs and goes
//!   on. A `log_prefix` on another action logs first.
//! - With flow logs on (`FlowLogsEnabled`), a rule that takes an action (`allow`, `deny`,
//!   `next-tier`) is preceded by the same matches with `-j NFLOG` to
//!   [`NFLOG_GROUP`](crate::flowlog::NFLOG_GROUP), prefixed with the step
//!   ([`crate::flowlog::prefix`]), as the nftables backend logs it.
//! - A staged policy's rule never acts: with flow logs on it logs its step and returns (the
//!   first match ends the staged policy); its `log` rules and log prefixes are left out (a
//!   policy not enforced writes nothing to the kernel log). With flow logs off it renders
//!   nothing.

use calico_model::rule::PortRange;

use super::{IpVersion, ipset_name, quote};
use crate::comment::{IPTABLES_COMMENT_MAX, rule_comment};
use crate::firewall::config::RenderConfig;
use crate::firewall::model::{FlowLog, Match, Rule, Side, Verdict};
use crate::flowlog::{self, NFLOG_GROUP};

/// The most ports one multiport match takes.
const MULTIPORT_LIMIT: usize = 15;

/// `<matched> -j NFLOG …` for a flow-log step (`matched` may be empty).
pub(super) fn flow_log_rule(matched: &str, flow_log: &FlowLog) -> String {
    let prefix = quote(&flowlog::prefix(
        &flow_log.step,
        flow_log.action,
        flow_log.inbound,
    ));
    let target = format!("-j NFLOG --nflog-group {NFLOG_GROUP} --nflog-prefix {prefix}");
    match matched {
        "" => target,
        matched => format!("{matched} {target}"),
    }
}

/// The iptables rule bodies for a rule, or none when the rule is for the other IP version.
pub(super) fn encode_rule(rule: &Rule, config: &RenderConfig, version: IpVersion) -> Vec<String> {
    if rule.version.is_some_and(|v| v != version) {
        return Vec::new();
    }
    let base: Vec<String> = (rule.matches.iter())
        .map(|m| encode_match(m, version))
        .collect();
    let mut ports: [Vec<Option<String>>; 2] = [vec![None], vec![None]];
    let mut negated = Vec::new();
    for list in &rule.ports {
        let flag = port_flag(list.side);
        if list.negate {
            for chunk in chunks(&list.ranges).into_iter().flatten() {
                negated.push(format!("-m multiport ! {flag} {chunk}"));
            }
        } else {
            ports[usize::from(list.side == Side::Dst)] = chunks(&list.ranges);
        }
    }
    let c = &rule.comment;
    let comment = rule_comment(&c.what, c.direction, c.number, IPTABLES_COMMENT_MAX);
    let head = format!("-m comment --comment {}", quote(&comment));
    let mut out = Vec::new();
    for src in &ports[0] {
        for dst in &ports[1] {
            let mut m = vec![head.clone()];
            m.extend(base.iter().cloned());
            if let Some(list) = src {
                m.push(format!("-m multiport --sports {list}"));
            }
            if let Some(list) = dst {
                m.push(format!("-m multiport --dports {list}"));
            }
            m.extend(negated.iter().cloned());
            out.extend(actions(rule, &m.join(" "), config));
        }
    }
    out
}

fn port_flag(side: Side) -> &'static str {
    match side {
        Side::Src => "--sports",
        Side::Dst => "--dports",
    }
}

/// One match.
fn encode_match(m: &Match, version: IpVersion) -> String {
    let not = |negate: bool| if negate { "! " } else { "" };
    match m {
        Match::Protocol { protocol, negate } => {
            let name = match protocol.name() {
                Some("icmpv6") => "ipv6-icmp".to_owned(),
                Some(name) => name.to_owned(),
                None => protocol.number().to_string(),
            };
            format!("{}-p {name}", not(*negate))
        }
        Match::Net { side, net, negate } => {
            let flag = match side {
                Side::Src => "-s",
                Side::Dst => "-d",
            };
            format!("{}{flag} {net}", not(*negate))
        }
        Match::Set { side, set, negate } => {
            let dir = match side {
                Side::Src => "src",
                Side::Dst => "dst",
            };
            let name = ipset_name(version, set);
            format!("-m set {}--match-set {name} {dir}", not(*negate))
        }
        Match::Icmp {
            icmp_type,
            code,
            negate,
        } => {
            let (module, flag) = match version {
                IpVersion::V4 => ("icmp", "--icmp-type"),
                IpVersion::V6 => ("icmp6", "--icmpv6-type"),
            };
            let spec = match code {
                Some(code) => format!("{icmp_type}/{code}"),
                None => icmp_type.to_string(),
            };
            format!("-m {module} {}{flag} {spec}", not(*negate))
        }
    }
}

/// The port list in multiport chunks; `[None]` for no list (one rule without a port match).
fn chunks(ports: &[PortRange]) -> Vec<Option<String>> {
    if ports.is_empty() {
        return vec![None];
    }
    let mut out = Vec::new();
    let mut current: Vec<String> = Vec::new();
    let mut used = 0;
    for range in ports {
        let (text, cost) = if range.first() == range.last() {
            (range.first().to_string(), 1)
        } else {
            (format!("{}:{}", range.first(), range.last()), 2)
        };
        if used + cost > MULTIPORT_LIMIT {
            out.push(Some(current.join(",")));
            current.clear();
            used = 0;
        }
        current.push(text);
        used += cost;
    }
    out.push(Some(current.join(",")));
    out
}

/// The rules for the verdict, each starting with the matches: the kernel log, the flow-log
/// step, then the verdict (marks carry accept and pass to the endpoint's chain).
fn actions(rule: &Rule, matched: &str, config: &RenderConfig) -> Vec<String> {
    let marks = config.marks;
    let mut out = Vec::new();
    if let Some(prefix) = &rule.log {
        out.push(format!(
            "{matched} -j LOG --log-prefix {}",
            quote(&format!("{prefix}: "))
        ));
    }
    out.extend(rule.flow_log.as_ref().map(|f| flow_log_rule(matched, f)));
    let set_and_return = |bit: u32| {
        [
            format!("{matched} -j MARK --set-xmark {bit:#x}/{bit:#x}"),
            format!("-m mark --mark {bit:#x}/{bit:#x} -j RETURN"),
        ]
    };
    match rule.verdict {
        Verdict::Accept => out.extend(set_and_return(marks.accept)),
        Verdict::Pass => out.extend(set_and_return(marks.pass)),
        Verdict::Drop => {
            for target in config.drop_action.targets() {
                out.push(format!("{matched} -j {target}"));
            }
        }
        Verdict::Return => out.push(format!("{matched} -j RETURN")),
        Verdict::Continue => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ports(list: &[(u16, u16)]) -> Vec<PortRange> {
        list.iter()
            .map(|(a, b)| PortRange::new(*a, *b).unwrap())
            .collect()
    }

    #[test]
    fn multiport_chunks_count_ranges_twice() {
        let singles: Vec<(u16, u16)> = (1..=16).map(|p| (p, p)).collect();
        let chunked = chunks(&ports(&singles));
        assert_eq!(chunked.len(), 2);
        assert_eq!(chunked[1].as_deref(), Some("16"));
        let ranges: Vec<(u16, u16)> = (0..8).map(|i| (i * 10, i * 10 + 5)).collect();
        let chunked = chunks(&ports(&ranges));
        assert_eq!(chunked.len(), 2, "8 ranges cost 16");
        assert_eq!(chunks(&[]), vec![None]);
    }
}
