//! What Felix tells monitoring: Prometheus metrics and the health endpoint (liveness, and
//! readiness = in sync with the datastore and the dataplane programmed), both over a minimal
//! HTTP server (GET only).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

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

/// What the HTTP server answers: status code and body for a path.
pub type Route = Arc<dyn Fn(&str) -> Option<(u16, String)> + Send + Sync>;

/// `/liveness` and `/readiness`: 200 or 503.
pub fn health_routes(health: Health) -> Route {
    Arc::new(move |path| {
        let (ok, what) = match path {
            "/liveness" => (health.live(), "live"),
            "/readiness" => (health.ready(), "ready"),
            _ => return None,
        };
        Some(if ok {
            (200, format!("{what}\n"))
        } else {
            (503, format!("not {what}\n"))
        })
    })
}

/// `/metrics`.
pub fn metrics_routes(metrics: Metrics) -> Route {
    Arc::new(move |path| (path == "/metrics").then(|| (200, metrics.render())))
}

/// Serves GET requests on `listener` until the process ends.
pub async fn serve(listener: TcpListener, route: Route) {
    loop {
        let Ok((mut stream, _)) = listener.accept().await else {
            continue;
        };
        let route = route.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            let mut request = Vec::new();
            let mut buf = [0u8; 1024];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < 8192 {
                let read = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf));
                match read.await {
                    Ok(Ok(n)) if n > 0 => request.extend_from_slice(&buf[..n]),
                    _ => return,
                }
            }
            let text = String::from_utf8_lossy(&request);
            let mut words = text.split_whitespace();
            let (method, path) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
            let (code, body) = match (method, route(path.split('?').next().unwrap_or(""))) {
                ("GET", Some(answer)) => answer,
                ("GET", None) => (404, "not found\n".to_owned()),
                _ => (405, "only GET\n".to_owned()),
            };
            let reason = match code {
                200 => "OK",
                404 => "Not Found",
                405 => "Method Not Allowed",
                _ => "Service Unavailable",
            };
            let response = format!(
                "HTTP/1.1 {code} {reason}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(response.as_bytes()).await;
            tracing::trace!(path, code, elapsed = ?started.elapsed(), "http");
        });
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
}
