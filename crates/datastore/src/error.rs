//! Errors that say which endpoint or file is at fault and what to check next.

use std::path::PathBuf;

/// Why a datastore operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DatastoreError {
    /// No endpoint answered.
    #[error(
        "cannot reach etcd at {endpoints}: {reason}; check --etcd-endpoints / ETCD_ENDPOINTS \
         and that etcd is running"
    )]
    Unreachable { endpoints: String, reason: String },
    /// A TLS file is missing or unreadable.
    #[error("cannot read {kind} {}: {reason}", file.display())]
    TlsFile {
        kind: &'static str,
        file: PathBuf,
        reason: String,
    },
    /// The connection settings contradict each other.
    #[error("invalid datastore configuration: {0}")]
    Config(String),
    /// etcd refused or failed the operation.
    #[error("etcd {operation} {key} failed: {reason}")]
    Etcd {
        operation: &'static str,
        key: String,
        reason: String,
    },
    /// A key or value in etcd is not UTF-8 text, which the Calico data model never writes.
    #[error("{key}: the stored key or value is not UTF-8 text")]
    NotText { key: String },
}
