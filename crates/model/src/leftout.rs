//! What calico-neutron left out of a security group's profile:
//! `/calico/openstack/v1/left-out/<security-group-id>` (ours, not in the seeds).
//!
//! A Neutron rule Calico cannot express (a protocol it has no name for, ...) is not in the
//! profile, so Felix does not enforce it. calico-neutron writes this key while a group has
//! such rules and deletes it when none are left, so that `calicoctl get profile` can say so
//! where an operator looks. Felix never reads it.

use serde::{Deserialize, Serialize};

use crate::error::{Validate, ValidationError};

/// The rules of one security group that are not in its profile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeftOut {
    /// Never empty: a group with nothing left out has no key.
    pub rules: Vec<LeftOutRule>,
}

/// One Neutron rule left out, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeftOutRule {
    /// The Neutron rule's id.
    pub id: String,
    /// `inbound` (Neutron's `ingress`) or `outbound` (`egress`).
    pub direction: LeftOutDirection,
    /// What Calico cannot express about it.
    pub reason: String,
}

/// The direction of a left-out rule, in Calico's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LeftOutDirection {
    Inbound,
    Outbound,
}

impl std::fmt::Display for LeftOutDirection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LeftOutDirection::Inbound => "inbound",
            LeftOutDirection::Outbound => "outbound",
        })
    }
}

impl Validate for LeftOut {
    fn validate(&mut self) -> Result<(), ValidationError> {
        if self.rules.is_empty() {
            return Err(ValidationError::new(
                "rules",
                "empty: a group with nothing left out has no left-out key (delete it)",
            ));
        }
        for (i, rule) in self.rules.iter().enumerate() {
            if rule.id.is_empty() {
                return Err(ValidationError::new(
                    format!("rules[{i}].id"),
                    "empty: name the Neutron rule",
                ));
            }
            if rule.reason.is_empty() {
                return Err(ValidationError::new(
                    format!("rules[{i}].reason"),
                    "empty: say what Calico cannot express",
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{from_json, to_json};

    #[test]
    fn round_trips_and_refuses_empty_lists_and_fields() {
        let raw = r#"{"rules":[{"id":"r1","direction":"inbound","reason":"protocol dccp"}]}"#;
        let value: LeftOut = from_json(raw).unwrap();
        assert_eq!(value.rules[0].direction, LeftOutDirection::Inbound);
        assert_eq!(to_json(&value).unwrap(), raw);
        let err = from_json::<LeftOut>(r#"{"rules":[]}"#).unwrap_err();
        assert_eq!(err.field, "rules");
        let err =
            from_json::<LeftOut>(r#"{"rules":[{"id":"","direction":"outbound","reason":"x"}]}"#)
                .unwrap_err();
        assert_eq!(err.field, "rules[0].id");
        assert!(
            from_json::<LeftOut>(r#"{"rules":[{"id":"r","direction":"up","reason":"x"}]}"#)
                .is_err()
        );
    }
}
