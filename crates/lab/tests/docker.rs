//! Docker on two lab hosts: each host runs its own dockerd (own data-root, exec-root, socket,
//! `--iptables=false --bridge=none`) and `calico-libnetwork` (its own plugin name: all dockerds
//! of a machine share `/run/docker/plugins`) beside the lab's Felix and calico-node. Containers
//! on one Calico network on both hosts ping each other across hosts (routes through BIRD); one
//! on a second network cannot until the first network's profile lets it; `docker rm` and
//! `docker network rm` leave no endpoint, no veth, no address. A container given a second
//! network with `docker network connect` reaches, and is reached by, that network's container
//! on the other host: its replies leave by the second network's interface.
//!
//! Needs, beyond the lab's tools: dockerd and docker (docker.io), nsenter (util-linux),
//! busybox-static, and `calico-libnetwork` built beside `calico-lab`
//! (`cargo build -p calico-libnetwork`). Debug with `nsenter --net=/run/netns/<lab>.hostN
//! docker -H unix://<dir>/hostN/docker.sock ...` (both printed).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use calico_testkit::{Dockerd, NsProcess, PluginSocket, eventually, require_tool};
use common::{BIN, TestLab};

/// One lab host's Docker: the driver and dockerd in the host's namespace, state in `dir`.
/// Fields drop in order: dockerd (removing the containers through the driver), the driver,
/// the plugin's sockets.
struct DockerHost {
    docker: Dockerd,
    driver: NsProcess,
    _plugin_sockets: [PluginSocket; 2],
    host: String,
    plugin: String,
}

impl DockerHost {
    fn start(lab: &TestLab, host: &str, scratch: &Path) -> DockerHost {
        let dir = scratch.join(host);
        std::fs::create_dir_all(&dir).expect("host dir");
        let netns = lab.netns(host);
        let plugin = format!("{}-{host}", lab.name);
        let plugin_socket = PluginSocket::new(&plugin);
        let ipam_socket = PluginSocket::new(&format!("{plugin}-ipam"));
        let driver = NsProcess::start(
            &netns,
            dir.join("calico-libnetwork.log"),
            &PathBuf::from(BIN).with_file_name("calico-libnetwork"),
            &[
                format!("--plugin-name={plugin}"),
                format!("--hostname={host}"),
                format!("--etcd-endpoints={}", calico_lab::Lab::fabric_endpoint()),
                format!("--docker-socket={}/docker.sock", dir.display()),
            ],
        );
        plugin_socket.wait(&driver);
        eprintln!("{host}: nsenter --net=/run/netns/{netns}");
        let docker = Dockerd::start(&netns, &dir);
        docker.import_busybox();
        DockerHost {
            host: host.to_owned(),
            plugin,
            docker,
            driver,
            _plugin_sockets: [plugin_socket, ipam_socket],
        }
    }

    fn ok(&self, args: &[&str]) -> String {
        self.checked(self.docker.run(args), args)
    }

    /// `out`'s trimmed stdout; a failure names the host and shows the driver's log.
    fn checked(&self, out: Output, args: &[&str]) -> String {
        assert!(
            out.status.success(),
            "docker {args:?} on {} failed: {}{}\ndriver log:\n{}",
            self.host,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            self.driver.log()
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    fn network(&self, name: &str) {
        let plugin = self.plugin.as_str();
        self.ok(&[
            "network",
            "create",
            "--driver",
            plugin,
            "--ipam-driver",
            plugin,
            name,
        ]);
    }

    /// Starts a container on `network`; its address.
    fn container(&self, name: &str, network: &str) -> String {
        let out = self.docker.run_container(name, network, &[]);
        self.checked(out, &["run", name, "--net", network]);
        self.docker.ip_of(name)
    }

    fn pings(&self, from: &str, to: &str) -> bool {
        self.docker.pings(from, to)
    }
}

fn eventually_pings(docker: &DockerHost, from: &str, to: &str) {
    docker
        .docker
        .wait_for_ping(from, to, Duration::from_secs(20));
}

/// The tools and the driver binary the tests need.
fn require_docker() {
    for tool in ["dockerd", "docker", "nsenter", "busybox", "etcdctl"] {
        require_tool(tool);
    }
    let driver = PathBuf::from(BIN).with_file_name("calico-libnetwork");
    assert!(
        driver.is_file(),
        "{} is missing: build it first (cargo build -p calico-libnetwork)",
        driver.display()
    );
}

/// After everything was removed: no endpoint key, no pending record, no address
/// (`calicoctl ipam check`), no veth on either host.
fn assert_clean(lab: &TestLab) {
    let keys = lab.etcdctl(&["get", "--prefix", "--keys-only", "/calico/v1/host/"]);
    let keys = String::from_utf8_lossy(&keys.stdout);
    assert!(!keys.contains("/workload/"), "endpoint keys left:\n{keys}");
    let pending = lab.etcdctl(&["get", "--prefix", "--keys-only", "/calico/libnetwork/"]);
    assert!(
        pending.stdout.iter().all(u8::is_ascii_whitespace),
        "pending records left: {pending:?}"
    );
    let calicoctl = PathBuf::from(BIN).with_file_name("calicoctl");
    let check = Command::new(calicoctl)
        .env("ETCD_ENDPOINTS", lab.state().client_endpoint)
        .args(["ipam", "check"])
        .output()
        .expect("calicoctl runs");
    let report = String::from_utf8_lossy(&check.stdout);
    assert!(check.status.success(), "{report}");
    assert!(report.contains("0 address(es) assigned"), "{report}");
    for host in ["host1", "host2"] {
        let links = lab.in_host(host, "ip", &["-o", "link"]);
        let links = String::from_utf8_lossy(&links.stdout);
        assert!(!links.contains("cali"), "a veth is left on {host}: {links}");
    }
}

#[test]
fn docker_containers_on_two_hosts_share_a_calico_network() {
    require_docker();
    let lab = TestLab::up(2, &[]);
    let scratch = tempfile::tempdir().expect("temp dir");
    let host1 = DockerHost::start(&lab, "host1", scratch.path());
    let host2 = DockerHost::start(&lab, "host2", scratch.path());
    // The same names on both hosts: one profile, one policy, one address space.
    for docker in [&host1, &host2] {
        docker.network("net1");
        docker.network("net2");
    }
    let a = host1.container("web1", "net1");
    let b = host2.container("web2", "net1");
    host2.container("db2", "net2");

    // calico-node announces each host's block; the pings wait for the routes.
    lab.wait();
    eventually_pings(&host2, "web2", &a);
    eventually_pings(&host1, "web1", &b);
    assert!(!host2.pings("db2", &a), "db2 on net2 reached web1 on net1");

    lab.put(
        "/calico/v1/policy/profile/net1/rules",
        r#"{"inbound_rules":[{"action":"allow","src_tag":"net1"},{"action":"allow","src_tag":"net2"}],"outbound_rules":[{"action":"allow"}]}"#,
    );
    lab.wait();
    eventually_pings(&host2, "db2", &a);

    host1.ok(&["rm", "-f", "web1"]);
    host2.ok(&["rm", "-f", "web2", "db2"]);
    for docker in [&host1, &host2] {
        docker.ok(&["network", "rm", "net1", "net2"]);
    }
    assert_clean(&lab);
}

/// `docker network connect net2 both` gives `both` a second interface on net2, a standby
/// beside net1's `eth0` that owns the default route: it is reached on its net2 address by
/// net2's container on the other host and reaches it from that address, its replies leaving by
/// `eth1` (by `eth0` the host's reverse-path check and Felix's anti-spoofing rules drop
/// them). `docker network disconnect` takes the source rule away with the interface.
#[test]
fn a_second_network_connected_later_reaches_and_is_reached_across_hosts() {
    require_docker();
    let lab = TestLab::up(2, &[]);
    let scratch = tempfile::tempdir().expect("temp dir");
    let host1 = DockerHost::start(&lab, "host1", scratch.path());
    let host2 = DockerHost::start(&lab, "host2", scratch.path());
    host1.network("net1");
    host1.network("net2");
    host2.network("net2");
    host1.container("both", "net1");
    let peer = host2.container("peer2", "net2");
    host1.ok(&["network", "connect", "net2", "both"]);
    let second = host1.ok(&[
        "inspect",
        "-f",
        "{{(index .NetworkSettings.Networks \"net2\").IPAddress}}",
        "both",
    ]);
    assert!(
        second.starts_with("10.65."),
        "both's net2 address: {second:?}"
    );

    // What it sends from its net2 address leaves by net2's interface.
    let route = host1.ok(&["exec", "both", "ip", "route", "get", &peer, "from", &second]);
    assert!(
        route.contains("dev eth1"),
        "both's route to {peer} from {second}: {route}"
    );

    lab.wait();
    eventually_pings(&host2, "peer2", &second);
    let from_second = [
        "exec", "both", "ping", "-c", "1", "-W", "1", "-I", &second, &peer,
    ];
    eventually(
        &format!("both pings {peer} from {second}"),
        Duration::from_secs(20),
        || {
            let out = host1.docker.run(&from_second);
            out.status
                .success()
                .then_some(())
                .ok_or_else(|| String::from_utf8_lossy(&out.stdout).into_owned())
        },
    );

    host1.ok(&["network", "disconnect", "net2", "both"]);
    let rules = host1.ok(&["exec", "both", "ip", "rule"]);
    assert!(
        !rules.contains(&second),
        "a rule of {second} outlived its interface:\n{rules}"
    );

    host1.ok(&["rm", "-f", "both"]);
    host2.ok(&["rm", "-f", "peer2"]);
    host1.ok(&["network", "rm", "net1", "net2"]);
    host2.ok(&["network", "rm", "net2"]);
    assert_clean(&lab);
}
