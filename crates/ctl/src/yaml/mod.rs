//! YAML as calicoctl writes and reads it, beyond what serde_yaml_ng does.
//!
//! | module | owns |
//! | --- | --- |
//! | `mod` | writing a document: block style, every scalar as `scalar` spells it |
//! | `scalar` | which strings must be quoted so that YAML 1.1 and 1.2 readers read them back as strings |
//! | `depth` | the nesting scan every YAML input passes before it is parsed |
//!
//! Documents are written here rather than by serde_yaml_ng because its writer follows YAML 1.2
//! alone: it leaves `yes`, `on`, `20:30` or `0o12` unquoted, which PyYAML and Ansible (YAML 1.1)
//! read as a boolean or a number, so an edit through such a tool would change a rule.

pub mod depth;
pub mod scalar;

use serde_json::Value;

/// `value` as one YAML document starting with `---` (so that outputs concatenate into one file
/// of documents), in block style: mappings and lists one entry per line, a list under a key at
/// the key's indentation (as libyaml writes it), empty ones as `{}` and `[]`.
pub fn document(value: &Value) -> String {
    let mut text = String::from("---\n");
    for line in lines(value) {
        text.push_str(&line);
        text.push('\n');
    }
    text
}

/// The lines of `value`, not indented.
fn lines(value: &Value) -> Vec<String> {
    match value {
        Value::Object(map) if !map.is_empty() => map
            .iter()
            .flat_map(|(key, value)| entry(key, value))
            .collect(),
        Value::Array(items) if !items.is_empty() => items.iter().flat_map(item).collect(),
        scalar => vec![scalar_text(scalar)],
    }
}

fn entry(key: &str, value: &Value) -> Vec<String> {
    let key = scalar::string(key);
    let nested = lines(value);
    match value {
        Value::Object(map) if !map.is_empty() => std::iter::once(format!("{key}:"))
            .chain(nested.into_iter().map(|line| format!("  {line}")))
            .collect(),
        Value::Array(items) if !items.is_empty() => {
            std::iter::once(format!("{key}:")).chain(nested).collect()
        }
        _ => vec![format!("{key}: {}", nested[0])],
    }
}

fn item(value: &Value) -> Vec<String> {
    let mut nested = lines(value);
    for (index, line) in nested.iter_mut().enumerate() {
        let lead = if index == 0 { "- " } else { "  " };
        line.insert_str(0, lead);
    }
    nested
}

/// A scalar, or an empty collection, on one line.
fn scalar_text(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) if n.is_f64() => scalar::float(&n.to_string()),
        Value::Number(n) => n.to_string(),
        Value::String(text) => scalar::string(text),
        Value::Array(_) => "[]".to_owned(),
        Value::Object(_) => "{}".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn documents_are_written_in_block_style_and_read_back_the_same() {
        let value = json!({
            "apiVersion": "projectcalico.org/v1",
            "kind": "List",
            "items": [
                {"metadata": {"name": "p1"}, "spec": {
                    "inbound_rules": [{"action": "allow", "dst_ports": [80, "20:30"]}],
                    "outbound_rules": [],
                    "labels": {"on": "yes", "empty": "", "n": 1.0e300},
                    "nested": [[1, 2], [], {}],
                }},
            ],
        });
        let text = document(&value);
        assert_eq!(
            text,
            "---\n\
             apiVersion: projectcalico.org/v1\n\
             kind: List\n\
             items:\n\
             - metadata:\n    name: p1\n  \
               spec:\n    \
                 inbound_rules:\n    \
                 - action: allow\n      \
                   dst_ports:\n      \
                   - 80\n      \
                   - \"20:30\"\n    \
                 outbound_rules: []\n    \
                 labels:\n      \
                   \"on\": \"yes\"\n      \
                   empty: \"\"\n      \
                   \"n\": 1.0e+300\n    \
                 nested:\n    \
                 - - 1\n      \
                   - 2\n    \
                 - []\n    \
                 - {}\n"
        );
        let back: Value = serde_yaml_ng::from_str(&text).unwrap();
        assert_eq!(back, value);
    }
}
