//! The flows as a table for people: one row per flow, newest first, with the step that decided
//! and what staged policies would decide. Endpoints are shortened as the console shortens them
//! (`host/workload/endpoint`, `host/endpoint`, a bare address for a /32 or /128 net), each with
//! the address its packets used (`h1/ns.web/eth0 (10.65.0.10)`); `-o json` keeps the full keys
//! and the addresses.

use std::time::{Duration, UNIX_EPOCH};

use calico_flowlog::protocol::FlowResult;
use calico_model::flow::{FlowEndpoint, FlowRecord};
use calico_model::key::Key;

/// The columns of the listing (`#` first only there).
const COLUMNS: [&str; 10] = [
    "TIME",
    "REPORTER",
    "SOURCE",
    "DESTINATION",
    "PROTO/PORT",
    "DIRECTION",
    "ACTION",
    "DECIDED BY",
    "STAGED",
    "ID",
];

/// The aligned table of `flows`, numbered from 1 when `numbered` (the `--explain N` number).
pub fn table(flows: &[FlowResult], numbered: bool) -> String {
    let header = COLUMNS.iter().map(|c| c.to_string());
    let mut rows: Vec<Vec<String>> = vec![match numbered {
        true => std::iter::once("#".to_owned()).chain(header).collect(),
        false => header.collect(),
    }];
    for (index, result) in flows.iter().enumerate() {
        let cells = cells(result);
        rows.push(match numbered {
            true => std::iter::once((index + 1).to_string())
                .chain(cells)
                .collect(),
            false => cells.collect(),
        });
    }
    align(&rows)
}

/// The header of `--follow`, whose rows cannot be aligned on what has not arrived yet.
pub fn follow_header() -> String {
    COLUMNS.join("  ")
}

/// One row of `--follow`: the cells, two spaces apart.
pub fn follow_row(result: &FlowResult) -> String {
    let cells: Vec<String> = cells(result).collect();
    format!("{}\n", cells.join("  ").trim_end())
}

fn cells(result: &FlowResult) -> impl Iterator<Item = String> {
    let flow = &result.flow;
    [
        time(flow.end_time),
        flow.reporter.clone(),
        addressed(&flow.source),
        addressed(&flow.destination),
        port(flow),
        flow.direction.as_str().to_owned(),
        flow.action.to_string(),
        decided(flow),
        staged(flow),
        result.id.clone(),
    ]
    .into_iter()
}

/// Rows of cells, each column as wide as its widest cell, three spaces apart.
pub fn align(rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|i| {
            let width = |row: &Vec<String>| row.get(i).map_or(0, |c| c.chars().count());
            rows.iter().map(width).max().unwrap_or(0)
        })
        .collect();
    let mut text = String::new();
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        text.push_str(cells.join("   ").trim_end());
        text.push('\n');
    }
    text
}

/// Unix seconds as an RFC 3339 time in UTC.
pub fn time(seconds: u64) -> String {
    humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_secs(seconds)).to_string()
}

/// `host/workload/endpoint` for a workload endpoint, `host/endpoint` for a host endpoint, the
/// address (or network) of a net.
pub fn short(side: &FlowEndpoint) -> String {
    if let Some(key) = &side.key {
        return short_key(key);
    }
    match &side.net {
        Some(net) if net.prefix_len() == net.max_prefix_len() => net.addr().to_string(),
        Some(net) => net.to_string(),
        None => String::new(),
    }
}

/// [`short`] with the address the packets used, when the record has it and the name does not
/// say it already: `h1/ns.web/eth0 (10.65.0.10)`, `10.0.0.0/8 (10.1.2.3)`, `192.0.2.7`.
pub fn addressed(side: &FlowEndpoint) -> String {
    let name = short(side);
    match side.address {
        Some(address) if address.to_string() != name => format!("{name} ({address})"),
        _ => name,
    }
}

/// An endpoint's key as [`short`] names it; any other text as it is.
pub fn short_key(key: &str) -> String {
    match Key::parse(key) {
        Ok(Key::WorkloadEndpoint(id)) => format!("{}/{}/{}", id.hostname, id.workload, id.endpoint),
        Ok(Key::HostEndpoint(id)) => format!("{}/{}", id.hostname, id.endpoint),
        _ => key.to_owned(),
    }
}

/// `tcp/5432`, or the protocol alone for one without ports.
pub fn port(flow: &FlowRecord) -> String {
    match flow.dst_port {
        Some(port) => format!("{}/{port}", flow.protocol),
        None => flow.protocol.to_string(),
    }
}

/// The enforced trail's last step: the one that decided.
pub fn decided(flow: &FlowRecord) -> String {
    flow.policies
        .enforced
        .last()
        .map_or_else(String::new, ToString::to_string)
}

/// `would deny: tier default staged policy lockdown rule 1: deny` when staged policies change
/// the trail, else empty.
pub fn staged(flow: &FlowRecord) -> String {
    match (
        flow.policies.pending.last(),
        flow.policies.pending_verdict(),
    ) {
        (Some(step), Some(verdict)) => format!("would {verdict}: {step}"),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use calico_model::flow::PolicyHit;
    use calico_model::rule::Action;

    use super::*;

    fn record() -> FlowRecord {
        serde_json::from_value(serde_json::json!({
            "reporter": "h2", "start_time": 1_767_225_600u64, "end_time": 1_767_225_615u64,
            "source": {"kind": "net", "net": "192.0.2.7"},
            "destination": {"kind": "wep",
                "key": "/calico/v1/host/h2/workload/k8s/ns.db/endpoint/eth0"},
            "protocol": "tcp", "dst_port": 5432, "direction": "ingress", "action": "deny",
            "policies": {"enforced": [
                {"kind": "policy", "tier": "default", "name": "db-guard", "rule_index": 2,
                 "action": "deny"}]},
            "packets_in": 1, "bytes_in": 60, "packets_out": 0, "bytes_out": 0,
            "connections_started": 1
        }))
        .unwrap()
    }

    #[test]
    fn a_row_names_the_step_as_people_read_it_and_the_staged_verdict() {
        let mut flow = record();
        flow.policies.pending = vec![PolicyHit::staged("default", "db-open", 0, Action::Allow)];
        let result = FlowResult {
            id: "00000000000000ab".into(),
            records: 1,
            flow,
        };
        let table = table(&[result], true);
        let cells: Vec<&str> = table
            .lines()
            .nth(1)
            .unwrap()
            .split("   ")
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect();
        assert_eq!(
            cells,
            [
                "1",
                "2026-01-01T00:00:15Z",
                "h2",
                "192.0.2.7",
                "h2/ns.db/eth0",
                "tcp/5432",
                "ingress",
                "deny",
                "tier default policy db-guard rule 3: deny",
                "would allow: tier default staged policy db-open rule 1: allow",
                "00000000000000ab",
            ]
        );
        let header = table.lines().next().unwrap();
        assert!(header.starts_with("#   TIME "), "{header}");
    }

    #[test]
    fn each_side_shows_the_address_its_packets_used() {
        let mut flow = record();
        flow.source.address = Some("192.0.2.7".parse().unwrap());
        flow.destination.address = Some("10.65.1.20".parse().unwrap());
        assert_eq!(
            addressed(&flow.source),
            "192.0.2.7",
            "a /32 net is its address"
        );
        assert_eq!(addressed(&flow.destination), "h2/ns.db/eth0 (10.65.1.20)");
        flow.source.net = Some("192.0.2.0/24".parse().unwrap());
        assert_eq!(addressed(&flow.source), "192.0.2.0/24 (192.0.2.7)");
        flow.destination.address = None;
        assert_eq!(
            addressed(&flow.destination),
            "h2/ns.db/eth0",
            "an older Felix's"
        );
    }
}
