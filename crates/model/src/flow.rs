//! Flow records: what Felix reports about the connections through its endpoints, one record per
//! aggregated flow and interval, and what the flow aggregator (`calico-flows`) takes in, keeps
//! and serves. Not stored in etcd. docs/observability.md documents every field.
//!
//! A record says who talked to whom (each side a workload endpoint, a host endpoint or a
//! network), over which protocol and destination port, in which direction relative to the
//! reporting endpoint, the verdict, the policy trail that decided it (and the trail as it would
//! be with staged policies enforced), and the packets, bytes and connections of the interval.
//! Source ports are aggregated away, as upstream Calico's flow logs do: a client's ephemeral
//! ports would make every connection its own flow.
//!
//! | check | why |
//! | --- | --- |
//! | the reporting side (destination of an ingress flow, source of an egress flow) is a `wep` or `hep` of the reporter's host | a Felix reports only the endpoints it programs |
//! | `dst_port` present exactly for protocols with ports, never 0 | the key of a flow |
//! | times are unix seconds in 2000..2100, `end_time` after `start_time`, at most an hour apart | catches milliseconds and swapped fields |
//! | the trail ends in the step that decided, and that step's verdict is `action` | a record cannot contradict itself |
//! | an endpoint's `address` is an address of the flow's family (both sides the same), and for a `net` inside its `net` | what the packets used, read as an address |
//! | names follow the model's rules (`names`, `labels`); at most 32 profiles, 64 labels and 64 steps | hostile records stay small |

mod trail;

use std::fmt;
use std::net::IpAddr;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use crate::error::{Validate, ValidationError};
use crate::key::{HostEndpointId, Key, WorkloadEndpointId};
use crate::labels::{LabelMap, validate_labels};
use crate::names::{validate_hostname, validate_profile_id};
use crate::rule::{Protocol, net};

pub use trail::{HitKind, MAX_TRAIL_STEPS, PolicyHit, PolicyTrail};

/// The longest interval one record may cover, in seconds.
pub const MAX_INTERVAL_SECS: u64 = 3600;
/// The most profiles one side of a flow may list.
pub const MAX_PROFILES: usize = 32;
/// The most labels one side of a flow may carry.
pub const MAX_LABELS: usize = 64;
/// 2000-01-01T00:00:00Z and 2100-01-01T00:00:00Z: the range of plausible unix seconds.
const EARLIEST: u64 = 946_684_800;
const LATEST: u64 = 4_102_444_800;

/// What one side of a flow is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EndpointKind {
    /// A workload endpoint: `key` is its `/calico/v1/host/<h>/workload/<o>/<w>/endpoint/<e>`.
    Wep,
    /// A host endpoint: `key` is its `/calico/v1/host/<h>/endpoint/<e>`.
    Hep,
    /// Anything else: `net` is the address (or network) seen.
    Net,
}

impl EndpointKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EndpointKind::Wep => "wep",
            EndpointKind::Hep => "hep",
            EndpointKind::Net => "net",
        }
    }
}

/// Traffic into the reporting endpoint (its inbound rules decided) or out of it (outbound).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FlowDirection {
    Ingress,
    Egress,
}

impl FlowDirection {
    pub fn as_str(self) -> &'static str {
        match self {
            FlowDirection::Ingress => "ingress",
            FlowDirection::Egress => "egress",
        }
    }
}

/// What happened to the flow's packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Allow,
    Deny,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Allow => "allow",
            Verdict::Deny => "deny",
        }
    }

    /// Parses `allow` or `deny`.
    pub fn parse(text: &str) -> Result<Verdict, String> {
        match text {
            "allow" => Ok(Verdict::Allow),
            "deny" => Ok(Verdict::Deny),
            other => Err(format!("invalid action {other:?}: expected allow or deny")),
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One side of a flow.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FlowEndpoint {
    pub kind: EndpointKind,
    /// The endpoint's key, for `wep` and `hep`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The address or network, for `net` (a bare address is read as `/32` or `/128`).
    #[serde(default, deserialize_with = "net::deserialize_opt")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub net: Option<IpNet>,
    /// The address the flow's packets used for this side (records of older Felixes have none,
    /// and are accepted). For a `net` it is an address inside `net`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<IpAddr>,
    /// The endpoint's `profile_ids`, in order (the namespace-like grouping of this model).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub profiles: Vec<String>,
    /// The endpoint's labels (its own and its profiles'), when the reporter knows them.
    #[serde(default, skip_serializing_if = "LabelMap::is_empty")]
    pub labels: LabelMap,
}

impl FlowEndpoint {
    /// A workload endpoint.
    pub fn workload(id: &WorkloadEndpointId, profiles: Vec<String>, labels: LabelMap) -> Self {
        let key = Key::WorkloadEndpoint(id.clone()).to_string();
        FlowEndpoint::keyed(EndpointKind::Wep, key, profiles, labels)
    }

    /// A host endpoint.
    pub fn host(id: &HostEndpointId, profiles: Vec<String>, labels: LabelMap) -> Self {
        let key = Key::HostEndpoint(id.clone()).to_string();
        FlowEndpoint::keyed(EndpointKind::Hep, key, profiles, labels)
    }

    /// An address or network outside the endpoints Calico knows.
    pub fn net(net: IpNet) -> Self {
        FlowEndpoint {
            kind: EndpointKind::Net,
            key: None,
            net: Some(net),
            address: None,
            profiles: Vec::new(),
            labels: LabelMap::new(),
        }
    }

    fn keyed(kind: EndpointKind, key: String, profiles: Vec<String>, labels: LabelMap) -> Self {
        FlowEndpoint {
            kind,
            key: Some(key),
            net: None,
            address: None,
            profiles,
            labels,
        }
    }

    /// The same side, with the address its packets used.
    pub fn with_address(mut self, address: IpAddr) -> Self {
        self.address = Some(address);
        self
    }

    /// What the side is called: its key, or its network.
    pub fn name(&self) -> String {
        match (&self.key, &self.net) {
            (Some(key), _) => key.clone(),
            (None, Some(net)) => net.to_string(),
            (None, None) => String::new(),
        }
    }

    /// The host of a `wep` or `hep` (from its key).
    pub fn hostname(&self) -> Option<String> {
        match Key::parse(self.key.as_deref()?).ok()? {
            Key::WorkloadEndpoint(id) => Some(id.hostname),
            Key::HostEndpoint(id) => Some(id.hostname),
            _ => None,
        }
    }
}

impl Validate for FlowEndpoint {
    fn validate(&mut self) -> Result<(), ValidationError> {
        match self.kind {
            EndpointKind::Net => {
                forbid(
                    self.key.is_some(),
                    "key",
                    "a net has no key: use kind wep or hep",
                )?;
                forbid(
                    self.net.is_none(),
                    "net",
                    "kind net needs the address or network",
                )?;
                forbid(
                    !self.profiles.is_empty(),
                    "profiles",
                    "a net has no profiles",
                )?;
                forbid(!self.labels.is_empty(), "labels", "a net has no labels")?;
                match (self.net, self.address) {
                    (Some(net), Some(address)) if !net.contains(&address) => {
                        let reason = format!(
                            "{address} is not inside the net {net}: give the address the \
                             packets used, or leave it out"
                        );
                        Err(ValidationError::new("address", reason))
                    }
                    _ => Ok(()),
                }
            }
            kind => {
                forbid(self.net.is_some(), "net", "only kind net has a net")?;
                let Some(key) = &self.key else {
                    return Err(ValidationError::new("key", "kind wep or hep needs the key"));
                };
                self.key = Some(endpoint_key(kind, key).map_err(|e| e.within("key"))?);
                validate_profiles(&self.profiles)?;
                if self.labels.len() > MAX_LABELS {
                    let reason = format!("{} labels, the limit is {MAX_LABELS}", self.labels.len());
                    return Err(ValidationError::new("labels", reason));
                }
                validate_labels(&self.labels).map_err(|e| e.within("labels"))
            }
        }
    }
}

/// The key of a `kind` endpoint, in its canonical form.
fn endpoint_key(kind: EndpointKind, key: &str) -> Result<String, ValidationError> {
    let parsed = Key::parse(key).map_err(|e| ValidationError::object(e.to_string()))?;
    let fits = matches!(
        (kind, &parsed),
        (EndpointKind::Wep, Key::WorkloadEndpoint(_)) | (EndpointKind::Hep, Key::HostEndpoint(_))
    );
    if !fits {
        return Err(ValidationError::object(format!(
            "{key} is a {} key, not the key of a {}",
            parsed.kind(),
            kind.as_str()
        )));
    }
    Ok(parsed.to_string())
}

fn validate_profiles(profiles: &[String]) -> Result<(), ValidationError> {
    if profiles.len() > MAX_PROFILES {
        let reason = format!("{} profiles, the limit is {MAX_PROFILES}", profiles.len());
        return Err(ValidationError::new("profiles", reason));
    }
    for (i, profile) in profiles.iter().enumerate() {
        validate_profile_id(profile).map_err(|e| e.within(&format!("profiles[{i}]")))?;
    }
    Ok(())
}

fn forbid(bad: bool, field: &str, reason: &str) -> Result<(), ValidationError> {
    if bad {
        return Err(ValidationError::new(field, reason));
    }
    Ok(())
}

/// One aggregated flow over one interval, as a Felix reports it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FlowRecord {
    /// The hostname of the Felix that reports it (the host of the reporting endpoint).
    pub reporter: String,
    /// The interval, in unix seconds: `[start_time, end_time)`.
    pub start_time: u64,
    pub end_time: u64,
    pub source: FlowEndpoint,
    pub destination: FlowEndpoint,
    pub protocol: Protocol,
    /// For protocols with ports (tcp, udp, sctp, udplite) only. Source ports are aggregated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst_port: Option<u16>,
    pub direction: FlowDirection,
    /// The verdict of the enforced policy.
    pub action: Verdict,
    pub policies: PolicyTrail,
    /// Packets and bytes received by the reporting endpoint in the interval.
    pub packets_in: u64,
    pub bytes_in: u64,
    /// Packets and bytes sent by the reporting endpoint in the interval.
    pub packets_out: u64,
    pub bytes_out: u64,
    /// Connections that started in the interval.
    pub connections_started: u64,
}

impl FlowRecord {
    /// The side whose Felix reports: the destination of ingress flows, the source of egress.
    pub fn reporting_side(&self) -> (&'static str, &FlowEndpoint) {
        match self.direction {
            FlowDirection::Ingress => ("destination", &self.destination),
            FlowDirection::Egress => ("source", &self.source),
        }
    }

    /// The verdict with staged policies enforced: the pending trail's, or the real one when no
    /// staged policy changed the trail.
    pub fn pending_action(&self) -> Verdict {
        self.policies.pending_verdict().unwrap_or(self.action)
    }

    fn check_times(&self) -> Result<(), ValidationError> {
        for (field, time) in [("start_time", self.start_time), ("end_time", self.end_time)] {
            if !(EARLIEST..LATEST).contains(&time) {
                let reason = format!(
                    "{time} is not a unix time in seconds between 2000 and 2100 \
                     (milliseconds are not accepted)"
                );
                return Err(ValidationError::new(field, reason));
            }
        }
        let length = self.end_time.saturating_sub(self.start_time);
        if length == 0 {
            let reason = format!(
                "{} is not after start_time {}",
                self.end_time, self.start_time
            );
            return Err(ValidationError::new("end_time", reason));
        }
        if length > MAX_INTERVAL_SECS {
            let reason = format!(
                "the interval is {length} s long, the limit is {MAX_INTERVAL_SECS}: \
                 report longer flows once per interval"
            );
            return Err(ValidationError::new("end_time", reason));
        }
        Ok(())
    }

    fn check_port(&self) -> Result<(), ValidationError> {
        match (self.protocol.has_ports(), self.dst_port) {
            (true, None) => Err(ValidationError::new(
                "dst_port",
                format!("a {} flow needs its destination port", self.protocol),
            )),
            (true, Some(0)) => Err(ValidationError::new("dst_port", "port 0 is not a port")),
            (false, Some(port)) => Err(ValidationError::new(
                "dst_port",
                format!(
                    "protocol {} has no ports, but dst_port is {port}",
                    self.protocol
                ),
            )),
            _ => Ok(()),
        }
    }

    fn check_reporter(&self) -> Result<(), ValidationError> {
        let (field, side) = self.reporting_side();
        let direction = self.direction.as_str();
        let Some(host) = side.hostname() else {
            let reason = format!(
                "an {direction} flow is reported by its {field}'s host, so the {field} must be \
                 a wep or hep, not a {}",
                side.kind.as_str()
            );
            return Err(ValidationError::new(format!("{field}.kind"), reason));
        };
        if host != self.reporter {
            let reason = format!(
                "the endpoint is on host {host:?} but the reporter is {:?}: a host reports only \
                 its own endpoints",
                self.reporter
            );
            return Err(ValidationError::new(format!("{field}.key"), reason));
        }
        Ok(())
    }

    /// Both sides of one family (IPv4 or IPv6) once either gives its `address`.
    fn check_addresses(&self) -> Result<(), ValidationError> {
        let family = |side: &FlowEndpoint| {
            side.address
                .map(|a| a.is_ipv4())
                .or(side.net.map(|n| matches!(n, IpNet::V4(_))))
        };
        let given = self.source.address.is_some() || self.destination.address.is_some();
        let (Some(source), Some(destination)) = (family(&self.source), family(&self.destination))
        else {
            return Ok(());
        };
        if !given || source == destination {
            return Ok(());
        }
        let (field, side) = match self.destination.address {
            Some(_) => ("destination.address", &self.destination),
            None => ("source.address", &self.source),
        };
        let version = |v4: bool| if v4 { 4 } else { 6 };
        let reason = format!(
            "{} is IPv{} but the other side is IPv{}: a flow's addresses are of one family",
            side.address.map(|a| a.to_string()).unwrap_or_default(),
            version(family(side) == Some(true)),
            version(if field.starts_with("destination") {
                source
            } else {
                destination
            }),
        );
        Err(ValidationError::new(field, reason))
    }

    fn check_counters(&self) -> Result<(), ValidationError> {
        for (field, bytes, packets) in [
            ("bytes_in", self.bytes_in, self.packets_in),
            ("bytes_out", self.bytes_out, self.packets_out),
        ] {
            if bytes > 0 && packets == 0 {
                let reason = format!("{bytes} bytes in 0 packets");
                return Err(ValidationError::new(field, reason));
            }
        }
        Ok(())
    }
}

impl Validate for FlowRecord {
    fn validate(&mut self) -> Result<(), ValidationError> {
        validate_hostname(&self.reporter).map_err(|e| e.within("reporter"))?;
        self.check_times()?;
        self.source.validate().map_err(|e| e.within("source"))?;
        self.destination
            .validate()
            .map_err(|e| e.within("destination"))?;
        self.check_addresses()?;
        self.check_port()?;
        self.check_reporter()?;
        self.policies.validate().map_err(|e| e.within("policies"))?;
        let decided = self.policies.enforced_verdict();
        if decided != Some(self.action) {
            let step = self.policies.enforced.last().map(PolicyHit::to_string);
            let reason = format!(
                "the action is {} but the enforced trail ends in {}",
                self.action,
                step.unwrap_or_default()
            );
            return Err(ValidationError::new("action", reason));
        }
        self.check_counters()
    }
}

#[cfg(test)]
mod tests;
