//! Security profiles: three keys per profile, each its own object.
//!
//! | key | type |
//! | --- | --- |
//! | `/calico/v1/policy/profile/<profile_id>/rules` | [`ProfileRules`] (defined in `rule`) |
//! | `/calico/v1/policy/profile/<profile_id>/tags` | [`ProfileTags`] |
//! | `/calico/v1/policy/profile/<profile_id>/labels` | [`ProfileLabels`] (defined in `labels`) |

use serde::{Deserialize, Serialize};

use crate::error::{Validate, ValidationError};
use crate::names::validate_tag;
use crate::rule::{Action, Rule};

pub use crate::labels::ProfileLabels;
pub use crate::rule::ProfileRules;

/// The tags of a profile: a JSON list of tag names. Every endpoint that references the profile
/// is a member of each tag. Order and duplicates are kept as written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ProfileTags(pub Vec<String>);

impl Validate for ProfileTags {
    fn validate(&mut self) -> Result<(), ValidationError> {
        for (index, tag) in self.0.iter().enumerate() {
            validate_tag(tag).map_err(|e| e.within(&format!("[{index}]")))?;
        }
        Ok(())
    }
}

/// The profile calico-containers gave each network, which the CNI plugin and the Docker driver
/// create for a network that has none: tagged with the network's name, inbound allowed from
/// that tag, everything outbound allowed.
pub fn network_default(network: &str) -> (ProfileTags, ProfileRules) {
    let from_network = Rule {
        action: Action::Allow,
        src_tag: Some(network.to_owned()),
        ..Rule::default()
    };
    let rules = ProfileRules {
        inbound_rules: vec![from_network],
        outbound_rules: vec![Rule::default()],
    };
    (ProfileTags(vec![network.to_owned()]), rules)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_networks_default_profile_is_calico_containers() {
        let (tags, rules) = network_default("net1");
        assert_eq!(crate::to_json(&tags).unwrap(), r#"["net1"]"#);
        assert_eq!(
            crate::to_json(&rules).unwrap(),
            r#"{"inbound_rules":[{"src_tag":"net1","action":"allow"}],"outbound_rules":[{"action":"allow"}]}"#
        );
    }

    #[test]
    fn tags_name_the_bad_entry() {
        let mut tags = ProfileTags(vec!["db-user".into(), "bad tag".into()]);
        let err = tags.validate().unwrap_err();
        assert_eq!(err.field, "[1]");
        assert!(err.reason.starts_with("invalid tag \"bad tag\""));
    }
}
