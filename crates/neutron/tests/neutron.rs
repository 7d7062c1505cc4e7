//! `calico-neutron` against a real neutron-server (with Calico's ML2 driver) and a real etcd:
//! what an OpenStack operator sees in etcd as they create, change and delete Neutron objects.
//! Needs neutron-server and mariadb-server (scripts/setup-neutron.sh) and etcd.

mod common;

use std::time::{Duration, Instant};

use calico_testkit::{EtcdServer, eventually};
use common::SyncProcess;
use common::neutron::{Neutron, Options};
use serde_json::{Value, json};

const VM1: &str = "6f1e2a4c-0000-4000-8000-000000000001";
const VM2: &str = "6f1e2a4c-0000-4000-8000-000000000002";
const VM3: &str = "6f1e2a4c-0000-4000-8000-000000000003";

/// Keys of other orchestrators and of operators: never touched.
const FOREIGN: [(&str, &str); 3] = [
    (
        "/calico/v1/host/host1/workload/k8s/default.web-0/endpoint/eth0",
        r#"{"state":"active","name":"cali0ef24b1","profile_ids":["k8s_ns.default"],"ipv4_nets":["10.65.1.2/32"]}"#,
    ),
    (
        "/calico/v1/policy/profile/k8s_ns.default/rules",
        r#"{"inbound_rules":[{"action":"allow"}],"outbound_rules":[{"action":"allow"}]}"#,
    ),
    // A profile named like a security group id, but not written by the sync.
    (
        "/calico/v1/policy/profile/0b4c7e84-5c1e-4a5e-9d1e-2f6a1b7c9d01/tags",
        r#"["operators"]"#,
    ),
];

/// The value at `key`, parsed, or `None`.
fn get(etcd: &EtcdServer, key: &str) -> Option<Value> {
    let out = etcd.etcdctl(&["get", key, "--print-value-only"]);
    assert!(
        out.status.success(),
        "etcdctl get {key}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    (!text.is_empty()).then(|| serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

/// Every key under `prefix`.
fn keys(etcd: &EtcdServer, prefix: &str) -> Vec<String> {
    let out = etcd.etcdctl(&["get", prefix, "--prefix", "--keys-only"]);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Waits until `key` holds `expected` (or is absent for `None`).
fn wait_for(etcd: &EtcdServer, what: &str, key: &str, expected: Option<&Value>) -> Duration {
    let start = Instant::now();
    eventually(what, Duration::from_secs(10), || {
        let actual = get(etcd, key);
        match actual.as_ref() == expected {
            true => Ok(()),
            false => Err(format!("{key} is {actual:?}, expected {expected:?}")),
        }
    });
    start.elapsed()
}

fn endpoint_key(host: &str, vm: &str, port: &str) -> String {
    format!("/calico/v1/host/{host}/workload/openstack/{vm}/endpoint/{port}")
}

fn profile_key(group: &str, part: &str) -> String {
    format!("/calico/v1/policy/profile/openstack-sg-{group}/{part}")
}

fn id(object: &Value) -> String {
    object["id"].as_str().expect("an id").to_owned()
}

/// The objects the test creates first: a network with an IPv4 and an IPv6 subnet, and the
/// security group `web` with rules of every kind the mapping covers, and one Calico cannot
/// express.
struct World {
    network: String,
    subnet4: String,
    subnet6: String,
    web: String,
    dccp_rule: String,
}

fn build_world(neutron: &Neutron) -> World {
    let network = id(&neutron.create("networks", json!({"name": "calico"})));
    let subnet = |cidr: &str, version: u8, gateway: &str| {
        id(&neutron.create(
            "subnets",
            json!({"network_id": network, "cidr": cidr, "ip_version": version, "gateway_ip": gateway}),
        ))
    };
    let subnet4 = subnet("10.65.0.0/24", 4, "10.65.0.1");
    let subnet6 = subnet("2001:db8:a41:2::/64", 6, "2001:db8:a41:2::1");
    let web = id(&neutron.create("security-groups", json!({"name": "web"})));
    let rule = |fields: Value| {
        let mut fields = fields;
        fields["security_group_id"] = json!(web);
        id(&neutron.create("security-group-rules", fields))
    };
    rule(
        json!({"direction": "ingress", "ethertype": "IPv4", "protocol": "tcp",
                "port_range_min": 80, "port_range_max": 81, "remote_ip_prefix": "10.0.0.0/8"}),
    );
    rule(json!({"direction": "ingress", "ethertype": "IPv4", "remote_group_id": web}));
    rule(json!({"direction": "ingress", "ethertype": "IPv6", "remote_group_id": web}));
    rule(
        json!({"direction": "ingress", "ethertype": "IPv4", "protocol": "icmp",
                "port_range_min": 8, "port_range_max": 0}),
    );
    let dccp_rule = rule(
        json!({"direction": "ingress", "ethertype": "IPv4", "protocol": "dccp",
                                "port_range_min": 5000, "port_range_max": 5001}),
    );
    World {
        network,
        subnet4,
        subnet6,
        web,
        dccp_rule,
    }
}

/// `web`'s rules as Felix must read them (sorted by their JSON, see `translate`); Neutron added
/// the two egress rules itself.
fn web_rules(web: &str, extra_inbound: &[Value]) -> Value {
    let mut inbound = vec![
        json!({"ip_version": 4, "protocol": "icmp", "icmp_type": 8, "icmp_code": 0, "action": "allow"}),
        json!({"ip_version": 4, "protocol": "tcp", "src_net": "10.0.0.0/8", "dst_ports": ["80:81"], "action": "allow"}),
        json!({"ip_version": 4, "src_tag": web, "action": "allow"}),
        json!({"ip_version": 6, "src_tag": web, "action": "allow"}),
    ];
    inbound.extend_from_slice(extra_inbound);
    inbound.sort_by_key(|r| r.to_string());
    json!({
        "inbound_rules": inbound,
        "outbound_rules": [
            {"ip_version": 4, "action": "allow"},
            {"ip_version": 6, "action": "allow"},
        ],
    })
}

fn vm_port(world: &World, host: &str, vm: &str, last_octet: u8, groups: Value) -> Value {
    json!({
        "network_id": world.network,
        "device_owner": "compute:nova",
        "device_id": vm,
        "binding:host_id": host,
        "security_groups": groups,
        "fixed_ips": [
            {"subnet_id": world.subnet4, "ip_address": format!("10.65.0.{last_octet}")},
            {"subnet_id": world.subnet6, "ip_address": format!("2001:db8:a41:2::{last_octet}")},
        ],
    })
}

fn expected_endpoint(port: &Value, profiles: Value, last_octet: u8) -> Value {
    let port_id = id(port);
    json!({
        "state": "active",
        "name": format!("tap{}", &port_id[..11]),
        "mac": port["mac_address"],
        "profile_ids": profiles,
        "ipv4_nets": [format!("10.65.0.{last_octet}/32")],
        "ipv6_nets": [format!("2001:db8:a41:2::{last_octet}/128")],
        "ipv4_gateway": "10.65.0.1",
        "ipv6_gateway": "2001:db8:a41:2::1",
    })
}

/// Everything one run holds: Neutron, etcd, the sync, and what was created so far.
struct Scene {
    neutron: Neutron,
    etcd: EtcdServer,
    sync: SyncProcess,
    log: std::path::PathBuf,
    _logs: tempfile::TempDir,
    world: World,
    web_profile: String,
}

impl Scene {
    fn start() -> Scene {
        let started = Instant::now();
        // The dccp rule stands for one made before the driver refused such rules.
        let neutron = Neutron::start_with(Options {
            accept_inexpressible_rules: true,
            ..Options::default()
        });
        let etcd = EtcdServer::start();
        eprintln!("neutron-server and etcd up in {:?}", started.elapsed());
        for (key, value) in FOREIGN {
            etcd.put(key, value);
        }
        let logs = tempfile::tempdir().expect("temporary directory");
        let log = logs.path().join("calico-neutron.log");
        let sync = SyncProcess::start(&etcd.endpoint(), &neutron, &log, "2s");
        let world = build_world(&neutron);
        Scene {
            web_profile: format!("openstack-sg-{}", world.web),
            neutron,
            etcd,
            sync,
            log,
            _logs: logs,
            world,
        }
    }

    fn wait_for(&self, what: &str, key: &str, expected: Option<&Value>) -> Duration {
        wait_for(&self.etcd, what, key, expected)
    }

    fn web_rules_are(&self, what: &str, extra_inbound: &[Value]) -> Duration {
        let key = profile_key(&self.world.web, "rules");
        self.wait_for(what, &key, Some(&web_rules(&self.world.web, extra_inbound)))
    }

    /// Creates a VM port in `web` and waits for its endpoint; returns the port and its key.
    fn web_port(&self, host: &str, vm: &str, last_octet: u8) -> (Value, String) {
        let fields = vm_port(&self.world, host, vm, last_octet, json!([self.world.web]));
        let port = self.neutron.create("ports", fields);
        let key = endpoint_key(host, vm, &id(&port));
        let expected = expected_endpoint(&port, json!([self.web_profile]), last_octet);
        self.wait_for(
            &format!("the endpoint of {}", id(&port)),
            &key,
            Some(&expected),
        );
        (port, key)
    }

    /// The keys and values under `/calico/`.
    fn everything(&self) -> Vec<(String, Option<Value>)> {
        keys(&self.etcd, "/calico/")
            .into_iter()
            .map(|k| (k.clone(), get(&self.etcd, &k)))
            .collect()
    }
}

#[test]
fn neutron_ports_and_security_groups_become_endpoints_and_profiles() {
    let started = Instant::now();
    let mut scene = Scene::start();
    let (port1, key1) = vm_port_bound_and_translated(&scene);
    unexpressible_rule_is_logged_and_left_out(&scene);
    let ssh = rule_added_updates_the_profile(&scene);
    port_without_port_security_allows_everything(&scene);
    drift_is_repaired_both_ways(&scene, &key1);
    restart_while_ports_change_converges(&mut scene, &port1, &key1, &ssh);
    other_orchestrators_keys_are_untouched(&scene);
    neutron_away_leaves_etcd_as_it_is(&mut scene);
    eprintln!("whole test: {:?}", started.elapsed());
}

/// A VM port on host1 in `web`: Calico's driver binds it as a TAP, its endpoint and web's
/// profile appear with the exact JSON of the mapping.
fn vm_port_bound_and_translated(scene: &Scene) -> (Value, String) {
    let (port, key) = scene.web_port("host1", VM1, 10);
    assert_eq!(
        port["binding:vif_type"],
        "tap",
        "the driver did not bind: {port}\n{}",
        scene.neutron.log_tail()
    );
    assert_eq!(port["status"], "ACTIVE", "{port}");
    scene.web_rules_are("web's rules", &[]);
    let tags = profile_key(&scene.world.web, "tags");
    scene.wait_for("web's tags", &tags, Some(&json!([scene.world.web])));
    (port, key)
}

/// The dccp rule with ports is not in the profile (checked above), a line names it, etcd
/// records it under the group and `calicoctl get profile` warns about it; deleted, the record
/// goes.
fn unexpressible_rule_is_logged_and_left_out(scene: &Scene) {
    let rule = &scene.world.dccp_rule;
    eventually(
        "a log line naming the dccp rule",
        Duration::from_secs(5),
        || {
            let text = scene.sync.log();
            let line = text
                .lines()
                .find(|l| l.contains(rule) && l.contains("left out"));
            line.map(|l| eprintln!("logged: {l}"))
                .ok_or_else(|| format!("log so far:\n{text}"))
        },
    );
    let reason = "a port range with protocol \"dccp\" (33): Calico matches ports of tcp, udp, \
                  sctp and udplite only";
    let key = format!("/calico/openstack/v1/left-out/{}", scene.world.web);
    let record = json!({"rules": [{"id": rule, "direction": "inbound", "reason": reason}]});
    scene.wait_for("web's left-out record", &key, Some(&record));
    let warning = format!(
        "warning: security group {} rule {rule} (inbound) is not enforced: {reason}\n",
        scene.world.web
    );
    for output in [&[][..], &["-o", "yaml"][..]] {
        let stderr = calicoctl_stderr(
            scene,
            &[&["get", "profile", &scene.web_profile], output].concat(),
        );
        assert_eq!(stderr, warning, "calicoctl get profile {output:?}");
    }
    scene.neutron.delete("security-group-rules", rule);
    scene.wait_for("web's left-out record gone", &key, None);
    let stderr = calicoctl_stderr(scene, &["get", "profile", &scene.web_profile]);
    assert_eq!(stderr, "", "no warning once the rule is deleted");
}

/// `calicoctl ARGS` against the scene's etcd (the binary beside calico-neutron in the target
/// directory); must succeed; returns its stderr.
fn calicoctl_stderr(scene: &Scene, args: &[&str]) -> String {
    let calicoctl =
        std::path::Path::new(env!("CARGO_BIN_EXE_calico-neutron")).with_file_name("calicoctl");
    assert!(
        calicoctl.exists(),
        "{} is missing: build it first with `cargo build -j2 -p calico-ctl`",
        calicoctl.display()
    );
    let out = std::process::Command::new(&calicoctl)
        .env("ETCD_ENDPOINTS", scene.etcd.endpoint())
        .args(args)
        .output()
        .expect("calicoctl runs");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "calicoctl {args:?}: {stderr}");
    stderr
}

/// A rule added: the profile follows within a few seconds. Returns the rule's id.
fn rule_added_updates_the_profile(scene: &Scene) -> String {
    let rule = scene.neutron.create(
        "security-group-rules",
        json!({"security_group_id": scene.world.web, "direction": "ingress", "ethertype": "IPv4",
               "protocol": "tcp", "port_range_min": 22, "port_range_max": 22}),
    );
    let took = scene.web_rules_are("web's rules with ssh", &[ssh_rule()]);
    // Reported, not asserted (a loaded machine may be slow): docs/openstack.md gives figures.
    eprintln!("rule added → profile updated in {took:?}");
    id(&rule)
}

fn ssh_rule() -> Value {
    json!({"ip_version": 4, "protocol": "tcp", "dst_ports": [22], "action": "allow"})
}

/// Port security off: the endpoint allows everything through the open profile; deleting the
/// port deletes its endpoint, and the open profile nobody uses any more.
fn port_without_port_security_allows_everything(scene: &Scene) {
    let mut fields = vm_port(&scene.world, "host2", VM2, 11, json!([]));
    fields["port_security_enabled"] = json!(false);
    let port = scene.neutron.create("ports", fields);
    let key = endpoint_key("host2", VM2, &id(&port));
    let open = "/calico/v1/policy/profile/openstack-port-security-disabled/rules";
    let expected = expected_endpoint(&port, json!(["openstack-port-security-disabled"]), 11);
    scene.wait_for("port 2's endpoint", &key, Some(&expected));
    let allow_all =
        json!({"inbound_rules": [{"action": "allow"}], "outbound_rules": [{"action": "allow"}]});
    scene.wait_for("the open profile", open, Some(&allow_all));
    // What Calico cannot do for such a port (lift anti-spoofing) is said, by port id.
    let port_id = id(&port);
    eventually(
        "a warning that port 2 keeps anti-spoofing",
        Duration::from_secs(5),
        || {
            let text = scene.sync.log();
            text.lines()
                .find(|l| l.contains(&port_id) && l.contains("not its own"))
                .map(drop)
                .ok_or_else(|| format!("log so far:\n{text}"))
        },
    );
    let started = Instant::now();
    scene.neutron.delete("ports", &id(&port));
    scene.wait_for("port 2's endpoint gone", &key, None);
    eprintln!("port deleted → endpoint gone in {:?}", started.elapsed());
    scene.wait_for("the open profile gone", open, None);
}

/// Repaired by the resync (every 2 s here): a deleted owned key comes back, an owned key
/// Neutron does not have goes.
fn drift_is_repaired_both_ways(scene: &Scene, key1: &str) {
    let stray = endpoint_key("host9", VM3, "0b4c7e84-0000-4000-8000-00000000beef");
    let copy = get(&scene.etcd, key1).expect("port 1's endpoint");
    scene.etcd.put(&stray, &copy.to_string());
    let tags = profile_key(&scene.world.web, "tags");
    let out = scene.etcd.etcdctl(&["del", &tags]);
    assert!(out.status.success(), "etcdctl del {tags}");
    scene.wait_for(
        "web's tags restored",
        &tags,
        Some(&json!([scene.world.web])),
    );
    scene.wait_for("the stray endpoint deleted", &stray, None);
}

/// Stopped, Neutron changes, started while it still changes: etcd ends as Neutron is.
fn restart_while_ports_change_converges(scene: &mut Scene, port1: &Value, key1: &str, ssh: &str) {
    scene.sync.stop();
    scene.neutron.delete("ports", &id(port1));
    scene.neutron.delete("security-group-rules", ssh);
    let fields = vm_port(&scene.world, "host2", VM3, 12, json!([scene.world.web]));
    let port3 = scene.neutron.create("ports", fields);
    let etcd = scene.etcd.endpoint();
    scene.sync = SyncProcess::start(&etcd, &scene.neutron, &scene.log, "2s");
    let (port4, key4) = scene.web_port("host1", VM1, 13);
    let key3 = endpoint_key("host2", VM3, &id(&port3));
    let expected3 = expected_endpoint(&port3, json!([scene.web_profile]), 12);
    scene.wait_for("port 1's endpoint gone after the restart", key1, None);
    scene.wait_for("port 3's endpoint", &key3, Some(&expected3));
    scene.web_rules_are("web's rules without ssh", &[]);
    let mut workloads: Vec<String> = keys(&scene.etcd, "/calico/v1/host/")
        .into_iter()
        .filter(|k| k.contains("/workload/openstack/"))
        .collect();
    workloads.sort();
    let mut expected = vec![key3, key4.clone()];
    expected.sort();
    assert_eq!(workloads, expected, "OpenStack endpoints in etcd");
    // admin_state_up follows into the endpoint's state.
    scene
        .neutron
        .update("ports", &id(&port4), json!({"admin_state_up": false}));
    let mut down = expected_endpoint(&port4, json!([scene.web_profile]), 13);
    down["state"] = json!("inactive");
    scene.wait_for("port 4's endpoint inactive", &key4, Some(&down));
}

/// Nothing of other orchestrators or operators was touched.
fn other_orchestrators_keys_are_untouched(scene: &Scene) {
    for (key, value) in FOREIGN {
        let expected: Value = serde_json::from_str(value).unwrap();
        assert_eq!(get(&scene.etcd, key), Some(expected), "{key} was changed");
    }
}

/// Neutron unreachable: etcd stays as it is while the sync retries.
fn neutron_away_leaves_etcd_as_it_is(scene: &mut Scene) {
    let before = scene.everything();
    let earlier = scene.sync.log().matches("is unreachable").count();
    scene.neutron.stop_server();
    eventually(
        "warnings that neutron is unreachable",
        Duration::from_secs(15),
        || {
            let count = scene.sync.log().matches("is unreachable").count() - earlier;
            (count >= 3)
                .then_some(())
                .ok_or_else(|| format!("{count} warnings so far"))
        },
    );
    assert_eq!(
        scene.everything(),
        before,
        "etcd changed while Neutron was away"
    );
    let log = scene.sync.log();
    assert!(
        scene.sync.is_running(),
        "calico-neutron exited while Neutron was away:\n{log}"
    );
}
