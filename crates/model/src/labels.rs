//! Labels: the key/value pairs on endpoints and profiles that selectors match against.
//!
//! | part | rule | why |
//! | --- | --- | --- |
//! | name | 1..=317 bytes of `[a-zA-Z0-9_./-]` | the seeds allow alphanumerics, `-`, `_` and `/`; `.` is added so Kubernetes keys such as `app.kubernetes.io/name` work; 317 = a 253-byte DNS prefix, `/`, and a 63-byte name |
//! | value | 0..=4096 characters, no control characters | the seeds only ask for a string; selectors compare values as opaque strings, and control characters would corrupt logs and the text forms of rules |
//!
//! A missing `labels` field is an empty map. Maps are `BTreeMap`s so iteration (and anything
//! rendered from it) is deterministic.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{Validate, ValidationError};

/// Label name to value.
pub type LabelMap = BTreeMap<String, String>;

/// The longest label name accepted, in bytes.
pub const MAX_LABEL_NAME_LEN: usize = 317;

/// The longest label value accepted, in characters.
pub const MAX_LABEL_VALUE_LEN: usize = 4096;

/// True for the characters allowed in label names.
pub fn is_label_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '/' | '-')
}

/// Checks every name and value. Errors about a name have an empty field path (the name itself
/// is the problem); errors about a value name the label: `role: value ...`.
pub fn validate_labels(labels: &LabelMap) -> Result<(), ValidationError> {
    for (name, value) in labels {
        validate_label_name(name)?;
        validate_label_value(value).map_err(|e| e.within(name))?;
    }
    Ok(())
}

/// Checks one label name.
pub fn validate_label_name(name: &str) -> Result<(), ValidationError> {
    if name.is_empty() {
        return Err(ValidationError::object("label name must not be empty"));
    }
    if name.len() > MAX_LABEL_NAME_LEN {
        return Err(ValidationError::object(format!(
            "label name {name:?} is {} bytes long, the limit is {MAX_LABEL_NAME_LEN}",
            name.len()
        )));
    }
    match name.chars().find(|c| !is_label_name_char(*c)) {
        Some(bad) => Err(ValidationError::object(format!(
            "invalid label name {name:?}: character {bad:?} is not allowed \
             (only letters, digits, '_', '.', '/' and '-')"
        ))),
        None => Ok(()),
    }
}

/// Checks one label value.
pub fn validate_label_value(value: &str) -> Result<(), ValidationError> {
    let len = value.chars().count();
    if len > MAX_LABEL_VALUE_LEN {
        return Err(ValidationError::object(format!(
            "label value is {len} characters long, the limit is {MAX_LABEL_VALUE_LEN}"
        )));
    }
    match value.chars().find(|c| c.is_control()) {
        Some(bad) => Err(ValidationError::object(format!(
            "invalid label value {value:?}: control character {bad:?} is not allowed"
        ))),
        None => Ok(()),
    }
}

/// The value of `/calico/v1/policy/profile/<profile_id>/labels`: labels inherited by every
/// endpoint that references the profile.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ProfileLabels(pub LabelMap);

impl Validate for ProfileLabels {
    fn validate(&mut self) -> Result<(), ValidationError> {
        validate_labels(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubernetes_style_names_are_accepted() {
        assert!(validate_label_name("app.kubernetes.io/name").is_ok());
        assert!(
            validate_label_name("a b")
                .unwrap_err()
                .reason
                .contains("character ' ' is not allowed")
        );
        assert!(
            validate_label_name(&"n".repeat(318))
                .unwrap_err()
                .reason
                .contains("is 318 bytes long, the limit is 317")
        );
    }

    #[test]
    fn value_errors_name_the_label() {
        let labels = LabelMap::from([("role".to_owned(), "a\u{7}b".to_owned())]);
        let err = validate_labels(&labels).unwrap_err();
        assert_eq!(err.field, "role");
        assert!(err.reason.contains("control character"));
        assert!(
            validate_label_value(&"v".repeat(4097))
                .unwrap_err()
                .reason
                .contains("4097 characters long, the limit is 4096")
        );
        assert!(validate_label_value("any \"quoted\" text, even 'this'").is_ok());
    }
}
