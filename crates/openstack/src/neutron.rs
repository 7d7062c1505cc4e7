//! Neutron's REST API (v2.0): the objects as it returns them. Only what Calico reads is typed;
//! Neutron adds fields with every extension, so unknown fields are ignored. The HTTP side is
//! `client`.

use serde::Deserialize;

use crate::error::TranslateError;

/// A network: it plays no part in Calico's connectivity or security, read for completeness.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Network {
    pub id: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub subnets: Vec<String>,
    #[serde(default)]
    pub revision_number: u64,
}

/// A subnet: its gateway becomes the endpoints' `ipvX_gateway`; the DHCP agent serves the rest.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct Subnet {
    pub id: String,
    #[serde(default)]
    pub network_id: String,
    pub ip_version: u8,
    pub cidr: String,
    #[serde(default)]
    pub gateway_ip: Option<String>,
    #[serde(default)]
    pub enable_dhcp: bool,
    #[serde(default)]
    pub dns_nameservers: Vec<String>,
    #[serde(default)]
    pub host_routes: Vec<HostRoute>,
    #[serde(default)]
    pub ipv6_address_mode: Option<String>,
    #[serde(default)]
    pub ipv6_ra_mode: Option<String>,
    #[serde(default)]
    pub revision_number: u64,
}

/// One of a subnet's `host_routes`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct HostRoute {
    pub destination: String,
    pub nexthop: String,
}

/// One address of a port.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct FixedIp {
    pub subnet_id: String,
    pub ip_address: String,
}

/// A port: a VM's interface once Nova binds it to a compute host.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Port {
    pub id: String,
    #[serde(default)]
    pub network_id: String,
    #[serde(default)]
    pub device_id: String,
    #[serde(default)]
    pub device_owner: String,
    #[serde(default)]
    pub mac_address: String,
    #[serde(default)]
    pub fixed_ips: Vec<FixedIp>,
    #[serde(default)]
    pub security_groups: Vec<String>,
    #[serde(default = "yes")]
    pub admin_state_up: bool,
    /// Absent when the `port_security` extension is off: security groups apply then.
    #[serde(default)]
    pub port_security_enabled: Option<bool>,
    #[serde(rename = "binding:host_id", default)]
    pub host_id: String,
    #[serde(rename = "binding:vif_type", default)]
    pub vif_type: String,
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub revision_number: u64,
}

/// A security group with its rules (Neutron lists them inline).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct SecurityGroup {
    pub id: String,
    #[serde(default)]
    pub name: String,
    /// `false` for a stateless group (Zed); absent on older servers (stateful).
    #[serde(default)]
    pub stateful: Option<bool>,
    #[serde(default)]
    pub security_group_rules: Vec<SecurityGroupRule>,
    #[serde(default)]
    pub revision_number: u64,
}

/// One rule of a security group.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct SecurityGroupRule {
    pub id: String,
    #[serde(default)]
    pub security_group_id: String,
    /// `ingress` or `egress`.
    pub direction: String,
    /// `IPv4` or `IPv6`.
    pub ethertype: String,
    /// A name (`tcp`, `icmp`, `ipv6-icmp`, …), a number as a string, or none (any).
    #[serde(default, deserialize_with = "protocol")]
    pub protocol: Option<String>,
    #[serde(default)]
    pub port_range_min: Option<u32>,
    #[serde(default)]
    pub port_range_max: Option<u32>,
    #[serde(default)]
    pub remote_ip_prefix: Option<String>,
    #[serde(default)]
    pub remote_group_id: Option<String>,
    #[serde(default)]
    pub remote_address_group_id: Option<String>,
}

/// Neutron returns the protocol as a string, but older servers and hand-written fixtures use
/// a number: both are read as text.
fn protocol<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    match Option::<serde_json::Value>::deserialize(d)? {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::String(text)) => Ok(Some(text)),
        Some(serde_json::Value::Number(n)) => Ok(Some(n.to_string())),
        Some(other) => Err(serde::de::Error::custom(format!(
            "invalid protocol {other}: expected a name, a number or null"
        ))),
    }
}

fn yes() -> bool {
    true
}

/// Everything the sync translates, read at one time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub ports: Vec<Port>,
    pub subnets: Vec<Subnet>,
    pub security_groups: Vec<SecurityGroup>,
    /// Objects Neutron listed that did not decode: left out of the lists above.
    pub left_out: Vec<TranslateError>,
}

/// The ids and revisions of every object the sync translates: cheap to read, and different
/// whenever anything it translates changed (a rule change also bumps its group's revision, a
/// binding change its port's).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Revisions(pub Vec<(&'static str, String, u64)>);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_as_neutron_returns_it() {
        let port: Port = serde_json::from_str(
            r#"{"id": "p1", "device_owner": "compute:nova", "binding:host_id": "host1",
                "binding:vif_type": "tap", "fixed_ips": [{"subnet_id": "s", "ip_address": "10.0.0.2"}],
                "extra_field": {"ignored": true}}"#,
        )
        .unwrap();
        assert_eq!(port.host_id, "host1");
        assert!(port.admin_state_up);
        assert_eq!(port.port_security_enabled, None);
        let rule: SecurityGroupRule = serde_json::from_str(
            r#"{"id": "r", "direction": "ingress", "ethertype": "IPv4", "protocol": 6}"#,
        )
        .unwrap();
        assert_eq!(rule.protocol.as_deref(), Some("6"));
    }
}
