//! Errors by layer: Neutron's API ([`NeutronError`]), one Neutron object Calico cannot express
//! ([`TranslateError`]), and a sync pass ([`SyncError`]). Each decides its own log level.

use calico_datastore::DatastoreError;

use crate::keystone::AuthError;

/// Neutron's API did not answer as expected.
#[derive(Debug, thiserror::Error)]
pub enum NeutronError {
    /// The configured URL is not one the client can use.
    #[error("neutron url {url:?}: {reason}")]
    Url { url: String, reason: String },
    /// No connection, no answer in time, or the connection broke.
    #[error("neutron at {url} is unreachable: {reason}")]
    Unreachable { url: String, reason: String },
    /// An answer other than 2xx.
    #[error("neutron {method} {path}: HTTP {status}: {body}")]
    Status {
        method: String,
        path: String,
        status: u16,
        body: String,
    },
    /// A 2xx answer whose body is not what the API documents.
    #[error("neutron {path}: unexpected answer: {reason}")]
    Decode { path: String, reason: String },
    /// No token: Keystone refused the settings, or could not be asked (boxed: the largest).
    #[error(transparent)]
    Auth(Box<AuthError>),
    /// Neutron hides ports' bindings from the service user: nothing can be synced safely.
    #[error(
        "neutron shows port {id} without binding:host_id: its policy hides bindings from the \
         service user (Zed's default: admins only); give the user the admin role in its \
         project; nothing is written to etcd meanwhile"
    )]
    Policy { id: String },
}

impl From<AuthError> for NeutronError {
    fn from(error: AuthError) -> Self {
        NeutronError::Auth(Box::new(error))
    }
}

/// One Neutron object (port, security group or rule) that Calico cannot express. The caller
/// logs it and leaves the object out: never a half-written endpoint or profile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} {id}: {reason}")]
pub struct TranslateError {
    /// `port`, `subnet`, `security group` or `security group rule`.
    pub kind: &'static str,
    pub id: String,
    pub reason: String,
}

impl TranslateError {
    pub fn port(id: &str, reason: impl Into<String>) -> Self {
        Self::new("port", id, reason)
    }

    pub fn group(id: &str, reason: impl Into<String>) -> Self {
        Self::new("security group", id, reason)
    }

    pub fn rule(id: &str, reason: impl Into<String>) -> Self {
        Self::new("security group rule", id, reason)
    }

    /// `kind` names the object: `port`, `subnet`, `security group`, ...
    pub fn new(kind: &'static str, id: &str, reason: impl Into<String>) -> Self {
        TranslateError {
            kind,
            id: id.to_owned(),
            reason: reason.into(),
        }
    }

    /// Bad input from Neutron's users: a warning naming the object, and what happens to it.
    pub fn log(&self) {
        tracing::warn!(kind = self.kind, id = %self.id, "{self}; left out of etcd");
    }

    /// An object written to etcd that does not do all Neutron says: a warning naming it.
    pub fn log_caveat(&self) {
        tracing::warn!(kind = self.kind, id = %self.id, "{self}; written to etcd");
    }
}

/// A sync pass failed; etcd keeps what it had and the pass is retried.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error(transparent)]
    Neutron(#[from] NeutronError),
    #[error("etcd: {0}")]
    Datastore(#[from] DatastoreError),
}

impl SyncError {
    /// Neutron or etcd away is expected now and then (a warning; the loop retries with backoff).
    pub fn log(&self, retry_in: std::time::Duration) {
        tracing::warn!("{self}; etcd left as it is, retrying in {retry_in:?}");
    }
}
