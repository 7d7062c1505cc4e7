//! What a lab is made of, kept in `<state dir>/<lab>/state.json` so that every command (and
//! `down` after a crash) knows which namespaces, processes and files belong to it.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};

mod openstack;

pub use openstack::{OpenStack, Vm};

/// The fabric's bridge address: etcd listens here, and it is every host's default gateway.
pub const FABRIC_IP: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 1);
pub const FABRIC_IP6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x99, 0, 0, 0, 0, 0, 1);
/// etcd's client port on the fabric.
pub const ETCD_PORT: u16 = 2379;
/// TCP and UDP ports every workload listens on.
pub const SERVED_PORTS: &[u16] = &[80, 443, 5432, 6379, 8080];

/// One lab.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Lab {
    pub name: String,
    pub dir: PathBuf,
    /// `http://127.0.0.1:<port>[,…]`: etcd as the caller's shell reaches it, one relay per
    /// member, comma-separated (as `ETCD_ENDPOINTS` takes them).
    pub client_endpoint: String,
    /// The etcd members (empty in the state of a lab from before clusters: one member in the
    /// fabric).
    #[serde(default)]
    pub etcd: Vec<EtcdMember>,
    pub hosts: Vec<Host>,
    pub workloads: Vec<Workload>,
    /// Processes started in the caller's namespace (the relay); the rest die with their
    /// namespace.
    pub pids: Vec<i32>,
    /// The `FELIX_*` settings every Felix of this lab was started with.
    #[serde(default)]
    pub felix_env: Vec<(String, String)>,
    /// How many host subnets the fabric routes between (`up --subnets`; 1: one bridge).
    #[serde(default = "first_subnet")]
    pub subnets: u32,
    /// Neutron and its objects (`up --openstack`); `None` for a lab without OpenStack.
    #[serde(default)]
    pub openstack: Option<OpenStack>,
    /// The flow aggregator as the caller's shell reaches it (`http://127.0.0.1:<relay port>`);
    /// `None` for a lab without one (`up --no-flows`).
    #[serde(default)]
    pub flows_url: Option<String>,
    /// The `calico-felix` binary `up` started (its `--felix`, `$CALICO_FELIX`, or the one
    /// found): `restart-felix` starts the same one. `None` in the state of an older lab.
    #[serde(default)]
    pub felix: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Host {
    pub name: String,
    pub netns: String,
    pub ip: Ipv4Addr,
    pub ip6: Ipv6Addr,
    pub felix_pid: Option<i32>,
    /// calico-node (BGP: registration, BIRD's configuration, BIRD).
    #[serde(default)]
    pub node_pid: Option<i32>,
    /// The host's subnet, from 1: `10.99.<subnet - 1>.0/24` on the fabric's bridge
    /// `br<subnet - 1>`.
    #[serde(default = "first_subnet")]
    pub subnet: u32,
}

fn first_subnet() -> u32 {
    1
}

/// The fabric's address on subnet `subnet` (from 1): `10.99.<subnet - 1>.1`, the gateway of
/// that subnet's hosts (subnet 1: [`FABRIC_IP`]).
pub fn subnet_gateway(subnet: u32) -> Ipv4Addr {
    Ipv4Addr::new(10, 99, (subnet - 1) as u8, 1)
}

/// The fabric's IPv6 address on subnet `subnet`: `fd00:99:<subnet - 1>::1` (subnet 1:
/// [`FABRIC_IP6`]).
pub fn subnet_gateway6(subnet: u32) -> Ipv6Addr {
    Ipv6Addr::new(0xfd00, 0x99, (subnet - 1) as u16, 0, 0, 0, 0, 1)
}

impl Host {
    /// The host's default gateway: the fabric's address on its subnet.
    pub fn gateway(&self) -> Ipv4Addr {
        subnet_gateway(self.subnet)
    }

    pub fn gateway6(&self) -> Ipv6Addr {
        subnet_gateway6(self.subnet)
    }
}

/// One etcd member: `etcd` in the fabric (a one-member lab) or `etcdN` in `<lab>.etcdN`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EtcdMember {
    pub name: String,
    pub netns: String,
    /// Where it serves clients (port [`ETCD_PORT`]) and peers (port 2380; a lone member in the
    /// fabric talks to no peer and listens for them on 127.0.0.1 only).
    pub ip: Ipv4Addr,
    pub pid: Option<i32>,
    /// `http://127.0.0.1:<port>`: its relay, as the caller reaches it.
    pub client: String,
}

impl EtcdMember {
    /// Its client URL on the fabric, as hosts reach it.
    pub fn url(&self) -> String {
        format!("http://{}:{ETCD_PORT}", self.ip)
    }

    /// The name of its relay's log (and port file).
    pub fn relay_name(&self) -> String {
        match self.name.as_str() {
            "etcd" => "relay".to_owned(),
            member => format!("relay-{member}"),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Workload {
    pub name: String,
    pub host: String,
    pub netns: String,
    /// The host side of the veth (`cali` + 11 hex digits).
    pub interface: String,
    pub ips: Vec<IpAddr>,
    pub key: String,
}

impl Lab {
    /// Where labs keep their state: `$CALICO_LAB_DIR`, or `/run/calico-lab`.
    pub fn base_dir() -> PathBuf {
        std::env::var_os("CALICO_LAB_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/run/calico-lab"))
    }

    pub fn dir_of(name: &str) -> PathBuf {
        Lab::base_dir().join(name)
    }

    pub fn fabric_netns(name: &str) -> String {
        format!("{name}.fabric")
    }

    /// etcd as hosts reach it over the fabric when the lab has one member (the default).
    pub fn fabric_endpoint() -> String {
        format!("http://{FABRIC_IP}:{ETCD_PORT}")
    }

    /// Every member's client URL as hosts reach them over the fabric, comma-separated: what
    /// Felix, calico-node and the CNI plugin are given.
    pub fn etcd_endpoints(&self) -> String {
        if self.etcd.is_empty() {
            return Lab::fabric_endpoint();
        }
        let urls: Vec<String> = self.etcd.iter().map(EtcdMember::url).collect();
        urls.join(",")
    }

    /// The members' relays, as the caller reaches them.
    pub fn client_endpoints(&self) -> Vec<String> {
        self.client_endpoint
            .split(',')
            .filter(|e| !e.is_empty())
            .map(str::to_owned)
            .collect()
    }

    pub fn member(&self, name: &str) -> anyhow::Result<&EtcdMember> {
        let names: Vec<&str> = self.etcd.iter().map(|m| m.name.as_str()).collect();
        match self.etcd.iter().find(|m| m.name == name) {
            Some(member) => Ok(member),
            None => bail!(
                "no etcd member {name:?} in lab {:?}; members: {}",
                self.name,
                names.join(", ")
            ),
        }
    }

    pub fn load(name: &str) -> anyhow::Result<Lab> {
        let path = Lab::dir_of(name).join("state.json");
        let text = std::fs::read_to_string(&path).with_context(|| {
            format!(
                "lab {name:?} is not up ({} missing); run `calico-lab up`",
                path.display()
            )
        })?;
        serde_json::from_str(&text).with_context(|| format!("corrupt {}", path.display()))
    }

    pub fn save(&self) -> anyhow::Result<()> {
        let path = self.dir.join("state.json");
        let tmp = self.dir.join("state.json.tmp");
        std::fs::write(&tmp, serde_json::to_string_pretty(self)?)?;
        std::fs::rename(&tmp, &path).with_context(|| format!("cannot write {}", path.display()))
    }

    pub fn host(&self, name: &str) -> anyhow::Result<&Host> {
        match self.hosts.iter().find(|h| h.name == name) {
            Some(host) => Ok(host),
            None => bail!(
                "no host {name:?} in lab {:?}; hosts: {}",
                self.name,
                self.hosts
                    .iter()
                    .map(|h| h.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }

    pub fn workload(&self, name: &str) -> anyhow::Result<&Workload> {
        match self.workloads.iter().find(|w| w.name == name) {
            Some(w) => Ok(w),
            None => bail!("no workload {name:?} in lab {:?}", self.name),
        }
    }

    pub fn log_path(&self, process: &str) -> PathBuf {
        self.dir.join(format!("{process}.log"))
    }
}

/// A name usable in namespace and key names: letters, digits, `-` and `_`, at most 40.
pub fn check_name(what: &str, name: &str) -> anyhow::Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 40
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if !ok {
        bail!("{what} {name:?} is not valid: use 1 to 40 letters, digits, '-' or '_'");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        assert!(check_name("workload", "web-1").is_ok());
        let err = check_name("workload", "a/b").unwrap_err().to_string();
        assert!(err.contains("workload \"a/b\""), "{err}");
    }

    #[test]
    fn subnet_one_is_the_fabric_address() {
        assert_eq!(subnet_gateway(1), FABRIC_IP);
        assert_eq!(subnet_gateway6(1), FABRIC_IP6);
        assert_eq!(subnet_gateway(2), Ipv4Addr::new(10, 99, 1, 1));
        assert_eq!(subnet_gateway6(2).to_string(), "fd00:99:1::1");
    }

    #[test]
    fn old_state_files_have_one_subnet() {
        let host: Host = serde_json::from_str(
            r#"{"name": "host1", "netns": "l.host1", "ip": "10.99.0.11",
                "ip6": "fd00:99::11", "felix_pid": null}"#,
        )
        .unwrap();
        assert_eq!(host.subnet, 1);
    }
}
