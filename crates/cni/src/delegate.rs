//! The IPAM plugin the config names. `calico-ipam` runs in this process: the same code as the
//! `calico-ipam` binary (`ipam_plugin`), on the `calico` plugin's own etcd connection, with no
//! second process and no second connection. Any other plugin is called the way a runtime does:
//! the same environment with the command set, the same configuration on stdin.

use std::io::Write;
use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

use crate::config::NetConf;
use crate::spec::{CniError, CniResult, code};

/// The `ipam.type` that runs in this process.
pub const CALICO_IPAM: &str = "calico-ipam";

/// Where a `calico` call's IPAM runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IpamPlugin {
    /// `calico-ipam`, in this process (`ipam_plugin::{add, del, check}`).
    InProcess,
    /// Another plugin, found in `CNI_PATH` and run as a child process.
    Exec(String),
}

impl IpamPlugin {
    /// The config's `ipam.type`.
    pub fn of(conf: &NetConf) -> Result<IpamPlugin, CniError> {
        let plugin = &conf.ipam()?.plugin_type;
        Ok(match plugin.as_str() {
            CALICO_IPAM => IpamPlugin::InProcess,
            _ => IpamPlugin::Exec(plugin.clone()),
        })
    }
}

/// Finds `plugin` in the `CNI_PATH` directories.
pub fn find(plugin: &str, path: &[String]) -> Result<PathBuf, CniError> {
    if plugin.is_empty() || plugin.contains('/') {
        return Err(CniError::new(
            code::INVALID_CONFIG,
            format!("ipam.type {plugin:?} is not a plugin name"),
        ));
    }
    if path.is_empty() {
        return Err(CniError::new(
            code::INVALID_ENVIRONMENT,
            format!("CNI_PATH is not set, so the IPAM plugin {plugin} cannot be found"),
        ));
    }
    path.iter()
        .map(|dir| PathBuf::from(dir).join(plugin))
        .find(|candidate| candidate.is_file())
        .ok_or_else(|| {
            CniError::new(
                code::INVALID_CONFIG,
                format!(
                    "ipam.type: plugin {plugin:?} not found in CNI_PATH ({})",
                    path.join(":")
                ),
            )
        })
}

/// Runs `plugin` with `command` (ADD, DEL, CHECK) and `stdin`; returns its parsed stdout (None
/// when it printed nothing, as DEL and CHECK do). Its error object becomes ours, prefixed.
pub fn call(
    plugin: &str,
    path: &[String],
    command: &str,
    stdin: &[u8],
) -> Result<Option<Value>, CniError> {
    let program = find(plugin, path)?;
    let mut run = Command::new(&program);
    run.env("CNI_COMMAND", command);
    let out = calico_linux::output_with_input(&mut run, stdin).map_err(|e| {
        CniError::new(
            code::IO_FAILURE,
            format!("cannot run {}: {e}", program.display()),
        )
    })?;
    // Its log lines are the runtime's to see, as ours are: pass them on.
    let _ = std::io::stderr().write_all(&out.stderr);
    let text = String::from_utf8_lossy(&out.stdout);
    let parsed: Option<Value> = if text.trim().is_empty() {
        None
    } else {
        Some(serde_json::from_str(&text).map_err(|e| {
            CniError::new(
                code::DECODING_FAILURE,
                format!("IPAM plugin {plugin} printed something that is not JSON: {e}"),
            )
        })?)
    };
    if !out.status.success() {
        let object = parsed.unwrap_or_default();
        let inner = object
            .get("msg")
            .and_then(Value::as_str)
            .unwrap_or("no error object");
        let code = object
            .get("code")
            .and_then(Value::as_u64)
            .and_then(|c| u32::try_from(c).ok())
            .unwrap_or(code::IO_FAILURE);
        let details = object.get("details").and_then(Value::as_str).unwrap_or("");
        return Err(CniError::new(
            code,
            format!(
                "IPAM plugin {plugin} {command} failed ({}): {inner}",
                out.status
            ),
        )
        .with_details(details));
    }
    Ok(parsed)
}

/// Runs the IPAM plugin's ADD and reads its result.
pub fn ipam_add(plugin: &str, path: &[String], stdin: &[u8]) -> Result<CniResult, CniError> {
    let value = call(plugin, path, "ADD", stdin)?.ok_or_else(|| {
        CniError::new(
            code::DECODING_FAILURE,
            format!("IPAM plugin {plugin} printed no result"),
        )
    })?;
    let result = CniResult::from_json(&value, &format!("the result of IPAM plugin {plugin}"))?;
    if result.ips.is_empty() {
        return Err(CniError::new(
            code::IPAM,
            format!("IPAM plugin {plugin} assigned no address"),
        ));
    }
    Ok(result)
}
