//! A configuration change in etcd: read again, compared with the running configuration, and
//! either nothing, applied live, or a restart.

use std::collections::BTreeSet;

use calico_datastore::DatastoreError;
use calico_model::Key;

use super::ConfigValues;
use crate::config::{Config, Inputs, unknown_names};

/// What a configuration change in etcd means for the running Felix.
#[derive(Debug)]
pub(super) enum Reload {
    /// Nothing Felix uses changed (or the new configuration is invalid, or unreadable: it
    /// keeps the old).
    Same,
    /// Only parameters Felix applies while running changed.
    Live(Box<Config>),
    /// These parameters changed and apply only at start.
    Restart(Vec<&'static str>),
}

/// Compares the configuration read from etcd with the `running` one; `inputs` takes the values
/// read, `warned` what was warned about.
pub(super) fn reload(
    running: &Config,
    inputs: &mut Inputs,
    warned: &mut BTreeSet<String>,
    read: Result<ConfigValues, DatastoreError>,
) -> Reload {
    let values = match read {
        Ok(values) => values,
        Err(error) => {
            tracing::warn!(
                "cannot read the configuration in etcd (keeping the running one): {error}"
            );
            return Reload::Same;
        }
    };
    inputs.etcd_global = values.global;
    inputs.etcd_host = values.host;
    warn_unknown(inputs, warned);
    let new = match Config::load(inputs, &running.bootstrap.hostname) {
        Ok(new) => new,
        Err(error) => {
            tracing::warn!("{error}: keeping the running configuration");
            return Reload::Same;
        }
    };
    for warning in &new.warnings {
        if warned.insert(warning.clone()) {
            tracing::warn!("{warning}");
        }
    }
    compare(running, new)
}

fn compare(running: &Config, new: Config) -> Reload {
    let restart = running.restart_needed(&new);
    if !restart.is_empty() {
        return Reload::Restart(restart);
    }
    let live = running.live_changes(&new);
    if live.is_empty() {
        return Reload::Same;
    }
    for name in &live {
        let value = new.report.iter().find(|(n, ..)| n == name);
        if let Some((_, value, source)) = value {
            tracing::info!("config {name} = {value:?} ({source}): applied while running");
        }
    }
    Reload::Live(Box::new(new))
}

/// Warns about each name in the inputs that is not a Felix parameter (once per name and place).
pub(super) fn warn_unknown(inputs: &Inputs, warned: &mut BTreeSet<String>) {
    for (name, source) in unknown_names(inputs) {
        if warned.insert(format!("{name} {source}")) {
            tracing::warn!(
                "ignoring {name:?} from {source}: not a Felix parameter that can be set there \
                 (see docs/configuration.md)"
            );
        }
    }
}

/// Whether a key is global or this host's Felix configuration.
pub(super) fn is_config(key: &Key, hostname: &str) -> bool {
    match key {
        Key::GlobalConfig { .. } => true,
        Key::HostConfig { hostname: h, .. } => h == hostname,
        _ => false,
    }
}
