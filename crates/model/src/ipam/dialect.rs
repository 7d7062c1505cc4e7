//! Reading IPAM values in both dialects found in etcd: Calico 1.4's (libcalico 0.15) and ours
//! (libcalico-go's spellings). Serialising writes ours; `calico-ipam` rewrites a stored block in
//! the dialect it was read in (see `docs/ipam.md`).
//!
//! | field | Calico 1.4 | ours | read as |
//! | --- | --- | --- | --- |
//! | block `affinity` of no host | `""` | `null` or absent | `None` |
//! | block strict flag | `strict_affinity` | `strictAffinity` | either; both present must agree |
//! | attribute's handle | `handle_id` (`null` = none) | `primary` | either; both present must agree |
//! | attribute's `secondary` | values of any JSON type | string values | text (a number as its JSON) |
//! | config | `strict_affinity`, `auto_allocate_blocks` | the same | unknown fields refused |
//!
//! Two fields that say the same thing and disagree are refused while the second of them is read,
//! so the error's path is that field (`strictAffinity: is false but strict_affinity is true; …`).
//! Unknown fields of blocks and attributes are ignored (as everywhere in the model); the config
//! refuses them as `calico-ipam` does, because a misspelt flag (`strictAffinity`) would silently
//! leave strict affinity off for the whole cluster.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::Value as Json;

use super::{AllocationAttribute, AllocationBlock, IpamConfig};

impl<'de> Deserialize<'de> for AllocationBlock {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(BlockVisitor)
    }
}

struct BlockVisitor;

impl<'de> Visitor<'de> for BlockVisitor {
    type Value = AllocationBlock;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an IPAM block object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<AllocationBlock, A::Error> {
        let (mut cidr, mut affinity, mut allocations) = (None, None, None);
        let (mut snake, mut camel) = (None, None);
        let (mut unallocated, mut attributes) = (None, None);
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "cidr" => cidr = Some(map.next_value()?),
                "affinity" => affinity = map.next_value::<Option<String>>()?,
                "strict_affinity" => {
                    snake = map.next_value_seed(agreeing(camel, "strictAffinity"))?
                }
                "strictAffinity" => {
                    camel = map.next_value_seed(agreeing(snake, "strict_affinity"))?
                }
                "allocations" => allocations = Some(map.next_value()?),
                "unallocated" => unallocated = map.next_value()?,
                "attributes" => attributes = map.next_value::<Option<Vec<_>>>()?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(AllocationBlock {
            cidr: cidr.ok_or_else(|| de::Error::missing_field("cidr"))?,
            // Calico 1.4 writes "" for a block of no host.
            affinity: affinity.filter(|text| !text.is_empty()),
            strict_affinity: snake.or(camel).unwrap_or(false),
            allocations: allocations.ok_or_else(|| de::Error::missing_field("allocations"))?,
            unallocated,
            attributes: attributes.unwrap_or_default(),
        })
    }
}

impl<'de> Deserialize<'de> for AllocationAttribute {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(AttributeVisitor)
    }
}

struct AttributeVisitor;

impl<'de> Visitor<'de> for AttributeVisitor {
    type Value = AllocationAttribute;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an allocation attribute object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<AllocationAttribute, A::Error> {
        let (mut handle_id, mut primary) = (None, None);
        let mut secondary = None;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "handle_id" => {
                    handle_id = map.next_value_seed(agreeing(primary.clone(), "primary"))?
                }
                "primary" => {
                    primary = map.next_value_seed(agreeing(handle_id.clone(), "handle_id"))?
                }
                "secondary" => {
                    let details: Option<serde_json::Map<String, Json>> = map.next_value()?;
                    secondary =
                        details.map(|d| d.into_iter().map(|(k, v)| (k, as_text(v))).collect());
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(AllocationAttribute {
            primary: handle_id.or(primary),
            secondary,
        })
    }
}

/// A detail as text: strings as they are, anything else (Calico 1.4's `"rack": 1`) as its JSON.
fn as_text(value: Json) -> String {
    match value {
        Json::String(text) => text,
        other => other.to_string(),
    }
}

/// Reads an optional value that must agree with `other`, the value of its twin field
/// `other_name` read before it (if any). `null` counts as absent.
fn agreeing<T>(other: Option<T>, other_name: &'static str) -> Agreeing<T> {
    Agreeing { other, other_name }
}

struct Agreeing<T> {
    other: Option<T>,
    other_name: &'static str,
}

impl<'de, T> DeserializeSeed<'de> for Agreeing<T>
where
    T: Deserialize<'de> + PartialEq + fmt::Debug,
{
    type Value = Option<T>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Option<T>, D::Error> {
        let mine = Option::<T>::deserialize(deserializer)?;
        match (&mine, &self.other) {
            (Some(mine), Some(other)) if mine != other => Err(de::Error::custom(format!(
                "is {mine:?} but {} is {other:?}; remove the one that is wrong",
                self.other_name
            ))),
            _ => Ok(mine),
        }
    }
}

impl<'de> Deserialize<'de> for IpamConfig {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(ConfigVisitor)
    }
}

struct ConfigVisitor;

impl<'de> Visitor<'de> for ConfigVisitor {
    type Value = IpamConfig;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the IPAM config object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<IpamConfig, A::Error> {
        let mut config = IpamConfig::default();
        while let Some(key) = map.next_key::<String>()? {
            let flag = match key.as_str() {
                "strict_affinity" => &mut config.strict_affinity,
                "auto_allocate_blocks" => &mut config.auto_allocate_blocks,
                _ => match map.next_value_seed(UnknownConfigField)? {},
            };
            *flag = map.next_value_seed(ConfigFlag)?;
        }
        Ok(config)
    }
}

/// A flag of the config: `true` or `false` (not `null`, not `"true"`).
struct ConfigFlag;

impl<'de> DeserializeSeed<'de> for ConfigFlag {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<bool, D::Error> {
        let value = Json::deserialize(deserializer)?;
        value
            .as_bool()
            .ok_or_else(|| de::Error::custom(format!("expected true or false, found {value}")))
    }
}

/// Refuses the value of a field the config does not have (the error's path is the field).
struct UnknownConfigField;

impl<'de> DeserializeSeed<'de> for UnknownConfigField {
    type Value = std::convert::Infallible;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        IgnoredAny::deserialize(deserializer)?;
        Err(de::Error::custom(
            "unknown field; the IPAM config has strict_affinity and auto_allocate_blocks",
        ))
    }
}
