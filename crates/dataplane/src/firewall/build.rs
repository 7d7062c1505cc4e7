//! The firewall model from the desired state: Calico's semantics, decided here once. Pure;
//! by owner (the frame, the dispatch, one endpoint, one policy or profile), so that a backend
//! re-renders only what a change touched.
//!
//! - An endpoint clears the outcome, runs each tier (a tier of staged policies only is
//!   evaluated only with flow logs on, and enforces nothing), then its profiles, then drops.
//!   A missing profile drops instead of the profiles. An inactive endpoint drops everything.
//! - A rule's verdict: `allow` accepts, `next-tier` passes (in a profile it accepts), `deny`
//!   drops, `log` logs and goes on; a `log_prefix` on another action logs first.
//! - With flow logs on (`FlowLogsEnabled`), every rule that decides, and every drop that is a
//!   step of the evaluation (end of tier, missing profile, no profile matched), logs its step.
//! - A staged policy exists only with flow logs on; its rules log the step the first matching
//!   rule would take and return (its `log` rules and log prefixes are left out).

use calico_calc::{DesiredState, EndpointKey, EndpointProgram, IpSetSource, PolicyId, Rules};
use calico_model::IpVersion;
use calico_model::rule::{Action, Protocol};

use super::config::RenderConfig;
use super::model::{
    Body, Comment, Dispatch, Dropped, Endpoint, Firewall, FlowLog, Frame, Guard, HostService, Kind,
    Match, Ports, Profiles, Program, Route, Rule, RuleSet, Side, Tier, Untracked,
    UntrackedEndpoint, Verdict,
};
use crate::flowlog::{RuleOwner, Step, StepAction};

/// The whole model.
pub fn firewall(state: &DesiredState, config: &RenderConfig) -> Firewall {
    Firewall {
        frame: frame(config),
        dispatch: dispatch(state),
        endpoints: (state.endpoints.keys())
            .filter_map(|key| Some((key.clone(), endpoint(state, config, key)?)))
            .collect(),
        policies: (state.policies.keys())
            .filter_map(|id| Some((id.clone(), policy(state, config, id)?)))
            .collect(),
        staged_policies: (state.staged_policies.keys())
            .filter_map(|id| Some((id.clone(), staged_policy(state, config, id)?)))
            .collect(),
        profiles: (state.profiles.keys())
            .filter_map(|id| Some((id.clone(), profile(state, config, id)?)))
            .collect(),
        untracked: untracked(state, config),
    }
}

/// The frame: the workload prefixes and the bootstrap whitelist (000 §2.5.2, "How Calico uses
/// iptables"): what a workload needs from its host whatever its policy says. DHCP (IPv4
/// 68 → 67, IPv6 546 → 547), DNS to the host (UDP and TCP 53: TCP is DNS's fallback for large
/// answers), the metadata path (IPv4 only: TCP to `MetadataAddr:MetadataPort`, where the nat
/// table sent 169.254.169.254:80; absent with `MetadataAddr=None`), and for IPv6 router and
/// neighbour discovery and MLD (ICMPv6 130-133, 135, 136).
pub fn frame(config: &RenderConfig) -> Frame {
    let port = |version, protocol, src_port, dst_port, dst| HostService::Port {
        version,
        protocol,
        src_port,
        dst_port,
        dst,
    };
    let mut host_services = vec![
        port(Some(IpVersion::V4), Protocol::Udp, Some(68), 67, None),
        port(Some(IpVersion::V6), Protocol::Udp, Some(546), 547, None),
        port(None, Protocol::Udp, None, 53, None),
        port(None, Protocol::Tcp, None, 53, None),
    ];
    if let Some(metadata) = config.metadata {
        let dst = Some((*metadata.ip()).into());
        host_services.push(port(
            Some(IpVersion::V4),
            Protocol::Tcp,
            None,
            metadata.port(),
            dst,
        ));
    }
    for icmp_type in [130, 131, 132, 133, 135, 136] {
        host_services.push(HostService::Icmpv6 { icmp_type });
    }
    Frame {
        workload_prefixes: config
            .interface_prefixes
            .iter()
            .map(str::to_owned)
            .collect(),
        host_services,
        endpoint_to_host: config.endpoint_to_host,
    }
}

/// Interface → endpoint: the first endpoint (by key) with an interface owns it.
pub fn dispatch(state: &DesiredState) -> Dispatch {
    let mut dispatch = Dispatch::default();
    let mut seen = std::collections::BTreeSet::new();
    for (key, program) in &state.endpoints {
        let Some(iface) = &program.interface else {
            continue;
        };
        if !seen.insert(iface.as_str()) {
            continue;
        }
        let route = Route {
            iface: iface.clone(),
            endpoint: key.clone(),
        };
        match key {
            EndpointKey::Workload(_) => dispatch.workloads.push(route),
            EndpointKey::Host(_) => dispatch.hosts.push(route),
        }
    }
    dispatch
}

/// One endpoint, or none while it is unknown or has no interface.
pub fn endpoint(
    state: &DesiredState,
    config: &RenderConfig,
    key: &EndpointKey,
) -> Option<Endpoint> {
    let program = state.endpoints.get(key)?;
    let iface = program.interface.as_deref()?;
    // The profile a missing-profile drop names in the flow logs.
    let missing = (program.profiles.iter())
        .find(|p| !state.profiles.contains_key(*p))
        .map_or("", String::as_str);
    Some(endpoint_of(key, iface, program, missing, config))
}

/// An endpoint's model from its program, on `iface`; `missing` is the profile a
/// missing-profile drop names.
pub fn endpoint_of(
    key: &EndpointKey,
    iface: &str,
    program: &EndpointProgram,
    missing: &str,
    config: &RenderConfig,
) -> Endpoint {
    let kind = match key {
        EndpointKey::Workload(_) => Kind::Workload,
        EndpointKey::Host(_) => Kind::Host,
    };
    let direction = |inbound: bool| {
        let guard = match (kind, inbound) {
            (Kind::Host, true) => Guard::HostPreamble {
                failsafe_ports: config.failsafe_inbound.clone(),
            },
            (Kind::Host, false) => Guard::HostPreamble {
                failsafe_ports: config.failsafe_outbound.clone(),
            },
            (Kind::Workload, true) => Guard::None,
            (Kind::Workload, false) => Guard::AntiSpoofing {
                addresses: program.addresses.clone(),
            },
        };
        let body = body(program, config.flow_logs, inbound, missing);
        Program { guard, body }
    };
    Endpoint {
        iface: iface.to_owned(),
        kind,
        inbound: direction(true),
        outbound: direction(false),
    }
}

/// A drop that is a step of the evaluation, logged with flow logs on.
fn dropped(why: impl Into<String>, step: Step, flow_logs: bool, inbound: bool) -> Dropped {
    Dropped {
        why: why.into(),
        flow_log: flow_logs.then_some(FlowLog {
            step,
            action: StepAction::Deny,
            inbound,
        }),
    }
}

/// Tiers, then profiles.
fn body(program: &EndpointProgram, flow_logs: bool, inbound: bool, missing: &str) -> Body {
    if !program.active {
        let why = "endpoint inactive".to_owned();
        return Body::Inactive(Dropped {
            why,
            flow_log: None,
        });
    }
    let tiers = (program.tiers.iter())
        .filter(|t| t.enforces() || flow_logs)
        .map(|tier| Tier {
            name: tier.name.clone(),
            staged: if flow_logs {
                tier.staged.clone()
            } else {
                Vec::new()
            },
            policies: tier.policies.clone(),
            end_of_tier: tier.enforces().then(|| {
                let step = Step::EndOfTier {
                    tier: tier.name.clone(),
                };
                dropped(
                    format!("end of tier {}", tier.name),
                    step,
                    flow_logs,
                    inbound,
                )
            }),
        })
        .collect();
    let profiles = if program.missing_profile {
        let step = Step::MissingProfile {
            name: missing.to_owned(),
        };
        Profiles::Missing(dropped("missing profile", step, flow_logs, inbound))
    } else {
        Profiles::Listed {
            profiles: program.profiles.clone(),
            none_matched: dropped(
                "no profile matched",
                Step::NoProfileMatched,
                flow_logs,
                inbound,
            ),
        }
    };
    Body::Active { tiers, profiles }
}

/// A (tracked) policy's rules; none for an untracked one (see [`untracked`]).
pub fn policy(state: &DesiredState, config: &RenderConfig, id: &PolicyId) -> Option<RuleSet> {
    let rules = state.policies.get(id).filter(|r| !r.untracked)?;
    let what = format!("policy {}/{}", id.tier, id.name);
    let owner = RuleOwner::Policy {
        tier: &id.tier,
        name: &id.name,
    };
    Some(rule_set(&what, rules, owner, config.flow_logs))
}

/// A staged policy's rules; none with flow logs off (a staged policy then renders nothing).
pub fn staged_policy(
    state: &DesiredState,
    config: &RenderConfig,
    id: &PolicyId,
) -> Option<RuleSet> {
    let rules = state.staged_policies.get(id).filter(|_| config.flow_logs)?;
    let what = format!("staged policy {}/{}", id.tier, id.name);
    let owner = RuleOwner::StagedPolicy {
        tier: &id.tier,
        name: &id.name,
    };
    Some(rule_set(&what, rules, owner, config.flow_logs))
}

/// A profile's rules.
pub fn profile(state: &DesiredState, config: &RenderConfig, id: &str) -> Option<RuleSet> {
    let rules = state.profiles.get(id)?;
    let what = format!("profile {id}");
    Some(rule_set(
        &what,
        rules,
        RuleOwner::Profile(id),
        config.flow_logs,
    ))
}

/// The host endpoints' untracked tiers and the untracked policies.
pub fn untracked(state: &DesiredState, config: &RenderConfig) -> Untracked {
    let endpoints = (state.endpoints.iter())
        .filter_map(|(key, program)| match (key, &program.interface) {
            (EndpointKey::Host(_), Some(iface)) if !program.untracked_tiers.is_empty() => {
                Some(UntrackedEndpoint {
                    iface: iface.clone(),
                    tiers: (program.untracked_tiers.iter())
                        .map(|t| t.policies.clone())
                        .collect(),
                })
            }
            _ => None,
        })
        .collect();
    let policies = (state.policies.iter())
        .filter(|(_, rules)| rules.untracked)
        .map(|(id, rules)| {
            let what = format!("untracked policy {}/{}", id.tier, id.name);
            let owner = RuleOwner::Policy {
                tier: &id.tier,
                name: &id.name,
            };
            (id.clone(), rule_set(&what, rules, owner, config.flow_logs))
        })
        .collect();
    Untracked {
        endpoints,
        policies,
    }
}

/// The rules of a policy, staged policy or profile.
fn rule_set(what: &str, rules: &Rules, owner: RuleOwner<'_>, flow_logs: bool) -> RuleSet {
    let direction = |list: &[calico_model::rule::Rule], inbound: bool| {
        let name = if inbound { "inbound" } else { "outbound" };
        (list.iter().enumerate())
            .filter_map(|(index, rule)| {
                let comment = Comment {
                    what: what.to_owned(),
                    direction: name,
                    number: index + 1,
                };
                let step = owner.step(index as u32);
                one_rule(rule, owner, step, inbound, comment, flow_logs)
            })
            .collect()
    };
    RuleSet {
        inbound: direction(&rules.inbound, true),
        outbound: direction(&rules.outbound, false),
    }
}

/// One rule; none for a staged policy's rule that would not log.
fn one_rule(
    rule: &calico_model::rule::Rule,
    owner: RuleOwner<'_>,
    step: Step,
    inbound: bool,
    comment: Comment,
    flow_logs: bool,
) -> Option<Rule> {
    let staged = owner.is_staged();
    if staged && (!flow_logs || rule.action == Action::Log) {
        return None;
    }
    let action = match rule.action {
        Action::Allow => Some(StepAction::Allow),
        Action::Deny => Some(StepAction::Deny),
        Action::NextTier => Some(StepAction::NextTier),
        Action::Log => None,
    };
    let flow_log = action.filter(|_| flow_logs).map(|action| FlowLog {
        step,
        action,
        inbound,
    });
    let log = match (rule.action, &rule.log_prefix) {
        _ if staged => None,
        (Action::Log, prefix) => Some(prefix.clone().unwrap_or_else(|| "calico-packet".into())),
        (_, prefix) => prefix.clone(),
    };
    let verdict = match rule.action {
        _ if staged => Verdict::Return,
        Action::Allow => Verdict::Accept,
        Action::NextTier if owner.is_profile() => Verdict::Accept,
        Action::NextTier => Verdict::Pass,
        Action::Deny => Verdict::Drop,
        Action::Log => Verdict::Continue,
    };
    Some(Rule {
        version: rule.ip_version(),
        matches: matches(rule),
        ports: ports(rule),
        log,
        flow_log,
        verdict,
        comment,
    })
}

/// Every match of the rule, in a fixed order, ports last.
fn matches(rule: &calico_model::rule::Rule) -> Vec<Match> {
    let mut m = Vec::new();
    let protocols = [(rule.protocol, false), (rule.not_protocol, true)];
    for (protocol, negate) in protocols {
        if let Some(protocol) = protocol {
            m.push(Match::Protocol { protocol, negate });
        }
    }
    let nets = [
        (&rule.src_net, Side::Src, false),
        (&rule.not_src_net, Side::Src, true),
        (&rule.dst_net, Side::Dst, false),
        (&rule.not_dst_net, Side::Dst, true),
    ];
    for (net, side, negate) in nets {
        if let Some(net) = net {
            m.push(Match::Net {
                side,
                net: *net,
                negate,
            });
        }
    }
    let tag = |t: &Option<String>| t.clone().map(IpSetSource::Tag);
    let selector = |s: &Option<_>| s.clone().map(IpSetSource::Selector);
    let sets = [
        (tag(&rule.src_tag), Side::Src, false),
        (tag(&rule.not_src_tag), Side::Src, true),
        (selector(&rule.src_selector), Side::Src, false),
        (selector(&rule.not_src_selector), Side::Src, true),
        (tag(&rule.dst_tag), Side::Dst, false),
        (tag(&rule.not_dst_tag), Side::Dst, true),
        (selector(&rule.dst_selector), Side::Dst, false),
        (selector(&rule.not_dst_selector), Side::Dst, true),
    ];
    for (source, side, negate) in sets {
        if let Some(source) = source {
            let set = source.id();
            m.push(Match::Set { side, set, negate });
        }
    }
    let icmp = [
        (rule.icmp_type, rule.icmp_code, false),
        (rule.not_icmp_type, rule.not_icmp_code, true),
    ];
    for (icmp_type, code, negate) in icmp {
        if let Some(icmp_type) = icmp_type {
            m.push(Match::Icmp {
                icmp_type,
                code,
                negate,
            });
        }
    }
    m
}

/// The rule's port lists, in a fixed order.
fn ports(rule: &calico_model::rule::Rule) -> Vec<Ports> {
    let lists = [
        (&rule.src_ports, Side::Src, false),
        (&rule.dst_ports, Side::Dst, false),
        (&rule.not_src_ports, Side::Src, true),
        (&rule.not_dst_ports, Side::Dst, true),
    ];
    (lists.into_iter())
        .filter(|(ranges, _, _)| !ranges.is_empty())
        .map(|(ranges, side, negate)| Ports {
            side,
            ranges: ranges.clone(),
            negate,
        })
        .collect()
}
