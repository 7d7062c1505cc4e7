//! What Felix reports back into etcd: its own liveness (`/calico/felix/v1/host/<h>/status`,
//! `.../last_reported_status`) and the state of each endpoint it programs.

use serde::{Deserialize, Serialize};

use crate::error::{Validate, ValidationError};

/// Felix's periodic report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FelixStatus {
    /// When the report was written, RFC 3339 in UTC (`2016-06-01T12:00:00Z`).
    pub time: String,
    /// Seconds since Felix started.
    pub uptime: f64,
    /// True on the first report after a start.
    #[serde(default)]
    pub first_update: bool,
    /// The firewall backend programming the host: `iptables` or `nftables` (absent in the
    /// reports of Felixes that predate the choice, which all ran iptables).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataplane: Option<String>,
}

impl Validate for FelixStatus {
    fn validate(&mut self) -> Result<(), ValidationError> {
        if !self.uptime.is_finite() || self.uptime < 0.0 {
            return Err(ValidationError::new(
                "uptime",
                "must be a non-negative number of seconds",
            ));
        }
        if !looks_like_rfc3339(&self.time) {
            let reason = format!(
                "{:?} is not an RFC 3339 time like 2016-06-01T12:00:00Z",
                self.time
            );
            return Err(ValidationError::new("time", reason));
        }
        Ok(())
    }
}

/// `YYYY-MM-DDTHH:MM:SS` followed by optional fractions and a zone.
fn looks_like_rfc3339(time: &str) -> bool {
    let shape = "dddd-dd-ddTdd:dd:dd";
    time.len() > shape.len()
        && time.bytes().zip(shape.bytes()).all(|(c, s)| match s {
            b'd' => c.is_ascii_digit(),
            _ => c == s,
        })
}

/// Whether an endpoint's interface is programmed and up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EndpointOperState {
    Up,
    Down,
    Error,
}

/// `/calico/felix/v1/host/<h>/workload/.../endpoint/<e>` and `.../host/<h>/endpoint/<e>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndpointStatus {
    pub status: EndpointOperState,
}

impl Validate for EndpointStatus {
    fn validate(&mut self) -> Result<(), ValidationError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::from_json;

    #[test]
    fn felix_status_needs_a_time() {
        let ok = r#"{"time": "2016-06-01T12:00:00Z", "uptime": 12.5, "first_update": true}"#;
        assert!(from_json::<FelixStatus>(ok).is_ok());
        let err = from_json::<FelixStatus>(r#"{"time": "yesterday", "uptime": 1}"#).unwrap_err();
        assert_eq!(err.field, "time");
    }
}
