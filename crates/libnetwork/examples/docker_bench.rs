//! `docker run --rm --net <network> bb:local /bin/true` latency through `calico-libnetwork`
//! against Docker's own bridge driver (and `--net none` as the floor), measured in the same run
//! against one dockerd, the runs of the three interleaved. Prints a markdown table: median, p99
//! and max in milliseconds, and each figure's ratio to the bridge's.
//!
//! One network namespace holds etcd (one pool), the driver and dockerd
//! (`--iptables=false --bridge=none`, so the bridge network is a user-defined one: `docker
//! network create -d bridge`). No Felix: `docker run` does not wait for it. Needs root, etcd,
//! iproute2, util-linux (nsenter), busybox-static, docker.io.
//!
//! cargo build --release -p calico-libnetwork --bin calico-libnetwork --example docker_bench
//! target/release/examples/docker_bench [RUNS]      # default 30 per network

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use calico_testkit::{
    BUSYBOX_IMAGE, Dockerd, EtcdServer, NetNs, NsProcess, PluginSocket, Tails, require_tool,
};

const POOL: &str = "10.91.0.0/16";

/// One `docker run --rm`, timed.
fn time_run(docker: &Dockerd, network: &str) -> Duration {
    let start = Instant::now();
    docker.ok(&["run", "--rm", "--net", network, BUSYBOX_IMAGE, "/bin/true"]);
    start.elapsed()
}

fn driver_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("own path");
    let path = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/examples")
        .join("calico-libnetwork");
    assert!(
        path.is_file(),
        "{} is missing: cargo build --release -p calico-libnetwork",
        path.display()
    );
    path
}

fn millis(d: &Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn main() {
    let runs: usize = std::env::args()
        .nth(1)
        .map(|n| n.parse().expect("RUNS is a number"))
        .unwrap_or(30);
    for tool in ["ip", "nsenter", "etcd", "busybox", "dockerd", "docker"] {
        require_tool(tool);
    }
    let driver = driver_bin();
    let dir = tempfile::Builder::new()
        .prefix("lnwbench")
        .tempdir()
        .expect("dir");
    let netns = NetNs::new("lnwbench");
    let ns = netns.name().to_owned();
    let etcd = EtcdServer::start_in_netns(&ns);
    etcd.put(
        &format!("/calico/v1/ipam/v4/pool/{}", POOL.replace('/', "-")),
        &format!(r#"{{"cidr": "{POOL}"}}"#),
    );
    let plugin = format!("calico-bench-{}", std::process::id());
    let socket = PluginSocket::new(&plugin);
    let driver = NsProcess::start(
        &ns,
        dir.path().join("driver.log"),
        &driver,
        &[
            format!("--plugin-name={plugin}"),
            "--hostname=bench".to_owned(),
            format!("--etcd-endpoints={}", etcd.endpoint()),
            format!("--docker-socket={}/docker.sock", dir.path().display()),
        ],
    );
    socket.wait(&driver);
    // Dropped first: its networks are removed through the driver.
    let docker = Dockerd::start(&ns, dir.path());
    docker.import_busybox();
    let create = ["network", "create"];
    docker.ok(&[
        &create[..],
        &["-d", &plugin, "--ipam-driver", &plugin, "calico-bench"],
    ]
    .concat());
    docker.ok(&[
        &create[..],
        &["-d", "bridge", "--subnet", "172.31.0.0/16", "bridge-bench"],
    ]
    .concat());

    let networks = ["bridge-bench", "calico-bench", "none"];
    let mut samples: Vec<Vec<Duration>> = vec![Vec::new(); networks.len()];
    for round in 0..=runs {
        for (i, network) in networks.iter().enumerate() {
            let took = time_run(&docker, network);
            // Round 0 warms the page cache, etcd's first block and dockerd's caches.
            if round > 0 {
                samples[i].push(took);
            }
        }
    }
    let tails: Vec<Tails> = samples
        .iter()
        .map(|s| Tails::of(s.iter().map(millis)).expect("samples"))
        .collect();
    println!(
        "`docker run --rm --net <network> bb:local /bin/true`, {runs} runs each, interleaved:\n"
    );
    println!(
        "| network | median ms | p99 ms | max ms | median / bridge | p99 / bridge | max / bridge |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    let labels = [
        "Docker bridge",
        "Calico (calico-libnetwork)",
        "none (no network)",
    ];
    for (label, t) in labels.iter().zip(&tails) {
        let r = t.ratio(&tails[0]);
        println!(
            "| {label} | {:.0} | {:.0} | {:.0} | {:.2} | {:.2} | {:.2} |",
            t.median, t.p99, t.max, r.median, r.p99, r.max
        );
    }
    drop(docker);
}
