//! One Calico rule as nf_tables rules, and the pieces every chain shares (marks, drops).
//!
//! - A rule pinned to one IP version (by a net, or protocol `icmp` / `icmpv6`) becomes one
//!   rule that starts with `meta nfproto`. A rule that names tags or selectors but is not pinned
//!   becomes two, one per family, each with its family's set. Any other rule is one rule that
//!   matches both families.
//! - Port lists are one match each (`th dport { 80, 443, 8000-8080 }`), negated lists too: no
//!   chunks of 15 as with iptables' multiport.
//! - `allow` sets the accept mark and returns; `next-tier` sets the pass mark and returns (in
//!   a profile it means allow); `deny` drops (through `DropActionOverride`); `log` logs and
//!   goes on. A `log_prefix` on another action logs in the same rule.
//! - A staged policy's rule never acts: with flow logs on it logs its step and returns (the
//!   first match ends the staged policy); its `log` rules and log prefixes are left out. With
//!   flow logs off it renders nothing.

use calico_calc::IpSetSource;
use calico_linux::nft::{CtStates, Dir, Expr, IpFamily, Ports, Rule, Verdict};
use calico_model::IpVersion;
use calico_model::rule::{Action, PortRange, Protocol};

use super::names;
use crate::comment::{NFT_COMMENT_MAX, bounded};
use crate::firewall::config::{DropAction, RenderConfig};
pub(super) use crate::flowlog::RuleOwner;
use crate::flowlog::{self, NFLOG_GROUP, Step, StepAction};

/// Where a rule is rendered.
pub(super) struct RuleContext<'a> {
    pub config: &'a RenderConfig,
    /// The policy (tier, name) or, in a profile, the profile: in a profile, `next-tier` means
    /// allow.
    pub owner: RuleOwner<'a>,
    pub inbound: bool,
    /// The rule's index (0-based) in its direction.
    pub index: u32,
    /// Says which rule it is: `policy default/web inbound rule 2`.
    pub comment: String,
}

impl RuleContext<'_> {
    /// The flow-log statement for the rule taking `action` (none with flow logs off).
    fn flow_log(&self, action: StepAction) -> Option<Expr> {
        flow_log(
            self.config,
            &self.owner.step(self.index),
            action,
            self.inbound,
        )
    }
}

/// `log prefix "<step>" group NFLOG_GROUP` for a step taking `action`, with flow logs on.
pub(super) fn flow_log(
    config: &RenderConfig,
    step: &Step,
    action: StepAction,
    inbound: bool,
) -> Option<Expr> {
    config.flow_logs.then(|| Expr::Log {
        prefix: flowlog::prefix(step, action, inbound),
        group: Some(NFLOG_GROUP),
    })
}

pub(super) fn family(version: IpVersion) -> IpFamily {
    match version {
        IpVersion::V4 => IpFamily::V4,
        IpVersion::V6 => IpFamily::V6,
    }
}

/// The nf_tables rules for a Calico rule.
pub(super) fn render_rule(rule: &calico_model::rule::Rule, cx: &RuleContext<'_>) -> Vec<Rule> {
    if cx.owner.is_staged() && (!cx.config.flow_logs || rule.action == Action::Log) {
        return Vec::new();
    }
    let uses_sets = [
        &rule.src_tag,
        &rule.not_src_tag,
        &rule.dst_tag,
        &rule.not_dst_tag,
    ]
    .iter()
    .any(|t| t.is_some())
        || [
            &rule.src_selector,
            &rule.not_src_selector,
            &rule.dst_selector,
            &rule.not_dst_selector,
        ]
        .iter()
        .any(|s| s.is_some());
    let families: Vec<Option<IpFamily>> = match rule.ip_version() {
        Some(version) => vec![Some(family(version))],
        None if uses_sets => vec![Some(IpFamily::V4), Some(IpFamily::V6)],
        None => vec![None],
    };
    families
        .into_iter()
        .map(|f| Rule {
            exprs: [matches(rule, f), actions(rule, cx)].concat(),
            comment: Some(comment_text(&cx.comment)),
        })
        .collect()
}

/// Every match of the rule, dependencies first.
fn matches(rule: &calico_model::rule::Rule, family: Option<IpFamily>) -> Vec<Expr> {
    let mut m = Vec::new();
    if let Some(f) = family {
        m.push(Expr::NfProto(f));
    }
    if let Some(p) = rule.protocol {
        m.push(l4(p, false));
    }
    if let Some(p) = rule.not_protocol {
        m.push(l4(p, true));
    }
    let nets = [
        (&rule.src_net, Dir::Src, false),
        (&rule.not_src_net, Dir::Src, true),
        (&rule.dst_net, Dir::Dst, false),
        (&rule.not_dst_net, Dir::Dst, true),
    ];
    for (net, dir, negate) in nets {
        if let Some(net) = net {
            m.push(Expr::Addr {
                dir,
                net: *net,
                negate,
            });
        }
    }
    if let Some(f) = family {
        let sets = [
            (rule.src_tag.clone().map(IpSetSource::Tag), Dir::Src, false),
            (
                rule.not_src_tag.clone().map(IpSetSource::Tag),
                Dir::Src,
                true,
            ),
            (
                rule.src_selector.clone().map(IpSetSource::Selector),
                Dir::Src,
                false,
            ),
            (
                rule.not_src_selector.clone().map(IpSetSource::Selector),
                Dir::Src,
                true,
            ),
            (rule.dst_tag.clone().map(IpSetSource::Tag), Dir::Dst, false),
            (
                rule.not_dst_tag.clone().map(IpSetSource::Tag),
                Dir::Dst,
                true,
            ),
            (
                rule.dst_selector.clone().map(IpSetSource::Selector),
                Dir::Dst,
                false,
            ),
            (
                rule.not_dst_selector.clone().map(IpSetSource::Selector),
                Dir::Dst,
                true,
            ),
        ];
        for (source, dir, negate) in sets {
            if let Some(source) = source {
                m.push(Expr::AddrInSet {
                    dir,
                    family: f,
                    set: names::ipset(f, &source.id()),
                    negate,
                });
            }
        }
    }
    let ports = [
        (&rule.src_ports, Dir::Src, false),
        (&rule.not_src_ports, Dir::Src, true),
        (&rule.dst_ports, Dir::Dst, false),
        (&rule.not_dst_ports, Dir::Dst, true),
    ];
    for (list, dir, negate) in ports {
        if !list.is_empty() {
            m.push(Expr::Ports {
                dir,
                ports: list.iter().map(ports_of).collect(),
                negate,
            });
        }
    }
    let icmp_family = match rule.protocol {
        Some(Protocol::Icmpv6) => IpFamily::V6,
        _ => IpFamily::V4,
    };
    if let Some(t) = rule.icmp_type {
        m.push(Expr::Icmp {
            family: icmp_family,
            icmp_type: t,
            code: rule.icmp_code,
            negate: false,
        });
    }
    if let Some(t) = rule.not_icmp_type {
        m.push(Expr::Icmp {
            family: icmp_family,
            icmp_type: t,
            code: rule.not_icmp_code,
            negate: true,
        });
    }
    m
}

fn l4(protocol: Protocol, negate: bool) -> Expr {
    Expr::L4Proto {
        proto: protocol.number(),
        negate,
    }
}

pub(super) fn ports_of(range: &PortRange) -> Ports {
    Ports {
        first: range.first(),
        last: range.last(),
    }
}

/// The statements for the rule's action (and its log prefix).
fn actions(rule: &calico_model::rule::Rule, cx: &RuleContext<'_>) -> Vec<Expr> {
    let marks = cx.config.marks;
    let step = match rule.action {
        Action::Allow => Some(StepAction::Allow),
        Action::Deny => Some(StepAction::Deny),
        Action::NextTier => Some(StepAction::NextTier),
        Action::Log => None,
    };
    let logged = step.and_then(|action| cx.flow_log(action));
    if cx.owner.is_staged() {
        // Would decide: say so, and leave the staged policy (never a mark, never a drop).
        return logged
            .into_iter()
            .chain([Expr::Verdict(Verdict::Return)])
            .collect();
    }
    let mut out = Vec::new();
    match (rule.action, &rule.log_prefix) {
        (Action::Log, prefix) => out.push(log(prefix.as_deref().unwrap_or("calico-packet"))),
        (_, Some(prefix)) => out.push(log(prefix)),
        (_, None) => {}
    }
    let set_and_return = |bit: u32| {
        [
            Expr::SetMark {
                mask: bit,
                value: bit,
            },
            Expr::Verdict(Verdict::Return),
        ]
    };
    out.extend(logged);
    match rule.action {
        Action::Allow => out.extend(set_and_return(marks.accept)),
        Action::NextTier if cx.owner.is_profile() => out.extend(set_and_return(marks.accept)),
        Action::NextTier => out.extend(set_and_return(marks.pass)),
        Action::Deny => out.extend(drop_statements(cx.config.drop_action)),
        Action::Log => {}
    }
    out
}

fn log(prefix: &str) -> Expr {
    Expr::Log {
        prefix: format!("{prefix}: "),
        group: None,
    }
}

/// What a drop is under `DropActionOverride`: the verdict, logged first for the LOG variants.
pub(super) fn drop_statements(action: DropAction) -> Vec<Expr> {
    let logged = || log("calico-drop");
    match action {
        DropAction::Drop => vec![Expr::Verdict(Verdict::Drop)],
        DropAction::Accept => vec![Expr::Verdict(Verdict::Accept)],
        DropAction::LogAndDrop => vec![logged(), Expr::Verdict(Verdict::Drop)],
        DropAction::LogAndAccept => vec![logged(), Expr::Verdict(Verdict::Accept)],
    }
}

/// A rule: `matches`, then a drop (`DropActionOverride`), commented `why`.
pub(super) fn drop_rule(config: &RenderConfig, matches: Vec<Expr>, why: &str) -> Rule {
    rule([matches, drop_statements(config.drop_action)].concat(), why)
}

/// A drop that is a step of the flow logs' trail (end of tier, missing profile, no profile
/// matched): logged to NFLOG first when flow logs are on.
pub(super) fn logged_drop_rule(
    config: &RenderConfig,
    matches: Vec<Expr>,
    why: &str,
    step: Step,
    inbound: bool,
) -> Rule {
    let log = flow_log(config, &step, StepAction::Deny, inbound);
    let statements = log.into_iter().chain(drop_statements(config.drop_action));
    rule(matches.into_iter().chain(statements).collect(), why)
}

pub(super) fn rule(exprs: Vec<Expr>, comment: &str) -> Rule {
    Rule {
        exprs,
        comment: (!comment.is_empty()).then(|| comment_text(&bounded(comment, NFT_COMMENT_MAX))),
    }
}

/// `text` as a comment nf_tables can hold and `nft` can print back: `'` for `"`, spaces for
/// control characters (a selector's text has quotes).
pub(super) fn comment_text(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '"' => '\'',
            c if c.is_control() => ' ',
            c => c,
        })
        .collect()
}

pub(super) fn plain(exprs: Vec<Expr>) -> Rule {
    Rule {
        exprs,
        comment: None,
    }
}

/// `meta mark & bit == bit`.
pub(super) fn marked(bit: u32) -> Expr {
    Expr::Mark {
        mask: bit,
        value: bit,
        negate: false,
    }
}

/// `meta mark & bits == 0`.
pub(super) fn unmarked(bits: u32) -> Expr {
    Expr::Mark {
        mask: bits,
        value: 0,
        negate: false,
    }
}

/// Clears `bits` of the mark.
pub(super) fn clear(bits: u32) -> Expr {
    Expr::SetMark {
        mask: bits,
        value: 0,
    }
}

pub(super) fn ct(states: CtStates) -> Expr {
    Expr::CtState {
        states,
        negate: false,
    }
}

pub(super) fn jump(chain: impl Into<String>) -> Expr {
    Expr::Verdict(Verdict::Jump(chain.into()))
}

/// `meta mark & (accept|pass) != 0 return`: a policy decided.
pub(super) fn return_if_decided(config: &RenderConfig) -> Rule {
    plain(vec![
        Expr::Mark {
            mask: config.marks.both(),
            value: 0,
            negate: true,
        },
        Expr::Verdict(Verdict::Return),
    ])
}
