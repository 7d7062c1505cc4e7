//! IPAM throughput against a real etcd: allocations per second (auto-assign one IPv4 address,
//! release it again later) with 1, 4 and 16 concurrent allocators on 4 hosts, each figure also
//! as a ratio to 1 allocator measured in the same run, with the median, p99 and maximum time of
//! one assignment and one release. The allocators share one `Ipam` (one process: the allocators
//! of a host share its lane), except in the last runs, where each has its own (as separate
//! processes would: they share nothing but etcd): first with nothing else, then taking their
//! host's lock file (`HostLock`, as the CNI plugin does) around each assignment and release;
//! then with a fresh `Ipam` for each call (as one CNI plugin run per pod: nothing remembered
//! from the call before), without and with the lock.
//!
//! Every run also proves what it measured: no address is held by two allocators at once, and
//! after everything is released `ipam check` finds nothing (no leak, handles and blocks agree).
//!
//! cargo run --release -p calico-ipam --example ipam_bench [-- ALLOCATIONS_PER_RUN]

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use calico_datastore::{Datastore, EtcdConfig, EtcdDatastore};
use calico_ipam::{AssignRequest, HostLock, HostLockGuard, Ipam};
use calico_testkit::EtcdServer;

const HOSTS: usize = 4;
/// Addresses each allocator keeps, like pods coming and going.
const KEPT: usize = 20;

/// What the allocators of a run share.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sharing {
    /// One `Ipam`: one process.
    One,
    /// An `Ipam` each: separate processes.
    Own,
    /// An `Ipam` each, and their host's lock file around each call.
    OwnLocked,
    /// A new `Ipam` for every call.
    Fresh,
    /// A new `Ipam` for every call, and the host's lock file around it.
    FreshLocked,
}

impl Sharing {
    fn label(self, allocators: usize) -> String {
        match self {
            Sharing::One => allocators.to_string(),
            Sharing::Own => format!("{allocators} (own)"),
            Sharing::OwnLocked => format!("{allocators} (own, lock)"),
            Sharing::Fresh => format!("{allocators} (fresh)"),
            Sharing::FreshLocked => format!("{allocators} (fresh, lock)"),
        }
    }
}

struct Run {
    allocators: usize,
    sharing: Sharing,
    done: usize,
    seconds: f64,
    assign: Vec<Duration>,
    release: Vec<Duration>,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 4)]
async fn main() {
    let total: usize = match std::env::args().nth(1).as_deref() {
        Some("-h" | "--help") => {
            println!("usage: ipam_bench [ALLOCATIONS_PER_RUN (default 2000)]");
            return;
        }
        Some(n) => n.parse().expect("ALLOCATIONS_PER_RUN is a number"),
        None => 2_000,
    };
    let mut baseline = None;
    println!("load average before: {}", load_average());
    println!(
        "       allocators  allocations  seconds  allocations/s  × 1 allocator  \
         assign p50/p99/max (ms)  release p50/p99/max (ms)"
    );
    let runs = [
        (1, Sharing::One),
        (4, Sharing::One),
        (16, Sharing::One),
        (16, Sharing::Own),
        (16, Sharing::OwnLocked),
        (16, Sharing::Fresh),
        (16, Sharing::FreshLocked),
        (1, Sharing::FreshLocked),
    ];
    for (allocators, sharing) in runs {
        let run = run(allocators, sharing, total).await;
        let rate = run.done as f64 / run.seconds;
        let base = *baseline.get_or_insert(rate);
        let label = run.sharing.label(run.allocators);
        println!(
            "{label:>17}  {:>11}  {:>7.2}  {rate:>13.0}  {:>13.2}  {:>23}  {:>24}",
            run.done,
            run.seconds,
            rate / base,
            percentiles(run.assign),
            percentiles(run.release),
        );
    }
    println!("load average after: {}", load_average());
}

async fn run(allocators: usize, sharing: Sharing, total: usize) -> Run {
    // A fresh etcd per run, so no run inherits another's blocks or history.
    let server = EtcdServer::start();
    let config = EtcdConfig {
        endpoints: vec![server.endpoint()],
        ..EtcdConfig::default()
    };
    let store = Arc::new(EtcdDatastore::connect(config).await.expect("etcd"));
    store
        .put(
            "/calico/v1/ipam/v4/pool/10.0.0.0-16",
            r#"{"cidr": "10.0.0.0/16"}"#,
        )
        .await
        .unwrap();
    let ipam = Ipam::new(store.clone());
    let locks = LockDir::new();
    let held: Arc<Mutex<BTreeSet<IpAddr>>> = Arc::default();
    let started = Instant::now();
    let mut tasks = Vec::new();
    for worker in 0..allocators {
        let allocator = Allocator {
            ipam: match sharing {
                Sharing::One => ipam.clone(),
                _ => Ipam::new(store.clone()),
            },
            fresh: matches!(sharing, Sharing::Fresh | Sharing::FreshLocked),
            lock: matches!(sharing, Sharing::OwnLocked | Sharing::FreshLocked)
                .then(|| HostLock::new(locks.0.join(format!("host{}.lock", worker % HOSTS)))),
            store: store.clone(),
        };
        let held = held.clone();
        tasks.push(tokio::spawn(allocator.run(
            held,
            worker,
            total / allocators,
        )));
    }
    let (mut assign, mut release) = (Vec::new(), Vec::new());
    for task in tasks {
        let (a, r) = task.await.expect("allocator");
        assign.extend(a);
        release.extend(r);
    }
    let seconds = started.elapsed().as_secs_f64();
    let left: Vec<IpAddr> = held.lock().unwrap().iter().copied().collect();
    let freed = ipam.release_ips(&left).await.expect("release the rest");
    assert_eq!(freed.len(), left.len(), "every held address was assigned");
    let report = ipam.check().await.expect("ipam check");
    assert!(report.is_clean(), "ipam check after the run: {report:?}");
    Run {
        allocators,
        sharing,
        done: (total / allocators) * allocators,
        seconds,
        assign,
        release,
    }
}

/// One allocator: its `Ipam` (or a new one per call), its host's lock file if it takes one.
struct Allocator {
    ipam: Ipam,
    fresh: bool,
    lock: Option<HostLock>,
    store: Arc<EtcdDatastore>,
}

impl Allocator {
    /// `count` assignments, keeping the last [`KEPT`]; returns how long each assignment and
    /// each release took (waiting for the lock included).
    async fn run(
        self,
        held: Arc<Mutex<BTreeSet<IpAddr>>>,
        worker: usize,
        count: usize,
    ) -> (Vec<Duration>, Vec<Duration>) {
        let (mut assign, mut release) = (Vec::new(), Vec::new());
        let mut mine = Vec::new();
        for n in 0..count {
            let request = AssignRequest {
                host: format!("host{}", worker % HOSTS),
                handle: format!("w{worker}-{n}"),
                ipv4: 1,
                ..AssignRequest::default()
            };
            let started = Instant::now();
            let got = {
                let ipam = self.ipam();
                if self.fresh {
                    // As the CNI plugin: what comes before the blocks, read before the lock.
                    let versions = [calico_model::IpVersion::V4];
                    ipam.prefetch(&request.host, &versions)
                        .await
                        .expect("prefetch");
                }
                let _held = self.lock().await;
                ipam.auto_assign(&request).await.expect("assign")
            };
            assign.push(started.elapsed());
            let ip = got.ipv4[0];
            assert!(held.lock().unwrap().insert(ip), "{ip} handed out twice");
            mine.push(ip);
            if mine.len() > KEPT {
                let old = mine.remove(0);
                held.lock().unwrap().remove(&old);
                let started = Instant::now();
                let freed = {
                    let ipam = self.ipam();
                    let _held = self.lock().await;
                    ipam.release_ips(&[old]).await.expect("release")
                };
                release.push(started.elapsed());
                assert_eq!(freed.len(), 1, "{old} was assigned");
            }
        }
        (assign, release)
    }

    /// The `Ipam` of one call.
    fn ipam(&self) -> Ipam {
        match self.fresh {
            true => Ipam::new(self.store.clone()),
            false => self.ipam.clone(),
        }
    }

    /// The host's lock, if this allocator takes it.
    async fn lock(&self) -> Option<HostLockGuard> {
        match &self.lock {
            Some(lock) => Some(lock.acquire().await.expect("host lock")),
            None => None,
        }
    }
}

/// A directory for the runs' lock files, removed on drop.
struct LockDir(std::path::PathBuf);

impl LockDir {
    fn new() -> LockDir {
        let dir = std::env::temp_dir().join(format!("ipam-bench-locks-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("lock directory");
        LockDir(dir)
    }
}

impl Drop for LockDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The first three fields of /proc/loadavg.
fn load_average() -> String {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    text.split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// `p50/p99/max` in milliseconds.
fn percentiles(mut times: Vec<Duration>) -> String {
    if times.is_empty() {
        return "-".to_owned();
    }
    times.sort();
    let at = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    format!("{:.2}/{:.2}/{:.2}", ms(at(0.5)), ms(at(0.99)), ms(at(1.0)))
}
