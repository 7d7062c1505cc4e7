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
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use calico_testkit::{EtcdServer, NetNs, Tails, eventually, require_tool};

const POOL: &str = "10.91.0.0/16";

/// A process in the namespace, SIGTERMed (then killed) on drop.
struct Process(Child);

impl Process {
    fn start(netns: &str, log: &Path, program: &Path, args: &[String]) -> Process {
        let out = std::fs::File::create(log).expect("log file");
        let child = Command::new("nsenter")
            .arg(format!("--net=/run/netns/{netns}"))
            .arg(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("log file"))
            .stderr(out)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", program.display()));
        Process(child)
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .output();
        for _ in 0..100 {
            if matches!(self.0.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// dockerd's client, and the daemon (stopped on drop, after its networks are removed).
struct Docker {
    socket: String,
    cgroup: String,
    _daemon: Process,
}

impl Docker {
    fn run(&self, args: &[&str]) -> Output {
        Command::new("docker")
            .args(["-H", &self.socket])
            .args(args)
            .output()
            .expect("docker runs")
    }

    fn ok(&self, args: &[&str]) {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "docker {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// One `docker run --rm`, timed.
    fn time_run(&self, network: &str) -> Duration {
        let start = Instant::now();
        self.ok(&["run", "--rm", "--net", network, "bb:local", "/bin/true"]);
        start.elapsed()
    }
}

impl Drop for Docker {
    fn drop(&mut self) {
        let _ = self.run(&["network", "rm", "calico-bench", "bridge-bench"]);
        for hierarchy in std::fs::read_dir("/sys/fs/cgroup")
            .into_iter()
            .flatten()
            .flatten()
        {
            let _ = std::fs::remove_dir(hierarchy.path().join(&self.cgroup));
        }
    }
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

fn start_dockerd(netns: &str, dir: &Path) -> Docker {
    let d = dir.display();
    let config = format!(r#"{{"deprecated-key-path": "{d}/key.json"}}"#);
    std::fs::write(dir.join("daemon.json"), config).expect("daemon.json");
    let args: Vec<String> = [
        format!("--config-file={d}/daemon.json"),
        format!("--data-root={d}/data"),
        format!("--exec-root={d}/exec"),
        format!("--host=unix://{d}/docker.sock"),
        format!("--pidfile={d}/docker.pid"),
        format!("--cgroup-parent=/{netns}"),
        "--iptables=false".into(),
        "--ip-forward=false".into(),
        "--ip-masq=false".into(),
        "--bridge=none".into(),
    ]
    .into();
    let daemon = Process::start(netns, &dir.join("dockerd.log"), Path::new("dockerd"), &args);
    let docker = Docker {
        socket: format!("unix://{d}/docker.sock"),
        cgroup: netns.to_owned(),
        _daemon: daemon,
    };
    eventually("dockerd answers", Duration::from_secs(30), || {
        let out = docker.run(&["version"]);
        out.status
            .success()
            .then_some(())
            .ok_or_else(|| String::from_utf8_lossy(&out.stderr).into_owned())
    });
    docker
}

fn import_busybox(docker: &Docker, dir: &Path) {
    let root = dir.join("rootfs");
    std::fs::create_dir_all(root.join("bin")).expect("rootfs");
    let busybox = ["/bin/busybox", "/usr/bin/busybox"]
        .into_iter()
        .find(|p| Path::new(p).is_file())
        .expect("busybox-static is installed");
    std::fs::copy(busybox, root.join("bin/busybox")).expect("copy busybox");
    std::os::unix::fs::symlink("busybox", root.join("bin/true")).expect("applet");
    let import = format!(
        "tar -C {} -c . | docker -H {} import - bb:local",
        root.display(),
        docker.socket
    );
    let out = Command::new("sh")
        .args(["-c", &import])
        .output()
        .expect("sh");
    assert!(out.status.success(), "docker import: {out:?}");
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
    let socket = PathBuf::from(format!("/run/docker/plugins/{plugin}.sock"));
    let _driver = Process::start(
        &ns,
        &dir.path().join("driver.log"),
        &driver,
        &[
            format!("--plugin-name={plugin}"),
            "--hostname=bench".to_owned(),
            format!("--etcd-endpoints={}", etcd.endpoint()),
            format!("--docker-socket={}/docker.sock", dir.path().display()),
        ],
    );
    eventually("the driver's socket", Duration::from_secs(10), || {
        socket.exists().then_some(()).ok_or("not yet".to_owned())
    });
    let docker = start_dockerd(&ns, dir.path());
    import_busybox(&docker, dir.path());
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
            let took = docker.time_run(network);
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
    let _ = std::fs::remove_file(&socket);
}
