//! The reference evaluator: the verdict for one packet at one endpoint, computed straight from
//! the semantics of the seeds (not from rendered rules), with a trace naming the tier, policy or
//! profile and the rule that decided. It is what `calicoctl policy explain` prints and the
//! oracle the dataplane tests compare the kernel against.
//!
//! Per endpoint and direction:
//! 1. Tiers in order (`order` ascending, `default` last, then name). In a tier, the policies
//!    whose selector matches the endpoint, by `order` then name; in each, the first matching rule
//!    decides: `allow` accepts and `deny` drops (ending everything), `next-tier` leaves the tier,
//!    `log` logs and goes on. A policy without a matching rule falls to the next policy. If some
//!    policy of the tier applied and none decided, the packet is dropped; a tier where no policy
//!    applies is skipped.
//! 2. Then the endpoint's profiles in `profile_ids` order, first matching rule decides
//!    (`next-tier` means `allow` in a profile). If a referenced profile does not exist, the
//!    endpoint drops everything that reaches its profiles (fail closed).
//! 3. Nothing matched: drop.
//!
//! Policies with `untracked: true` apply to host endpoints only, before everything above (in
//! the raw table, without connection tracking): tiers in order, the untracked policies of each;
//! `allow` and `deny` decide, `next-tier` and a tier's end without a decision go on, and a packet
//! no untracked policy decided goes on to the tracked policies. Workload endpoints ignore them.

use std::fmt;
use std::net::IpAddr;

use calico_model::rule::{Action, IpVersion, PortRange, Protocol, Rule};
use calico_model::selector::Selector;

use crate::cluster::{Cluster, Endpoint, EndpointKey};

/// Traffic into the endpoint (its inbound rules) or out of it (its outbound rules).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    Inbound,
    Outbound,
}

impl Direction {
    fn rules<'a>(self, inbound: &'a [Rule], outbound: &'a [Rule]) -> &'a [Rule] {
        match self {
            Direction::Inbound => inbound,
            Direction::Outbound => outbound,
        }
    }
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Direction::Inbound => "inbound",
            Direction::Outbound => "outbound",
        })
    }
}

/// The packet being judged. Ports are for protocols with ports, ICMP type and code for ICMP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub protocol: Protocol,
    pub src_port: Option<u16>,
    pub dst_port: Option<u16>,
    pub icmp_type: Option<u8>,
    pub icmp_code: Option<u8>,
}

/// Accept or drop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verdict {
    Allow,
    Deny,
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Verdict::Allow => "allow",
            Verdict::Deny => "deny",
        })
    }
}

/// Where a rule lives.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum RuleSource {
    Policy { tier: String, policy: String },
    Profile { profile: String },
}

impl fmt::Display for RuleSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RuleSource::Policy { tier, policy } => write!(f, "tier {tier} policy {policy}"),
            RuleSource::Profile { profile } => write!(f, "profile {profile}"),
        }
    }
}

/// What decided the verdict.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Reason {
    /// A rule (0-based index in its direction's list) with this action.
    Rule {
        source: RuleSource,
        index: usize,
        action: Action,
    },
    /// Policies of the tier applied to the endpoint and none decided.
    EndOfTier { tier: String },
    /// A profile the endpoint references does not exist.
    MissingProfile { profile: String },
    /// No profile rule matched (or the endpoint has no profiles).
    NoRuleMatched,
    /// The workload endpoint is `inactive`.
    Inactive,
    /// No such endpoint (or its config is invalid): fail closed.
    UnknownEndpoint,
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Rule {
                source,
                index,
                action,
            } => write!(f, "{source}, rule {} ({action})", index + 1),
            Reason::EndOfTier { tier } => {
                write!(f, "end of tier {tier}: policies applied but none decided")
            }
            Reason::MissingProfile { profile } => write!(f, "profile {profile} does not exist"),
            Reason::NoRuleMatched => f.write_str("no profile rule matched"),
            Reason::Inactive => f.write_str("the endpoint is inactive"),
            Reason::UnknownEndpoint => f.write_str("no such endpoint (or its config is invalid)"),
        }
    }
}

/// The verdict, why, and every step taken to reach it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explanation {
    pub verdict: Verdict,
    pub reason: Reason,
    /// Human-readable steps, in evaluation order.
    pub trace: Vec<String>,
}

impl fmt::Display for Explanation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for step in &self.trace {
            writeln!(f, "  {step}")?;
        }
        write!(f, "{}: {}", self.verdict, self.reason)
    }
}

/// Judges `packet` at `endpoint` in `direction`.
pub fn explain(
    cluster: &Cluster,
    endpoint: &EndpointKey,
    direction: Direction,
    packet: &Packet,
) -> Explanation {
    let mut eval = Evaluation {
        cluster,
        packet,
        trace: Vec::new(),
    };
    let (verdict, reason) = match cluster.endpoints.get(endpoint) {
        None => (Verdict::Deny, Reason::UnknownEndpoint),
        Some(ep) if !ep.active => (Verdict::Deny, Reason::Inactive),
        Some(ep) => eval.endpoint(ep, matches!(endpoint, EndpointKey::Host(_)), direction),
    };
    Explanation {
        verdict,
        reason,
        trace: eval.trace,
    }
}

struct Evaluation<'a> {
    cluster: &'a Cluster,
    packet: &'a Packet,
    trace: Vec<String>,
}

/// How a list of rules ended.
enum Outcome {
    /// A rule with this action (not `log`) matched at this index.
    Decided(usize, Action),
    /// No rule decided.
    FellThrough,
}

impl Evaluation<'_> {
    fn endpoint(
        &mut self,
        endpoint: &Endpoint,
        host: bool,
        direction: Direction,
    ) -> (Verdict, Reason) {
        if host && let Some(decided) = self.tiers(endpoint, direction, true) {
            return decided;
        }
        if let Some(decided) = self.tiers(endpoint, direction, false) {
            return decided;
        }
        self.profiles(endpoint, direction)
    }

    /// Runs the tiers with the tracked (or, for `untracked`, the untracked) policies; `None`
    /// when every tier was skipped or left with `next-tier` — or, for untracked policies, when
    /// none decided: those packets go on to the tracked policies.
    fn tiers(
        &mut self,
        endpoint: &Endpoint,
        direction: Direction,
        untracked: bool,
    ) -> Option<(Verdict, Reason)> {
        let labels = self.cluster.effective_labels(endpoint);
        let kind = if untracked { "untracked " } else { "" };
        for (tier_name, tier) in self.cluster.ordered_tiers() {
            let mut applied: Vec<(&String, &calico_model::policy::Policy)> = tier
                .policies
                .iter()
                .filter(|(_, p)| p.untracked == untracked && p.selector.evaluate(&labels))
                .collect();
            if applied.is_empty() {
                if !untracked {
                    self.trace
                        .push(format!("tier {tier_name}: no policy applies, skipped"));
                }
                continue;
            }
            applied.sort_by(|a, b| a.1.order.cmp(&b.1.order).then(a.0.cmp(b.0)));
            match self.tier(tier_name, &applied, direction) {
                TierEnd::Decided(verdict, reason) => return Some((verdict, reason)),
                TierEnd::NextTier => continue,
                TierEnd::FellThrough if untracked => {
                    self.trace.push(format!(
                        "tier {tier_name}: {kind}policies did not decide, on to tracked policy"
                    ));
                }
                TierEnd::FellThrough => {
                    let tier = tier_name.to_owned();
                    return Some((Verdict::Deny, Reason::EndOfTier { tier }));
                }
            }
        }
        None
    }

    fn tier(
        &mut self,
        tier: &str,
        policies: &[(&String, &calico_model::policy::Policy)],
        direction: Direction,
    ) -> TierEnd {
        for (name, policy) in policies {
            let source = RuleSource::Policy {
                tier: tier.to_owned(),
                policy: (*name).clone(),
            };
            self.trace.push(format!("{source} applies"));
            let rules = direction.rules(&policy.inbound_rules, &policy.outbound_rules);
            match self.rules(&source, rules) {
                Outcome::Decided(_, Action::NextTier) => return TierEnd::NextTier,
                Outcome::Decided(index, action) => {
                    let verdict = verdict_of(action);
                    let reason = Reason::Rule {
                        source,
                        index,
                        action,
                    };
                    return TierEnd::Decided(verdict, reason);
                }
                Outcome::FellThrough => {}
            }
        }
        TierEnd::FellThrough
    }

    fn profiles(&mut self, endpoint: &Endpoint, direction: Direction) -> (Verdict, Reason) {
        let missing = endpoint.profile_ids.iter().find(|id| {
            !self
                .cluster
                .profiles
                .get(&***id)
                .is_some_and(|p| p.exists())
        });
        if let Some(profile) = missing {
            let profile = profile.to_string();
            return (Verdict::Deny, Reason::MissingProfile { profile });
        }
        for id in endpoint.profile_ids.iter() {
            let Some(rules) = self.cluster.profiles[&**id].rules.as_ref() else {
                continue;
            };
            let source = RuleSource::Profile {
                profile: id.to_string(),
            };
            self.trace.push(format!("{source}"));
            let rules = direction.rules(&rules.inbound_rules, &rules.outbound_rules);
            if let Outcome::Decided(index, action) = self.rules(&source, rules) {
                let reason = Reason::Rule {
                    source,
                    index,
                    action,
                };
                return (verdict_of(action), reason);
            }
        }
        (Verdict::Deny, Reason::NoRuleMatched)
    }

    /// The first matching rule that decides; `log` rules are traced and passed.
    fn rules(&mut self, source: &RuleSource, rules: &[Rule]) -> Outcome {
        for (index, rule) in rules.iter().enumerate() {
            if !self.matches(rule) {
                continue;
            }
            self.trace.push(format!(
                "{source}: rule {} matches ({})",
                index + 1,
                rule.action
            ));
            if rule.action != Action::Log {
                return Outcome::Decided(index, rule.action);
            }
        }
        Outcome::FellThrough
    }

    /// Whether every match of the rule holds for the packet.
    fn matches(&self, rule: &Rule) -> bool {
        let p = self.packet;
        let protocol = p.protocol.number();
        // A net (negated too) or an ICMP protocol pins a rule to one IP version: the dataplane
        // renders it in that version's table only, so packets of the other version never meet it.
        rule.ip_version()
            .is_none_or(|version| version == IpVersion::of_addr(&p.src))
            && rule.protocol.is_none_or(|r| r.number() == protocol)
            && rule.not_protocol.is_none_or(|r| r.number() != protocol)
            && rule.src_net.is_none_or(|n| n.contains(&p.src))
            && rule.not_src_net.is_none_or(|n| !n.contains(&p.src))
            && rule.dst_net.is_none_or(|n| n.contains(&p.dst))
            && rule.not_dst_net.is_none_or(|n| !n.contains(&p.dst))
            && self.tag(rule.src_tag.as_deref(), p.src, true)
            && self.tag(rule.not_src_tag.as_deref(), p.src, false)
            && self.tag(rule.dst_tag.as_deref(), p.dst, true)
            && self.tag(rule.not_dst_tag.as_deref(), p.dst, false)
            && self.selector(rule.src_selector.as_ref(), p.src, true)
            && self.selector(rule.not_src_selector.as_ref(), p.src, false)
            && self.selector(rule.dst_selector.as_ref(), p.dst, true)
            && self.selector(rule.not_dst_selector.as_ref(), p.dst, false)
            && ports(&rule.src_ports, &rule.not_src_ports, p.src_port)
            && ports(&rule.dst_ports, &rule.not_dst_ports, p.dst_port)
            && icmp(rule, p.icmp_type, p.icmp_code)
    }

    /// A tag match: the address belongs to an endpoint in the tag (`want` false: to none).
    fn tag(&self, tag: Option<&str>, address: IpAddr, want: bool) -> bool {
        let Some(tag) = tag else {
            return true;
        };
        let found = self
            .cluster
            .endpoints_with_address(address)
            .any(|e| self.cluster.has_tag(e, tag));
        found == want
    }

    /// A selector match: the address belongs to an endpoint the selector selects (`want`
    /// false: to none, which includes addresses outside Calico).
    fn selector(&self, selector: Option<&Selector>, address: IpAddr, want: bool) -> bool {
        let Some(selector) = selector else {
            return true;
        };
        let found = self
            .cluster
            .endpoints_with_address(address)
            .any(|e| selector.evaluate(&self.cluster.effective_labels(e)));
        found == want
    }
}

enum TierEnd {
    Decided(Verdict, Reason),
    NextTier,
    FellThrough,
}

fn verdict_of(action: Action) -> Verdict {
    match action {
        Action::Deny => Verdict::Deny,
        // `next-tier` in a profile means allow; `log` never decides.
        Action::Allow | Action::NextTier | Action::Log => Verdict::Allow,
    }
}

/// Positive port lists are ORed, negated ones ANDed; a packet without a port matches no
/// positive list and every negated one.
fn ports(positive: &[PortRange], negated: &[PortRange], port: Option<u16>) -> bool {
    let within = |ranges: &[PortRange]| port.is_some_and(|p| ranges.iter().any(|r| r.contains(p)));
    (positive.is_empty() || within(positive)) && !within(negated)
}

/// ICMP type and code; the negated pair is one match (the seeds' kernel warning): it excludes
/// only packets with both that type and that code.
fn icmp(rule: &Rule, packet_type: Option<u8>, packet_code: Option<u8>) -> bool {
    let positive = rule.icmp_type.is_none_or(|t| packet_type == Some(t))
        && rule.icmp_code.is_none_or(|c| packet_code == Some(c));
    let excluded = match (rule.not_icmp_type, rule.not_icmp_code) {
        (Some(t), Some(c)) => packet_type == Some(t) && packet_code == Some(c),
        (Some(t), None) => packet_type == Some(t),
        (None, _) => false,
    };
    positive && !excluded
}
