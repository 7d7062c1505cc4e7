//! The plugin's one error: a CNI error object with the spec's codes (and ours from 100), what
//! the runtime reads on stdout when a call fails.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The spec's error codes.
pub mod code {
    pub const INCOMPATIBLE_VERSION: u32 = 1;
    pub const UNSUPPORTED_FIELD: u32 = 2;
    pub const UNKNOWN_CONTAINER: u32 = 3;
    pub const INVALID_ENVIRONMENT: u32 = 4;
    pub const IO_FAILURE: u32 = 5;
    pub const DECODING_FAILURE: u32 = 6;
    pub const INVALID_CONFIG: u32 = 7;
    pub const TRY_AGAIN_LATER: u32 = 11;
    /// Plugin-specific: the datastore (etcd) failed or refused.
    pub const DATASTORE: u32 = 100;
    /// Plugin-specific: IPAM could not assign what was asked.
    pub const IPAM: u32 = 101;
    /// Plugin-specific: the kernel refused a change (veth, address, route, sysctl).
    pub const KERNEL: u32 = 102;
    /// Plugin-specific: CHECK found the container differs from its result.
    pub const CHECK_FAILED: u32 = 103;
}

/// A CNI error object: `{"cniVersion", "code", "msg", "details"}` on stdout, non-zero exit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{msg}")]
pub struct CniError {
    pub code: u32,
    pub msg: String,
    pub details: String,
}

/// Plugging in failed in the kernel (code 102): the message names the interface, route or rule.
impl From<calico_plumbing::PlumbingError> for CniError {
    fn from(error: calico_plumbing::PlumbingError) -> CniError {
        CniError::new(code::KERNEL, error.to_string())
    }
}

/// A netlink request failed (code 102): the message names the request and the object.
impl From<calico_linux::NetlinkError> for CniError {
    fn from(error: calico_linux::NetlinkError) -> CniError {
        CniError::new(code::KERNEL, error.to_string())
    }
}

impl CniError {
    pub fn new(code: u32, msg: impl Into<String>) -> CniError {
        CniError {
            code,
            msg: msg.into(),
            details: String::new(),
        }
    }

    pub fn with_details(mut self, details: impl Into<String>) -> CniError {
        self.details = details.into();
        self
    }

    /// The error object in `version`'s shape.
    pub fn to_json(&self, version: &str) -> Value {
        serde_json::to_value(self.to_object(version)).expect("an error object always serializes")
    }

    /// The error object as the spec's type.
    pub fn to_object(&self, version: &str) -> ErrorObject {
        ErrorObject {
            cni_version: version.to_owned(),
            code: self.code,
            msg: self.msg.clone(),
            details: self.details.clone(),
        }
    }
}

/// A CNI error object: `{"cniVersion", "code", "msg", "details"}` (`details` only when set).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorObject {
    pub cni_version: String,
    pub code: u32,
    pub msg: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub details: String,
}
