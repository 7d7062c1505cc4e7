//! Pure: a Neutron [`Snapshot`] → the etcd keys and values the sync owns, and what was left out.
//!
//! Every security group becomes a profile (`rules` and `tags` keys), used by a port or not, as
//! networking-calico did; the open profile of ports without port security only while some port
//! uses it. Values are the model types serialised, so they are what Felix parses.

use std::collections::BTreeMap;

use calico_model::Key;
use calico_model::leftout::{LeftOut, LeftOutDirection, LeftOutRule};
use serde::Serialize;

use crate::error::TranslateError;
use crate::neutron::{Port, SecurityGroup, Snapshot, Subnet};
use crate::translate::{self, OPEN_PROFILE, Profile};

/// The keys and values the sync wants in etcd, the objects it left out, and those it wrote
/// that do not mean all Neutron means (`caveats`: logged, never silent).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Desired {
    pub keys: BTreeMap<String, String>,
    pub left_out: Vec<TranslateError>,
    pub caveats: Vec<TranslateError>,
}

/// What a port without port security gets, and what it does not.
pub const PORT_SECURITY_CAVEAT: &str = "port_security_enabled false: the port's endpoint allows \
     all traffic (profile openstack-port-security-disabled), but Felix still drops what the VM \
     sends from addresses that are not its own; Calico's data model has no field to lift that";

/// Translates everything in `snapshot`.
pub fn desired(snapshot: &Snapshot) -> Desired {
    let mut desired = Desired {
        left_out: snapshot.left_out.clone(),
        ..Desired::default()
    };
    let subnets = snapshot
        .subnets
        .iter()
        .map(|s| (s.id.as_str(), s))
        .collect();
    let mut open = false;
    for port in &snapshot.ports {
        open |= desired.add_port(port, &subnets);
    }
    for group in &snapshot.security_groups {
        desired.add_group(group);
    }
    if open {
        desired.add_profile(translate::open_profile());
    }
    desired
}

/// The open profile's keys and values (its rules and tags).
pub fn open_profile_keys() -> BTreeMap<String, String> {
    let mut desired = Desired::default();
    desired.add_profile(translate::open_profile());
    desired.keys
}

impl Desired {
    /// Adds `port`'s endpoint if it is a VM port Calico can express (else names why); returns
    /// whether it uses the open profile (port security off).
    pub fn add_port(&mut self, port: &Port, subnets: &BTreeMap<&str, &Subnet>) -> bool {
        if !translate::is_vm_port(port) {
            return false;
        }
        match translate::endpoint(port, subnets) {
            Ok(endpoint) => {
                if port.port_security_enabled == Some(false) {
                    let caveat = TranslateError::port(&port.id, PORT_SECURITY_CAVEAT);
                    self.caveats.push(caveat);
                }
                let open = endpoint
                    .endpoint
                    .profile_ids
                    .iter()
                    .any(|p| p == OPEN_PROFILE);
                let key = Key::WorkloadEndpoint(endpoint.id).to_string();
                self.keys.insert(key, json(&endpoint.endpoint));
                open
            }
            Err(e) => {
                self.left_out.push(e);
                false
            }
        }
    }

    /// Adds `group`'s profile (without the rules Calico cannot express, named, and listed in
    /// the group's left-out key for `calicoctl get profile`), or names why the whole group is
    /// left out.
    pub fn add_group(&mut self, group: &SecurityGroup) {
        match translate::profile(group) {
            Ok((profile, left_out)) => {
                self.add_profile(profile);
                self.add_left_out(group, &left_out);
                self.left_out.extend(left_out);
            }
            Err(e) => self.left_out.push(e),
        }
    }

    /// `/calico/openstack/v1/left-out/<group>` while some of `group`'s rules are left out.
    fn add_left_out(&mut self, group: &SecurityGroup, left_out: &[TranslateError]) {
        let rules: Vec<LeftOutRule> = left_out
            .iter()
            .map(|e| {
                let egress = group
                    .security_group_rules
                    .iter()
                    .any(|r| r.id == e.id && r.direction == "egress");
                LeftOutRule {
                    id: e.id.clone(),
                    direction: match egress {
                        true => LeftOutDirection::Outbound,
                        false => LeftOutDirection::Inbound,
                    },
                    reason: e.reason.clone(),
                }
            })
            .collect();
        if rules.is_empty() {
            return;
        }
        let key = Key::LeftOut {
            group: group.id.clone(),
        };
        self.keys.insert(key.to_string(), json(&LeftOut { rules }));
    }

    fn add_profile(&mut self, profile: Profile) {
        let rules = Key::ProfileRules {
            profile: profile.id.clone(),
        };
        let tags = Key::ProfileTags {
            profile: profile.id,
        };
        self.keys.insert(rules.to_string(), json(&profile.rules));
        self.keys.insert(tags.to_string(), json(&profile.tags));
    }
}

fn json(value: &impl Serialize) -> String {
    // The model types serialise infallibly (no maps with non-string keys).
    serde_json::to_string(value).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::neutron::{FixedIp, Port, SecurityGroup, Subnet};

    fn port(id: &str, groups: &[&str]) -> Port {
        Port {
            id: id.to_owned(),
            network_id: "net".into(),
            device_id: "vm1".into(),
            device_owner: "compute:nova".into(),
            mac_address: "fa:16:3e:00:00:01".into(),
            fixed_ips: vec![FixedIp {
                subnet_id: "sub4".into(),
                ip_address: "10.65.0.2".into(),
            }],
            security_groups: groups.iter().map(|g| (*g).to_owned()).collect(),
            admin_state_up: true,
            port_security_enabled: Some(true),
            host_id: "host1".into(),
            vif_type: "tap".into(),
            status: "ACTIVE".into(),
            revision_number: 1,
        }
    }

    fn snapshot(ports: Vec<Port>) -> Snapshot {
        Snapshot {
            ports,
            subnets: vec![Subnet {
                id: "sub4".into(),
                network_id: "net".into(),
                ip_version: 4,
                cidr: "10.65.0.0/24".into(),
                gateway_ip: Some("10.65.0.1".into()),
                enable_dhcp: true,
                revision_number: 1,
                ..Default::default()
            }],
            security_groups: vec![SecurityGroup {
                id: "sg1".into(),
                name: "web".into(),
                stateful: None,
                security_group_rules: Vec::new(),
                revision_number: 1,
            }],
            left_out: Vec::new(),
        }
    }

    #[test]
    fn ports_become_endpoints_and_groups_profiles() {
        let mut unbound = port("0123456789abcdef-2", &["sg1"]);
        unbound.host_id.clear();
        let mut dhcp = port("0123456789abcdef-3", &[]);
        dhcp.device_owner = "network:dhcp".into();
        let mut failed = port("0123456789abcdef-4", &[]);
        failed.vif_type = "binding_failed".into();
        let ports = vec![port("0123456789abcdef-1", &["sg1"]), unbound, dhcp, failed];
        let desired = desired(&snapshot(ports));
        let keys: Vec<_> = desired.keys.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "/calico/v1/host/host1/workload/openstack/vm1/endpoint/0123456789abcdef-1",
                "/calico/v1/policy/profile/openstack-sg-sg1/rules",
                "/calico/v1/policy/profile/openstack-sg-sg1/tags",
            ]
        );
        assert_eq!(desired.left_out, []);
    }

    #[test]
    fn a_port_without_port_security_is_written_with_a_caveat_by_id() {
        let mut open = port("0123456789abcdef-5", &[]);
        open.port_security_enabled = Some(false);
        let desired = desired(&snapshot(vec![open, port("0123456789abcdef-6", &["sg1"])]));
        assert!(desired.left_out.is_empty(), "{:?}", desired.left_out);
        assert_eq!(desired.caveats.len(), 1, "{:?}", desired.caveats);
        let caveat = desired.caveats[0].to_string();
        assert!(
            caveat.starts_with("port 0123456789abcdef-5: port_security_enabled false"),
            "{caveat}"
        );
        assert!(caveat.contains("not its own"), "{caveat}");
    }

    #[test]
    fn the_open_profile_exists_while_a_port_uses_it() {
        let mut open = port("0123456789abcdef-1", &[]);
        open.port_security_enabled = Some(false);
        let desired = desired(&snapshot(vec![open]));
        let rules =
            &desired.keys["/calico/v1/policy/profile/openstack-port-security-disabled/rules"];
        assert_eq!(
            rules,
            r#"{"inbound_rules":[{"action":"allow"}],"outbound_rules":[{"action":"allow"}]}"#
        );
        let without = super::desired(&snapshot(vec![port("0123456789abcdef-1", &[])]));
        assert!(!without.keys.keys().any(|k| k.contains(OPEN_PROFILE)));
    }

    #[test]
    fn a_left_out_rule_is_listed_under_its_group_until_it_goes() {
        let mut snap = snapshot(Vec::new());
        snap.security_groups[0].security_group_rules = vec![crate::neutron::SecurityGroupRule {
            id: "r-dccp".into(),
            direction: "egress".into(),
            ethertype: "IPv4".into(),
            protocol: Some("dccp".into()),
            port_range_min: Some(5000),
            port_range_max: Some(5001),
            ..Default::default()
        }];
        let with = desired(&snap);
        let key = "/calico/openstack/v1/left-out/sg1";
        let value: LeftOut = calico_model::from_json(&with.keys[key]).unwrap();
        assert_eq!(value.rules.len(), 1);
        assert_eq!(value.rules[0].id, "r-dccp");
        assert_eq!(value.rules[0].direction, LeftOutDirection::Outbound);
        assert_eq!(value.rules[0].reason, with.left_out[0].reason);
        assert!(crate::sync::is_owned(key));
        snap.security_groups[0].security_group_rules.clear();
        let without = desired(&snap);
        assert!(!without.keys.contains_key(key));
        let plan = crate::sync::plan(&without.keys, &with.keys);
        assert_eq!(
            plan.ops,
            [calico_datastore::TxnOp::Delete { key: key.into() }]
        );
    }

    #[test]
    fn a_port_calico_cannot_express_is_left_out_by_id() {
        let mut bad = port("0123456789abcdef-1", &[]);
        bad.fixed_ips[0].ip_address = "10.65.0.300".into();
        let desired = desired(&snapshot(vec![bad]));
        assert!(!desired.keys.keys().any(|k| k.contains("/workload/")));
        assert_eq!(
            desired.left_out[0].to_string(),
            "port 0123456789abcdef-1: fixed_ips[0].ip_address \"10.65.0.300\": not an IP address"
        );
    }
}
