//! The agent loop: configuration from etcd, waiting for `/calico/v1/Ready`, then datastore
//! updates into the calculator and the calculator's changes into the dataplane, with a periodic
//! full sync that repairs drift, and a status report into etcd.

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use calico_calc::Calculator;
use calico_dataplane::Dataplane;
use calico_datastore::{Datastore, EtcdConfig, EtcdDatastore, WatchEvent};
use calico_linux::Netns;
use calico_model::Key;
use tokio::time::{MissedTickBehavior, interval, sleep, timeout};

use crate::config::{Bootstrap, Config, Inputs};

/// How often "wait-for-ready" is logged while `/calico/v1/Ready` is not true.
const READY_LOG_EVERY: Duration = Duration::from_secs(10);

/// Connects to etcd, retrying (and saying so) until it answers.
pub async fn connect(bootstrap: &Bootstrap) -> EtcdDatastore {
    let config = EtcdConfig {
        endpoints: bootstrap.etcd_endpoints.clone(),
        ca_file: bootstrap.etcd_ca_file.clone(),
        cert_file: bootstrap.etcd_cert_file.clone(),
        key_file: bootstrap.etcd_key_file.clone(),
        ..EtcdConfig::default()
    };
    let mut delay = Duration::from_millis(200);
    loop {
        match EtcdDatastore::connect(config.clone()).await {
            Ok(store) => return store,
            Err(error) => {
                tracing::warn!(%error, "cannot reach etcd yet; retrying in {delay:?}");
                sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(5));
            }
        }
    }
}

/// Reads the global and this host's config from etcd and loads the whole configuration.
pub async fn load_config(
    store: &dyn Datastore,
    mut inputs: Inputs,
    hostname: &str,
    bootstrap: &Bootstrap,
) -> anyhow::Result<Config> {
    inputs.etcd_global = config_values(store, "/calico/v1/config/").await?;
    let host = format!("/calico/v1/host/{}/config/", bootstrap.hostname);
    inputs.etcd_host = config_values(store, &host).await?;
    Ok(Config::load(&inputs, hostname)?)
}

async fn config_values(
    store: &dyn Datastore,
    prefix: &str,
) -> anyhow::Result<BTreeMap<String, String>> {
    let pairs = store.list(prefix).await?;
    Ok(pairs
        .into_iter()
        .filter_map(|p| {
            let name = p.key.strip_prefix(prefix)?;
            (!name.contains('/')).then(|| (name.to_owned(), p.value))
        })
        .collect())
}

/// Waits until `/calico/v1/Ready` is `true`.
pub async fn wait_for_ready(store: &dyn Datastore) {
    let mut last_log: Option<Instant> = None;
    loop {
        let ready = store
            .get("/calico/v1/Ready")
            .await
            .ok()
            .flatten()
            .is_some_and(|p| p.value.trim() == "true");
        if ready {
            tracing::info!("datastore is ready");
            return;
        }
        if last_log.is_none_or(|t| t.elapsed() >= READY_LOG_EVERY) {
            tracing::info!("wait-for-ready: /calico/v1/Ready is not true yet");
            last_log = Some(Instant::now());
        }
        sleep(Duration::from_millis(500)).await;
    }
}

/// Runs until the process is stopped.
pub async fn run(store: &dyn Datastore, config: &Config, netns: Netns) -> anyhow::Result<()> {
    let hostname = config.bootstrap.hostname.clone();
    let started = Instant::now();
    let mut calc = Calculator::new(&hostname);
    let mut dataplane = Dataplane::new(netns, config.render());
    let mut watch = store.watch("/calico/v1/").await?;
    let mut in_sync = false;
    let mut synced = false;
    let mut refresh = interval(config.iptables_refresh);
    refresh.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut report = interval(config.reporting_interval);
    report.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut first_report = true;
    loop {
        tokio::select! {
            event = watch.next() => {
                let Some(event) = event else {
                    anyhow::bail!("the datastore watch ended");
                };
                in_sync |= handle(&mut calc, event, &hostname);
                // Take whatever else is already waiting, then program once for the batch.
                while let Ok(Some(event)) = timeout(Duration::ZERO, watch.next()).await {
                    in_sync |= handle(&mut calc, event, &hostname);
                }
                if in_sync {
                    program(&mut calc, &mut dataplane, &mut synced)?;
                }
            }
            _ = refresh.tick() => {
                if synced {
                    let repairs = dataplane.sync(calc.state()).context("periodic sync")?;
                    if !repairs.is_empty() {
                        tracing::warn!(?repairs, "repaired dataplane drift");
                    }
                }
            }
            _ = report.tick() => {
                let status = status_json(started.elapsed(), first_report);
                let key = format!("/calico/felix/v1/host/{hostname}/status");
                match store.put(&key, &status).await {
                    Ok(_) => first_report = false,
                    Err(error) => tracing::warn!(%error, "cannot write status"),
                }
            }
        }
    }
}

/// Feeds one watch event to the calculator; returns true on `InSync`.
fn handle(calc: &mut Calculator, event: WatchEvent, hostname: &str) -> bool {
    match event {
        WatchEvent::Put(pair) => {
            warn_on_config_change(&pair.key, hostname);
            let applied = calc.apply(&pair.key, Some(&pair.value));
            if let calico_calc::Applied::Invalid { reason } = applied {
                tracing::warn!(
                    "Validation failed for {}, treating as missing: {reason}",
                    pair.key
                );
            }
            false
        }
        WatchEvent::Delete { key, .. } => {
            warn_on_config_change(&key, hostname);
            calc.apply(&key, None);
            false
        }
        WatchEvent::InSync { revision } => {
            tracing::info!(revision, "in sync with the datastore");
            true
        }
    }
}

fn warn_on_config_change(key: &str, hostname: &str) {
    let config = match Key::parse(key) {
        Ok(Key::GlobalConfig { .. }) => true,
        Ok(Key::HostConfig { hostname: h, .. }) => h == hostname,
        _ => false,
    };
    if config {
        tracing::warn!(
            key,
            "Felix configuration changed in etcd; restart Felix to apply it"
        );
    }
}

/// Programs the dataplane: a full sync the first time (and whenever `synced` is false), then
/// only the calculator's changes.
fn program(
    calc: &mut Calculator,
    dataplane: &mut Dataplane,
    synced: &mut bool,
) -> anyhow::Result<()> {
    let changes = calc.take_changes();
    let started = Instant::now();
    if !*synced {
        let repairs = dataplane.sync(calc.state()).context("initial sync")?;
        tracing::info!(?repairs, elapsed = ?started.elapsed(), "dataplane programmed");
        *synced = true;
    } else if !changes.is_empty() {
        dataplane
            .apply(calc.state(), &changes)
            .context("applying changes")?;
        tracing::debug!(elapsed = ?started.elapsed(), "changes applied");
    }
    Ok(())
}

/// `{"time": ..., "uptime": ..., "first_update": ...}` as Felix 1.x wrote it.
fn status_json(uptime: Duration, first_update: bool) -> String {
    format!(
        r#"{{"time": "{}", "uptime": {:.1}, "first_update": {first_update}}}"#,
        rfc3339(SystemTime::now()),
        uptime.as_secs_f64()
    )
}

/// `2016-06-01T12:00:00Z` for a time (UTC, whole seconds).
fn rfc3339(time: SystemTime) -> String {
    let secs = time.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days as i64);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

/// The proleptic Gregorian date of a day count since 1970-01-01.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_dates() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let t = UNIX_EPOCH + Duration::from_secs(1_464_782_400); // 2016-06-01T12:00:00Z
        assert_eq!(rfc3339(t), "2016-06-01T12:00:00Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400); // 2000-02-29
        assert_eq!(&rfc3339(leap)[..10], "2000-02-29");
    }
}
