//! Values whose mappings name each key once, from JSON and from YAML alike: serde_json's own
//! `Value` keeps the last of two keys (a second `"action"` in a rule would silently win), and
//! YAML keys that differ as YAML (`1`, `"1"`) become the same JSON key.

use serde::Deserialize;
use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// A YAML value as JSON: keys become strings (`1` and `"1"` are then the same key, refused as a
/// duplicate like any other), tags are refused.
pub fn to_json(value: serde_yaml_ng::Value) -> Result<Value, String> {
    use serde_yaml_ng::Value as Yaml;
    Ok(match value {
        Yaml::Null => Value::Null,
        Yaml::Bool(b) => Value::Bool(b),
        Yaml::Number(n) => serde_json::to_value(&n).map_err(|e| format!("number {n}: {e}"))?,
        Yaml::String(text) => Value::String(text),
        Yaml::Sequence(items) => {
            Value::Array(items.into_iter().map(to_json).collect::<Result<_, _>>()?)
        }
        Yaml::Mapping(mapping) => {
            let mut map = Map::new();
            for (key, value) in mapping {
                let key = match key {
                    Yaml::String(text) => text,
                    Yaml::Number(n) => n.to_string(),
                    Yaml::Bool(b) => b.to_string(),
                    Yaml::Null => "null".to_owned(),
                    other => return Err(format!("a key must be a scalar, got {other:?}")),
                };
                if map.contains_key(&key) {
                    return Err(format!("duplicate entry with key {key:?}"));
                }
                map.insert(key, to_json(value)?);
            }
            Value::Object(map)
        }
        Yaml::Tagged(tagged) => {
            return Err(format!(
                "tag {} is not part of a resource document",
                tagged.tag
            ));
        }
    })
}

/// A JSON value whose objects name each key once (deserialized from any format; the error names
/// the key: `duplicate entry with key "action"`, as serde_yaml_ng says it).
#[derive(Debug)]
pub struct Unique(pub Value);

impl<'de> Deserialize<'de> for Unique {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(UniqueVisitor).map(Unique)
    }
}

struct UniqueVisitor;

impl<'de> Visitor<'de> for UniqueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Bool(b))
    }

    fn visit_i64<E>(self, n: i64) -> Result<Value, E> {
        Ok(Value::from(n))
    }

    fn visit_u64<E>(self, n: u64) -> Result<Value, E> {
        Ok(Value::from(n))
    }

    fn visit_f64<E>(self, n: f64) -> Result<Value, E> {
        Ok(Value::from(n))
    }

    fn visit_str<E>(self, text: &str) -> Result<Value, E> {
        Ok(Value::String(text.to_owned()))
    }

    fn visit_string<E>(self, text: String) -> Result<Value, E> {
        Ok(Value::String(text))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(Unique(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        let mut map = Map::new();
        while let Some(key) = access.next_key::<String>()? {
            if map.contains_key(&key) {
                return Err(de::Error::custom(format!(
                    "duplicate entry with key {key:?}"
                )));
            }
            let Unique(value) = access.next_value()?;
            map.insert(key, value);
        }
        Ok(Value::Object(map))
    }
}
