//! The rig the CNI tests share: a test-made "host" namespace where etcd runs and the plugins
//! are called the way libcni calls them (`CNI_*` variables, the config on stdin), plugging
//! test-made "container" namespaces.
#![allow(dead_code)] // each test file uses part of the rig

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Command;

use calico_testkit::{EtcdServer, NetNs, output_with_stdin, require_tool};
use serde_json::{Value, json};

pub struct Rig {
    pub host: NetNs,
    pub etcd: EtcdServer,
    _scratch: tempfile::TempDir,
    pub scratch: std::path::PathBuf,
}

/// What a plugin call returned.
#[derive(Debug)]
pub struct Reply {
    pub ok: bool,
    /// The signal that ended the plugin, if one did (a crash).
    pub signal: Option<i32>,
    pub json: Value,
    pub stderr: String,
}

impl Rig {
    pub fn new() -> Rig {
        require_tool("ip");
        let host = NetNs::new("cni-host");
        let etcd = EtcdServer::start_in_netns(host.name());
        let scratch = tempfile::tempdir().expect("temp dir");
        let rig = Rig {
            scratch: scratch.path().to_owned(),
            host,
            etcd,
            _scratch: scratch,
        };
        rig.put(
            "/calico/v1/ipam/v4/pool/10.80.0.0-16",
            r#"{"cidr": "10.80.0.0/16"}"#,
        );
        rig.put(
            "/calico/v1/ipam/v6/pool/fd00:80::-64",
            r#"{"cidr": "fd00:80::/64"}"#,
        );
        rig
    }

    pub fn put(&self, key: &str, value: &str) {
        let out = self.etcd.etcdctl(&["put", key, value]);
        assert!(out.status.success(), "etcdctl put {key}: {out:?}");
    }

    pub fn get(&self, key: &str) -> Option<Value> {
        let out = self.etcd.etcdctl(&["get", key, "--print-value-only"]);
        let text = String::from_utf8_lossy(&out.stdout);
        let text = text.trim();
        (!text.is_empty()).then(|| serde_json::from_str(text).unwrap_or(Value::String(text.into())))
    }

    pub fn keys(&self, prefix: &str) -> Vec<String> {
        let out = self
            .etcd
            .etcdctl(&["get", prefix, "--prefix", "--keys-only"]);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect()
    }

    pub fn config(&self, version: &str, ipam: Value) -> Value {
        json!({
            "cniVersion": version,
            "name": "testnet",
            "type": "calico",
            "etcd_endpoints": self.etcd.endpoint(),
            "nodename": "node1",
            "log_level": "info",
            "ipam": ipam,
        })
    }

    /// Runs `plugin` in the host namespace as a runtime would.
    pub fn call(&self, plugin: &str, command: &str, env: &[(&str, &str)], stdin: &Value) -> Reply {
        self.call_raw(plugin, command, env, stdin.to_string().as_bytes())
    }

    pub fn call_raw(
        &self,
        plugin: &str,
        command: &str,
        env: &[(&str, &str)],
        stdin: &[u8],
    ) -> Reply {
        let binary = match plugin {
            "calico" => env!("CARGO_BIN_EXE_calico"),
            _ => env!("CARGO_BIN_EXE_calico-ipam"),
        };
        let plugin_dir = Path::new(binary).parent().unwrap().display().to_string();
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", self.host.name(), binary])
            .env_clear()
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
            .env("CNI_COMMAND", command)
            .env("CNI_PATH", format!("{plugin_dir}:/usr/lib/cni"));
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = output_with_stdin(&mut cmd, &String::from_utf8_lossy(stdin));
        let stdout = String::from_utf8_lossy(&out.stdout);
        let json = if stdout.trim().is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&stdout)
                .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {stdout}"))
        };
        Reply {
            ok: out.status.success(),
            signal: out.status.signal(),
            json,
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    pub fn in_host(&self, args: &[&str]) -> String {
        self.host.run_ok("ip", args, "")
    }
}

pub fn env<'a>(container: &'a str, netns: &'a str, args: &'a str) -> Vec<(&'static str, &'a str)> {
    vec![
        ("CNI_CONTAINERID", container),
        ("CNI_NETNS", netns),
        ("CNI_IFNAME", "eth0"),
        ("CNI_ARGS", args),
    ]
}

pub fn netns_path(ns: &NetNs) -> String {
    format!("/run/netns/{}", ns.name())
}

#[track_caller]
pub fn assert_ok(reply: &Reply) {
    assert!(
        reply.ok,
        "plugin failed: {}\nstderr:\n{}",
        reply.json, reply.stderr
    );
}

pub fn with_prev(mut config: Value, prev: &Value) -> Value {
    config["prevResult"] = prev.clone();
    config
}

/// The variables of a call for interface `ifname` (a second network is `eth1`).
pub fn env_if<'a>(
    container: &'a str,
    netns: &'a str,
    args: &'a str,
    ifname: &'a str,
) -> Vec<(&'static str, &'a str)> {
    let mut vars = env(container, netns, args);
    vars.retain(|(k, _)| *k != "CNI_IFNAME");
    vars.push(("CNI_IFNAME", ifname));
    vars
}

/// The container's routes of one family (`-4`, `-6`) as `ip route` prints them, one per line.
pub fn routes(container: &NetNs, family: &str) -> Vec<String> {
    container
        .run_ok("ip", &[family, "route", "show", "table", "main"], "")
        .lines()
        .map(|l| l.trim().to_owned())
        .collect()
}

/// The interface `ip route get <destination>` leaves the container through.
pub fn route_dev(container: &NetNs, destination: &str) -> String {
    let out = container.run_ok("ip", &["-o", "route", "get", destination], "");
    out.split_whitespace()
        .skip_while(|w| *w != "dev")
        .nth(1)
        .unwrap_or_else(|| panic!("no dev in {out}"))
        .to_owned()
}
