//! `calicoctl status`: this host as support first asks about it. Each part says why it is
//! missing instead of failing the whole report:
//!
//! | part | source |
//! | --- | --- |
//! | Felix health | `GET /liveness` and `/readiness` on Felix's health port (`HealthPort`, 9099) |
//! | last status report | `/calico/felix/v1/host/<host>/status` (written with a TTL: absent once Felix stops) |
//! | endpoints programmed | the host's endpoints (`/calico/v1/host/<host>/…`) against Felix's statuses (`/calico/felix/v1/host/<host>/…`) |
//! | BGP sessions | BIRD, as `calicoctl node status` shows them |
//!
//! Exit status 0 when Felix is live, ready and reporting; 1 otherwise.

use std::collections::BTreeMap;
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use calico_datastore::Datastore;
use calico_model::key::Prefix;
use calico_model::{Key, Value, parse_value};

use serde_json::json;

use super::node::{bird_sessions, sessions_json, write_sessions};
use super::{kernel_hostname, print_report};
use crate::cli::{Output, StatusArgs};

/// How long Felix's health endpoint may take to answer.
const HEALTH_TIMEOUT: Duration = Duration::from_secs(3);

/// Felix's answers on its health port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Health {
    Answered { live: bool, ready: bool },
    Unreachable(String),
}

pub async fn run(
    store: Option<&dyn Datastore>,
    store_error: Option<String>,
    args: &StatusArgs,
    real_out: &mut impl Write,
) -> anyhow::Result<ExitCode> {
    let host = args.hostname.clone().unwrap_or_else(kernel_hostname);
    let format = args.output.output;
    // In json and yaml the text goes nowhere; the parts are gathered into one document.
    let mut sink = std::io::sink();
    let text: &mut dyn Write = if format == Output::Table {
        &mut *real_out
    } else {
        &mut sink
    };
    let mut report = json!({ "host": host });
    let out = text;
    writeln!(out, "host: {host}")?;
    let health = felix_health(&args.felix_health_url).await;
    match &health {
        Health::Answered { live, ready } => writeln!(
            out,
            "Felix health ({}): {}, {}",
            args.felix_health_url,
            if *live { "live" } else { "NOT live" },
            if *ready { "ready" } else { "NOT ready" }
        )?,
        Health::Unreachable(_) => {}
    }
    report["felixHealth"] = match &health {
        Health::Answered { live, ready } => json!({
            "url": args.felix_health_url, "reachable": true, "live": live, "ready": ready,
            "error": null,
        }),
        Health::Unreachable(why) => json!({
            "url": args.felix_health_url, "reachable": false, "live": false, "ready": false,
            "error": why,
        }),
    };
    match &health {
        Health::Answered { .. } => {}
        Health::Unreachable(why) => writeln!(
            out,
            "Felix health: not reachable at {} ({why})",
            args.felix_health_url
        )?,
    }
    let reporting = match store {
        Some(store) => {
            report["datastore"] = json!({ "reachable": true, "error": null });
            datastore_part(store, &host, out, &mut report).await?
        }
        None => {
            let why = store_error.unwrap_or_default();
            report["datastore"] = json!({ "reachable": false, "error": why });
            report["lastReport"] = json!(null);
            report["endpoints"] = json!([]);
            writeln!(
                out,
                "datastore: not reachable ({why}): no status report, no endpoints"
            )?;
            false
        }
    };
    writeln!(out, "BGP sessions:")?;
    match bird_sessions(&args.bird) {
        Ok(sessions) => {
            write_sessions(&sessions, out)?;
            report["bgp"] = json!({
                "available": true, "error": null, "sessions": sessions_json(&sessions),
            });
        }
        Err(why) => {
            writeln!(out, "  not available: {why:#}")?;
            report["bgp"] = json!({
                "available": false, "error": format!("{why:#}"), "sessions": [],
            });
        }
    }
    let healthy = health
        == (Health::Answered {
            live: true,
            ready: true,
        })
        && reporting;
    if format != Output::Table {
        report["healthy"] = json!(healthy);
        print_report(format, &report, real_out)?;
    }
    Ok(if healthy {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The status report and the endpoints; returns whether Felix is reporting.
async fn datastore_part(
    store: &dyn Datastore,
    host: &str,
    out: &mut dyn Write,
    report: &mut serde_json::Value,
) -> anyhow::Result<bool> {
    let status_key = Key::FelixStatus {
        hostname: host.to_owned(),
    }
    .to_string();
    let reporting = match store.get(&status_key).await? {
        Some(pair) => {
            writeln!(
                out,
                "Felix last status report: {}",
                describe_report(&pair.value)
            )?;
            report["lastReport"] = match parse_value(&Key::parse(&status_key)?, &pair.value) {
                Ok(Value::FelixStatus(s)) => json!({
                    "time": s.time, "uptimeSecs": s.uptime, "dataplane": s.dataplane,
                    "raw": pair.value,
                }),
                _ => json!({ "time": null, "uptimeSecs": null, "raw": pair.value }),
            };
            true
        }
        None => {
            writeln!(
                out,
                "Felix last status report: none ({status_key} is absent: Felix is not running \
                 on {host}, or its report expired)"
            )?;
            report["lastReport"] = json!(null);
            false
        }
    };
    let hostname = host.to_owned();
    let configured = store
        .list(
            &Prefix::Host {
                hostname: hostname.clone(),
            }
            .to_string(),
        )
        .await?;
    let reported = store.list(&Prefix::Status { hostname }.to_string()).await?;
    let rows = endpoint_rows(
        configured
            .iter()
            .map(|p| (p.key.as_str(), p.value.as_str())),
        reported.iter().map(|p| (p.key.as_str(), p.value.as_str())),
    );
    write_endpoints(&rows, out)?;
    report["endpoints"] = rows
        .iter()
        .map(|(path, status)| {
            let (status, configured) = match status.strip_suffix(" (not configured)") {
                Some(status) => (status, false),
                None => (status.as_str(), true),
            };
            json!({ "endpoint": path, "status": status, "configured": configured })
        })
        .collect();
    Ok(reporting)
}

/// `time (uptime Ns)` of a Felix status value, or the raw value when it does not read.
fn describe_report(raw: &str) -> String {
    let key = Key::FelixStatus {
        hostname: "h".to_owned(),
    };
    match parse_value(&key, raw) {
        Ok(Value::FelixStatus(s)) => match s.dataplane {
            Some(dataplane) => format!(
                "{} (uptime {:.0}s, dataplane {dataplane})",
                s.time, s.uptime
            ),
            None => format!("{} (uptime {:.0}s)", s.time, s.uptime),
        },
        _ => format!("{raw} (unreadable)"),
    }
}

/// Each endpoint of the host (its path below the host, e.g. `endpoint/eth0`) with the status
/// Felix reported for it ("not reported" when none). Statuses of endpoints that are not
/// configured are listed too, as "(not configured)".
pub fn endpoint_rows<'a>(
    configured: impl Iterator<Item = (&'a str, &'a str)>,
    reported: impl Iterator<Item = (&'a str, &'a str)>,
) -> BTreeMap<String, String> {
    let mut rows = BTreeMap::new();
    for (key, _) in configured {
        if let Ok(Key::WorkloadEndpoint(_) | Key::HostEndpoint(_)) = Key::parse(key) {
            rows.insert(below_host(key), "not reported".to_owned());
        }
    }
    for (key, value) in reported {
        let Ok(parsed @ (Key::WorkloadEndpointStatus(_) | Key::HostEndpointStatus(_))) =
            Key::parse(key)
        else {
            continue;
        };
        let status = match parse_value(&parsed, value) {
            Ok(Value::EndpointStatus(s)) => format!("{:?}", s.status).to_lowercase(),
            _ => format!("unreadable: {value}"),
        };
        let path = below_host(key);
        let entry = rows.entry(path).or_insert_with(String::new);
        *entry = if entry.is_empty() {
            format!("{status} (not configured)")
        } else {
            status
        };
    }
    rows
}

/// `/calico/…/host/<host>/rest` → `rest`.
fn below_host(key: &str) -> String {
    key.split_once("/host/")
        .and_then(|(_, rest)| rest.split_once('/'))
        .map_or_else(|| key.to_owned(), |(_, rest)| rest.to_owned())
}

fn write_endpoints(rows: &BTreeMap<String, String>, out: &mut dyn Write) -> std::io::Result<()> {
    let up = rows.values().filter(|s| *s == "up").count();
    writeln!(
        out,
        "endpoints: {} configured or reported, {up} up",
        rows.len()
    )?;
    if rows.is_empty() {
        return Ok(());
    }
    let width = rows.keys().map(String::len).max().unwrap_or(0).max(8);
    writeln!(out, "  {:<width$}  STATUS", "ENDPOINT")?;
    for (path, status) in rows {
        writeln!(out, "  {path:<width$}  {status}")?;
    }
    Ok(())
}

/// Liveness and readiness from Felix's health port.
pub async fn felix_health(url: &str) -> Health {
    let client = calico_http::Client::plain()
        .named("calicoctl")
        .with_timeout(HEALTH_TIMEOUT);
    let ask = |path: &'static str| {
        let client = client.clone();
        async move {
            match client.get(url, path).await {
                Ok(answer) => Ok(answer.status == 200),
                Err(why) => Err(why.to_string()),
            }
        }
    };
    match (ask("/liveness").await, ask("/readiness").await) {
        (Ok(live), Ok(ready)) => Health::Answered { live, ready },
        (Err(why), _) | (_, Err(why)) => Health::Unreachable(why),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_matched_with_their_statuses() {
        let configured = [
            ("/calico/v1/host/h1/endpoint/eth0", "{}"),
            ("/calico/v1/host/h1/workload/k8s/w1/endpoint/e1", "{}"),
            ("/calico/v1/host/h1/config/LogSeverityScreen", "info"),
        ];
        let reported = [
            (
                "/calico/felix/v1/host/h1/endpoint/eth0",
                r#"{"status": "up"}"#,
            ),
            (
                "/calico/felix/v1/host/h1/endpoint/old",
                r#"{"status": "down"}"#,
            ),
            ("/calico/felix/v1/host/h1/status", "{}"),
        ];
        let rows = endpoint_rows(configured.into_iter(), reported.into_iter());
        let rows: Vec<(&str, &str)> = rows.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(
            rows,
            [
                ("endpoint/eth0", "up"),
                ("endpoint/old", "down (not configured)"),
                ("workload/k8s/w1/endpoint/e1", "not reported"),
            ]
        );
    }
}
