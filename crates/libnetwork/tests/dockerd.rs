//! A real dockerd drives the driver: one host namespace with etcd, Felix, the driver and
//! dockerd (its own data-root, exec-root, socket; `--iptables=false --bridge=none`), a busybox
//! image imported locally. Containers on one Calico network ping each other; one on another
//! network cannot until the profile lets it; removing everything leaves no endpoint key, no
//! veth and a clean IPAM check.
//!
//! Needs root, etcd, iproute2, util-linux (nsenter), busybox-static, docker.io, iptables and
//! ipset (Felix), and `target/debug/calico-felix` (`cargo build -p calico-felix`).
//! Debug a run from another shell with `nsenter --net=/run/netns/<ns> ...` (the namespace name
//! is printed) and `docker -H unix://<dir>/docker.sock ...`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use calico_datastore::{EtcdConfig, EtcdDatastore};
use calico_ipam::Ipam;
use calico_linux::{Netns, in_netns};
use calico_testkit::{
    BUSYBOX_IMAGE, Dockerd, EtcdServer, NetNs, NsProcess, PluginSocket, eventually, require_tool,
};

const DRIVER: &str = env!("CARGO_BIN_EXE_calico-libnetwork");
const POOL: &str = "10.65.0.0/16";
const POOL6: &str = "fd65:6500::/48";

fn felix_bin() -> PathBuf {
    let path = PathBuf::from(DRIVER).with_file_name("calico-felix");
    assert!(
        path.is_file(),
        "{} is missing: build it first (cargo build -p calico-felix; scripts/test.sh does)",
        path.display()
    );
    path
}

fn unique(prefix: &str) -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}-{}-{n}", std::process::id())
}

fn check(output: Output, what: &str) -> String {
    assert!(
        output.status.success(),
        "{what} failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

/// Runs the IPAM audit from inside the namespace (etcd listens on its loopback).
fn ipam_report(netns: &str, endpoint: &str) -> calico_ipam::Report {
    let endpoint = endpoint.to_owned();
    in_netns(&Netns::named(netns), move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        runtime.block_on(async move {
            let config = EtcdConfig {
                endpoints: vec![endpoint],
                ..EtcdConfig::default()
            };
            let store = EtcdDatastore::connect(config)
                .await
                .map_err(std::io::Error::other)?;
            Ipam::new(Arc::new(store))
                .check()
                .await
                .map_err(std::io::Error::other)
        })
    })
    .expect("ipam check runs")
}

fn host_links(netns: &NetNs) -> Vec<String> {
    netns
        .run_ok("ip", &["-o", "link", "show"], "")
        .lines()
        .filter_map(|l| l.split(": ").nth(1))
        .map(|name| name.split('@').next().unwrap_or(name).to_owned())
        .filter(|name| name.starts_with("cali") || name.starts_with("tmp"))
        .collect()
}

/// The host's namespace: a default route out of a veth whose peer goes nowhere (proxy ARP answers for
/// 169.254.1.1 only when the host has a route towards it) and forwarding on.
fn host_namespace() -> NetNs {
    let netns = NetNs::new("lnw");
    eprintln!("host namespace: nsenter --net=/run/netns/{}", netns.name());
    for args in [
        "link add uplink type veth peer name uplink-peer",
        "addr add 192.0.2.1/24 dev uplink",
        "link set uplink-peer up",
        "link set uplink up",
        "route add default via 192.0.2.254 dev uplink",
    ] {
        let args: Vec<&str> = args.split(' ').collect();
        netns.run_ok("ip", &args, "");
    }
    for sysctl in ["ipv4/ip_forward", "ipv6/conf/all/forwarding"] {
        let write = format!("echo 1 > /proc/sys/net/{sysctl}");
        netns.run_ok("sh", &["-c", &write], "");
    }
    netns
}

/// One Docker host in a namespace: etcd with a pool, Felix, the driver, dockerd with
/// `bb:local`. Fields drop in order: dockerd (removing its containers through the driver)
/// first, the namespace last.
struct Host {
    docker: Option<Dockerd>,
    driver: Option<NsProcess>,
    _felix: NsProcess,
    etcd: EtcdServer,
    socket: PluginSocket,
    /// The IPAM driver's second name's socket (`<plugin>-ipam`).
    ipam_socket: PluginSocket,
    /// Extra arguments of every driver started.
    driver_args: Vec<String>,
    netns: NetNs,
    dir: tempfile::TempDir,
    host: String,
    plugin: String,
}

impl Host {
    fn start() -> Host {
        Host::start_with(&[])
    }

    /// A host whose drivers take `driver_args` too.
    fn start_with(driver_args: &[&str]) -> Host {
        for tool in [
            "ip", "nsenter", "busybox", "etcd", "etcdctl", "iptables", "ipset",
        ] {
            require_tool(tool);
        }
        require_tool("dockerd");
        require_tool("docker");
        let felix = felix_bin();
        let dir = tempfile::Builder::new()
            .prefix("lnw")
            .tempdir()
            .expect("temp dir");
        let netns = host_namespace();
        let ns = netns.name().to_owned();
        let host = unique("docker");
        let plugin = unique("calico");
        let etcd = EtcdServer::start_in_netns(&ns);
        etcd.put(
            &format!("/calico/v1/ipam/v4/pool/{}", POOL.replace('/', "-")),
            &format!(r#"{{"cidr": "{POOL}"}}"#),
        );
        etcd.put(
            &format!("/calico/v1/ipam/v6/pool/{}", POOL6.replace('/', "-")),
            &format!(r#"{{"cidr": "{POOL6}"}}"#),
        );
        etcd.put("/calico/v1/Ready", "true");
        let endpoint = etcd.endpoint();
        let felix = NsProcess::start_with_env(
            &ns,
            dir.path().join("felix.log"),
            &felix,
            &[] as &[&str],
            &[
                ("FELIX_LOGFILEPATH", "none"),
                ("FELIX_ETCDENDPOINTS", &endpoint),
                ("FELIX_FELIXHOSTNAME", &host),
            ],
        );
        let socket = PluginSocket::new(&plugin);
        let ipam_socket = PluginSocket::new(&format!("{plugin}-ipam"));
        let mut host = Host {
            docker: None,
            driver: None,
            _felix: felix,
            etcd,
            socket,
            ipam_socket,
            driver_args: driver_args.iter().map(|a| a.to_string()).collect(),
            netns,
            dir,
            host,
            plugin,
        };
        host.start_driver("calico-libnetwork", &[]);
        let docker = Dockerd::start(&ns, host.dir.path());
        docker.import_busybox();
        host.docker = Some(docker);
        host
    }

    /// Starts the driver (a first one, or the next after a crash) and waits for its socket.
    fn start_driver(&mut self, log: &'static str, env: &[(&str, &str)]) {
        let docker_socket = format!("{}/docker.sock", self.dir.path().display());
        let endpoint = self.etcd.endpoint();
        // A crashed driver's sockets: gone before the wait below can mistake them for the new
        // one's.
        self.socket.remove();
        self.ipam_socket.remove();
        let env = [&[("CALICO_LIBNETWORK_LOG", "debug")], env].concat();
        let mut args = vec![
            "--plugin-name",
            &self.plugin,
            "--hostname",
            &self.host,
            "--etcd-endpoints",
            &endpoint,
            "--docker-socket",
            &docker_socket,
        ];
        args.extend(self.driver_args.iter().map(String::as_str));
        let driver = NsProcess::start_with_env(
            self.netns.name(),
            self.dir.path().join(format!("{log}.log")),
            Path::new(DRIVER),
            &args,
            &env,
        );
        self.socket.wait(&driver);
        self.ipam_socket.wait(&driver);
        self.driver = Some(driver);
    }

    fn docker(&self) -> &Dockerd {
        self.docker.as_ref().expect("dockerd runs")
    }

    fn driver_log(&self) -> String {
        self.driver.as_ref().map(NsProcess::log).unwrap_or_default()
    }

    fn network(&self, name: &str, extra: &[&str]) {
        self.network_of(name, &self.plugin, extra);
    }

    /// `docker network create --driver <plugin> --ipam-driver <ipam> [extra] <name>`.
    fn network_of(&self, name: &str, ipam: &str, extra: &[&str]) {
        let mut args = vec![
            "network",
            "create",
            "--driver",
            &self.plugin,
            "--ipam-driver",
            ipam,
        ];
        args.extend_from_slice(extra);
        args.push(name);
        self.docker().ok(&args);
    }

    /// Keys under a prefix, one a line.
    fn keys(&self, prefix: &str) -> String {
        check(
            self.etcd
                .etcdctl(&["get", "--prefix", "--keys-only", prefix]),
            "etcdctl get",
        )
    }

    /// After everything was removed: no endpoint key, no pending record, no veth, a clean
    /// IPAM check.
    fn assert_clean(&self) {
        let keys = self.keys(&format!("/calico/v1/host/{}/", self.host));
        assert!(!keys.contains("/workload/"), "endpoint keys left:\n{keys}");
        let pending = self.keys("/calico/libnetwork/");
        assert_eq!(pending, "", "pending records left");
        assert_eq!(host_links(&self.netns), Vec::<String>::new(), "veths left");
        let report = ipam_report(self.netns.name(), &self.etcd.endpoint());
        assert!(report.is_clean(), "ipam check: {report:?}");
    }
}

#[test]
fn docker_networks_connect_their_containers_and_clean_up() {
    let host = Host::start();
    let docker = host.docker();
    host.network("net1", &[]);
    host.network("net2", &[]);
    for (name, network) in [("c1", "net1"), ("c2", "net1"), ("c3", "net2")] {
        run(&host, name, network, &[]);
    }
    let ip1 = docker.ip_of("c1");
    assert!(
        ip1.starts_with("10.65."),
        "c1 got {ip1:?}, not an address of {POOL}"
    );

    let keys = host.keys(&format!("/calico/v1/host/{}/workload/docker/", host.host));
    assert_eq!(
        keys.lines().filter(|l| !l.is_empty()).count(),
        3,
        "endpoint keys:\n{keys}"
    );

    let first = keys.lines().next().expect("a key");
    let value = check(
        host.etcd.etcdctl(&["get", "--print-value-only", first]),
        "etcdctl get",
    );
    let value: serde_json::Value = serde_json::from_str(&value).expect("endpoint JSON");
    assert_eq!(value["state"], "active", "{value}");
    assert!(
        value["name"]
            .as_str()
            .is_some_and(|n| n.starts_with("cali") && n.len() == 15),
        "{value}"
    );
    assert!(
        value["mac"].as_str().is_some_and(|m| m.len() == 17),
        "{value}"
    );
    assert!(
        value["profile_ids"] == serde_json::json!(["net1"])
            || value["profile_ids"] == serde_json::json!(["net2"]),
        "{value}"
    );

    eventually_pings(docker, "c2", &ip1);
    assert!(!docker.pings("c3", &ip1), "c3 on net2 reached c1 on net1");

    // The operator opens net1 to net2: the drop was policy.
    host.etcd.put(
        "/calico/v1/policy/profile/net1/rules",
        r#"{"inbound_rules":[{"action":"allow","src_tag":"net1"},{"action":"allow","src_tag":"net2"}],"outbound_rules":[{"action":"allow"}]}"#,
    );
    eventually_pings(docker, "c3", &ip1);

    // Bad input: a subnet outside every pool, an address already taken.
    let out = docker.run(&[
        "network",
        "create",
        "--driver",
        &host.plugin,
        "--ipam-driver",
        &host.plugin,
        "--subnet",
        "192.168.7.0/24",
        "outside",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && err.contains("subnet 192.168.7.0/24 is not inside an enabled Calico pool"),
        "network create --subnet outside the pools: {err}"
    );
    host.network("net3", &["--subnet", POOL]);
    let out = docker.run_container("c4", "net3", &["--ip", &ip1]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("address already in use"),
        "docker run --ip of c1: {err}"
    );
    let _ = docker.run(&["rm", "-f", "c4"]);

    docker.ok(&["rm", "-f", "c1", "c2", "c3"]);
    docker.ok(&["network", "rm", "net1", "net2", "net3"]);
    host.assert_clean();
}

/// `docker run -d --name <name> --net <network> [extra] bb:local sleep 600`.
fn run(host: &Host, name: &str, network: &str, extra: &[&str]) {
    let out = host.docker().run_container(name, network, extra);
    assert!(
        out.status.success(),
        "docker run {name}: {}\ndriver log:\n{}",
        String::from_utf8_lossy(&out.stderr),
        host.driver_log()
    );
}

fn eventually_pings(docker: &Dockerd, from: &str, to: &str) {
    docker.wait_for_ping(from, to, Duration::from_secs(30));
}

/// The driver stops between `CreateEndpoint` and `Join` (right after answering
/// `CreateEndpoint`, through `CALICO_LIBNETWORK_STOP_AFTER`); a new driver finishes the `Join`
/// that dockerd retries meanwhile. Then the driver is killed with containers running and restarted,
/// dockerd is restarted with containers present and starts them again, and removing
/// everything leaves nothing behind.
#[test]
fn a_restarted_driver_or_dockerd_finishes_and_leaks_nothing() {
    let mut host = Host::start();
    host.network("net1", &[]);
    host.driver.take();
    host.start_driver(
        "calico-libnetwork-stopping",
        &[(
            "CALICO_LIBNETWORK_STOP_AFTER",
            "NetworkDriver.CreateEndpoint",
        )],
    );
    let docker_socket = host.docker().socket().to_owned();
    let plugin_log = host.dir.path().join("calico-libnetwork-stopping.log");
    // docker run blocks in Join (dockerd retries the dead socket) until the next driver runs.
    let run_c1 = std::thread::spawn(move || {
        Command::new("docker")
            .args(["-H", &docker_socket, "run", "-d", "--name", "c1"])
            .args([
                "--net",
                "net1",
                "--stop-timeout",
                "1",
                BUSYBOX_IMAGE,
                "sleep",
                "600",
            ])
            .output()
            .expect("docker runs")
    });
    eventually("the driver's stop", Duration::from_secs(30), || {
        let stopping = host.driver.as_mut().expect("a driver");
        match stopping.try_wait() {
            Ok(Some(status)) if status.success() => Ok(()),
            other => Err(format!("{other:?}: {}", stopping.log())),
        }
    });
    let log = std::fs::read_to_string(&plugin_log).unwrap_or_default();
    assert!(
        !log.contains("NetworkDriver.Join"),
        "the stopping driver saw the Join:\n{log}"
    );
    let pending = host.keys("/calico/libnetwork/");
    assert_eq!(pending.lines().count(), 1, "pending records: {pending}");
    host.driver.take();
    host.start_driver("calico-libnetwork-2", &[]);
    let out = run_c1.join().expect("docker run thread");
    assert!(
        out.status.success(),
        "docker run c1 across the driver's restart: {}\ndriver log:\n{}",
        String::from_utf8_lossy(&out.stderr),
        host.driver_log()
    );
    assert_eq!(host.keys("/calico/libnetwork/"), "", "pending record left");
    run(&host, "c2", "net1", &["--stop-timeout", "1"]);
    let ip1 = host.docker().ip_of("c1");
    eventually_pings(host.docker(), "c2", &ip1);

    // Killed with containers running: the next driver removes them from ids alone.
    host.driver.take().expect("a driver").kill();
    host.start_driver("calico-libnetwork-3", &[]);

    // dockerd restarted with both containers present: it stops them on the way down and
    // starts them again on request.
    host.docker.take().expect("dockerd").stop();
    host.docker = Some(Dockerd::start(host.netns.name(), host.dir.path()));
    host.docker().ok(&["start", "c1", "c2"]);
    let ip1 = host.docker().ip_of("c1");
    eventually_pings(host.docker(), "c2", &ip1);

    host.docker().ok(&["rm", "-f", "c1", "c2"]);
    host.docker().ok(&["network", "rm", "net1"]);
    host.assert_clean();
}

/// An `--ipv6` network whose v6 subnet is a Calico pool: each container gets a v6 address
/// and a default route through the host side's link-local address, and they ping each other
/// over IPv6 (Felix routes the /128s).
#[test]
fn ipv6_networks_give_containers_v6_addresses_and_routes() {
    let host = Host::start();
    let docker = host.docker();
    host.network("net6", &["--ipv6", "--subnet", POOL6]);
    run(&host, "v1", "net6", &[]);
    run(&host, "v2", "net6", &[]);
    let v6 = |c: &str| {
        docker.ok(&[
            "inspect",
            "-f",
            "{{range .NetworkSettings.Networks}}{{.GlobalIPv6Address}}{{end}}",
            c,
        ])
    };
    let ip1 = v6("v1");
    assert!(
        ip1.starts_with("fd65:6500:"),
        "v1 got {ip1:?}, not an address of {POOL6}"
    );
    let routes = docker.ok(&["exec", "v2", "ip", "-6", "route"]);
    assert!(
        routes.contains("default via fe80::"),
        "v2's IPv6 routes:\n{routes}"
    );
    eventually(&format!("v2 pings {ip1}"), Duration::from_secs(30), || {
        let out = docker.run(&["exec", "v2", "ping6", "-c", "1", "-W", "1", &ip1]);
        out.status
            .success()
            .then_some(())
            .ok_or_else(|| String::from_utf8_lossy(&out.stdout).into_owned())
    });
    docker.ok(&["rm", "-f", "v1", "v2"]);
    docker.ok(&["network", "rm", "net6"]);
    host.assert_clean();
}

/// Scripts written for Calico's libnetwork plugin name the IPAM driver `calico-ipam`: here the
/// driver answers to `<plugin>-ipam` too (dockerd finds it by its own socket), and a container
/// on such a network gets a Calico address and is removed cleanly. The driver's log at the
/// documented `CALICO_LIBNETWORK_LOG=debug` holds every request and answer, and no line of
/// the HTTP/2 stack under etcd's client.
#[test]
fn the_ipam_driver_answers_to_its_upstream_name_and_debug_logs_the_calls() {
    let host = Host::start();
    let ipam = format!("{}-ipam", host.plugin);
    host.network_of("upstream", &ipam, &[]);
    run(&host, "u1", "upstream", &[]);
    let ip = host.docker().ip_of("u1");
    assert!(
        ip.starts_with("10.65."),
        "u1 got {ip:?}, not an address of {POOL}"
    );
    let ipam_driver =
        host.docker()
            .ok(&["network", "inspect", "-f", "{{.IPAM.Driver}}", "upstream"]);
    assert_eq!(ipam_driver, ipam);
    host.docker().ok(&["rm", "-f", "u1"]);
    host.docker().ok(&["network", "rm", "upstream"]);
    host.assert_clean();

    let log = host.driver_log();
    for call in ["IpamDriver.RequestAddress", "NetworkDriver.Join"] {
        assert!(
            log.lines()
                .any(|l| l.contains("DEBUG") && l.contains("request") && l.contains(call)),
            "no debug line of {call}:\n{log}"
        );
    }
    let foreign: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("DEBUG") || l.contains("TRACE"))
        .filter(|l| !l.contains("calico_"))
        .collect();
    assert!(
        foreign.is_empty(),
        "other crates' debug lines: {:#?}",
        &foreign[..foreign.len().min(5)]
    );
}

/// Issue 24's leak: the driver stops (SIGTERM), `docker rm -f` gives up on its calls after
/// dockerd's retries and leaves the endpoint key, the address and the veth, whole, back in the
/// host's namespace (`tmp<ep>@cali<ep>`). Meanwhile the IPAM check reports the endpoint stale
/// (Felix reports it down). The next driver (`--reconcile-interval 1`) collects all three.
#[test]
fn a_container_removed_while_the_driver_is_down_is_collected_by_the_next_driver() {
    let mut host = Host::start_with(&["--reconcile-interval", "1"]);
    host.network("net1", &[]);
    run(&host, "c1", "net1", &["--stop-timeout", "1"]);
    let ip = host.docker().ip_of("c1");
    let endpoints = format!("/calico/v1/host/{}/workload/docker/", host.host);
    let key = host.keys(&endpoints);
    assert_eq!(key.lines().count(), 1, "endpoint keys: {key}");

    host.driver.take();
    let out = host.docker().run(&["rm", "-f", "c1"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        host.docker().run(&["inspect", "c1"]).status.code() != Some(0),
        "c1 is still there after docker rm -f: {err}"
    );
    // What dockerd leaves: the veth whole in the host's namespace, the key, the address.
    let links = host_links(&host.netns);
    assert_eq!(
        links.len(),
        2,
        "the veth pair back in the host's namespace: {links:?}"
    );
    assert!(links.iter().any(|l| l.starts_with("tmp")), "{links:?}");
    assert_eq!(
        host.keys(&endpoints),
        key,
        "the endpoint key went without the driver"
    );
    // The address is no leak (the key lists it), but the IPAM check sees the endpoint as
    // stale: Felix reports it down, its veth having no carrier.
    eventually(
        "ipam check sees the stale endpoint",
        Duration::from_secs(30),
        || {
            let report = ipam_report(host.netns.name(), &host.etcd.endpoint());
            let stale: Vec<&str> = report
                .stale_endpoints
                .iter()
                .map(|s| s.key.as_str())
                .collect();
            (report.leaks.is_empty() && stale == [key.trim()])
                .then_some(())
                .ok_or_else(|| format!("{report:?}"))
        },
    );

    host.start_driver("calico-libnetwork-2", &[]);
    eventually(
        "the next driver collects c1's leftovers",
        Duration::from_secs(30),
        || {
            let log = host.driver_log();
            log.contains("collected what")
                .then_some(())
                .ok_or_else(|| format!("the driver's log:\n{log}"))
        },
    );
    let log = host.driver_log();
    assert!(
        log.contains(&ip),
        "{ip} not among what was collected:\n{log}"
    );
    assert_eq!(host.keys(&endpoints), "", "the endpoint key is left");
    assert_eq!(
        host_links(&host.netns),
        Vec::<String>::new(),
        "the veth is left"
    );
    host.docker().ok(&["network", "rm", "net1"]);
    host.assert_clean();
}
