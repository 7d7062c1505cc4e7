//! Endpoints: workload endpoints
//! (`/calico/v1/host/<hostname>/workload/<orchestrator_id>/<workload_id>/endpoint/<endpoint_id>`)
//! and host endpoints (`/calico/v1/host/<hostname>/endpoint/<endpoint_id>`).
//!
//! Decisions where the seeds are silent:
//! - `mac` is optional: the seeds list it without saying it is required, Felix 1.x only checked
//!   it when present, and without it the host simply programs no static ARP entry.
//! - The legacy singular `"profile_id": "x"` (calico-containers) is read as `profile_ids: ["x"]`;
//!   when both are present `profile_ids` wins. It is never written back.
//! - Nets may be written as bare addresses (`"10.0.0.1"` = `10.0.0.1/32`).
//! - `address_space` (ours, issue 34) names the private address space the endpoint's IPv4
//!   addresses are in; absent means the shared space, and `"shared"` is normalised to absent.
//! - An interface name is what the kernel accepts: 1-15 bytes, no `/`, `:`, whitespace or
//!   control characters, not `.` or `..`.

use std::net::IpAddr;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use crate::error::{Validate, ValidationError};
use crate::labels::{LabelMap, validate_labels};
pub use crate::mac::MacAddr;
use crate::names::{SHARED, validate_profile_id, validate_space_name};
use crate::rule::{IpVersion, net};

/// Whether a workload endpoint may pass traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EndpointState {
    Active,
    Inactive,
}

/// A 1:1 NAT mapping: connections to `ext_ip` are forwarded to `int_ip`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct NatMapping {
    pub int_ip: IpAddr,
    pub ext_ip: IpAddr,
}

/// The interface of a VM or container on this host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "RawWorkloadEndpoint")]
pub struct WorkloadEndpoint {
    pub state: EndpointState,
    /// The host side Linux interface, e.g. `tap80` or `cali0ef24b1`.
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mac: Option<MacAddr>,
    /// Applied in list order.
    pub profile_ids: Vec<String>,
    /// Each a /32.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ipv4_nets: Vec<IpNet>,
    /// Each a /128.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ipv6_nets: Vec<IpNet>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ipv4_nat: Vec<NatMapping>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ipv6_nat: Vec<NatMapping>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ipv4_gateway: Option<IpAddr>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ipv6_gateway: Option<IpAddr>,
    #[serde(skip_serializing_if = "LabelMap::is_empty")]
    pub labels: LabelMap,
    /// The private address space of its IPv4 addresses; `None`: the shared space.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address_space: Option<String>,
}

impl WorkloadEndpoint {
    /// The private space the endpoint is in, if it is in one.
    pub fn private_space(&self) -> Option<&str> {
        self.address_space.as_deref().filter(|s| *s != SHARED)
    }

    /// An active endpoint on host interface `name` with `profiles` and the addresses
    /// `addresses` (each as a /32 or /128); everything else unset.
    pub fn active(name: &str, profiles: &[&str], addresses: &[IpAddr]) -> WorkloadEndpoint {
        let nets = |v4: bool| {
            addresses
                .iter()
                .filter(|ip| ip.is_ipv4() == v4)
                .map(|ip| IpNet::from(*ip))
                .collect()
        };
        WorkloadEndpoint {
            state: EndpointState::Active,
            name: name.to_owned(),
            mac: None,
            profile_ids: profiles.iter().map(|p| (*p).to_owned()).collect(),
            ipv4_nets: nets(true),
            ipv6_nets: nets(false),
            ipv4_nat: Vec::new(),
            ipv6_nat: Vec::new(),
            ipv4_gateway: None,
            ipv6_gateway: None,
            labels: LabelMap::default(),
            address_space: None,
        }
    }
}

/// The JSON as written, including the legacy `profile_id`.
#[derive(Deserialize)]
struct RawWorkloadEndpoint {
    state: EndpointState,
    name: String,
    #[serde(default)]
    mac: Option<MacAddr>,
    #[serde(default)]
    profile_ids: Option<Vec<String>>,
    #[serde(default)]
    profile_id: Option<String>,
    #[serde(default, deserialize_with = "net::deserialize_vec")]
    ipv4_nets: Vec<IpNet>,
    #[serde(default, deserialize_with = "net::deserialize_vec")]
    ipv6_nets: Vec<IpNet>,
    #[serde(default)]
    ipv4_nat: Vec<NatMapping>,
    #[serde(default)]
    ipv6_nat: Vec<NatMapping>,
    #[serde(default)]
    ipv4_gateway: Option<IpAddr>,
    #[serde(default)]
    ipv6_gateway: Option<IpAddr>,
    #[serde(default)]
    labels: LabelMap,
    #[serde(default)]
    address_space: Option<String>,
}

impl From<RawWorkloadEndpoint> for WorkloadEndpoint {
    fn from(raw: RawWorkloadEndpoint) -> WorkloadEndpoint {
        let legacy = raw.profile_id.into_iter().collect();
        WorkloadEndpoint {
            state: raw.state,
            name: raw.name,
            mac: raw.mac,
            profile_ids: raw.profile_ids.unwrap_or(legacy),
            ipv4_nets: raw.ipv4_nets,
            ipv6_nets: raw.ipv6_nets,
            ipv4_nat: raw.ipv4_nat,
            ipv6_nat: raw.ipv6_nat,
            ipv4_gateway: raw.ipv4_gateway,
            ipv6_gateway: raw.ipv6_gateway,
            labels: raw.labels,
            address_space: raw.address_space,
        }
    }
}

impl Validate for WorkloadEndpoint {
    fn validate(&mut self) -> Result<(), ValidationError> {
        validate_interface_name(&self.name).map_err(|e| e.within("name"))?;
        validate_profile_ids(&self.profile_ids)?;
        let (v4, v6) = (IpVersion::V4, IpVersion::V6);
        check_addressing(
            v4,
            "ipv4",
            &self.ipv4_nets,
            &self.ipv4_nat,
            self.ipv4_gateway,
        )?;
        check_addressing(
            v6,
            "ipv6",
            &self.ipv6_nets,
            &self.ipv6_nat,
            self.ipv6_gateway,
        )?;
        validate_labels(&self.labels).map_err(|e| e.within("labels"))?;
        if let Some(space) = &self.address_space {
            validate_space_name(space).map_err(|e| e.within("address_space"))?;
        }
        // One spelling of the shared space: none.
        if self.address_space.as_deref() == Some(SHARED) {
            self.address_space = None;
        }
        Ok(())
    }
}

/// A "bare-metal" interface of this host, named or found by its expected addresses.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostEndpoint {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expected_ipv4_addrs: Vec<IpAddr>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expected_ipv6_addrs: Vec<IpAddr>,
    #[serde(default)]
    pub profile_ids: Vec<String>,
    #[serde(default, skip_serializing_if = "LabelMap::is_empty")]
    pub labels: LabelMap,
}

impl Validate for HostEndpoint {
    fn validate(&mut self) -> Result<(), ValidationError> {
        match &self.name {
            Some(name) => validate_interface_name(name).map_err(|e| e.within("name"))?,
            None if self.expected_ipv4_addrs.is_empty() && self.expected_ipv6_addrs.is_empty() => {
                // The message Felix 1.4 logs for this case, word for word.
                return Err(ValidationError::object(
                    "'name' or 'expected_ipvX_addrs' must be present",
                ));
            }
            None => {}
        }
        check_addrs(
            IpVersion::V4,
            "expected_ipv4_addrs",
            &self.expected_ipv4_addrs,
        )?;
        check_addrs(
            IpVersion::V6,
            "expected_ipv6_addrs",
            &self.expected_ipv6_addrs,
        )?;
        validate_profile_ids(&self.profile_ids)?;
        validate_labels(&self.labels).map_err(|e| e.within("labels"))
    }
}

/// Checks a Linux interface name as the kernel would (`dev_valid_name`).
pub fn validate_interface_name(name: &str) -> Result<(), ValidationError> {
    let bad_char = |c: char| c == '/' || c == ':' || c.is_whitespace() || c.is_control();
    let reason = if name.is_empty() || name.len() > 15 {
        format!("invalid interface name {name:?}: must be 1-15 bytes long")
    } else if name == "." || name == ".." {
        format!("invalid interface name {name:?}")
    } else if let Some(c) = name.chars().find(|c| bad_char(*c)) {
        format!("invalid interface name {name:?}: character {c:?} is not allowed")
    } else {
        return Ok(());
    };
    Err(ValidationError::object(reason))
}

fn validate_profile_ids(ids: &[String]) -> Result<(), ValidationError> {
    for (index, id) in ids.iter().enumerate() {
        validate_profile_id(id).map_err(|e| e.within(&format!("profile_ids[{index}]")))?;
    }
    Ok(())
}

fn check_family(version: IpVersion, addr: &IpAddr) -> Result<(), ValidationError> {
    if IpVersion::of_addr(addr) == version {
        return Ok(());
    }
    Err(ValidationError::object(format!(
        "must be an {version} address, got {addr}"
    )))
}

/// The nets, NAT mappings and gateway of one IP version of a workload endpoint.
fn check_addressing(
    version: IpVersion,
    prefix: &str,
    nets: &[IpNet],
    nat: &[NatMapping],
    gateway: Option<IpAddr>,
) -> Result<(), ValidationError> {
    check_host_nets(version, &format!("{prefix}_nets"), nets)?;
    check_nat(version, prefix, nets, nat)?;
    match gateway {
        Some(gateway) => {
            check_family(version, &gateway).map_err(|e| e.within(&format!("{prefix}_gateway")))
        }
        None => Ok(()),
    }
}

fn check_addrs(version: IpVersion, field: &str, addrs: &[IpAddr]) -> Result<(), ValidationError> {
    for (index, addr) in addrs.iter().enumerate() {
        check_family(version, addr).map_err(|e| e.within(&format!("{field}[{index}]")))?;
    }
    Ok(())
}

/// Nets of an endpoint are single addresses: /32 for IPv4, /128 for IPv6.
fn check_host_nets(version: IpVersion, field: &str, nets: &[IpNet]) -> Result<(), ValidationError> {
    for (index, net) in nets.iter().enumerate() {
        let reason = if IpVersion::of_net(net) != version {
            format!("must be an {version} network, got {net}")
        } else if net.prefix_len() != net.max_prefix_len() {
            format!("must be a /{}, got {net}", net.max_prefix_len())
        } else {
            continue;
        };
        return Err(ValidationError::new(format!("{field}[{index}]"), reason));
    }
    Ok(())
}

/// Each mapping is of the right family and its `int_ip` is one of the endpoint's nets.
fn check_nat(
    version: IpVersion,
    prefix: &str,
    nets: &[IpNet],
    mappings: &[NatMapping],
) -> Result<(), ValidationError> {
    for (index, mapping) in mappings.iter().enumerate() {
        let at = |field: &str| format!("{prefix}_nat[{index}].{field}");
        check_family(version, &mapping.int_ip).map_err(|e| e.within(&at("int_ip")))?;
        check_family(version, &mapping.ext_ip).map_err(|e| e.within(&at("ext_ip")))?;
        if !nets.iter().any(|net| net.addr() == mapping.int_ip) {
            let reason = format!("{} is not one of {prefix}_nets", mapping.int_ip);
            return Err(ValidationError::new(at("int_ip"), reason));
        }
    }
    Ok(())
}
