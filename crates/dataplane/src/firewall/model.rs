//! What the firewall does, typed, for both IP versions at once: the semantics a backend
//! encodes. Nothing here is syntax: no chain names, no marks, no comment limits; an encoder
//! decides how each piece is written (iptables with jumps and marks per IP version, nf_tables
//! with verdict maps in one `inet` table).
//!
//! | piece | what |
//! | --- | --- |
//! | [`Frame`] | the entry of every packet of ours: conntrack, the host services a workload always gets, the endpoint-to-host action |
//! | [`Dispatch`] | interface → endpoint, workloads (an unknown workload interface drops) and host endpoints (an unknown one returns) |
//! | [`Endpoint`] | per direction: a [`Guard`] (anti-spoofing, host preamble), then a [`Body`]: tiers, profiles, the final drop |
//! | [`RuleSet`] | a policy's, staged policy's or profile's rules, inbound and outbound |
//! | [`Untracked`] | host endpoints' untracked tiers and the untracked policies (raw, before conntrack) |

use std::collections::BTreeMap;
use std::net::IpAddr;

use calico_calc::{EndpointKey, PolicyId};
use calico_model::IpVersion;
use calico_model::rule::{PortRange, Protocol};
use ipnet::IpNet;

use super::config::EndpointToHostAction;
use crate::flowlog::{Step, StepAction};

/// A host's whole firewall (the filter and raw tables' semantics).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Firewall {
    pub frame: Frame,
    pub dispatch: Dispatch,
    pub endpoints: BTreeMap<EndpointKey, Endpoint>,
    pub policies: BTreeMap<PolicyId, RuleSet>,
    /// Present only with flow logs on: a staged policy then logs its step and returns.
    pub staged_policies: BTreeMap<PolicyId, RuleSet>,
    pub profiles: BTreeMap<String, RuleSet>,
    pub untracked: Untracked,
}

/// What every packet to, from or through our interfaces meets first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// Workload interface prefixes (`cali`): every rule about workloads is repeated per prefix.
    pub workload_prefixes: Vec<String>,
    /// What a workload may always ask of its host, before any policy (accepted).
    pub host_services: Vec<HostService>,
    /// What happens to a workload's packet to the host once its outbound policy allowed it.
    pub endpoint_to_host: EndpointToHostAction,
}

/// A service of the host a workload always reaches (DHCP, DNS, metadata, ND).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostService {
    /// TCP or UDP to `dst_port`, from `src_port` if given, to `dst` if given.
    Port {
        version: Option<IpVersion>,
        protocol: Protocol,
        src_port: Option<u16>,
        dst_port: u16,
        dst: Option<IpAddr>,
    },
    /// ICMPv6 of this type (router and neighbour discovery, MLD).
    Icmpv6 { icmp_type: u8 },
}

impl HostService {
    /// The IP version the service is for, if only one.
    pub fn version(&self) -> Option<IpVersion> {
        match self {
            HostService::Port { version, .. } => *version,
            HostService::Icmpv6 { .. } => Some(IpVersion::V6),
        }
    }
}

/// Interface → endpoint, in endpoint order; the first endpoint (by key) with an interface
/// owns it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dispatch {
    /// A workload interface not listed is dropped (fail closed).
    pub workloads: Vec<Route>,
    /// A host interface not listed returns to the kernel untouched.
    pub hosts: Vec<Route>,
}

/// One interface and the endpoint whose chains take its traffic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub iface: String,
    pub endpoint: EndpointKey,
}

/// Workload or host endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Workload,
    Host,
}

/// One local endpoint's program, both directions. Inbound is towards the endpoint (to the
/// workload, to the host); outbound from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub iface: String,
    pub kind: Kind,
    pub inbound: Program,
    pub outbound: Program,
}

/// One direction of an endpoint: the guard, then the policy body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Program {
    pub guard: Guard,
    pub body: Body,
}

/// What is checked before any policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Guard {
    None,
    /// A workload may only send from its own addresses (both versions listed; a version
    /// with none is dropped whole).
    AntiSpoofing {
        addresses: Vec<IpAddr>,
    },
    /// A host endpoint: invalid connections dropped, established ones accepted, then the
    /// failsafe TCP destination ports accepted.
    HostPreamble {
        failsafe_ports: Vec<u16>,
    },
}

/// The policy evaluation of one direction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// The endpoint is not active: everything drops.
    Inactive(Dropped),
    /// Tiers in order, then the profiles.
    Active {
        tiers: Vec<Tier>,
        profiles: Profiles,
    },
}

/// One tier as an endpoint evaluates it: the staged policies (log only), then the policies in
/// order until one accepts (the endpoint accepts), passes (the next tier) or drops; the end
/// of tier drops when none decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tier {
    pub name: String,
    pub staged: Vec<PolicyId>,
    pub policies: Vec<PolicyId>,
    /// None for a tier of staged policies only: it enforces nothing.
    pub end_of_tier: Option<Dropped>,
}

/// The profiles after the tiers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Profiles {
    /// One of the endpoint's profiles does not exist: drop.
    Missing(Dropped),
    /// Each in order until one accepts; then the drop.
    Listed {
        profiles: Vec<String>,
        none_matched: Dropped,
    },
}

/// A drop that is a step of the evaluation, through `DropActionOverride`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dropped {
    /// Says why (the rule's comment).
    pub why: String,
    /// With flow logs on, the step logged before dropping.
    pub flow_log: Option<FlowLog>,
}

/// A flow-log step: logged to NFLOG with its prefix ([`crate::flowlog::prefix`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowLog {
    pub step: Step,
    pub action: StepAction,
    /// Whether the endpoint's inbound evaluation logs it.
    pub inbound: bool,
}

/// A policy's, staged policy's or profile's rules: one chain per direction.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuleSet {
    pub inbound: Vec<Rule>,
    pub outbound: Vec<Rule>,
}

/// One Calico rule: its matches, then its log, flow-log step and verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// The IP version the rule is for, if only one (by its nets, ICMP protocol or
    /// `ip_version`).
    pub version: Option<IpVersion>,
    /// All must match, with [`Rule::ports`].
    pub matches: Vec<Match>,
    /// Port lists, in the order source, destination, not source, not destination.
    pub ports: Vec<Ports>,
    /// Logged to the kernel log first (`log_prefix`, or a `log` rule's prefix).
    pub log: Option<String>,
    pub flow_log: Option<FlowLog>,
    pub verdict: Verdict,
    pub comment: Comment,
}

/// What a rule's comment says: `<what> <direction> rule <number>`, bounded by the encoder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comment {
    pub what: String,
    pub direction: &'static str,
    /// 1-based.
    pub number: usize,
}

/// Source or destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Src,
    Dst,
}

/// One match of a rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Match {
    Protocol {
        protocol: Protocol,
        negate: bool,
    },
    Net {
        side: Side,
        net: IpNet,
        negate: bool,
    },
    /// The IP set of a tag or selector, by [`calico_calc::IpSetSource::id`].
    Set {
        side: Side,
        set: String,
        negate: bool,
    },
    Icmp {
        icmp_type: u8,
        code: Option<u8>,
        negate: bool,
    },
}

/// A port list: any of its ranges, or with `negate` none of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ports {
    pub side: Side,
    pub ranges: Vec<PortRange>,
    pub negate: bool,
}

/// What a rule does once it matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The endpoint accepts (`allow`; `next-tier` in a profile).
    Accept,
    /// The next tier (`next-tier` in a policy).
    Pass,
    /// Drops, through `DropActionOverride` (`deny`).
    Drop,
    /// Goes on to the next rule (`log`).
    Continue,
    /// Leaves the policy without deciding (a staged policy's rule).
    Return,
}

/// The raw table's semantics: untracked policies of host endpoints, before conntrack. A
/// packet one allows is marked, exempted from conntrack and accepted (the frame accepts it
/// again); one it denies drops; one no untracked policy decides goes on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Untracked {
    /// Host endpoints with untracked tiers, in endpoint order.
    pub endpoints: Vec<UntrackedEndpoint>,
    pub policies: BTreeMap<PolicyId, RuleSet>,
}

/// A host endpoint's untracked tiers: each tier's policies in order (no end-of-tier drop).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UntrackedEndpoint {
    pub iface: String,
    pub tiers: Vec<Vec<PolicyId>>,
}
