//! A real container runtime: podman (Debian's, CNI backend, runc) on two lab hosts starts a
//! container on each on a Calico network; they ping each other through Felix's policy; removing
//! them frees their addresses and endpoints. The containers run a busybox-static root file
//! system, so no image registry is needed.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use calico_linux::Netns;
use calico_testkit::require_tool;
use common::{BIN, TestLab};
use serde_json::{Value, json};

const NETWORK: &str = "calico-net";

/// podman for one lab host: its own storage, config and CNI config directory; every container
/// it made is removed on drop.
struct Podman {
    host: String,
    netns: String,
    dir: PathBuf,
}

impl Podman {
    fn new(lab: &TestLab, host: &str, scratch: &Path) -> Podman {
        let dir = scratch.join(host);
        let net_dir = dir.join("net.d");
        std::fs::create_dir_all(&net_dir).unwrap();
        let plugins = Path::new(BIN).parent().unwrap();
        let conflist = json!({
            "cniVersion": "1.0.0",
            "name": NETWORK,
            "plugins": [{
                "type": "calico",
                "etcd_endpoints": calico_lab::Lab::fabric_endpoint(),
                "nodename": host,
                "log_level": "info",
                "ipam": {"type": "calico-ipam"},
            }],
        });
        std::fs::write(net_dir.join("10-calico.conflist"), conflist.to_string()).unwrap();
        // runc (crun refuses this VM's hybrid cgroups), explicit ulimits (no CAP_SYS_RESOURCE).
        let conf = format!(
            "[containers]\ndefault_ulimits = [\"nofile=4096:4096\", \"nproc=4096:4096\"]\n\
             [engine]\nruntime = \"runc\"\ncgroup_manager = \"cgroupfs\"\nevents_logger = \"file\"\n\
             [network]\nnetwork_backend = \"cni\"\ncni_plugin_dirs = [\"{}\", \"/usr/lib/cni\"]\n\
             network_config_dir = \"{}\"\n",
            plugins.display(),
            net_dir.display()
        );
        std::fs::write(dir.join("containers.conf"), conf).unwrap();
        Podman {
            host: host.to_owned(),
            netns: format!("/run/netns/{}.{host}", lab.name),
            dir,
        }
    }

    /// Runs podman inside the host's network namespace. `nsenter`, not `ip netns exec`: the
    /// latter remounts /sys, hiding the cgroup file systems runc needs.
    fn run(&self, args: &[&str]) -> Output {
        let root = self.dir.join("root");
        let runroot = self.dir.join("run");
        Netns::at_path(&self.netns)
            .command("podman")
            .env("CONTAINERS_CONF", self.dir.join("containers.conf"))
            .arg("--root")
            .arg(root)
            .arg("--runroot")
            .arg(runroot)
            .args(["--storage-driver", "vfs"])
            .args(args)
            .output()
            .expect("podman runs")
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "podman {args:?} on {} failed: {}\n{}",
            self.host,
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }
}

impl Drop for Podman {
    fn drop(&mut self) {
        let _ = self.run(&["rm", "--force", "--all", "--time", "0"]);
    }
}

/// A root file system of busybox-static: sh, sleep, ping.
fn busybox_rootfs(scratch: &Path) -> PathBuf {
    let root = scratch.join("rootfs");
    std::fs::create_dir_all(root.join("bin")).unwrap();
    std::fs::create_dir_all(root.join("etc")).unwrap();
    let busybox = ["/bin/busybox", "/usr/bin/busybox"]
        .into_iter()
        .find(|p| Path::new(p).is_file())
        .expect("busybox is installed (busybox-static)");
    std::fs::copy(busybox, root.join("bin/busybox")).unwrap();
    for applet in ["sh", "sleep", "ping", "ip"] {
        std::os::unix::fs::symlink("busybox", root.join("bin").join(applet)).unwrap();
    }
    std::fs::write(root.join("etc/passwd"), "root:x:0:0:root:/:/bin/sh\n").unwrap();
    std::fs::write(root.join("etc/group"), "root:x:0:\n").unwrap();
    root
}

/// The workload endpoints under a prefix: key → value.
fn endpoints(lab: &TestLab, prefix: &str) -> Vec<(String, Value)> {
    let out = lab.etcdctl(&["get", prefix, "--prefix"]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let lines: Vec<&str> = text.lines().collect();
    lines
        .chunks(2)
        .filter(|pair| pair.len() == 2 && pair[0].contains("/workload/"))
        .map(|pair| (pair[0].to_owned(), serde_json::from_str(pair[1]).unwrap()))
        .collect()
}

fn ping_until(podman: &Podman, container: &str, ip: &str) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let out = podman.run(&["exec", container, "ping", "-c", "1", "-W", "1", ip]);
        if out.status.success() {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "{container} cannot ping {ip}: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn podman_containers_on_two_hosts_reach_each_other_and_leave_nothing_behind() {
    for tool in ["podman", "runc", "busybox", "nsenter", "etcdctl"] {
        require_tool(tool);
    }
    let lab = TestLab::up(2, &[]);
    let scratch = tempfile::tempdir().unwrap();
    let rootfs = busybox_rootfs(scratch.path());
    let rootfs = rootfs.to_str().unwrap();
    let host1 = Podman::new(&lab, "host1", scratch.path());
    let host2 = Podman::new(&lab, "host2", scratch.path());
    let run = |podman: &Podman, name: &str| {
        let args = [
            "run",
            "--detach",
            "--network",
            NETWORK,
            "--name",
            name,
            "--rootfs",
            rootfs,
        ];
        podman.ok(&[&args[..], &["/bin/sleep", "600"]].concat())
    };
    let a = run(&host1, "a");
    let b = run(&host2, "b");

    // Each container is a `cni` endpoint of its host, with the network's profile.
    let on1 = endpoints(&lab, "/calico/v1/host/host1/");
    let on2 = endpoints(&lab, "/calico/v1/host/host2/");
    assert_eq!(on1.len(), 1, "{on1:?}");
    assert_eq!(on2.len(), 1, "{on2:?}");
    assert!(
        on1[0]
            .0
            .contains(&format!("/workload/cni/{a}/endpoint/eth0")),
        "{on1:?}"
    );
    assert!(
        on2[0]
            .0
            .contains(&format!("/workload/cni/{b}/endpoint/eth0")),
        "{on2:?}"
    );
    assert_eq!(on1[0].1["profile_ids"], json!([NETWORK]));
    let ip_of = |endpoint: &Value| {
        let net = endpoint["ipv4_nets"][0].as_str().unwrap();
        net.split('/').next().unwrap().to_owned()
    };
    let (ip_a, ip_b) = (ip_of(&on1[0].1), ip_of(&on2[0].1));

    // calico-node on each host announces the container's block over BGP; the pings wait for it.
    lab.wait();
    ping_until(&host2, "b", &ip_a).unwrap();
    ping_until(&host1, "a", &ip_b).unwrap();

    // Policy applies to them like to any endpoint: a profile that drops inbound cuts a off.
    lab.put(
        &format!("/calico/v1/policy/profile/{NETWORK}/rules"),
        r#"{"inbound_rules": [{"action": "deny"}], "outbound_rules": [{"action": "allow"}]}"#,
    );
    lab.wait();
    let blocked = host2.run(&["exec", "b", "ping", "-c", "1", "-W", "1", &ip_a]);
    assert!(
        !blocked.status.success(),
        "the ping got through a deny-all profile"
    );

    host1.ok(&["rm", "--force", "--time", "0", "a"]);
    host2.ok(&["rm", "--force", "--time", "0", "b"]);
    assert!(
        endpoints(&lab, "/calico/v1/host/").is_empty(),
        "endpoints left behind"
    );
    let handles = lab.etcdctl(&["get", "/calico/ipam/v2/handle/", "--prefix", "--keys-only"]);
    assert!(
        handles.stdout.iter().all(u8::is_ascii_whitespace),
        "handles left: {handles:?}"
    );
    let calicoctl = Path::new(BIN).with_file_name("calicoctl");
    let check = Command::new(calicoctl)
        .env("ETCD_ENDPOINTS", lab.state().client_endpoint)
        .args(["ipam", "check"])
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&check.stdout);
    assert!(check.status.success(), "{report}");
    assert!(report.contains("0 address(es) assigned"), "{report}");
    for host in ["host1", "host2"] {
        let links = lab.in_host(host, "ip", &["-o", "link"]);
        let links = String::from_utf8_lossy(&links.stdout);
        assert!(!links.contains("cali"), "a veth is left on {host}: {links}");
    }
}
