//! Pure: Neutron objects → Calico's endpoints and profiles (seed 000, "How Calico interprets
//! Neutron API calls"), with the project's model types, so the JSON is the data model's.
//!
//! | Neutron | Calico |
//! | --- | --- |
//! | port bound by Calico's driver (`binding:host_id` set, `binding:vif_type` `tap`, `device_owner` `compute:*`) | `/calico/v1/host/<host>/workload/openstack/<device_id>/endpoint/<port_id>` |
//! | port id | interface `tap` + its first 11 characters (the name Nova gives the TAP) |
//! | `fixed_ips` | `ipv4_nets` (/32) and `ipv6_nets` (/128), in Neutron's order |
//! | the subnets' `gateway_ip` | `ipv4_gateway` / `ipv6_gateway` (the first subnet of each version with one) |
//! | `security_groups` | `profile_ids`: `openstack-sg-<group id>` each, in the port's order |
//! | `port_security_enabled: false` | `profile_ids: ["openstack-port-security-disabled"]`, a profile that allows everything |
//! | `admin_state_up` | `state` `active` / `inactive` |
//! | security group | profile `openstack-sg-<id>`, tags `[<id>]`, rules translated one to one |
//!
//! Rules are translated one by one in `rule`. A profile's rules are sorted by their JSON and
//! duplicates dropped (all allow, so order means nothing), which keeps the value independent of
//! Neutron's listing order.
//!
//! What Calico cannot express is an error naming the object and the reason: a rule is left
//! out of its profile (fail closed: the profile allows less), a group or a port is left out
//! entirely (an endpoint without its profile passes nothing).

use std::collections::BTreeMap;
use std::net::IpAddr;

use calico_model::Validate;
use calico_model::endpoint::{EndpointState, MacAddr, WorkloadEndpoint};
use calico_model::key::WorkloadEndpointId;
use calico_model::labels::LabelMap;
use calico_model::names;
use calico_model::profile::{ProfileRules, ProfileTags};
use calico_model::rule::Rule;
use ipnet::IpNet;

use crate::error::TranslateError;
use crate::neutron::{Port, SecurityGroup, Subnet};
use crate::rule::{Direction, rule};

/// The orchestrator segment of every endpoint key the sync writes.
pub const ORCHESTRATOR: &str = "openstack";
/// Every profile the sync owns has an id starting with this; it never touches other profiles.
pub const OWNED_PROFILE_PREFIX: &str = "openstack-";
/// A security group's profile is this followed by the group's id.
pub const GROUP_PROFILE_PREFIX: &str = "openstack-sg-";
/// The profile of ports with `port_security_enabled: false`: everything allowed.
pub const OPEN_PROFILE: &str = "openstack-port-security-disabled";

/// The profile id of a security group.
pub fn profile_id(group_id: &str) -> String {
    format!("{GROUP_PROFILE_PREFIX}{group_id}")
}

/// A workload endpoint and where it goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub id: WorkloadEndpointId,
    pub endpoint: WorkloadEndpoint,
}

/// A profile's id, rules and tags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    pub id: String,
    pub rules: ProfileRules,
    pub tags: ProfileTags,
}

/// Whether the port is a VM's interface that Calico's driver bound on a compute host.
pub fn is_vm_port(port: &Port) -> bool {
    !port.host_id.is_empty() && port.vif_type == "tap" && port.device_owner.starts_with("compute:")
}

/// The endpoint of a VM port (see [`is_vm_port`]); `subnets` by id.
pub fn endpoint(
    port: &Port,
    subnets: &BTreeMap<&str, &Subnet>,
) -> Result<Endpoint, TranslateError> {
    let fail = |reason: String| TranslateError::port(&port.id, reason);
    let prefix = port.id.get(..11).ok_or_else(|| {
        fail(format!(
            "id {:?} is shorter than the 11 characters of a TAP name",
            port.id
        ))
    })?;
    let mac = match port.mac_address.as_str() {
        "" => None,
        text => Some(
            text.parse::<MacAddr>()
                .map_err(|e| fail(format!("mac_address: {e}")))?,
        ),
    };
    let mut endpoint = WorkloadEndpoint {
        state: if port.admin_state_up {
            EndpointState::Active
        } else {
            EndpointState::Inactive
        },
        name: format!("tap{prefix}"),
        mac,
        profile_ids: profile_ids(port),
        ipv4_nets: Vec::new(),
        ipv6_nets: Vec::new(),
        ipv4_nat: Vec::new(),
        ipv6_nat: Vec::new(),
        ipv4_gateway: None,
        ipv6_gateway: None,
        labels: LabelMap::new(),
        address_space: None,
    };
    addressing(port, subnets, &mut endpoint).map_err(fail)?;
    endpoint.validate().map_err(|e| fail(e.to_string()))?;
    // The model's rules for the key's segments, each named by its Neutron field.
    let names = [
        ("binding:host_id", names::validate_hostname(&port.host_id)),
        ("device_id", names::validate_workload_id(&port.device_id)),
        ("id", names::validate_endpoint_id(&port.id)),
    ];
    for (field, check) in names {
        check.map_err(|e| fail(format!("{field}: {}", e.reason)))?;
    }
    let id = WorkloadEndpointId {
        hostname: port.host_id.clone(),
        orchestrator: ORCHESTRATOR.to_owned(),
        workload: port.device_id.clone(),
        endpoint: port.id.clone(),
    };
    Ok(Endpoint { id, endpoint })
}

fn profile_ids(port: &Port) -> Vec<String> {
    // Neutron refuses security groups on a port without port security: nothing is lost.
    if port.port_security_enabled == Some(false) {
        return vec![OPEN_PROFILE.to_owned()];
    }
    port.security_groups.iter().map(|g| profile_id(g)).collect()
}

/// Nets from `fixed_ips`, gateways from their subnets.
fn addressing(
    port: &Port,
    subnets: &BTreeMap<&str, &Subnet>,
    endpoint: &mut WorkloadEndpoint,
) -> Result<(), String> {
    for (index, fixed) in port.fixed_ips.iter().enumerate() {
        let field = format!("fixed_ips[{index}]");
        let addr: IpAddr = fixed.ip_address.parse().map_err(|_| {
            format!(
                "{field}.ip_address {:?}: not an IP address",
                fixed.ip_address
            )
        })?;
        let subnet = subnets
            .get(fixed.subnet_id.as_str())
            .ok_or_else(|| format!("{field}.subnet_id {:?}: no such subnet", fixed.subnet_id))?;
        let gateway = match subnet.gateway_ip.as_deref() {
            None | Some("") => None,
            Some(text) => Some(text.parse::<IpAddr>().map_err(|_| {
                format!(
                    "subnet {} gateway_ip {text:?}: not an IP address",
                    subnet.id
                )
            })?),
        };
        let (nets, slot) = match addr {
            IpAddr::V4(_) => (&mut endpoint.ipv4_nets, &mut endpoint.ipv4_gateway),
            IpAddr::V6(_) => (&mut endpoint.ipv6_nets, &mut endpoint.ipv6_gateway),
        };
        nets.push(IpNet::from(addr));
        if slot.is_none() {
            *slot = gateway;
        }
    }
    Ok(())
}

/// The profile of a security group, and the rules left out of it. A stateless group is left
/// out entirely: Calico's rules are stateful and would allow the replies it does not.
pub fn profile(group: &SecurityGroup) -> Result<(Profile, Vec<TranslateError>), TranslateError> {
    if group.stateful == Some(false) {
        return Err(TranslateError::group(
            &group.id,
            "stateful: false: Calico's rules are stateful (replies are always allowed)",
        ));
    }
    names::validate_tag(&group.id).map_err(|e| TranslateError::group(&group.id, e.reason))?;
    let mut rules = ProfileRules::default();
    let mut left_out = Vec::new();
    for neutron_rule in &group.security_group_rules {
        match rule(neutron_rule) {
            Ok((Direction::Inbound, r)) => rules.inbound_rules.push(r),
            Ok((Direction::Outbound, r)) => rules.outbound_rules.push(r),
            Err(e) => left_out.push(e),
        }
    }
    canonical(&mut rules.inbound_rules);
    canonical(&mut rules.outbound_rules);
    let profile = Profile {
        id: profile_id(&group.id),
        rules,
        tags: ProfileTags(vec![group.id.clone()]),
    };
    Ok((profile, left_out))
}

/// The profile of ports without port security: everything in and out.
pub fn open_profile() -> Profile {
    Profile {
        id: OPEN_PROFILE.to_owned(),
        rules: ProfileRules {
            inbound_rules: vec![Rule::default()],
            outbound_rules: vec![Rule::default()],
        },
        tags: ProfileTags::default(),
    }
}

fn canonical(rules: &mut Vec<Rule>) {
    rules.sort_by_cached_key(|r| serde_json::to_string(r).unwrap_or_default());
    rules.dedup();
}

#[cfg(test)]
mod tests;
