//! `ipam.type: calico-ipam` runs Calico IPAM inside the `calico` plugin: no `calico-ipam`
//! binary is needed on `CNI_PATH`, while any other IPAM type is still looked up there. IPAM
//! calls take the per-host lock file the config names (`ipam_lock_file`): a plugin run waits
//! while another process holds it.

mod common;

use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use calico_ipam::HostLock;
use calico_testkit::{NetNs, eventually};
use common::{Rig, assert_ok, env, netns_path, with_prev};
use serde_json::{Value, json};

#[test]
fn calico_ipam_runs_in_the_plugin_with_no_calico_ipam_binary_on_cni_path() {
    let rig = Rig::new();
    let container = NetNs::new("cni-inproc");
    let path = netns_path(&container);
    let empty = rig.scratch.join("empty-cni-path");
    std::fs::create_dir_all(&empty).unwrap();
    let lock_file = rig.scratch.join("run/ipam.lock");
    let mut config = rig.config("1.0.0", json!({"type": "calico-ipam", "assign_ipv6": true}));
    config["ipam_lock_file"] = json!(lock_file);
    let mut vars = env("inproc", &path, "");
    let cni_path = empty.display().to_string();
    vars.push(("CNI_PATH", &cni_path));

    let add = rig.call("calico", "ADD", &vars, &config);
    assert_ok(&add);
    let ips = add.json["ips"].as_array().unwrap();
    assert_eq!(ips.len(), 2, "an IPv4 and an IPv6 address: {}", add.json);
    assert!(
        ips[0]["address"].as_str().unwrap().starts_with("10.80."),
        "{}",
        add.json
    );
    assert_eq!(
        rig.keys("/calico/ipam/v2/handle/"),
        ["/calico/ipam/v2/handle/testnet.inproc"]
    );
    assert!(lock_file.is_file(), "IPAM took the lock at ipam_lock_file");
    assert_ok(&rig.call(
        "calico",
        "CHECK",
        &vars,
        &with_prev(config.clone(), &add.json),
    ));
    assert_ok(&rig.call("calico", "DEL", &vars, &config));
    assert!(rig.keys("/calico/ipam/v2/handle/").is_empty());
    assert!(rig.keys("/calico/v1/host/").is_empty());

    // Any other IPAM type is a plugin to run, and it is not there.
    config["ipam"] = json!({"type": "host-local", "subnet": "10.90.0.0/24"});
    let add = rig.call("calico", "ADD", &vars, &config);
    assert!(!add.ok, "{}", add.json);
    assert_eq!(add.json["code"], 7, "{}", add.json);
    assert_eq!(
        add.json["msg"],
        format!("ipam.type: plugin \"host-local\" not found in CNI_PATH ({cni_path})"),
    );
    let links = container.run_ok("ip", &["-o", "link"], "");
    assert_eq!(links.lines().count(), 1, "only lo: {links}");
}

#[test]
fn an_add_waits_for_the_host_lock_another_process_holds() {
    let rig = Rig::new();
    let container = NetNs::new("cni-locked");
    let path = netns_path(&container);
    let lock_file = rig.scratch.join("ipam.lock");
    let mut config = rig.config("1.0.0", json!({"type": "calico-ipam"}));
    config["ipam_lock_file"] = json!(lock_file);
    let lock = HostLock::new(&lock_file);
    let held = lock
        .try_acquire()
        .unwrap()
        .expect("the test holds the lock");
    let inode = std::fs::metadata(&lock_file).unwrap().ino();

    let mut add = Running(Some(spawn_calico(
        &rig,
        "ADD",
        &env("locked", &path, ""),
        &config,
    )));
    eventually(
        "the plugin to wait for the lock file",
        Duration::from_secs(20),
        || match waiters_on(inode) {
            0 => Err(std::fs::read_to_string("/proc/locks").unwrap()),
            _ => Ok(()),
        },
    );
    assert!(
        add.child().try_wait().unwrap().is_none(),
        "ADD finished while the lock was held"
    );
    assert!(
        rig.keys("/calico/ipam/v2/handle/").is_empty(),
        "no address may be assigned while another process holds the lock"
    );
    drop(held);
    let out = add.0.take().unwrap().wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "ADD after the lock came free: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        rig.keys("/calico/ipam/v2/handle/"),
        ["/calico/ipam/v2/handle/testnet.locked"]
    );
    assert_ok(&rig.call("calico", "DEL", &env("locked", &path, ""), &config));
}

/// A plugin process, killed if the test ends before it does.
struct Running(Option<std::process::Child>);

impl Running {
    fn child(&mut self) -> &mut std::process::Child {
        self.0.as_mut().expect("running")
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The `calico` plugin started in the host namespace, not waited for.
fn spawn_calico(
    rig: &Rig,
    command: &str,
    vars: &[(&str, &str)],
    config: &Value,
) -> std::process::Child {
    let binary = env!("CARGO_BIN_EXE_calico");
    let dir = Path::new(binary).parent().unwrap().display().to_string();
    let mut child = Command::new("ip")
        .args(["netns", "exec", rig.host.name(), binary])
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .env("CNI_COMMAND", command)
        .env("CNI_PATH", dir)
        .envs(vars.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("calico starts");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(config.to_string().as_bytes()).unwrap();
    child
}

/// How many `flock` waiters `/proc/locks` lists on the file with this inode (lines such as
/// `1: -> FLOCK  ADVISORY  WRITE 4242 00:2a:1234 0 EOF`).
fn waiters_on(inode: u64) -> usize {
    let locks = std::fs::read_to_string("/proc/locks").expect("/proc/locks");
    locks
        .lines()
        .filter(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            words.get(1) == Some(&"->")
                && words.get(2) == Some(&"FLOCK")
                && words
                    .get(6)
                    .and_then(|id| id.rsplit(':').next())
                    .is_some_and(|ino| ino == inode.to_string())
        })
        .count()
}
