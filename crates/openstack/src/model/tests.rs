use proptest::prelude::*;

use super::*;
use crate::desired::desired;
use crate::neutron::{FixedIp, SecurityGroupRule};
use crate::sync::plan;

fn subnet(id: &str, gateway: &str) -> Subnet {
    Subnet {
        id: id.into(),
        network_id: "net".into(),
        ip_version: 4,
        cidr: "10.65.0.0/16".into(),
        gateway_ip: Some(gateway.into()),
        enable_dhcp: true,
        ..Default::default()
    }
}

fn port(n: u8, host: u8, groups: &[u8], secure: bool) -> Port {
    Port {
        id: format!("0123456789abcdef-{n}"),
        network_id: "net".into(),
        device_id: format!("vm{n}"),
        device_owner: "compute:nova".into(),
        mac_address: format!("fa:16:3e:00:00:{n:02x}"),
        fixed_ips: vec![FixedIp {
            subnet_id: format!("sub{}", n % 2),
            ip_address: format!("10.65.0.{n}"),
        }],
        security_groups: groups.iter().map(|g| format!("sg{g}")).collect(),
        admin_state_up: true,
        port_security_enabled: Some(secure),
        host_id: format!("host{host}"),
        vif_type: "tap".into(),
        status: "ACTIVE".into(),
        revision_number: 1,
    }
}

fn group(n: u8, rules: u16) -> SecurityGroup {
    SecurityGroup {
        id: format!("sg{n}"),
        name: format!("g{n}"),
        stateful: None,
        security_group_rules: (0..rules)
            .map(|r| SecurityGroupRule {
                id: format!("r{n}-{r}"),
                security_group_id: format!("sg{n}"),
                direction: "ingress".into(),
                ethertype: "IPv4".into(),
                protocol: Some("tcp".into()),
                port_range_min: Some(u32::from(r) + 1),
                port_range_max: Some(u32::from(r) + 1),
                ..Default::default()
            })
            .collect(),
        revision_number: 1,
    }
}

/// One thing a user does in Neutron.
#[derive(Debug, Clone)]
enum Op {
    Port {
        n: u8,
        host: u8,
        groups: Vec<u8>,
        secure: bool,
    },
    DeletePort(u8),
    Group {
        n: u8,
        rules: u16,
    },
    DeleteGroup(u8),
    Gateway {
        subnet: u8,
        last: u8,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (
            0u8..6,
            1u8..3,
            prop::collection::vec(0u8..3, 0..3),
            any::<bool>()
        )
            .prop_map(|(n, host, groups, secure)| Op::Port {
                n,
                host,
                groups,
                secure
            }),
        (0u8..6).prop_map(Op::DeletePort),
        (0u8..3, 0u16..4).prop_map(|(n, rules)| Op::Group { n, rules }),
        (0u8..3).prop_map(Op::DeleteGroup),
        (0u8..2, 1u8..250).prop_map(|(subnet, last)| Op::Gateway { subnet, last }),
    ]
}

/// Neutron's state, and the sync's incremental view of it.
struct World {
    ports: BTreeMap<u8, Port>,
    groups: BTreeMap<u8, SecurityGroup>,
    subnets: [Subnet; 2],
}

impl World {
    fn snapshot(&self) -> Snapshot {
        Snapshot {
            ports: self.ports.values().cloned().collect(),
            subnets: self.subnets.to_vec(),
            security_groups: self.groups.values().cloned().collect(),
            left_out: Vec::new(),
        }
    }

    /// Applies `op` to Neutron and, as calico-neutron would on its notification, to the model;
    /// returns the objects the notification touches.
    fn apply(&mut self, op: &Op, model: &mut Model) -> Touched {
        let mut touched = Touched::default();
        match op {
            Op::Port {
                n,
                host,
                groups,
                secure,
            } => {
                let p = port(*n, *host, groups, *secure);
                model.set_port(&p.id, Some(p.clone()));
                touched.ports.insert(p.id.clone());
                self.ports.insert(*n, p);
            }
            Op::DeletePort(n) => {
                let id = port(*n, 1, &[], true).id;
                self.ports.remove(n);
                model.set_port(&id, None);
                touched.ports.insert(id);
            }
            Op::Group { n, rules } => {
                let g = group(*n, *rules);
                model.set_group(&g.id, Some(g.clone()));
                touched.groups.insert(g.id.clone());
                self.groups.insert(*n, g);
            }
            Op::DeleteGroup(n) => {
                self.groups.remove(n);
                model.set_group(&format!("sg{n}"), None);
                touched.groups.insert(format!("sg{n}"));
            }
            Op::Gateway { subnet: s, last } => {
                let new = subnet(&format!("sub{s}"), &format!("10.65.9.{last}"));
                model.set_subnet(&new.id, Some(new.clone()));
                touched.ports.extend(model.ports_in_subnet(&new.id));
                self.subnets[usize::from(*s)] = new;
            }
        }
        touched
    }
}

proptest! {
    /// The answer must not depend on the path: after any sequence of changes, each applied by
    /// writing only the keys it touches, etcd holds exactly what a full resync would write.
    #[test]
    fn changes_applied_one_by_one_end_where_a_full_resync_would(ops in prop::collection::vec(op(), 1..40)) {
        let mut world = World {
            ports: BTreeMap::new(),
            groups: BTreeMap::new(),
            subnets: [subnet("sub0", "10.65.0.1"), subnet("sub1", "10.65.0.1")],
        };
        let mut model = Model::from_snapshot(world.snapshot());
        let mut written = Written::new(desired(&world.snapshot()).keys);
        let mut open = BTreeSet::new();
        for op in &ops {
            let touched = world.apply(op, &mut model);
            let before = written.of(&touched);
            let now = model.desired(&touched, &mut open).keys;
            let writes = plan(&now, &before);
            // Only the touched objects' keys are written.
            for op in &writes.ops {
                let key = match op {
                    calico_datastore::TxnOp::Put { key, .. } | calico_datastore::TxnOp::Delete { key } => key,
                };
                prop_assert!(now.contains_key(key) || before.contains_key(key), "{key} not touched");
            }
            written.update(&before, &now);
            prop_assert_eq!(&written.keys, &desired(&world.snapshot()).keys, "after {:?}", op);
        }
    }
}

#[test]
fn a_rule_added_touches_its_group_s_two_keys_only() {
    let ports: Vec<Port> = (1..=50).map(|n| port(n, 1, &[0], true)).collect();
    let snapshot = Snapshot {
        ports,
        subnets: vec![subnet("sub0", "10.65.0.1"), subnet("sub1", "10.65.0.1")],
        security_groups: vec![group(0, 3), group(1, 3)],
        left_out: Vec::new(),
    };
    let mut model = Model::from_snapshot(snapshot.clone());
    let written = Written::new(desired(&snapshot).keys);
    model.set_group("sg0", Some(group(0, 4)));
    let touched = Touched {
        groups: ["sg0".to_owned()].into(),
        ..Touched::default()
    };
    let before = written.of(&touched);
    let now = model.desired(&touched, &mut BTreeSet::new()).keys;
    let writes = plan(&now, &before);
    assert_eq!(writes.ops.len(), 1, "{writes:?}");
    assert!(format!("{writes:?}").contains("openstack-sg-sg0/rules"));
}
