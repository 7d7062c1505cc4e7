//! A resource's `spec` to the values of its keys (`encode`), and back (`decode`).
//!
//! The spec of every object kind is the seed's JSON object itself (same field names, same
//! validation, through `model::from_json`), less the fields `metadata` already names (a pool's
//! `cidr`, a peer's `ip`). Unknown fields are refused by name here, although the model tolerates
//! them in etcd: a misspelt field in a file is a mistake, in the datastore it may be a newer
//! writer's.

use calico_model::ipam::IpamConfig;
use calico_model::key::Key;
use calico_model::policy::{Policy, TierMetadata};
use calico_model::pool::IpPool;
use calico_model::profile::{ProfileLabels, ProfileRules, ProfileTags};
use calico_model::space::{AddressSpace, SpaceConfig, SpaceMapping};
use calico_model::{Validate, ValidationError, Value as Stored, from_json, parse_value};
use calico_model::{bgp::BgpPeer, endpoint::HostEndpoint, endpoint::WorkloadEndpoint};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::id::{Id, node_keys};

/// A node's `spec` fields, in the order of `node_keys`.
const NODE_FIELDS: [&str; 5] = [
    "ipv4_address",
    "ipv6_address",
    "as_num",
    "rr_cluster_id",
    "log_level",
];

const PROFILE_FIELDS: [&str; 4] = ["inbound_rules", "outbound_rules", "tags", "labels"];

/// The keys and values (canonical JSON or text) that `spec` gives the resource `id`.
pub fn encode(id: &Id, spec: &Value) -> Result<Vec<(Key, String)>, ValidationError> {
    let key = || id.keys().remove(0);
    Ok(match id {
        Id::Tier(_) => vec![(key(), typed::<TierMetadata>(spec, "spec")?)],
        Id::Policy { .. } => vec![(key(), typed::<Policy>(spec, "spec")?)],
        Id::StagedPolicy { .. } => {
            // A policy's fields, and what only a staged policy refuses (`untracked`).
            let json = typed::<Policy>(spec, "spec")?;
            parse_value(&key(), &json).map_err(|e| e.within("spec"))?;
            vec![(key(), json)]
        }
        Id::WorkloadEndpoint(_) => vec![(key(), typed::<WorkloadEndpoint>(spec, "spec")?)],
        Id::HostEndpoint(_) => vec![(key(), typed::<HostEndpoint>(spec, "spec")?)],
        Id::IpamConfig => vec![(key(), typed::<IpamConfig>(spec, "spec")?)],
        Id::IpPool(cidr) => {
            let spec = with_name(spec, "cidr", cidr.to_string())?;
            vec![(key(), typed::<IpPool>(&spec, "spec")?)]
        }
        Id::SpacePool { cidr, .. } => {
            // A pool's fields, and what a private space's pool refuses (ipip, masquerade, ...).
            let spec = with_name(spec, "cidr", cidr.to_string())?;
            let json = typed::<IpPool>(&spec, "spec")?;
            parse_value(&key(), &json).map_err(|e| e.within("spec"))?;
            vec![(key(), json)]
        }
        Id::AddressSpace(_) => vec![(key(), typed::<AddressSpace>(spec, "spec")?)],
        Id::SpaceConfig => vec![(key(), typed::<SpaceConfig>(spec, "spec")?)],
        Id::SpaceMapping { .. } => vec![(key(), typed::<SpaceMapping>(spec, "spec")?)],
        Id::BgpPeer { ip, .. } => {
            let spec = with_name(spec, "ip", ip.to_string())?;
            vec![(key(), typed::<BgpPeer>(&spec, "spec")?)]
        }
        Id::Profile(_) => encode_profile(id, object(spec, "spec")?)?,
        Id::Node(host) => encode_node(host, object(spec, "spec")?)?,
        Id::FelixConfig(host) => encode_felix(host.as_deref(), object(spec, "spec")?)?,
    })
}

/// The `spec` of a resource from its stored values (already validated).
pub fn decode(id: &Id, values: &[(Key, Stored)]) -> Value {
    let mut spec = Map::new();
    for (key, value) in values {
        let json = stored_json(value);
        match (id, key) {
            (Id::IpPool(_) | Id::SpacePool { .. } | Id::BgpPeer { .. }, _) => {
                spec = json.as_object().cloned().unwrap_or_default();
                spec.remove("cidr");
                spec.remove("ip");
            }
            (Id::Profile(_), Key::ProfileRules { .. }) => {
                spec.extend(json.as_object().cloned().unwrap_or_default());
            }
            (Id::Profile(_), Key::ProfileTags { .. }) => _ = spec.insert("tags".into(), json),
            (Id::Profile(_), _) => _ = spec.insert("labels".into(), json),
            (Id::Node(host), _) => {
                let at = node_keys(host).iter().position(|k| k == key);
                let field = NODE_FIELDS[at.unwrap_or(NODE_FIELDS.len() - 1)];
                spec.insert(field.into(), json);
            }
            (Id::FelixConfig(_), Key::GlobalConfig { name } | Key::HostConfig { name, .. }) => {
                spec.insert(name.clone(), json);
            }
            _ => spec = json.as_object().cloned().unwrap_or_default(),
        }
    }
    Value::Object(spec)
}

/// A stored value as JSON: objects as their canonical JSON, texts as strings, AS numbers as
/// numbers.
fn stored_json(value: &Stored) -> Value {
    let json = match value {
        Stored::Policy(v) | Stored::StagedPolicy(v) => serde_json::to_value(v),
        Stored::TierMetadata(v) => serde_json::to_value(v),
        Stored::ProfileRules(v) => serde_json::to_value(v),
        Stored::ProfileTags(v) => serde_json::to_value(v),
        Stored::ProfileLabels(v) => serde_json::to_value(v),
        Stored::WorkloadEndpoint(v) => serde_json::to_value(v),
        Stored::HostEndpoint(v) => serde_json::to_value(v),
        Stored::Pool(v) => serde_json::to_value(v),
        Stored::BgpPeer(v) => serde_json::to_value(v),
        Stored::IpamConfig(v) => serde_json::to_value(v),
        Stored::AddressSpace(v) => serde_json::to_value(v),
        Stored::SpaceConfig(v) => serde_json::to_value(v),
        Stored::SpaceMapping(v) => serde_json::to_value(v),
        Stored::AsNumber(n) => Ok(Value::from(n.0)),
        Stored::Config(text) | Stored::BgpLogLevel(text) => Ok(Value::from(text.clone())),
        Stored::HostIp(ip) => Ok(optional(ip)),
        Stored::RrClusterId(ip) => Ok(optional(ip)),
        _ => Ok(Value::Null),
    };
    json.unwrap_or(Value::Null)
}

/// An empty stored address is the empty string, so that it is written back as it was.
fn optional(ip: &Option<impl ToString>) -> Value {
    ip.as_ref()
        .map_or(String::new(), ToString::to_string)
        .into()
}

/// Parses `value` as `T` with the model's validation, refusing fields `T` does not have; returns
/// the canonical JSON the key will hold.
fn typed<T: DeserializeOwned + Validate + Serialize>(
    value: &Value,
    path: &str,
) -> Result<String, ValidationError> {
    let mut unknown = Vec::new();
    let _: Result<T, _> = serde_ignored::deserialize(value.clone(), |at| {
        unknown.push(field_path(&at));
    });
    if let Some(first) = unknown.first() {
        return Err(ValidationError::new(first.clone(), "unknown field").within(path));
    }
    let object: T = from_json(&value.to_string()).map_err(|e| e.within(path))?;
    serde_json::to_string(&object).map_err(|e| ValidationError::new(path, e.to_string()))
}

/// `inbound_rules[0].src_tagz`, the path notation of the model's errors.
fn field_path(path: &serde_ignored::Path<'_>) -> String {
    use serde_ignored::Path;
    match path {
        Path::Root => String::new(),
        Path::Seq { parent, index } => format!("{}[{index}]", field_path(parent)),
        Path::Map { parent, key } => {
            let parent = field_path(parent);
            match parent.is_empty() {
                true => key.clone(),
                false => format!("{parent}.{key}"),
            }
        }
        Path::Some { parent }
        | Path::NewtypeStruct { parent }
        | Path::NewtypeVariant { parent } => field_path(parent),
    }
}

fn object<'a>(value: &'a Value, path: &str) -> Result<&'a Map<String, Value>, ValidationError> {
    static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
    match value {
        Value::Object(map) => Ok(map),
        Value::Null => Ok(EMPTY.get_or_init(Map::new)),
        other => Err(ValidationError::new(
            path,
            format!("expected a mapping, got {other}"),
        )),
    }
}

/// The spec with the field that `metadata.name` gives (refused when the spec has it too).
fn with_name(spec: &Value, field: &str, name: String) -> Result<Value, ValidationError> {
    let mut map = object(spec, "spec")?.clone();
    if map.contains_key(field) {
        let reason = "set by metadata.name, not in spec";
        return Err(ValidationError::new(format!("spec.{field}"), reason));
    }
    map.insert(field.into(), name.into());
    Ok(Value::Object(map))
}

fn refuse_unknown(map: &Map<String, Value>, known: &[&str]) -> Result<(), ValidationError> {
    match map.keys().find(|field| !known.contains(&field.as_str())) {
        Some(field) => Err(ValidationError::new(
            format!("spec.{field}"),
            format!("unknown field (expected one of {})", known.join(", ")),
        )),
        None => Ok(()),
    }
}

fn encode_profile(
    id: &Id,
    spec: &Map<String, Value>,
) -> Result<Vec<(Key, String)>, ValidationError> {
    refuse_unknown(spec, &PROFILE_FIELDS)?;
    let [rules_key, tags_key, labels_key]: [Key; 3] =
        id.keys().try_into().expect("a profile has three keys");
    let mut pairs = Vec::new();
    let rules: Map<String, Value> = spec
        .iter()
        .filter(|(field, _)| field.ends_with("_rules"))
        .map(|(field, value)| (field.clone(), value.clone()))
        .collect();
    // A profile exists by its keys: one with no field at all is Calico's empty profile, its
    // rules key with no rules (written, not a silent no-op).
    if !rules.is_empty() || spec.is_empty() {
        let raw = typed::<ProfileRules>(&Value::Object(rules), "spec")?;
        pairs.push((rules_key, raw));
    }
    if let Some(tags) = spec.get("tags") {
        pairs.push((tags_key, typed::<ProfileTags>(tags, "spec.tags")?));
    }
    if let Some(labels) = spec.get("labels") {
        pairs.push((labels_key, typed::<ProfileLabels>(labels, "spec.labels")?));
    }
    Ok(pairs)
}

fn encode_node(
    host: &str,
    spec: &Map<String, Value>,
) -> Result<Vec<(Key, String)>, ValidationError> {
    refuse_unknown(spec, &NODE_FIELDS)?;
    if spec.is_empty() {
        let reason = format!(
            "empty: a node is its keys ({}), so one without any would not exist; give at least \
             one (calico-node writes ipv4_address and as_num when it starts)",
            NODE_FIELDS.join(", ")
        );
        return Err(ValidationError::new("spec", reason));
    }
    let mut pairs = Vec::new();
    for (field, key) in NODE_FIELDS.iter().zip(node_keys(host)) {
        if let Some(value) = spec.get(*field) {
            let path = format!("spec.{field}");
            pairs.push((key.clone(), text(&key, value, &path)?));
        }
    }
    Ok(pairs)
}

fn encode_felix(
    host: Option<&str>,
    spec: &Map<String, Value>,
) -> Result<Vec<(Key, String)>, ValidationError> {
    if spec.is_empty() {
        let reason = "empty: a Felix configuration is its parameters, so one without any would \
                      not exist; give at least one (to remove every parameter: calicoctl delete \
                      felixConfig NAME)";
        return Err(ValidationError::new("spec", reason));
    }
    let mut pairs = Vec::new();
    for (name, value) in spec {
        let path = format!("spec.{name}");
        let name = name.clone();
        let written = match host {
            None => Key::GlobalConfig { name },
            Some(host) => Key::HostConfig {
                hostname: host.to_owned(),
                name,
            },
        };
        // Read back, the key must be the parameter: a `/` in the name would make it another.
        let text_key = written.to_string();
        let key = Key::parse(&text_key).map_err(|e| ValidationError::new(&path, e.reason))?;
        if !matches!(key, Key::GlobalConfig { .. } | Key::HostConfig { .. }) {
            let reason = format!("not a Felix parameter: {text_key} holds a {}", key.kind());
            return Err(ValidationError::new(path, reason));
        }
        pairs.push((key.clone(), text(&key, value, &path)?));
    }
    Ok(pairs)
}

/// A scalar as the text a plain key holds, validated for that key.
fn text(key: &Key, value: &Value, path: &str) -> Result<String, ValidationError> {
    let raw = match value {
        Value::String(text) => text.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        other => {
            let reason = format!("expected a string, number or boolean, got {other}");
            return Err(ValidationError::new(path, reason));
        }
    };
    parse_value(key, &raw).map_err(|e| e.within(path))?;
    Ok(raw)
}
