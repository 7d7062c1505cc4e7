//! `calico-neutron` driven by the ML2 driver's notifications: a real neutron-server (Keystone,
//! Calico's driver sending a datagram per committed change), a real etcd, and calico-neutron
//! with a resync ten minutes away and no polling, so that everything that reaches etcd here
//! was announced by the driver and read object by object. Each kind of change an operator
//! makes is followed, and what one change costs is counted: Neutron requests and etcd writes.
//! Needs scripts/setup-neutron.sh and etcd.

mod common;

use std::time::Duration;

use calico_testkit::{EtcdServer, eventually};
use common::SyncProcess;
use common::neutron::Neutron;
use serde_json::{Value, json};

fn id(object: &Value) -> String {
    object["id"].as_str().expect("an id").to_owned()
}

/// Waits until `key`'s value satisfies `check` (`None`: the key is absent).
fn wait(
    etcd: &EtcdServer,
    sync: &SyncProcess,
    what: &str,
    key: &str,
    check: impl Fn(Option<Value>) -> bool,
) {
    eventually(what, Duration::from_secs(20), || {
        let out = etcd.etcdctl(&["get", key, "--print-value-only"]);
        let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        let value = (!text.is_empty()).then(|| serde_json::from_str(&text).unwrap_or(Value::Null));
        match check(value.clone()) {
            true => Ok(()),
            false => {
                let log = sync.log();
                let tail: Vec<&str> = log.lines().rev().take(10).collect();
                Err(format!("{key}: {value:?}\n{}", tail.join("\n")))
            }
        }
    });
}

/// The `changes applied` lines logged so far: (changes, requests, writes) each.
fn applied(sync: &SyncProcess) -> Vec<(u64, u64, u64)> {
    let field = |line: &str, name: &str| -> u64 {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(&format!("{name}=")))
            .and_then(|v| v.parse().ok())
            .unwrap_or(u64::MAX)
    };
    sync.log()
        .lines()
        .filter(|l| l.contains("changes applied"))
        .map(|l| {
            (
                field(l, "changes"),
                field(l, "requests"),
                field(l, "writes"),
            )
        })
        .collect()
}

#[test]
fn each_change_is_read_by_id_as_the_driver_announces_it() {
    let neutron = Neutron::start();
    let etcd = EtcdServer::start();
    let dir = tempfile::tempdir().expect("temporary directory");
    let log = dir.path().join("calico-neutron.log");
    // No polling, a resync far away: only notifications can bring changes.
    let sync = SyncProcess::start_logging(
        &etcd.endpoint(),
        &neutron,
        &log,
        "10m",
        "calico_openstack=debug,info",
    );
    eventually("the first resync", Duration::from_secs(30), || {
        sync.log()
            .contains("resync done")
            .then_some(())
            .ok_or_else(|| sync.log())
    });

    let network = id(&neutron.create("networks", json!({"name": "n"})));
    let subnet = id(&neutron.create(
        "subnets",
        json!({"network_id": network, "cidr": "10.65.0.0/24", "ip_version": 4, "gateway_ip": "10.65.0.1",
               "allocation_pools": [{"start": "10.65.0.2", "end": "10.65.0.200"}]}),
    ));
    let web = id(&neutron.create("security-groups", json!({"name": "web"})));
    let db = id(&neutron.create("security-groups", json!({"name": "db"})));
    let profile =
        |group: &str, part: &str| format!("/calico/v1/policy/profile/openstack-sg-{group}/{part}");
    wait(&etcd, &sync, "db's profile", &profile(&db, "tags"), |v| {
        v == Some(json!([db]))
    });

    // Port created (bound by the driver): its endpoint.
    let port = neutron.create(
        "ports",
        json!({"network_id": network, "device_owner": "compute:nova", "device_id": "vm1",
               "binding:host_id": "host1", "security_groups": [web],
               "fixed_ips": [{"subnet_id": subnet, "ip_address": "10.65.0.5"}]}),
    );
    let key = format!(
        "/calico/v1/host/host1/workload/openstack/vm1/endpoint/{}",
        id(&port)
    );
    wait(&etcd, &sync, "the endpoint", &key, |v| {
        v.is_some_and(|v| v["ipv4_gateway"] == "10.65.0.1")
    });

    // Many ports: what one later change costs does not grow with them.
    for n in 0..30 {
        neutron.create(
            "ports",
            json!({"network_id": network, "device_owner": "compute:nova",
                   "device_id": format!("filler{n}"), "binding:host_id": "host2",
                   "security_groups": [db]}),
        );
    }

    // A rule added: the group's profile, for one read and one write.
    let settled = applied(&sync).len();
    let rule = id(&neutron.create(
        "security-group-rules",
        json!({"security_group_id": web, "direction": "ingress", "ethertype": "IPv4",
               "protocol": "tcp", "port_range_min": 22, "port_range_max": 22}),
    ));
    wait(
        &etcd,
        &sync,
        "the rule in web's profile",
        &profile(&web, "rules"),
        |v| v.is_some_and(|v| v.to_string().contains("\"dst_ports\":[22]")),
    );
    eventually(
        "the rule's step in the log",
        Duration::from_secs(10),
        || {
            let steps = applied(&sync);
            match steps[settled..].iter().find(|(_, _, writes)| *writes > 0) {
                Some(step) => {
                    assert_eq!(
                        *step,
                        (1, 1, 1),
                        "(changes, requests, writes) of a rule added"
                    );
                    Ok(())
                }
                None => Err(format!("{steps:?}")),
            }
        },
    );

    // The rule deleted: the profile follows.
    neutron.delete("security-group-rules", &rule);
    wait(
        &etcd,
        &sync,
        "the rule gone",
        &profile(&web, "rules"),
        |v| v.is_some_and(|v| !v.to_string().contains("\"dst_ports\":[22]")),
    );

    // The port moved from web to db (`openstack port set`): its profiles.
    neutron.update("ports", &id(&port), json!({"security_groups": [db]}));
    wait(&etcd, &sync, "the endpoint in db", &key, |v| {
        v.is_some_and(|v| v["profile_ids"] == json!([format!("openstack-sg-{db}")]))
    });

    // The subnet's gateway changed: the endpoints of its ports.
    neutron.update("subnets", &subnet, json!({"gateway_ip": "10.65.0.254"}));
    wait(&etcd, &sync, "the new gateway", &key, |v| {
        v.is_some_and(|v| v["ipv4_gateway"] == "10.65.0.254")
    });

    // The port deleted, then the group: both gone.
    neutron.delete("ports", &id(&port));
    wait(&etcd, &sync, "the endpoint gone", &key, |v| v.is_none());
    neutron.delete("security-groups", &web);
    wait(
        &etcd,
        &sync,
        "web's profile gone",
        &profile(&web, "rules"),
        |v| v.is_none(),
    );

    // All of it without a second resync.
    assert_eq!(
        sync.log().matches("resync done").count(),
        1,
        "{}",
        sync.log()
    );
}
