//! Kernel settings under `/proc/sys`, per network namespace (`/proc/sys/net` shows the
//! namespace of the thread that opens it).

use crate::Netns;
use crate::rtnl::in_netns;

/// A setting could not be read or written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("sysctl {path} in {netns}: {reason}")]
pub struct SysctlError {
    pub path: String,
    pub netns: String,
    pub reason: String,
}

/// Reads `/proc/sys/<path>` (e.g. `net/ipv4/ip_forward`), trimmed.
pub fn get_sysctl(netns: &Netns, path: &str) -> Result<String, SysctlError> {
    let file = format!("/proc/sys/{path}");
    in_netns(netns, || std::fs::read_to_string(&file))
        .map(|v| v.trim().to_owned())
        .map_err(|e| error(netns, path, e))
}

/// Writes `value` to `/proc/sys/<path>` unless it already holds it; returns whether it changed.
pub fn set_sysctl(netns: &Netns, path: &str, value: &str) -> Result<bool, SysctlError> {
    let file = format!("/proc/sys/{path}");
    in_netns(netns, || {
        if std::fs::read_to_string(&file)?.trim() == value {
            return Ok(false);
        }
        std::fs::write(&file, value)?;
        Ok(true)
    })
    .map_err(|e| error(netns, path, e))
}

fn error(netns: &Netns, path: &str, e: std::io::Error) -> SysctlError {
    SysctlError {
        path: path.to_owned(),
        netns: netns.to_string(),
        reason: e.to_string(),
    }
}
