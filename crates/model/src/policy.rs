//! Tiered policy: tier metadata (`/calico/v1/policy/tier/<tier_name>/metadata`) and policies
//! (`/calico/v1/policy/tier/<tier_name>/policy/<policy_id>`), and the order both share.
//!
//! `order` is a JSON number or the string `"default"`; missing means `"default"`, which sorts
//! after every number ("effectively infinite order"). Lower orders apply first. Equal orders are
//! left for the caller to break by name, as Calico does.

use std::cmp::Ordering;
use std::fmt;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::{Validate, ValidationError};
use crate::rule::{Rule, validate_rules};
use crate::selector::Selector;

/// The order of a tier or policy.
#[derive(Debug, Clone, Copy, Default)]
pub enum Order {
    Number(f64),
    /// After every number.
    #[default]
    Default,
}

impl Order {
    /// The total order used to sort tiers and policies: numbers ascending (by `f64::total_cmp`,
    /// so `-0.0` sorts before `0.0`), then `Default`.
    pub fn total_cmp(&self, other: &Order) -> Ordering {
        match (self, other) {
            (Order::Number(a), Order::Number(b)) => a.total_cmp(b),
            (Order::Number(_), Order::Default) => Ordering::Less,
            (Order::Default, Order::Number(_)) => Ordering::Greater,
            (Order::Default, Order::Default) => Ordering::Equal,
        }
    }
}

impl PartialEq for Order {
    fn eq(&self, other: &Order) -> bool {
        self.total_cmp(other) == Ordering::Equal
    }
}

impl Eq for Order {}

impl PartialOrd for Order {
    fn partial_cmp(&self, other: &Order) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Order {
    fn cmp(&self, other: &Order) -> Ordering {
        self.total_cmp(other)
    }
}

impl fmt::Display for Order {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Order::Number(n) => write!(f, "{n}"),
            Order::Default => f.write_str("default"),
        }
    }
}

impl Validate for Order {
    /// Only reachable from Rust: JSON has no NaN or infinity.
    fn validate(&mut self) -> Result<(), ValidationError> {
        match self {
            Order::Number(n) if !n.is_finite() => Err(ValidationError::object(format!(
                "invalid order {n}: expected a finite number or \"default\""
            ))),
            _ => Ok(()),
        }
    }
}

impl Serialize for Order {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            // Whole numbers are written as integers, so `{"order": 100}` reads back unchanged
            // (-0.0 stays a float: as an integer it would read back as 0.0).
            Order::Number(n) if is_plain_integer(*n) => serializer.serialize_i64(*n as i64),
            Order::Number(n) => serializer.serialize_f64(*n),
            Order::Default => serializer.serialize_str("default"),
        }
    }
}

impl<'de> Deserialize<'de> for Order {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(OrderVisitor)
    }
}

fn is_plain_integer(n: f64) -> bool {
    n.fract() == 0.0 && n.abs() < 1e15 && !(n == 0.0 && n.is_sign_negative())
}

struct OrderVisitor;

impl Visitor<'_> for OrderVisitor {
    type Value = Order;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a number or \"default\"")
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Order, E> {
        Ok(Order::Number(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Order, E> {
        Ok(Order::Number(v as f64))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Order, E> {
        Ok(Order::Number(v as f64))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Order, E> {
        match v {
            "default" => Ok(Order::Default),
            _ => Err(E::custom(format!(
                "invalid order {v:?}: expected a number or \"default\""
            ))),
        }
    }
}

/// The value of a tier's `metadata` key.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TierMetadata {
    #[serde(default)]
    pub order: Order,
}

impl Validate for TierMetadata {
    fn validate(&mut self) -> Result<(), ValidationError> {
        self.order.validate().map_err(|e| e.within("order"))
    }
}

/// A policy of a tier: the endpoints it applies to, its place in the tier and its rules.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Policy {
    /// Missing means `all()`.
    #[serde(default = "all_selector")]
    pub selector: Selector,
    #[serde(default)]
    pub order: Order,
    #[serde(default)]
    pub inbound_rules: Vec<Rule>,
    #[serde(default)]
    pub outbound_rules: Vec<Rule>,
    /// Rendered without connection tracking (libcalico-go data model); false when missing.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub untracked: bool,
}

impl Default for Policy {
    fn default() -> Policy {
        Policy {
            selector: all_selector(),
            order: Order::Default,
            inbound_rules: Vec::new(),
            outbound_rules: Vec::new(),
            untracked: false,
        }
    }
}

/// `all()`, the selector of a policy that has none.
fn all_selector() -> Selector {
    Selector::parse("all()").expect("the selector grammar accepts all()")
}

impl Validate for Policy {
    fn validate(&mut self) -> Result<(), ValidationError> {
        self.order.validate().map_err(|e| e.within("order"))?;
        validate_rules(&mut self.inbound_rules, "inbound_rules")?;
        validate_rules(&mut self.outbound_rules, "outbound_rules")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_sorts_after_every_number() {
        let mut orders = [Order::Default, Order::Number(1e300), Order::Number(-5.0)];
        orders.sort();
        assert_eq!(
            orders,
            [Order::Number(-5.0), Order::Number(1e300), Order::Default]
        );
    }

    #[test]
    fn whole_numbers_serialise_as_integers() {
        let json = serde_json::to_string(&[Order::Number(100.0), Order::Number(1.5)]).unwrap();
        assert_eq!(json, "[100,1.5]");
        assert_eq!(
            serde_json::to_string(&Order::Default).unwrap(),
            "\"default\""
        );
        assert!(
            Order::Number(f64::NAN)
                .validate()
                .unwrap_err()
                .reason
                .contains("invalid order NaN")
        );
    }
}
