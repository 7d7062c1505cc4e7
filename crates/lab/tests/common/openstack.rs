//! OpenStack labs for tests (`up --openstack`): brought up after checking what they need, and
//! Neutron's API through the lab's relay.

use std::path::{Path, PathBuf};
use std::process::Child;

use calico_lab::openstack::PROJECT;
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
            "{} is missing: build it first (cargo build -p calico-openstack)",
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

/// Neutron's API through the lab's relay.
pub struct Neutron {
    client: Client,
    runtime: tokio::runtime::Runtime,
}

impl Neutron {
    pub fn of(lab: &TestLab) -> Neutron {
        let openstack = lab.state().openstack.expect("an OpenStack lab");
        Neutron {
            client: Client::new(&openstack.client_url).expect("neutron url"),
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
    pub fn create(&self, singular: &str, mut fields: Value) -> Value {
        fields["project_id"] = json!(PROJECT);
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
