//! A flow record as a packet the reference evaluator can judge: at the reporting endpoint
//! (the destination of an ingress flow, its inbound rules; the source of an egress flow, its
//! outbound rules), between the addresses the flow's packets used.
//!
//! Each end's address is the record's `address`. A record of a Felix that sends no addresses
//! names endpoints by key alone: then a workload's or host endpoint's address is its endpoint's
//! in the datastore now, the first address of the IP version both ends have (IPv4 first).
//! Records aggregate source ports away and carry no ICMP type or code, so the
//! packet has none: rules that name a source port or an ICMP type do not match it.

use std::fmt::Write as _;
use std::net::IpAddr;

use calico_calc::{Cluster, Direction, EndpointKey, Explanation, Packet, Reason, RuleSource};
use calico_model::flow::{
    EndpointKind, FlowDirection, FlowEndpoint, FlowRecord, PolicyHit, Verdict,
};
use calico_model::key::Key;
use calico_model::rule::IpVersion;

/// Where and how the live model judges a flow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Judgement {
    pub endpoint: EndpointKey,
    pub direction: Direction,
    pub packet: Packet,
}

/// One end of a flow, resolved.
enum End {
    Endpoint(Vec<IpAddr>),
    Net(IpAddr),
}

/// The flow as a packet at its reporting endpoint; why not, when an end is gone or has no
/// address to use.
pub fn packet_of(cluster: &Cluster, flow: &FlowRecord) -> Result<Judgement, String> {
    let (field, side) = flow.reporting_side();
    let endpoint = endpoint_key(side).ok_or_else(|| format!("the {field} is not an endpoint"))?;
    let source = end(cluster, "source", &flow.source)?;
    let destination = end(cluster, "destination", &flow.destination)?;
    let (src, dst) = [IpVersion::V4, IpVersion::V6]
        .into_iter()
        .find_map(|version| Some((pick(&source, version)?, pick(&destination, version)?)))
        .ok_or_else(|| {
            "the source and destination have no address of the same IP version".to_owned()
        })?;
    let direction = match flow.direction {
        FlowDirection::Ingress => Direction::Inbound,
        FlowDirection::Egress => Direction::Outbound,
    };
    let packet = Packet {
        src,
        dst,
        protocol: flow.protocol,
        src_port: None,
        dst_port: flow.dst_port,
        icmp_type: None,
        icmp_code: None,
    };
    Ok(Judgement {
        endpoint,
        direction,
        packet,
    })
}

/// The endpoint a `wep` or `hep` side names.
pub fn endpoint_key(side: &FlowEndpoint) -> Option<EndpointKey> {
    match Key::parse(side.key.as_deref()?).ok()? {
        Key::WorkloadEndpoint(id) => Some(EndpointKey::Workload(id)),
        Key::HostEndpoint(id) => Some(EndpointKey::Host(id)),
        _ => None,
    }
}

fn end(cluster: &Cluster, field: &str, side: &FlowEndpoint) -> Result<End, String> {
    if side.kind == EndpointKind::Net {
        let net = side.net.ok_or_else(|| format!("the {field} has no net"))?;
        return Ok(End::Net(side.address.unwrap_or(net.addr())));
    }
    let key = endpoint_key(side).ok_or_else(|| format!("the {field} has no endpoint key"))?;
    let name = side.name();
    match (cluster.endpoints.get(&key), side.address) {
        // The endpoint must still be there to be judged; the address is the packets'.
        (Some(_), Some(address)) => Ok(End::Net(address)),
        (Some(found), None) if !found.addresses.is_empty() => {
            Ok(End::Endpoint(found.addresses.clone()))
        }
        (Some(_), None) => Err(format!(
            "the {field} {name} has no address in the datastore now"
        )),
        (None, _) => Err(format!("the {field} {name} is no longer in the datastore")),
    }
}

fn pick(end: &End, version: IpVersion) -> Option<IpAddr> {
    let fits = |address: &IpAddr| IpVersion::of_addr(address) == version;
    match end {
        End::Endpoint(addresses) => addresses.iter().copied().find(fits),
        End::Net(address) => Some(*address).filter(fits),
    }
}

/// The step `explain` decided at, as a flow's trail names it; `None` when no rule or tier
/// decided (the endpoint is inactive or unknown).
pub fn hit_of(reason: &Reason) -> Option<PolicyHit> {
    Some(match reason {
        Reason::Rule {
            source: RuleSource::Policy { tier, policy },
            index,
            action,
        } => PolicyHit::policy(tier, policy, *index as u32, *action),
        Reason::Rule {
            source: RuleSource::Profile { profile },
            index,
            action,
        } => PolicyHit::profile(profile, *index as u32, *action),
        Reason::EndOfTier { tier } => PolicyHit::end_of_tier(tier, None),
        Reason::MissingProfile { profile } => PolicyHit::missing_profile(profile),
        Reason::NoRuleMatched => PolicyHit::no_profile_matched(),
        Reason::Inactive | Reason::UnknownEndpoint => return None,
    })
}

/// Whether two steps are the same decision (an end of tier by its tier alone: the policy that
/// made the tier apply is optional in a record).
pub fn same_step(a: &PolicyHit, b: &PolicyHit) -> bool {
    a.kind == b.kind
        && a.tier == b.tier
        && a.rule_index == b.rule_index
        && a.action == b.action
        && (a.kind == calico_model::flow::HitKind::EndOfTier || a.name == b.name)
}

/// The evaluator's verdict in a flow's terms.
pub fn verdict(explanation: &Explanation) -> Verdict {
    match explanation.verdict {
        calico_calc::Verdict::Allow => Verdict::Allow,
        calico_calc::Verdict::Deny => Verdict::Deny,
    }
}

/// The `calicoctl policy explain` command that judges the same packet.
pub fn command(judged: &Judgement) -> String {
    let packet = &judged.packet;
    let mut text = format!(
        "calicoctl policy explain --endpoint {} --direction {} --src {} --dst {} --protocol {}",
        judged.endpoint, judged.direction, packet.src, packet.dst, packet.protocol
    );
    if let Some(port) = packet.dst_port {
        let _ = write!(text, " --dst-port {port}");
    }
    text
}

#[cfg(test)]
mod tests {
    use calico_calc::Calculator;

    use super::*;

    const FRONT: &str = "/calico/v1/host/h1/workload/k8s/ns.front/endpoint/eth0";
    const DB: &str = "/calico/v1/host/h2/workload/k8s/ns.db/endpoint/eth0";

    fn flow(source: serde_json::Value) -> FlowRecord {
        serde_json::from_value(serde_json::json!({
            "reporter": "h2", "start_time": 1_767_225_600u64, "end_time": 1_767_225_615u64,
            "source": source,
            "destination": {"kind": "wep", "key": DB, "address": "10.65.1.20"},
            "protocol": "tcp", "dst_port": 5432, "direction": "ingress", "action": "allow",
            "policies": {"enforced": [{"kind": "no-profile-matched", "action": "deny"}]},
            "packets_in": 1, "bytes_in": 60, "packets_out": 0, "bytes_out": 0,
            "connections_started": 1
        }))
        .unwrap()
    }

    #[test]
    fn the_packet_has_the_records_addresses_and_else_the_datastores() {
        let mut calc = Calculator::new("h2");
        let front = r#"{"state": "active", "name": "califront", "profile_ids": [],
            "ipv4_nets": ["10.65.0.1/32", "10.65.0.11/32"]}"#;
        let db = r#"{"state": "active", "name": "calidb", "profile_ids": [],
            "ipv4_nets": ["10.65.1.2/32"]}"#;
        calc.apply(FRONT, Some(front));
        calc.apply(DB, Some(db));
        let judged = |source| {
            let packet = packet_of(calc.cluster(), &flow(source))?.packet;
            Ok::<_, String>((packet.src.to_string(), packet.dst.to_string()))
        };
        let recorded = serde_json::json!({"kind": "wep", "key": FRONT, "address": "10.65.0.11"});
        assert_eq!(
            judged(recorded),
            Ok(("10.65.0.11".into(), "10.65.1.20".into()))
        );
        let old = serde_json::json!({"kind": "wep", "key": FRONT});
        assert_eq!(
            judged(old),
            Ok(("10.65.0.1".into(), "10.65.1.20".into())),
            "no address in the record: the endpoint's first in the datastore"
        );
        let gone = serde_json::json!({"kind": "wep", "key": FRONT.replace("front", "gone"),
            "address": "10.65.0.99"});
        let refused = judged(gone).unwrap_err();
        assert!(
            refused.contains("is no longer in the datastore"),
            "an end gone is not judged, address or not: {refused}"
        );
    }
}
