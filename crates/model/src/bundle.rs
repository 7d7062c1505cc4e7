//! The bundle format: one JSON object mapping keys to values, so a set of related keys (a tier
//! and its policies, a profile's rules, tags and labels) lives in one file. `calicoctl get -o
//! json` writes it and `calicoctl load` reads it (so `get -o json` output can be loaded back
//! unchanged); the seed examples in `examples/*.json` are bundles (the demo applies their YAML
//! twins, `examples/*.yaml`, as resources).
//!
//! Values that are JSON objects or lists are stored as compact JSON; JSON strings are stored as
//! their text (`"64512"` → `64512`, for plain-text keys such as `as_num` or Felix config);
//! numbers and booleans are stored as their JSON text (`true`).

use serde_json::{Map, Value};

/// A bundle that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    #[error("the bundle is not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("a bundle must be a JSON object mapping keys to values")]
    NotAnObject,
}

/// One key and the exact text to store there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub key: String,
    pub raw: String,
}

/// Reads a bundle, keeping the file's order (so a tier's metadata can precede its policies).
pub fn parse(text: &str) -> Result<Vec<Entry>, BundleError> {
    let value: Value = serde_json::from_str(text)?;
    let Value::Object(map) = value else {
        return Err(BundleError::NotAnObject);
    };
    Ok(map
        .into_iter()
        .map(|(key, value)| Entry {
            key,
            raw: stored_text(&value),
        })
        .collect())
}

/// The text stored in etcd for one bundle value.
fn stored_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// Builds a bundle from stored pairs: JSON text becomes JSON, anything else a JSON string.
pub fn render<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let map: Map<String, Value> = pairs
        .into_iter()
        .map(|(key, raw)| (key.to_owned(), bundle_value(raw)))
        .collect();
    let mut text = serde_json::to_string_pretty(&Value::Object(map)).expect("JSON values render");
    text.push('\n');
    text
}

fn bundle_value(raw: &str) -> Value {
    match serde_json::from_str::<Value>(raw) {
        Ok(value @ (Value::Object(_) | Value::Array(_))) => value,
        _ => Value::String(raw.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalars_are_stored_as_plain_text() {
        let entries = parse(r#"{"/a": "64512", "/b": true, "/c": {"order": 0}}"#).unwrap();
        let raws: Vec<_> = entries.iter().map(|e| e.raw.as_str()).collect();
        assert_eq!(raws, ["64512", "true", r#"{"order":0}"#]);
    }

    #[test]
    fn order_of_the_file_is_kept() {
        let entries = parse(r#"{"/z": "1", "/a": "2"}"#).unwrap();
        assert_eq!(entries[0].key, "/z");
    }

    #[test]
    fn render_then_parse_gives_back_the_stored_text() {
        let stored = [("/k1", r#"{"order":0}"#), ("/k2", "true"), ("/k3", "DEBUG")];
        let entries = parse(&render(stored)).unwrap();
        let back: Vec<_> = entries
            .iter()
            .map(|e| (e.key.as_str(), e.raw.as_str()))
            .collect();
        assert_eq!(back, stored);
    }

    #[test]
    fn non_object_bundles_are_refused() {
        let err = parse("[1, 2]").unwrap_err();
        assert!(err.to_string().contains("JSON object"), "{err}");
    }
}
