//! What Felix tells monitoring: Prometheus metrics and the health endpoint (liveness, and
//! readiness = in sync with the datastore and the dataplane programmed), both served with axum.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::http::{StatusCode, header};
use axum::routing::get;
use calico_dataplane::Written;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;

use crate::core::Metric;

/// Labels naming the kernel tool that failed: `tool="iptables"`, `"ipset"`, `"netlink"`, ...
type ToolLabels = Vec<(String, String)>;

/// Felix's metrics; cheap to clone (shared).
#[derive(Debug, Clone)]
pub struct Metrics {
    registry: Arc<Registry>,
    /// Datastore updates (puts and deletes) received.
    pub updates: Counter,
    /// The datastore revision of the last update the dataplane has programmed.
    pub applied_revision: Gauge,
    /// Seconds to apply one batch of changes (incremental) to the dataplane.
    pub apply_seconds: Histogram,
    /// Seconds for a full sync of the dataplane (start-up and periodic refresh).
    pub sync_seconds: Histogram,
    /// Full resyncs with the datastore (start-up and after reconnecting).
    pub resyncs: Counter,
    /// Things a periodic sync found changed behind Felix's back and put back.
    pub repairs: Counter,
    /// Failed kernel operations, by tool.
    pub failures: Family<ToolLabels, Counter>,
    /// Local endpoints programmed.
    pub endpoints: Gauge,
    /// Bytes of restore input written to the kernel, by tool (`iptables`, `ipset`).
    pub written_bytes: Family<ToolLabels, Counter>,
    /// iptables chains written (declared in restore input: written, flushed or deleted).
    pub written_chains: Counter,
    /// Operations of nf_tables transactions written (rules, elements, chains, sets).
    pub written_nft_ops: Counter,
    /// Flow logs: logged packets read and dropped, records made and dropped, and the sender's
    /// counts, by `what`.
    pub flow_logs: Family<ToolLabels, Counter>,
    /// 1 for the firewall backend that runs (`backend="iptables"` or `"nftables"`), 0 for the
    /// other.
    pub backend: Family<ToolLabels, Gauge>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("felix");
        let updates = Counter::default();
        registry.register(
            "datastore_updates",
            "Datastore updates received",
            updates.clone(),
        );
        let applied_revision = Gauge::default();
        registry.register(
            "applied_revision",
            "Datastore revision of the last update programmed into the dataplane",
            applied_revision.clone(),
        );
        let buckets = || Histogram::new(exponential_buckets(0.0005, 2.0, 16));
        let apply_seconds = buckets();
        registry.register(
            "dataplane_apply_seconds",
            "Time to apply one batch of changes to the dataplane",
            apply_seconds.clone(),
        );
        let sync_seconds = buckets();
        registry.register(
            "dataplane_sync_seconds",
            "Time for a full sync of the dataplane",
            sync_seconds.clone(),
        );
        let resyncs = Counter::default();
        registry.register(
            "resyncs",
            "Full resyncs with the datastore",
            resyncs.clone(),
        );
        let repairs = Counter::default();
        registry.register(
            "dataplane_repairs",
            "Drift found by a periodic sync and put back",
            repairs.clone(),
        );
        let failures = Family::<ToolLabels, Counter>::default();
        registry.register(
            "dataplane_failures",
            "Failed kernel operations, by tool",
            failures.clone(),
        );
        let endpoints = Gauge::default();
        registry.register(
            "local_endpoints",
            "Local endpoints programmed",
            endpoints.clone(),
        );
        let written_bytes = Family::<ToolLabels, Counter>::default();
        registry.register(
            "dataplane_written_bytes",
            "Bytes of restore input written to the kernel, by tool",
            written_bytes.clone(),
        );
        let written_chains = Counter::default();
        registry.register(
            "dataplane_written_chains",
            "iptables chains written, flushed or deleted",
            written_chains.clone(),
        );
        let written_nft_ops = Counter::default();
        registry.register(
            "dataplane_written_nft_ops",
            "Operations of nf_tables transactions written (rules, elements, chains, sets)",
            written_nft_ops.clone(),
        );
        let flow_logs = Family::<ToolLabels, Counter>::default();
        registry.register(
            "flow_logs",
            "Flow logs: packets logged and dropped, records made, dropped, sent, accepted, refused",
            flow_logs.clone(),
        );
        let backend = Family::<ToolLabels, Gauge>::default();
        registry.register(
            "dataplane_backend",
            "1 for the firewall backend that programs the kernel (iptables or nftables)",
            backend.clone(),
        );
        Metrics {
            registry: Arc::new(registry),
            updates,
            applied_revision,
            apply_seconds,
            sync_seconds,
            resyncs,
            repairs,
            failures,
            endpoints,
            written_bytes,
            written_chains,
            written_nft_ops,
            flow_logs,
            backend,
        }
    }

    /// Says which firewall backend runs.
    pub fn set_backend(&self, running: &str) {
        for name in ["iptables", "nftables"] {
            let labels = vec![("backend".to_owned(), name.to_owned())];
            self.backend
                .get_or_create(&labels)
                .set(i64::from(name == running));
        }
    }

    /// Brings the written-bytes and -chains counters up to the dataplane's running totals
    /// (which only grow, and which only this agent reads).
    pub fn count_written(&self, written: &Written) {
        let catch_up = |counter: &Counter, total: &AtomicU64| {
            let total = total.load(Ordering::Relaxed);
            counter.inc_by(total.saturating_sub(counter.get()));
        };
        for (tool, total) in [
            ("iptables", &written.iptables_bytes),
            ("ipset", &written.ipset_bytes),
        ] {
            let labels = vec![("tool".to_owned(), tool.to_owned())];
            catch_up(&self.written_bytes.get_or_create(&labels), total);
        }
        catch_up(&self.written_chains, &written.chains);
        catch_up(&self.written_nft_ops, &written.nft_ops);
    }

    /// Records what the agent's core decided about a metric.
    pub fn record(&self, metric: &Metric) {
        match metric {
            Metric::Updates(n) => {
                self.updates.inc_by(*n);
            }
            Metric::Resync => {
                self.resyncs.inc();
            }
            Metric::Failed(tool) => self.failed(tool),
            Metric::FullSync(took) => self.sync_seconds.observe(took.as_secs_f64()),
            Metric::Applied(took) => self.apply_seconds.observe(took.as_secs_f64()),
            Metric::Repaired => {
                self.repairs.inc();
            }
            Metric::Programmed {
                revision,
                endpoints,
            } => {
                self.applied_revision.set(*revision);
                self.endpoints
                    .set(i64::try_from(*endpoints).unwrap_or(i64::MAX));
            }
            Metric::Backend(kind) => self.set_backend(kind.name()),
        }
    }

    /// Brings the flow-log counters up to the running flow logs' totals.
    pub fn count_flow_logs(&self, flow_logs: &crate::flowlogs::FlowLogs) {
        for (what, total) in flow_logs.totals() {
            let labels = vec![("what".to_owned(), what.to_owned())];
            let counter = self.flow_logs.get_or_create(&labels);
            counter.inc_by(total.saturating_sub(counter.get()));
        }
    }

    /// Counts a failure of `tool`.
    pub fn failed(&self, tool: &str) {
        self.failures
            .get_or_create(&vec![("tool".to_owned(), tool.to_owned())])
            .inc();
    }

    /// The text exposition format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        encode(&mut out, &self.registry).expect("writing to a String cannot fail");
        out
    }
}

/// Liveness and readiness, shared between the agent loop and the health server.
#[derive(Debug, Clone, Default)]
pub struct Health {
    inner: Arc<HealthInner>,
}

#[derive(Debug, Default)]
struct HealthInner {
    /// Seconds since the epoch of the agent loop's last heartbeat.
    heartbeat: AtomicU64,
    ready: AtomicBool,
}

/// The loop is live if it beat within this long.
const LIVENESS_WINDOW: Duration = Duration::from_secs(60);

impl Health {
    /// The agent loop is running.
    pub fn beat(&self) {
        self.inner.heartbeat.store(now_secs(), Ordering::Relaxed);
    }

    /// In sync with the datastore, and the dataplane programmed (or not).
    pub fn set_ready(&self, ready: bool) {
        self.inner.ready.store(ready, Ordering::Relaxed);
    }

    pub fn live(&self) -> bool {
        let last = self.inner.heartbeat.load(Ordering::Relaxed);
        last != 0 && now_secs().saturating_sub(last) <= LIVENESS_WINDOW.as_secs()
    }

    pub fn ready(&self) -> bool {
        self.live() && self.inner.ready.load(Ordering::Relaxed)
    }
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// `/liveness` and `/readiness`: 200 or 503.
pub fn health_routes(health: Health) -> Router {
    let answer = |ok: bool, what: &str| match ok {
        true => (StatusCode::OK, format!("{what}\n")),
        false => (StatusCode::SERVICE_UNAVAILABLE, format!("not {what}\n")),
    };
    let live = health.clone();
    Router::new()
        .route(
            "/liveness",
            get(move || async move { answer(live.live(), "live") }),
        )
        .route(
            "/readiness",
            get(move || async move { answer(health.ready(), "ready") }),
        )
}

/// `/metrics`, in the Prometheus text format.
pub fn metrics_routes(metrics: Metrics) -> Router {
    Router::new().route(
        "/metrics",
        get(move || async move {
            (
                [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
                metrics.render(),
            )
        }),
    )
}

/// Serves `routes` on `listener` until the process ends (anything else: 404; methods other
/// than GET: 405).
pub async fn serve(listener: TcpListener, routes: Router) {
    if let Err(error) = axum::serve(listener, routes).await {
        tracing::error!("the HTTP server stopped: {error}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_render_with_their_names() {
        let metrics = Metrics::new();
        metrics.applied_revision.set(42);
        metrics.failed("iptables");
        metrics.apply_seconds.observe(0.003);
        let written = Written::default();
        written.ipset_bytes.store(120, Ordering::Relaxed);
        metrics.count_written(&written);
        written.ipset_bytes.store(200, Ordering::Relaxed);
        written.chains.store(3, Ordering::Relaxed);
        metrics.count_written(&written);
        let text = metrics.render();
        assert!(text.contains("felix_applied_revision 42"), "{text}");
        assert!(
            text.contains(r#"felix_dataplane_failures_total{tool="iptables"} 1"#),
            "{text}"
        );
        assert!(
            text.contains("felix_dataplane_apply_seconds_count 1"),
            "{text}"
        );
        assert!(
            text.contains(r#"felix_dataplane_written_bytes_total{tool="ipset"} 200"#),
            "{text}"
        );
        assert!(
            text.contains(r#"felix_dataplane_written_bytes_total{tool="iptables"} 0"#),
            "{text}"
        );
        assert!(
            text.contains("felix_dataplane_written_chains_total 3"),
            "{text}"
        );
    }

    #[test]
    fn readiness_needs_a_live_loop() {
        let health = Health::default();
        health.set_ready(true);
        assert!(!health.ready(), "no heartbeat yet");
        health.beat();
        assert!(health.live() && health.ready());
        health.set_ready(false);
        assert!(!health.ready());
    }

    /// One HTTP/1.1 request to the server; the status line and the body.
    async fn request(addr: std::net::SocketAddr, method: &str, path: &str) -> (String, String) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let text = format!("{method} {path} HTTP/1.1\r\nHost: felix\r\nConnection: close\r\n\r\n");
        stream.write_all(text.as_bytes()).await.unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        let status = response.lines().next().unwrap_or("").to_owned();
        let body = response.split("\r\n\r\n").nth(1).unwrap_or("").to_owned();
        (status, body)
    }

    #[tokio::test]
    async fn the_http_endpoints_answer_as_documented() {
        let health = Health::default();
        let metrics = Metrics::new();
        metrics.applied_revision.set(7);
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let routes = health_routes(health.clone()).merge(metrics_routes(metrics));
        tokio::spawn(serve(listener, routes));

        let (status, body) = request(addr, "GET", "/readiness").await;
        assert!(status.contains("503"), "{status}");
        assert_eq!(body, "not ready\n");
        health.beat();
        health.set_ready(true);
        let (status, body) = request(addr, "GET", "/readiness").await;
        assert!(status.contains("200"), "{status}");
        assert_eq!(body, "ready\n");
        let (status, body) = request(addr, "GET", "/liveness").await;
        assert!(
            status.contains("200") && body == "live\n",
            "{status} {body}"
        );
        let (status, body) = request(addr, "GET", "/metrics").await;
        assert!(status.contains("200"), "{status}");
        assert!(body.contains("felix_applied_revision 7"), "{body}");
        let (status, _) = request(addr, "GET", "/nothing").await;
        assert!(status.contains("404"), "{status}");
        let (status, _) = request(addr, "POST", "/metrics").await;
        assert!(status.contains("405"), "{status}");
    }
}
