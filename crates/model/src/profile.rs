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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_name_the_bad_entry() {
        let mut tags = ProfileTags(vec!["db-user".into(), "bad tag".into()]);
        let err = tags.validate().unwrap_err();
        assert_eq!(err.field, "[1]");
        assert!(err.reason.starts_with("invalid tag \"bad tag\""));
    }
}
