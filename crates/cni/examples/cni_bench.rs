//! CNI ADD and DEL latency of `calico` + `calico-ipam` (etcd in the host namespace) against the
//! reference `ptp` + `host-local` plugins of Debian's containernetworking-plugins, measured in
//! the same run on the same namespaces. Prints median, p99 and max of each and the ratios.
//!
//! `calico` runs `calico-ipam` in its own process; the third row runs the same `calico-ipam`
//! binary as a child process (a copy under another `ipam.type`, which `calico` execs as it
//! would any IPAM plugin), as `calico` did before. With `CNI_BENCH_COMPARE_DIR` set to a
//! directory holding another build of `calico` and `calico-ipam` (an earlier commit's, say),
//! that build is a fourth row, calling its own `calico-ipam`.
//!
//! cargo build --release -p calico-cni
//! cargo run --release -p calico-cni --example cni_bench [-- ITERATIONS]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use calico_testkit::{EtcdServer, NetNs};
use serde_json::{Value, json};

const REFERENCE_DIR: &str = "/usr/lib/cni";
/// The name the copy of `calico-ipam` run as a child process has.
const EXEC_IPAM: &str = "calico-ipam-exec";

fn main() {
    let iterations: usize = std::env::args()
        .nth(1)
        .map(|n| n.parse().expect("ITERATIONS is a number"))
        .unwrap_or(100);
    let ours = plugin_dir();
    assert!(
        Path::new(REFERENCE_DIR).join("ptp").is_file(),
        "the reference plugins are missing: apt-get install -y containernetworking-plugins"
    );
    let load_before = load_average();
    let host = NetNs::new("cnibench-host");
    let etcd = EtcdServer::start_in_netns(host.name());
    let put = etcd.etcdctl(&[
        "put",
        "/calico/v1/ipam/v4/pool/10.92.0.0-16",
        r#"{"cidr": "10.92.0.0/16"}"#,
    ]);
    assert!(put.status.success(), "{put:?}");
    let scratch = tempfile::tempdir().unwrap();
    let calico = json!({
        "cniVersion": "1.0.0", "name": "bench", "type": "calico",
        "etcd_endpoints": etcd.endpoint(), "nodename": "node1",
        "ipam": {"type": "calico-ipam"},
    });
    let ptp = json!({
        "cniVersion": "1.0.0", "name": "bench", "type": "ptp",
        "ipam": {"type": "host-local", "subnet": "10.93.0.0/16", "dataDir": scratch.path()},
    });
    let exec_dir = scratch.path().join("bin");
    std::fs::create_dir_all(&exec_dir).unwrap();
    std::fs::copy(ours.join("calico-ipam"), exec_dir.join(EXEC_IPAM)).unwrap();
    let mut exec = calico.clone();
    exec["ipam"]["type"] = json!(EXEC_IPAM);
    let path = format!("{}:{}:{REFERENCE_DIR}", exec_dir.display(), ours.display());
    let mut plugins = vec![
        (
            "ptp + host-local",
            Path::new(REFERENCE_DIR).join("ptp"),
            &ptp,
            path.clone(),
        ),
        (
            "calico (IPAM in process)",
            ours.join("calico"),
            &calico,
            path.clone(),
        ),
        (
            "calico + calico-ipam exec",
            ours.join("calico"),
            &exec,
            path.clone(),
        ),
    ];
    if let Some(dir) = std::env::var_os("CNI_BENCH_COMPARE_DIR").map(PathBuf::from) {
        assert!(
            dir.join("calico").is_file() && dir.join("calico-ipam").is_file(),
            "CNI_BENCH_COMPARE_DIR: no calico and calico-ipam in {}",
            dir.display()
        );
        let path = format!("{}:{REFERENCE_DIR}", dir.display());
        plugins.push(("compared build", dir.join("calico"), &calico, path));
    }
    // The plugins take turns cycle by cycle, each cycle starting with the next one, so that a
    // busy moment of the machine (or the kernel still cleaning up the namespace before) falls
    // on all of them alike. One unmeasured round first: page cache, etcd's first blocks.
    let mut samples = vec![(Vec::new(), Vec::new()); plugins.len()];
    for i in 0..=iterations {
        for turn in 0..plugins.len() {
            let which = (i + turn) % plugins.len();
            let (_, plugin, config, path) = &plugins[which];
            let (adds, dels) = &mut samples[which];
            let container = NetNs::new("cnibench-ctr");
            let id = format!("bench{i}");
            let add = call(&host, plugin, path, "ADD", &id, &container, config);
            let del = call(&host, plugin, path, "DEL", &id, &container, config);
            if i > 0 {
                adds.push(add);
                dels.push(del);
            }
        }
    }
    let results: Vec<_> = (plugins.iter().zip(&samples))
        .map(|((label, _, _, _), (adds, dels))| (*label, stats(adds), stats(dels)))
        .collect();
    let (_, base_add, base_del) = results[0];
    println!(
        "{iterations} ADD/DEL cycles each, one container namespace per cycle, the plugins in turn"
    );
    println!(
        "load average before: {load_before}, after: {}",
        load_average()
    );
    println!(
        "plugins                    ADD median   ADD p99   ADD max   DEL median   DEL p99   DEL max   \
         × ref: ADD median / p99   DEL median / p99"
    );
    for (label, add, del) in &results {
        println!(
            "{label:<25} {:>9.1} ms {:>6.1} ms {:>6.1} ms {:>9.1} ms {:>6.1} ms {:>6.1} ms   {:>11.2} / {:<7.2}   {:>10.2} / {:.2}",
            ms(add.0),
            ms(add.1),
            ms(add.2),
            ms(del.0),
            ms(del.1),
            ms(del.2),
            ms(add.0) / ms(base_add.0),
            ms(add.1) / ms(base_add.1),
            ms(del.0) / ms(base_del.0),
            ms(del.1) / ms(base_del.1),
        );
    }
}

fn plugin_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("CALICO_CNI_DIR") {
        return PathBuf::from(dir);
    }
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().and_then(Path::parent).unwrap().to_owned();
    assert!(
        dir.join("calico").is_file() && dir.join("calico-ipam").is_file(),
        "calico and calico-ipam are not in {}: cargo build --release -p calico-cni (or set CALICO_CNI_DIR)",
        dir.display()
    );
    dir
}

/// One plugin call, as a runtime makes it; returns how long it took.
fn call(
    host: &NetNs,
    plugin: &Path,
    path: &str,
    command: &str,
    id: &str,
    container: &NetNs,
    config: &Value,
) -> Duration {
    let started = Instant::now();
    let mut child = Command::new("nsenter")
        .arg(format!("--net=/run/netns/{}", host.name()))
        .arg(plugin)
        .env("CNI_COMMAND", command)
        .env("CNI_CONTAINERID", id)
        .env("CNI_NETNS", format!("/run/netns/{}", container.name()))
        .env("CNI_IFNAME", "eth0")
        .env("CNI_PATH", path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("plugin starts");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(config.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let took = started.elapsed();
    assert!(
        out.status.success(),
        "{} {command} failed: {}{}",
        plugin.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    took
}

/// (median, p99, max)
fn stats(samples: &[Duration]) -> (Duration, Duration, Duration) {
    let t = calico_testkit::Tails::of(samples.iter().map(Duration::as_secs_f64)).expect("samples");
    (
        Duration::from_secs_f64(t.median),
        Duration::from_secs_f64(t.p99),
        Duration::from_secs_f64(t.max),
    )
}

/// The first three fields of /proc/loadavg.
fn load_average() -> String {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    text.split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
