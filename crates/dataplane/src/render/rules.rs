//! One Calico rule as iptables rules (without the `-A <chain>` head).
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

use calico_calc::IpSetSource;
use calico_model::rule::{Action, PortRange, Rule};

use super::config::RenderConfig;
use super::{IpVersion, ipset_name, quote};
pub(super) use crate::flowlog::RuleOwner;
use crate::flowlog::{self, NFLOG_GROUP, Step, StepAction};

/// The most ports one multiport match takes.
const MULTIPORT_LIMIT: usize = 15;

/// Where a rule is rendered.
pub(super) struct RuleContext<'a> {
    pub version: IpVersion,
    pub config: &'a RenderConfig,
    /// Whose rule it is: in a profile, `next-tier` means allow; a staged policy only logs.
    pub owner: RuleOwner<'a>,
    pub inbound: bool,
    /// The rule's index (0-based) in its direction.
    pub index: u32,
    /// Identifies the rule in `-m comment`.
    pub comment: String,
}

impl RuleContext<'_> {
    /// The step this rule is in the flow logs.
    fn step(&self) -> Step {
        self.owner.step(self.index)
    }
}

/// `<matched> -j NFLOG …` for a step taking `action`, with flow logs on (`matched` may be
/// empty).
pub(super) fn flow_log(
    config: &RenderConfig,
    matched: &str,
    step: &Step,
    action: StepAction,
    inbound: bool,
) -> Option<String> {
    config.flow_logs.then(|| {
        let prefix = quote(&flowlog::prefix(step, action, inbound));
        let target = format!("-j NFLOG --nflog-group {NFLOG_GROUP} --nflog-prefix {prefix}");
        match matched {
            "" => target,
            matched => format!("{matched} {target}"),
        }
    })
}

/// The iptables rule bodies for a rule, or none when the rule is for the other IP version.
pub(super) fn render_rule(rule: &Rule, cx: &RuleContext<'_>) -> Vec<String> {
    if rule.ip_version().is_some_and(|v| v != cx.version) {
        return Vec::new();
    }
    if cx.owner.is_staged() && (!cx.config.flow_logs || rule.action == Action::Log) {
        return Vec::new();
    }
    let base = matches(rule, cx.version);
    let src_chunks = chunks(&rule.src_ports);
    let dst_chunks = chunks(&rule.dst_ports);
    let mut out = Vec::new();
    for src in &src_chunks {
        for dst in &dst_chunks {
            let mut m = base.clone();
            if let Some(ports) = src {
                m.push(format!("-m multiport --sports {ports}"));
            }
            if let Some(ports) = dst {
                m.push(format!("-m multiport --dports {ports}"));
            }
            for ports in chunks(&rule.not_src_ports).into_iter().flatten() {
                m.push(format!("-m multiport ! --sports {ports}"));
            }
            for ports in chunks(&rule.not_dst_ports).into_iter().flatten() {
                m.push(format!("-m multiport ! --dports {ports}"));
            }
            let head = format!("-m comment --comment {}", quote(&cx.comment));
            let matched = std::iter::once(head).chain(m).collect::<Vec<_>>().join(" ");
            out.extend(actions(rule, &matched, cx));
        }
    }
    out
}

/// Every match but the ports, in a fixed order.
fn matches(rule: &Rule, version: IpVersion) -> Vec<String> {
    let mut m = Vec::new();
    if let Some(p) = rule.protocol {
        m.push(format!("-p {}", protocol_name(p, version)));
    }
    if let Some(p) = rule.not_protocol {
        m.push(format!("! -p {}", protocol_name(p, version)));
    }
    let nets = [
        (&rule.src_net, "-s"),
        (&rule.not_src_net, "! -s"),
        (&rule.dst_net, "-d"),
        (&rule.not_dst_net, "! -d"),
    ];
    for (net, flag) in nets {
        if let Some(net) = net {
            m.push(format!("{flag} {net}"));
        }
    }
    let sets = [
        (rule.src_tag.clone().map(IpSetSource::Tag), "", "src"),
        (rule.not_src_tag.clone().map(IpSetSource::Tag), "! ", "src"),
        (
            rule.src_selector.clone().map(IpSetSource::Selector),
            "",
            "src",
        ),
        (
            rule.not_src_selector.clone().map(IpSetSource::Selector),
            "! ",
            "src",
        ),
        (rule.dst_tag.clone().map(IpSetSource::Tag), "", "dst"),
        (rule.not_dst_tag.clone().map(IpSetSource::Tag), "! ", "dst"),
        (
            rule.dst_selector.clone().map(IpSetSource::Selector),
            "",
            "dst",
        ),
        (
            rule.not_dst_selector.clone().map(IpSetSource::Selector),
            "! ",
            "dst",
        ),
    ];
    for (source, not, dir) in sets {
        if let Some(source) = source {
            let name = ipset_name(version, &source.id());
            m.push(format!("-m set {not}--match-set {name} {dir}"));
        }
    }
    m.extend(icmp(rule, version));
    m
}

fn protocol_name(protocol: calico_model::rule::Protocol, version: IpVersion) -> String {
    match (protocol.name(), version) {
        (Some("icmpv6"), _) => "ipv6-icmp".to_owned(),
        (Some(name), _) => name.to_owned(),
        (None, _) => protocol.number().to_string(),
    }
}

fn icmp(rule: &Rule, version: IpVersion) -> Vec<String> {
    let (module, flag) = match version {
        IpVersion::V4 => ("icmp", "--icmp-type"),
        IpVersion::V6 => ("icmp6", "--icmpv6-type"),
    };
    let spec = |t: u8, c: Option<u8>| match c {
        Some(c) => format!("{t}/{c}"),
        None => t.to_string(),
    };
    let mut m = Vec::new();
    if let Some(t) = rule.icmp_type {
        m.push(format!("-m {module} {flag} {}", spec(t, rule.icmp_code)));
    }
    if let Some(t) = rule.not_icmp_type {
        m.push(format!(
            "-m {module} ! {flag} {}",
            spec(t, rule.not_icmp_code)
        ));
    }
    m
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

/// The rules for the action, each starting with the matches.
fn actions(rule: &Rule, matched: &str, cx: &RuleContext<'_>) -> Vec<String> {
    let marks = cx.config.marks;
    let step = match rule.action {
        Action::Allow => Some(StepAction::Allow),
        Action::Deny => Some(StepAction::Deny),
        Action::NextTier => Some(StepAction::NextTier),
        Action::Log => None,
    };
    let logged =
        step.and_then(|action| flow_log(cx.config, matched, &cx.step(), action, cx.inbound));
    if cx.owner.is_staged() {
        // Would decide: say so, and leave the staged policy (never a mark, never a drop).
        return logged
            .into_iter()
            .chain([format!("{matched} -j RETURN")])
            .collect();
    }
    let mut out = Vec::new();
    let log = |prefix: &str| {
        format!(
            "{matched} -j LOG --log-prefix {}",
            quote(&format!("{prefix}: "))
        )
    };
    match (rule.action, &rule.log_prefix) {
        (Action::Log, prefix) => out.push(log(prefix.as_deref().unwrap_or("calico-packet"))),
        (_, Some(prefix)) => out.push(log(prefix)),
        (_, None) => {}
    }
    out.extend(logged);
    let set_and_return = |bit: u32| {
        [
            format!("{matched} -j MARK --set-xmark {bit:#x}/{bit:#x}"),
            format!("-m mark --mark {bit:#x}/{bit:#x} -j RETURN"),
        ]
    };
    match rule.action {
        Action::Allow => out.extend(set_and_return(marks.accept)),
        Action::NextTier if cx.owner.is_profile() => out.extend(set_and_return(marks.accept)),
        Action::NextTier => out.extend(set_and_return(marks.pass)),
        Action::Deny => {
            for target in cx.config.drop_action.targets() {
                out.push(format!("{matched} -j {target}"));
            }
        }
        Action::Log => {}
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
