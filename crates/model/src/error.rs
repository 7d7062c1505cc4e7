//! Validation errors that name the field and the reason, and the one entry point that turns JSON
//! text into a validated object.

use serde::Serialize;
use serde::de::DeserializeOwned;

/// Why an object was refused: the field path (`inbound_rules[0].dst_ports`, empty for the object
/// as a whole) and a lowercase reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ValidationError {
    pub field: String,
    pub reason: String,
}

impl std::fmt::Display for ValidationError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.field.is_empty() {
            f.write_str(&self.reason)
        } else {
            write!(f, "{}: {}", self.field, self.reason)
        }
    }
}

/// The one line every reader of the datastore writes (at WARNING) when a stored value does not
/// validate and is treated as missing — the seed's
/// `Validation failed for <key>, treating as missing: <reason>`. Felix, calico-node and
/// calicoctl all use it, so the line is the same whichever of them read the object.
pub fn invalid_warning(key: &str, reason: &impl std::fmt::Display) -> String {
    format!("Validation failed for {key}, treating as missing: {reason}")
}

impl ValidationError {
    /// An error about `field` (a path relative to the object being validated).
    pub fn new(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            reason: reason.into(),
        }
    }

    /// An error about the object as a whole.
    pub fn object(reason: impl Into<String>) -> Self {
        Self::new("", reason)
    }

    /// Re-roots the error under `parent`: `dst_ports` within `inbound_rules[0]` becomes
    /// `inbound_rules[0].dst_ports`.
    pub fn within(mut self, parent: &str) -> Self {
        self.field = match (parent.is_empty(), self.field.is_empty()) {
            (true, _) => self.field,
            (false, true) => parent.to_owned(),
            (false, false) if self.field.starts_with('[') => format!("{parent}{}", self.field),
            (false, false) => format!("{parent}.{}", self.field),
        };
        self
    }
}

/// Checks an object after deserialisation. It may normalise fields the seeds say are normalised
/// (for example truncating `log_prefix`); everything else is refused with the field and reason.
pub trait Validate {
    fn validate(&mut self) -> Result<(), ValidationError>;
}

/// Parses JSON text into a validated object. Wrong types are errors naming the field path;
/// unknown fields are tolerated (forward compatibility).
pub fn from_json<T: DeserializeOwned + Validate>(raw: &str) -> Result<T, ValidationError> {
    let mut de = serde_json::Deserializer::from_str(raw);
    let mut value: T = serde_path_to_error::deserialize(&mut de).map_err(json_error)?;
    de.end()
        .map_err(|e| ValidationError::object(format!("invalid JSON: {e}")))?;
    value.validate()?;
    Ok(value)
}

/// The JSON of an object the system writes, validated (and normalised) first exactly as
/// [`from_json`] validates it when read back: a writer never stores what a reader refuses, and
/// the error names the field and the reason.
pub fn to_json<T: Serialize + Validate + Clone>(value: &T) -> Result<String, ValidationError> {
    let mut checked = value.clone();
    checked.validate()?;
    serde_json::to_string(&checked).map_err(|e| ValidationError::object(e.to_string()))
}

fn json_error(err: serde_path_to_error::Error<serde_json::Error>) -> ValidationError {
    let path = err.path().to_string();
    let inner = err.into_inner();
    // The root is "."; an empty path is a field named "" (`{"": 1}`), shown quoted.
    let field = match path.as_str() {
        "." => String::new(),
        "" => "\"\"".to_owned(),
        _ => path,
    };
    let reason = if inner.is_syntax() || inner.is_eof() {
        format!("invalid JSON: {inner}")
    } else {
        strip_position(&inner.to_string())
    };
    ValidationError::new(field, reason)
}

/// serde_json appends " at line L column C"; the field path already says where.
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(at) => message[..at].to_owned(),
        None => message.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn within_builds_paths() {
        let e = ValidationError::new("dst_ports", "bad").within("inbound_rules[0]");
        assert_eq!(e.to_string(), "inbound_rules[0].dst_ports: bad");
        let e = ValidationError::new("[2]", "bad").within("ipv4_nets");
        assert_eq!(e.field, "ipv4_nets[2]");
        let e = ValidationError::object("bad").within("rules");
        assert_eq!(e.to_string(), "rules: bad");
    }

    #[test]
    fn the_invalid_warning_is_the_seed_s_line() {
        let reason = ValidationError::new("ipv4_nets[0]", "bad");
        assert_eq!(
            invalid_warning("/calico/v1/k", &reason),
            "Validation failed for /calico/v1/k, treating as missing: ipv4_nets[0]: bad"
        );
    }
}
