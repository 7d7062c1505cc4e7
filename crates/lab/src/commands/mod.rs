//! One module per `calico-lab` command: its arguments and what it does. `main.rs` holds the
//! command line and dispatches; the work itself lives in the library (`calico_lab`).

pub mod check;
pub mod connect_rate;
pub mod demo;
pub mod down;
pub mod env;
pub mod etcd;
pub mod exec;
pub mod flow;
pub mod probe;
pub mod relay;
pub mod restart_felix;
pub mod restart_neutron;
pub mod serve;
pub mod soak;
pub mod supervise;
pub mod up;
pub mod vm;
pub mod wait;
pub mod wait_open;
pub mod workload;

use anyhow::bail;

/// `NAME=VALUE` items as pairs; `what` names the option in errors.
pub fn pairs(items: &[String], what: &str) -> anyhow::Result<Vec<(String, String)>> {
    items
        .iter()
        .map(|item| match item.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
            _ => bail!("{what} {item:?} must be NAME=VALUE"),
        })
        .collect()
}

/// `--felix-config NAME=VALUE` items as Felix's environment (`FELIX_NAME=VALUE`).
pub fn felix_env(items: &[String]) -> anyhow::Result<Vec<(String, String)>> {
    Ok(pairs(items, "--felix-config")?
        .into_iter()
        .map(|(k, v)| (format!("FELIX_{}", k.to_ascii_uppercase()), v))
        .collect())
}
