//! Docker on two lab hosts: each host runs its own dockerd (own data-root, exec-root, socket,
//! `--iptables=false --bridge=none`) and `calico-libnetwork` (its own plugin name: all dockerds
//! of a machine share `/run/docker/plugins`) beside the lab's Felix and calico-node. Containers
//! on one Calico network on both hosts ping each other across hosts (routes through BIRD); one
//! on a second network cannot until the first network's profile lets it; `docker rm` and
//! `docker network rm` leave no endpoint, no veth, no address.
//!
//! Needs, beyond the lab's tools: dockerd and docker (docker.io), nsenter (util-linux),
//! busybox-static, and `calico-libnetwork` built beside `calico-lab`
//! (`cargo build -p calico-libnetwork`). Debug with `nsenter --net=/run/netns/<lab>.hostN
//! docker -H unix://<dir>/hostN/docker.sock ...` (both printed).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use calico_testkit::{Dockerd, NsProcess, PluginSocket, require_tool};
use common::{BIN, TestLab};

/// One lab host's Docker: the driver and dockerd in the host's namespace, state in `dir`.
/// Fields drop in order: dockerd (removing the containers through the driver), the driver,
/// the plugin's socket.
struct DockerHost {
    docker: Dockerd,
    driver: NsProcess,
    _plugin_socket: PluginSocket,
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
            _plugin_socket: plugin_socket,
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

#[test]
fn docker_containers_on_two_hosts_share_a_calico_network() {
    for tool in ["dockerd", "docker", "nsenter", "busybox", "etcdctl"] {
        require_tool(tool);
    }
    let driver = PathBuf::from(BIN).with_file_name("calico-libnetwork");
    assert!(
        driver.is_file(),
        "{} is missing: build it first (cargo build -p calico-libnetwork)",
        driver.display()
    );
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
