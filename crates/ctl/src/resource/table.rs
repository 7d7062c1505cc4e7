//! The `get` table: for every kind, NAME and the few columns an operator looks at first; `wide`
//! adds the rest. Cells are read from the document `-o yaml` would print, so the table and the
//! documents cannot disagree.

use serde_json::Value;

use super::kind::Kind;

/// A column: its header, where its cell is in the document (a JSON pointer; a leading `#`
/// counts the entries there), and whether only `wide` shows it.
type Column = (&'static str, &'static str, bool);

fn columns(kind: Kind) -> &'static [Column] {
    match kind {
        Kind::Tier => &[
            ("NAME", "/metadata/name", false),
            ("ORDER", "/spec/order", false),
        ],
        Kind::Policy => &[
            ("NAME", "/metadata/name", false),
            ("TIER", "/metadata/tier", false),
            ("ORDER", "/spec/order", false),
            ("SELECTOR", "/spec/selector", false),
            ("INBOUND", "#/spec/inbound_rules", true),
            ("OUTBOUND", "#/spec/outbound_rules", true),
            ("UNTRACKED", "/spec/untracked", true),
        ],
        Kind::StagedPolicy => &[
            ("NAME", "/metadata/name", false),
            ("TIER", "/metadata/tier", false),
            ("ORDER", "/spec/order", false),
            ("SELECTOR", "/spec/selector", false),
            ("INBOUND", "#/spec/inbound_rules", true),
            ("OUTBOUND", "#/spec/outbound_rules", true),
        ],
        Kind::Profile => &[
            ("NAME", "/metadata/name", false),
            ("TAGS", "/spec/tags", false),
            ("LABELS", "/spec/labels", false),
            ("INBOUND", "#/spec/inbound_rules", true),
            ("OUTBOUND", "#/spec/outbound_rules", true),
        ],
        Kind::WorkloadEndpoint => &[
            ("NODE", "/metadata/node", false),
            ("ORCHESTRATOR", "/metadata/orchestrator", false),
            ("WORKLOAD", "/metadata/workload", false),
            ("NAME", "/metadata/name", false),
            ("NETWORKS", "/spec/ipv4_nets", false),
            ("INTERFACE", "/spec/name", false),
            ("IPV6-NETWORKS", "/spec/ipv6_nets", true),
            ("STATE", "/spec/state", true),
            ("MAC", "/spec/mac", true),
            ("PROFILES", "/spec/profile_ids", true),
            ("LABELS", "/spec/labels", true),
        ],
        Kind::HostEndpoint => &[
            ("NODE", "/metadata/node", false),
            ("NAME", "/metadata/name", false),
            ("INTERFACE", "/spec/name", false),
            ("IPV4", "/spec/expected_ipv4_addrs", false),
            ("PROFILES", "/spec/profile_ids", false),
            ("IPV6", "/spec/expected_ipv6_addrs", true),
            ("LABELS", "/spec/labels", true),
        ],
        Kind::IpPool => &[
            ("NAME", "/metadata/name", false),
            ("SPACE", "/metadata/space", true),
            ("IPIP", "/spec/ipip", false),
            ("MASQUERADE", "/spec/masquerade", false),
            ("VXLAN", "/spec/vxlan_mode", true),
            ("DISABLED", "/spec/disabled", true),
            ("IPAM", "/spec/ipam", true),
        ],
        Kind::AddressSpace => &[("NAME", "/metadata/name", false), ("ID", "/spec/id", false)],
        Kind::AddressSpaceConfig => &[
            ("NAME", "/metadata/name", false),
            ("PREFIX", "/spec/translation_prefix", false),
        ],
        Kind::AddressSpaceMapping => &[
            ("NAME", "/metadata/name", false),
            ("SPACE", "/spec/address_space", false),
        ],
        Kind::BgpPeer => &[
            ("NAME", "/metadata/name", false),
            ("NODE", "/metadata/node", false),
            ("AS", "/spec/as_num", false),
        ],
        Kind::Node => &[
            ("NAME", "/metadata/name", false),
            ("IPV4", "/spec/ipv4_address", false),
            ("IPV6", "/spec/ipv6_address", false),
            ("AS", "/spec/as_num", false),
            ("RR-CLUSTER-ID", "/spec/rr_cluster_id", true),
            ("LOGLEVEL", "/spec/log_level", true),
        ],
        Kind::FelixConfig => &[
            ("NAME", "/metadata/name", false),
            ("PARAMETERS", "#/spec", false),
            ("VALUES", "/spec", true),
        ],
        Kind::IpamConfig => &[
            ("NAME", "/metadata/name", false),
            ("STRICT-AFFINITY", "/spec/strict_affinity", false),
            ("AUTO-ALLOCATE-BLOCKS", "/spec/auto_allocate_blocks", false),
        ],
    }
}

/// The aligned table of `documents` (all of `kind`).
pub fn render(kind: Kind, documents: &[Value], wide: bool) -> String {
    let columns: Vec<&Column> = columns(kind).iter().filter(|c| wide || !c.2).collect();
    let mut rows = vec![columns.iter().map(|c| c.0.to_owned()).collect::<Vec<_>>()];
    for document in documents {
        rows.push(columns.iter().map(|c| cell(document, c.1)).collect());
    }
    let widths: Vec<usize> = (0..columns.len())
        .map(|i| {
            rows.iter()
                .map(|row| row[i].chars().count())
                .max()
                .unwrap_or(0)
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

fn cell(document: &Value, pointer: &str) -> String {
    if let Some(pointer) = pointer.strip_prefix('#') {
        return match document.pointer(pointer) {
            Some(Value::Array(items)) => items.len().to_string(),
            Some(Value::Object(map)) => map.len().to_string(),
            _ => "0".to_owned(),
        };
    }
    document.pointer(pointer).map_or_else(String::new, text)
}

fn text(value: &Value) -> String {
    match value {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        Value::Array(items) => items.iter().map(text).collect::<Vec<_>>().join(","),
        Value::Object(map) => {
            let pairs: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{k}={}", text(v)))
                .collect();
            pairs.join(",")
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_aligned_and_wide_adds_some() {
        let docs = [
            serde_json::json!({"metadata": {"name": "a"}, "spec": {"order": 10}}),
            serde_json::json!({"metadata": {"name": "long-name"}, "spec": {}}),
        ];
        let table = render(Kind::Tier, &docs, false);
        assert_eq!(table, "NAME        ORDER\na           10\nlong-name\n");
    }
}
