//! containerd's own CNI client: `ctr run --cni` (go-cni over libcni) plugs a container into
//! Calico with the built plugins, and `--rm` takes it out again.
//!
//! ctr reads the first conflist of `/etc/cni/net.d` and the plugins of `/opt/cni/bin`, fixed
//! paths: it runs in a private mount namespace where both are the test's own directories, and
//! in the test's "host" network namespace (`nsenter --net`, not `ip netns exec`, which would
//! remount `/sys` and hide the cgroup file systems from runc). containerd runs with its own
//! root, state, socket, plugin directory, FIFOs and runc root in a temporary directory and is
//! stopped on drop (containerd 1.6 still puts its shims' sockets in `/run/containerd/s`).

mod common;

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use calico_testkit::{eventually, require_tool};
use common::Rig;
use serde_json::{Value, json};

/// A containerd of the test's own; killed (with what it runs) on drop.
struct Containerd {
    child: Child,
    dir: PathBuf,
}

impl Containerd {
    fn start(dir: &Path) -> Containerd {
        for tool in ["containerd", "ctr"] {
            if Command::new("sh")
                .args(["-c", &format!("command -v {tool}")])
                .output()
                .map_or(true, |o| !o.status.success())
            {
                panic!(
                    "required tool `{tool}` is not installed: run scripts/setup-test-deps.sh \
                     (or apt-get install -y containerd)"
                );
            }
        }
        require_tool("runc");
        let config = format!(
            "version = 2\nroot = \"{d}/root\"\nstate = \"{d}/state\"\n\
             disabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n\
             [plugins.\"io.containerd.internal.v1.opt\"]\n  path = \"{d}/opt\"\n\
             [grpc]\n  address = \"{d}/containerd.sock\"\n\
             [ttrpc]\n  address = \"{d}/containerd.sock.ttrpc\"\n",
            d = dir.display()
        );
        std::fs::write(dir.join("config.toml"), config).unwrap();
        let log = std::fs::File::create(dir.join("containerd.log")).unwrap();
        let child = Command::new("containerd")
            .arg("--config")
            .arg(dir.join("config.toml"))
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("cannot start containerd");
        let containerd = Containerd {
            child,
            dir: dir.to_owned(),
        };
        let socket = containerd.socket();
        eventually("containerd's socket", Duration::from_secs(20), || {
            socket
                .exists()
                .then_some(())
                .ok_or_else(|| containerd.log())
        });
        containerd
    }

    fn socket(&self) -> PathBuf {
        self.dir.join("containerd.sock")
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("containerd.log")).unwrap_or_default()
    }

    fn ctr(&self, args: &[&str]) -> std::process::Output {
        Command::new("ctr")
            .arg("--address")
            .arg(self.socket())
            .args(args)
            .output()
            .expect("cannot run ctr")
    }
}

impl Drop for Containerd {
    fn drop(&mut self) {
        // A container left by a failed test: killed and removed before containerd goes.
        let _ = self.ctr(&["task", "kill", "--signal", "SIGKILL", "calico1"]);
        let _ = self.ctr(&["task", "delete", "--force", "calico1"]);
        let _ = self.ctr(&["container", "delete", "calico1"]);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A root file system of busybox-static: `sh`, `ip`, `cat`, `sleep`, `test`.
fn busybox_rootfs(dir: &Path) -> PathBuf {
    require_tool("busybox");
    let rootfs = dir.join("rootfs");
    for sub in ["bin", "etc", "proc", "sys", "dev", "tmp"] {
        std::fs::create_dir_all(rootfs.join(sub)).unwrap();
    }
    std::fs::copy("/bin/busybox", rootfs.join("bin/busybox")).unwrap();
    for applet in ["sh", "ip", "cat", "sleep", "test", "["] {
        symlink("busybox", rootfs.join("bin").join(applet)).unwrap();
    }
    std::fs::write(rootfs.join("etc/passwd"), "root:x:0:0:root:/:/bin/sh\n").unwrap();
    std::fs::write(rootfs.join("etc/group"), "root:x:0:\n").unwrap();
    rootfs
}

#[test]
fn ctr_run_with_cni_plugs_the_container_in_and_rm_takes_it_out() {
    require_tool("unshare");
    require_tool("nsenter");
    let rig = Rig::new();
    let dir = rig.scratch.clone();
    let containerd = Containerd::start(&dir);
    let rootfs = busybox_rootfs(&dir);
    // The plugin directory and the network configuration ctr will see.
    let (bin, netd) = (dir.join("bin"), dir.join("net.d"));
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(&netd).unwrap();
    for plugin in [
        env!("CARGO_BIN_EXE_calico"),
        env!("CARGO_BIN_EXE_calico-ipam"),
    ] {
        let name = Path::new(plugin).file_name().unwrap();
        symlink(plugin, bin.join(name)).unwrap();
    }
    let mut plugin = rig.config("1.0.0", json!({"type": "calico-ipam"}));
    plugin.as_object_mut().unwrap().remove("cniVersion");
    plugin.as_object_mut().unwrap().remove("name");
    let conflist = json!({"cniVersion": "1.0.0", "name": "testnet", "plugins": [plugin]});
    std::fs::write(netd.join("10-calico.conflist"), conflist.to_string()).unwrap();

    // The container reports its network, then waits for the test to let it go.
    let script = "ip -o addr show dev eth0; ip route; cat /sys/class/net/eth0/address; \
                  echo ready > /tmp/ready; while [ ! -e /tmp/go ]; do sleep 0.05; done";
    let setup = format!(
        "set -e; mkdir -p /etc/cni/net.d; mount -t tmpfs tmpfs /opt; mkdir -p /opt/cni/bin; \
         mount --bind {bin} /opt/cni/bin; mount --bind {netd} /etc/cni/net.d; \
         exec ctr --address {socket} run --rm --cni --fifo-dir {scratch}/fifo \
         --runc-root {scratch}/runc --rootfs {rootfs} calico1 /bin/sh -c '{script}'",
        scratch = dir.display(),
        bin = bin.display(),
        netd = netd.display(),
        socket = containerd.socket().display(),
        rootfs = rootfs.display(),
    );
    let host_netns = format!("--net=/run/netns/{}", rig.host.name());
    let run = Command::new("nsenter")
        .args([
            host_netns.as_str(),
            "unshare",
            "--mount",
            "--propagation",
            "private",
        ])
        .args(["sh", "-c", &setup])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot start ctr");
    let ready = rootfs.join("tmp/ready");
    eventually("the container to start", Duration::from_secs(30), || {
        ready.exists().then_some(()).ok_or_else(|| containerd.log())
    });

    // While it runs: one cni endpoint, named by ctr's container id, listing its address.
    let keys = rig.keys("/calico/v1/host/node1/workload/");
    assert_eq!(keys.len(), 1, "{keys:?}");
    assert!(keys[0].ends_with("/endpoint/eth0"), "{keys:?}");
    let endpoint: Value = rig.get(&keys[0]).unwrap();
    let address = endpoint["ipv4_nets"][0].as_str().unwrap().to_owned();
    let veth = endpoint["name"].as_str().unwrap().to_owned();
    assert!(rig.in_host(&["-o", "link", "show", &veth]).contains("UP"));

    std::fs::write(rootfs.join("tmp/go"), "").unwrap();
    let out = run.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "ctr failed: {stdout}\n{stderr}");
    // What the container saw: its address, the gateway routes, the endpoint's MAC.
    assert!(stdout.contains(&format!("inet {address}")), "{stdout}");
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("default via 169.254.1.1 dev eth0") && l.contains("metric 1024")),
        "{stdout}"
    );
    assert!(
        stdout.contains("169.254.1.1 dev eth0 scope link"),
        "{stdout}"
    );
    assert!(
        stdout.contains(endpoint["mac"].as_str().unwrap()),
        "{stdout}\n{endpoint}"
    );

    // `--rm`: ctr's DEL (the container's namespace already gone) released everything.
    assert!(rig.keys("/calico/v1/host/").is_empty(), "endpoint left");
    assert!(
        rig.keys("/calico/ipam/v2/handle/").is_empty(),
        "address left"
    );
    assert!(!rig.in_host(&["-o", "link"]).contains(&veth), "veth left");
}
