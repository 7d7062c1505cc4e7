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
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use calico_testkit::{eventually, require_tool};
use common::{BIN, TestLab};

/// A process in a host's namespace, stopped with SIGTERM (then SIGKILL) on drop.
struct Process {
    child: Child,
    log: PathBuf,
}

impl Process {
    fn start(netns: &str, log: PathBuf, program: &Path, args: &[String]) -> Process {
        let out = std::fs::File::create(&log).expect("log file");
        // nsenter execs the program in place: the child's pid is the program's.
        let child = Command::new("nsenter")
            .arg(format!("--net=/run/netns/{netns}"))
            .arg(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("log file"))
            .stderr(out)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", program.display()));
        Process { child, log }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).output();
        for _ in 0..100 {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One lab host's Docker: the driver and dockerd in the host's namespace, state in `dir`.
/// Drop removes the containers (through the driver), stops dockerd, then the driver.
struct DockerHost {
    host: String,
    socket: String,
    plugin: String,
    cgroup: String,
    dockerd: Option<Process>,
    driver: Option<Process>,
    plugin_socket: PathBuf,
}

impl DockerHost {
    fn start(lab: &TestLab, host: &str, scratch: &Path) -> DockerHost {
        let dir = scratch.join(host);
        std::fs::create_dir_all(&dir).expect("host dir");
        let netns = lab.netns(host);
        let plugin = format!("{}-{host}", lab.name);
        let plugin_socket = PathBuf::from(format!("/run/docker/plugins/{plugin}.sock"));
        let d = dir.display();
        let driver = Process::start(
            &netns,
            dir.join("calico-libnetwork.log"),
            &PathBuf::from(BIN).with_file_name("calico-libnetwork"),
            &[
                format!("--plugin-name={plugin}"),
                format!("--hostname={host}"),
                format!("--etcd-endpoints={}", calico_lab::Lab::fabric_endpoint()),
                format!("--docker-socket={d}/docker.sock"),
            ],
        );
        eventually("the driver's socket", Duration::from_secs(10), || {
            plugin_socket
                .exists()
                .then_some(())
                .ok_or_else(|| driver.log())
        });
        std::fs::write(
            dir.join("daemon.json"),
            format!(r#"{{"deprecated-key-path": "{d}/key.json"}}"#),
        )
        .expect("daemon.json");
        let cgroup = netns.clone();
        let dockerd = Process::start(
            &netns,
            dir.join("dockerd.log"),
            Path::new("dockerd"),
            &[
                format!("--config-file={d}/daemon.json"),
                format!("--data-root={d}/data"),
                format!("--exec-root={d}/exec"),
                format!("--host=unix://{d}/docker.sock"),
                format!("--pidfile={d}/docker.pid"),
                format!("--cgroup-parent=/{cgroup}"),
                "--iptables=false".into(),
                "--ip-forward=false".into(),
                "--ip-masq=false".into(),
                "--bridge=none".into(),
            ],
        );
        let docker = DockerHost {
            host: host.to_owned(),
            socket: format!("unix://{d}/docker.sock"),
            plugin,
            cgroup,
            dockerd: Some(dockerd),
            driver: Some(driver),
            plugin_socket,
        };
        eprintln!(
            "{host}: nsenter --net=/run/netns/{netns} docker -H {}",
            docker.socket
        );
        eventually("dockerd answers", Duration::from_secs(30), || {
            let out = docker.run(&["version", "--format", "{{.Server.Version}}"]);
            out.status
                .success()
                .then_some(())
                .ok_or_else(|| String::from_utf8_lossy(&out.stderr).into_owned())
        });
        docker.import_busybox(&scratch.join("rootfs"));
        docker
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new("docker")
            .args(["-H", &self.socket])
            .args(args)
            .output()
            .expect("docker runs")
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "docker {args:?} on {} failed: {}{}\ndriver log:\n{}",
            self.host,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            self.driver.as_ref().map(Process::log).unwrap_or_default()
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    fn import_busybox(&self, root: &Path) {
        let tar = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "tar -C {} -c . | docker -H {} import - bb:local",
                root.display(),
                self.socket
            ))
            .output()
            .expect("sh runs");
        assert!(
            tar.status.success(),
            "docker import: {}",
            String::from_utf8_lossy(&tar.stderr)
        );
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
        self.ok(&[
            "run", "-d", "--name", name, "--net", network, "bb:local", "sleep", "600",
        ]);
        self.ok(&[
            "inspect",
            "-f",
            "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
            name,
        ])
    }

    fn pings(&self, from: &str, to: &str) -> bool {
        self.run(&["exec", from, "ping", "-c", "1", "-W", "1", to])
            .status
            .success()
    }
}

impl Drop for DockerHost {
    fn drop(&mut self) {
        let ids = self.run(&["ps", "-aq"]);
        for id in String::from_utf8_lossy(&ids.stdout).split_whitespace() {
            let _ = self.run(&["rm", "-f", id]);
        }
        self.dockerd.take();
        self.driver.take();
        let _ = std::fs::remove_file(&self.plugin_socket);
        // dockerd leaves its (empty) cgroup parent in each hierarchy.
        for hierarchy in std::fs::read_dir("/sys/fs/cgroup")
            .into_iter()
            .flatten()
            .flatten()
        {
            let _ = std::fs::remove_dir(hierarchy.path().join(&self.cgroup));
        }
    }
}

/// A busybox-static root file system: sh, sleep, ping.
fn busybox_rootfs(root: &Path) {
    std::fs::create_dir_all(root.join("bin")).expect("rootfs");
    let busybox = ["/bin/busybox", "/usr/bin/busybox"]
        .into_iter()
        .find(|p| Path::new(p).is_file())
        .expect("busybox is installed (busybox-static)");
    std::fs::copy(busybox, root.join("bin/busybox")).expect("copy busybox");
    for applet in ["sh", "sleep", "ping"] {
        std::os::unix::fs::symlink("busybox", root.join("bin").join(applet)).expect("applet");
    }
}

fn eventually_pings(docker: &DockerHost, from: &str, to: &str) {
    eventually(
        &format!("{from} on {} pings {to}", docker.host),
        Duration::from_secs(20),
        || {
            docker
                .pings(from, to)
                .then_some(())
                .ok_or_else(|| "no answer".to_owned())
        },
    );
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
    busybox_rootfs(&scratch.path().join("rootfs"));
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
