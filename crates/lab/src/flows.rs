//! The lab's flow aggregator: `calico-flows` in the fabric namespace beside etcd, every Felix
//! sending its flow records to it (`FlowLogsEnabled`), and a relay so that the caller's shell
//! (`calicoctl flows`, a browser on the console) reaches it on loopback.
//!
//! ```text
//!   host Felix ── FlowLogsAggregator=10.99.0.1:7480 ──► calico-flows (fabric) ◄── relay ◄── caller
//! ```

use std::time::Duration;

use crate::poll::{self, Deadline, Progress};
use crate::processes::{self, sibling_binary};
use crate::state::{FABRIC_IP, Lab};

/// Where the aggregator listens on the fabric.
pub const FLOWS_PORT: u16 = 7480;

/// How often the lab's Felixes send their flows: shorter than Felix's default (15 s) so that a
/// flow shows within seconds in the lab.
pub const LAB_FLUSH_SECS: u32 = 5;

/// The Felix settings that send a lab's flows to its aggregator.
pub fn felix_env() -> Vec<(String, String)> {
    vec![
        ("FELIX_FLOWLOGSENABLED".to_owned(), "true".to_owned()),
        (
            "FELIX_FLOWLOGSAGGREGATOR".to_owned(),
            format!("{FABRIC_IP}:{FLOWS_PORT}"),
        ),
        (
            "FELIX_FLOWLOGSFLUSHINTERVAL".to_owned(),
            LAB_FLUSH_SECS.to_string(),
        ),
    ]
}

/// Starts the aggregator in the fabric and the relay to it; returns the URL the caller reaches
/// it at, once it answers `/health`.
pub async fn start(lab: &mut Lab) -> anyhow::Result<String> {
    let binary = sibling_binary("calico-flows", "calico-flows")?;
    let listen = format!("{FABRIC_IP}:{FLOWS_PORT}");
    let fabric = Lab::fabric_netns(&lab.name);
    // The lab's records are kept in its own state directory, gone with `down`.
    let log = lab.log_path("calico-flows");
    let store = log.with_file_name("flows-store");
    let store = store.to_string_lossy();
    let pid = processes::spawn(
        Some(&fabric),
        &binary,
        &[
            "--listen",
            &listen,
            "--bucket",
            &LAB_FLUSH_SECS.to_string(),
            "--store-dir",
            &store,
        ],
        &[],
        &lab.log_path("calico-flows"),
    )?;
    lab.pids.push(pid);
    let relay = processes::start_relay_to(lab, &listen, "flows-relay").await?;
    lab.pids.push(relay.pid);
    let url = format!("http://127.0.0.1:{}", relay.port);
    let client = calico_http::Client::plain().with_timeout(Duration::from_secs(2));
    let log = lab.log_path("calico-flows");
    poll::until(
        Deadline::after(Duration::from_secs(20)),
        "calico-flows to answer /health",
        &log,
        async || {
            Ok(match client.get(&url, "/health").await {
                Ok(answer) if answer.status == 200 => Progress::Done,
                Ok(answer) => Progress::Waiting(format!("/health answered {}", answer.status)),
                Err(error) => Progress::Waiting(error.to_string()),
            })
        },
    )
    .await?;
    Ok(url)
}
