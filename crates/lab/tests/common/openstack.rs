//! OpenStack labs for tests (`up --openstack`): brought up after checking what they need;
//! the operator's client (`openstack`, with the lab's `openrc`) for what an operator does, and
//! Neutron's API through the lab's relay, as the cloud's admin, for what a program does (Nova
//! binding a port) or what the test reads back.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};

use calico_lab::openstack::vm::BUSYBOX;
use calico_openstack::client::Client;
use serde_json::{Value, json};

use super::{BIN, TestLab};

/// A lab of two hosts with OpenStack and `extra` arguments to `up`; fails naming what is
/// missing.
pub fn openstack_lab(extra: &[&str]) -> TestLab {
    for binary in ["calico-neutron", "calico-dhcp-agent"] {
        let path = PathBuf::from(BIN).with_file_name(binary);
        assert!(
            path.is_file(),
            "{} is missing: build it first (cargo build -p calico-neutron)",
            path.display()
        );
    }
    assert!(
        Path::new(BUSYBOX).is_file(),
        "{BUSYBOX} is missing: install busybox (the VMs' DHCP client, the metadata servers)"
    );
    let mut args = vec!["--openstack"];
    args.extend_from_slice(extra);
    TestLab::up_with(2, &args)
}

/// The `openstack` CLI of Debian's python3-openstackclient.
pub const OPENSTACK: &str = "/usr/bin/openstack";

/// The operator's client, with the variables of the lab's `openrc` (as `source openrc` sets
/// them) and none of the caller's `OS_*`.
pub struct Cli {
    env: Vec<(String, String)>,
}

impl Cli {
    pub fn of(lab: &TestLab) -> Cli {
        assert!(
            Path::new(OPENSTACK).is_file(),
            "{OPENSTACK} is missing: install python3-openstackclient (scripts/setup-neutron.sh)"
        );
        let path = lab.state().dir.join("openrc");
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (up --openstack writes it)", path.display()));
        let env = text
            .lines()
            .filter_map(|line| line.strip_prefix("export "))
            .filter_map(|pair| pair.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        Cli { env }
    }

    /// `openstack ARGS`, which must succeed: its stdout.
    pub fn run(&self, args: &[&str]) -> String {
        let mut command = Command::new(OPENSTACK);
        for (name, _) in std::env::vars().filter(|(k, _)| k.starts_with("OS_")) {
            command.env_remove(name);
        }
        let out = command
            .args(args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .output()
            .expect("openstack runs");
        assert!(
            out.status.success(),
            "openstack {}: {}\n{}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// `openstack ARGS -f value -c id`: the id of what the command made or showed.
    pub fn id(&self, args: &[&str]) -> String {
        let mut all = args.to_vec();
        all.extend(["-f", "value", "-c", "id"]);
        self.run(&all)
    }
}

/// Neutron's API through the lab's relay.
pub struct Neutron {
    client: Client,
    runtime: tokio::runtime::Runtime,
}

impl Neutron {
    pub fn of(lab: &TestLab) -> Neutron {
        let openstack = lab.state().openstack.expect("an OpenStack lab");
        Neutron {
            client: openstack.client().expect("neutron's client"),
            runtime: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("tokio runtime"),
        }
    }

    pub fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        self.runtime
            .block_on(self.client.call(method, path, body.as_ref()))
            .unwrap_or_else(|e| panic!("neutron {method} {path}: {e}"))
    }

    /// Creates a `singular` (`port`, `security_group_rule`, ...) in the lab's project.
    pub fn create(&self, singular: &str, fields: Value) -> Value {
        let collection = format!("/v2.0/{}s", singular.replace('_', "-"));
        self.call("POST", &collection, Some(json!({ singular: fields })))[singular].clone()
    }
}

/// A process the test started, killed when dropped.
pub struct Guard(pub Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
