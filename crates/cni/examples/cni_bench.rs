//! CNI ADD and DEL latency of `calico` + `calico-ipam` (etcd in the host namespace) against the
//! reference `ptp` + `host-local` plugins of Debian's containernetworking-plugins, measured in
//! the same run on the same namespaces. Prints median and p99 of each and the ratios.
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
    let path = format!("{}:{REFERENCE_DIR}", ours.display());
    let mut results = Vec::new();
    for (label, plugin, config) in [
        (
            "ptp + host-local",
            Path::new(REFERENCE_DIR).join("ptp"),
            &ptp,
        ),
        ("calico + calico-ipam", ours.join("calico"), &calico),
    ] {
        // One unmeasured round first: page cache, etcd's first blocks.
        let (mut adds, mut dels) = (Vec::new(), Vec::new());
        for i in 0..=iterations {
            let container = NetNs::new("cnibench-ctr");
            let id = format!("bench{i}");
            let add = call(&host, &plugin, &path, "ADD", &id, &container, config);
            let del = call(&host, &plugin, &path, "DEL", &id, &container, config);
            if i > 0 {
                adds.push(add);
                dels.push(del);
            }
        }
        results.push((label, stats(&adds), stats(&dels)));
    }
    let (_, base_add, base_del) = results[0];
    println!("{iterations} ADD/DEL cycles each, one container namespace per cycle");
    println!(
        "plugins                 ADD median   ADD p99   DEL median   DEL p99   ADD × ref   DEL × ref"
    );
    for (label, add, del) in &results {
        println!(
            "{label:<22} {:>9.1} ms {:>6.1} ms {:>9.1} ms {:>6.1} ms {:>10.2} {:>11.2}",
            ms(add.0),
            ms(add.1),
            ms(del.0),
            ms(del.1),
            ms(add.0) / ms(base_add.0),
            ms(del.0) / ms(base_del.0)
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

/// (median, p99)
fn stats(samples: &[Duration]) -> (Duration, Duration) {
    let t = calico_testkit::Tails::of(samples.iter().map(Duration::as_secs_f64)).expect("samples");
    (
        Duration::from_secs_f64(t.median),
        Duration::from_secs_f64(t.p99),
    )
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
