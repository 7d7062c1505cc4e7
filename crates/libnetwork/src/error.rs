//! Why a plugin call failed. Every variant becomes libnetwork's `{"Err": "..."}`, so the
//! message is what `docker network create` or `docker run` prints: it names the call's field,
//! the value and the reason.

use calico_datastore::DatastoreError;
use calico_ipam::IpamError;
use calico_linux::NetlinkError;
use calico_plumbing::PlumbingError;

/// A plugin call failed; whatever it had written is undone.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    /// The body is not the JSON the call takes.
    #[error("{call}: malformed request: {path}: {reason}")]
    Malformed {
        call: String,
        path: String,
        reason: String,
    },
    /// A call this driver does not implement.
    #[error("unknown plugin call {call}")]
    UnknownCall { call: String },
    /// A field holds a value the driver refuses.
    #[error("{field} {value:?}: {reason}")]
    Invalid {
        field: &'static str,
        value: String,
        reason: String,
    },
    /// An endpoint the driver has no record of (created before a restart, or never).
    #[error("endpoint {endpoint}: unknown to this driver ({reason})")]
    UnknownEndpoint { endpoint: String, reason: String },
    #[error("ipam: {0}")]
    Ipam(#[from] IpamError),
    #[error("datastore: {0}")]
    Datastore(#[from] DatastoreError),
    #[error("kernel: {0}")]
    Netlink(#[from] NetlinkError),
    #[error("kernel: {0}")]
    Plumbing(#[from] PlumbingError),
    /// A value the data model refuses to have written at `key` (the field and the reason).
    #[error("{key}: {source}")]
    Model {
        key: String,
        source: calico_model::ValidationError,
    },
    /// dockerd's API (asked for a network's name) did not answer as expected.
    #[error("docker api at {socket}: {reason}")]
    Docker { socket: String, reason: String },
}

impl DriverError {
    /// The model's JSON for a value the driver writes at `key`.
    pub fn value_of<T>(key: impl std::fmt::Display, value: &T) -> Result<String, DriverError>
    where
        T: serde::Serialize + calico_model::Validate + Clone,
    {
        calico_model::to_json(value).map_err(|source| DriverError::Model {
            key: key.to_string(),
            source,
        })
    }

    /// A refused field value.
    pub fn invalid(
        field: &'static str,
        value: impl Into<String>,
        reason: impl Into<String>,
    ) -> Self {
        DriverError::Invalid {
            field,
            value: value.into(),
            reason: reason.into(),
        }
    }

    /// Logs the failure once, at the level it deserves: bad input is the caller's (warning),
    /// everything else is ours or the environment's (error).
    pub fn log(&self, call: &str) {
        match self {
            DriverError::Malformed { .. }
            | DriverError::UnknownCall { .. }
            | DriverError::Invalid { .. }
            | DriverError::Ipam(
                IpamError::NotInPool { .. }
                | IpamError::InUse { .. }
                | IpamError::DisabledPool { .. }
                | IpamError::UnknownPool { .. },
            ) => tracing::warn!(call, "refused: {self}"),
            _ => tracing::error!(call, "failed: {self}"),
        }
    }
}
