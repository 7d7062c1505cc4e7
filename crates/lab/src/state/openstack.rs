//! What `up --openstack` made, as the lab's state keeps it (`Lab.openstack`): the cloud's
//! addresses and objects, and the VMs `vm boot` made. The clients and the work are
//! `crate::openstack`'s; this is data, so that the state names nothing that runs.

use std::net::{Ipv4Addr, Ipv6Addr};

use serde::{Deserialize, Serialize};

/// What `up --openstack` made, kept in the lab's state.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct OpenStack {
    /// neutron-server as hosts reach it: `http://10.99.0.1:9696`.
    pub neutron_url: String,
    /// neutron-server as the caller reaches it (its relay): `http://127.0.0.1:<port>`.
    pub client_url: String,
    /// Keystone's v3 API as hosts reach it: `http://10.99.0.1:5000/v3`.
    #[serde(default)]
    pub keystone_url: String,
    /// Keystone's v3 API as the caller reaches it (its relay).
    #[serde(default)]
    pub keystone_client_url: String,
    /// The cloud's admin (user and project `admin`), whose credentials `openrc` holds.
    #[serde(default)]
    pub admin_password: String,
    /// The project objects are made in (the admin's).
    pub project: String,
    pub network: String,
    pub subnet: String,
    /// The IPv6 subnet (labs brought up before it existed have none).
    #[serde(default)]
    pub subnet6: String,
    pub security_group: String,
    /// neutron-server's pid (it runs in the fabric), to notice an early exit.
    pub server_pid: Option<i32>,
    /// The VMs `vm boot` made.
    #[serde(default)]
    pub vms: Vec<Vm>,
}

/// One booted VM.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Vm {
    pub name: String,
    pub host: String,
    pub netns: String,
    /// Neutron's port, and what the VM got from it.
    pub port: String,
    pub tap: String,
    pub mac: String,
    pub ip: Ipv4Addr,
    /// The port's IPv6 address, when its network has an IPv6 subnet.
    #[serde(default)]
    pub ip6: Option<Ipv6Addr>,
    /// The port's `device_id` (the VM's name).
    pub device_id: String,
    /// Whether `vm boot` made the port (deleted with the VM), or was given it with `--port`
    /// (unbound and kept, as Nova does with a port it was given).
    #[serde(default = "made")]
    pub port_made: bool,
}

fn made() -> bool {
    true
}

impl Vm {
    /// The endpoint calico-neutron writes for the VM's port.
    pub fn endpoint_key(&self) -> String {
        calico_model::Key::WorkloadEndpoint(calico_model::key::WorkloadEndpointId {
            hostname: self.host.clone(),
            orchestrator: "openstack".to_owned(),
            workload: self.device_id.clone(),
            endpoint: self.port.clone(),
        })
        .to_string()
    }
}
