//! Reading results as leniently as the spec's readers do, with errors that name the field:
//! `null` counts as absent, unknown fields are ignored, a list item that is not an object reads
//! as `{}`, and every refusal says which field and why (`ips[0].address "x" is not an
//! address/prefix`).

use std::fmt;
use std::marker::PhantomData;
use std::net::IpAddr;
use std::str::FromStr;

use ipnet::IpNet;
use serde::Deserialize;
use serde::de::{self, DeserializeOwned, DeserializeSeed, Deserializer, MapAccess, SeqAccess};
use serde_json::{Value, json};

/// Deserializes `value` as `T`; the error names the field: `<path> <reason>`.
pub(super) fn decode<T: DeserializeOwned>(value: &Value) -> Result<T, String> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let reason = e.inner().to_string();
        // Serde's own error for a required field that is absent.
        if let Some(field) = reason
            .strip_prefix("missing field `")
            .and_then(|r| r.strip_suffix('`'))
        {
            return if path == "." {
                format!("{field} is missing")
            } else {
                format!("{path}.{field} is missing")
            };
        }
        format!("{path} {reason}")
    })
}

pub(super) fn empty_object() -> Value {
    json!({})
}

/// `cniVersion` as read: not checked (a result is read whatever version it says it is).
pub(super) fn any_version<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    Ok(match Value::deserialize(deserializer)? {
        Value::String(version) => version,
        _ => String::new(),
    })
}

/// An optional string (`null` is absent).
pub(super) fn text<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    match Value::deserialize(deserializer)? {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s)),
        _ => Err(de::Error::custom("is not a string")),
    }
}

/// A required string (`null` is missing).
pub(super) fn required_text<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<String, D::Error> {
    text(deserializer)?.ok_or_else(|| de::Error::custom("is missing"))
}

/// An optional string parsed as `T`; `kind` names what it should be.
pub(super) fn parsed<'de, D: Deserializer<'de>, T: FromStr>(
    deserializer: D,
    kind: &str,
) -> Result<Option<T>, D::Error> {
    text(deserializer)?
        .map(|s| {
            s.parse()
                .map_err(|_| de::Error::custom(format!("{s:?} is not {kind}")))
        })
        .transpose()
}

pub(super) fn address<'de, D: Deserializer<'de>>(deserializer: D) -> Result<IpNet, D::Error> {
    parsed(deserializer, "an address/prefix")?.ok_or_else(|| de::Error::custom("is missing"))
}

pub(super) fn network<'de, D: Deserializer<'de>>(deserializer: D) -> Result<IpNet, D::Error> {
    parsed(deserializer, "a network")?.ok_or_else(|| de::Error::custom("is missing"))
}

pub(super) fn gateway<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<IpAddr>, D::Error> {
    parsed(deserializer, "an address")
}

/// An index into `interfaces`: a non-negative integer (`null` is absent).
pub(super) fn index<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<usize>, D::Error> {
    match Value::deserialize(deserializer)? {
        Value::Null => Ok(None),
        value => value
            .as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .map(Some)
            .ok_or_else(|| de::Error::custom("is not an index")),
    }
}

/// A list (`null` is empty). Each item is read as an object; an item that is not one reads as
/// `{}`, so its first required field is the one reported missing. The items are read in
/// place, so their errors name the item and the field (`ips[1].address`).
pub(super) fn list<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    deserializer.deserialize_any(ListVisitor(PhantomData))
}

/// Every other kind of JSON value is refused with `$reason`.
macro_rules! refuse_others {
    ($reason:expr; $($method:ident($ty:ty)),*) => {
        $(fn $method<E: de::Error>(self, _: $ty) -> Result<Self::Value, E> {
            Err(E::custom($reason))
        })*
        fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<Self::Value, A::Error> {
            Err(de::Error::custom($reason))
        }
    };
}

struct ListVisitor<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> de::Visitor<'de> for ListVisitor<T> {
    type Value = Vec<T>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Vec<T>, E> {
        Ok(Vec::new())
    }

    fn visit_none<E: de::Error>(self) -> Result<Vec<T>, E> {
        Ok(Vec::new())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(ObjectOrEmpty(PhantomData))? {
            items.push(item);
        }
        Ok(items)
    }

    refuse_others!("is not a list";
        visit_bool(bool), visit_i64(i64), visit_u64(u64), visit_f64(f64), visit_str(&str));
}

/// Reads an item as an object, or as `{}` when it is some other JSON value.
struct ObjectOrEmpty<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> DeserializeSeed<'de> for ObjectOrEmpty<T> {
    type Value = T;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<T, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de, T: Deserialize<'de>> ObjectOrEmpty<T> {
    fn empty<E: de::Error>() -> Result<T, E> {
        T::deserialize(de::value::MapDeserializer::new(std::iter::empty::<(
            &'static str,
            (),
        )>()))
    }
}

impl<'de, T: Deserialize<'de>> de::Visitor<'de> for ObjectOrEmpty<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
        T::deserialize(de::value::MapAccessDeserializer::new(map))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<T, A::Error> {
        while seq.next_element::<de::IgnoredAny>()?.is_some() {}
        Self::empty()
    }

    fn visit_unit<E: de::Error>(self) -> Result<T, E> {
        Self::empty()
    }

    fn visit_none<E: de::Error>(self) -> Result<T, E> {
        Self::empty()
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<T, E> {
        Self::empty()
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<T, E> {
        Self::empty()
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<T, E> {
        Self::empty()
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<T, E> {
        Self::empty()
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<T, E> {
        Self::empty()
    }
}
