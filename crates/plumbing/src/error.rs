//! Why plugging a workload in failed. The CNI plugin answers each as a kernel error (code 11),
//! the Docker driver as `{"Err": ...}`: the message names the interface, route or rule.

use calico_linux::{NetlinkError, SysctlError};

#[derive(Debug, thiserror::Error)]
pub enum PlumbingError {
    #[error("{0}")]
    Netlink(#[from] NetlinkError),
    #[error("{0}")]
    Sysctl(#[from] SysctlError),
    /// A route or rule the kernel refused, named as `ip` would be told to add it.
    #[error("{command} failed: {reason}")]
    Refused { command: String, reason: String },
    /// An interface the plan acts on is not where the plan says.
    #[error("{0}")]
    Missing(String),
}
