//! Several attachments in one container, CHECK of routes, and what a runtime passes besides
//! the config (`runtimeConfig` `ips`/`mac`, `CNI_ARGS` `MAC=`): the built `calico` binary
//! driven the way libcni drives it, one call per attachment, as podman does with two networks.

mod common;

use calico_testkit::NetNs;
use common::{Rig, assert_ok, env, env_if, netns_path, route_dev, routes, with_prev};
use serde_json::{Value, json};

const ENDPOINTS: &str = "/calico/v1/host/node1/workload/cni/pod2/endpoint";

fn address(result: &Value, family: &str) -> String {
    let ips = result["ips"].as_array().expect("ips");
    let ip = ips
        .iter()
        .map(|ip| ip["address"].as_str().unwrap())
        .find(|a| a.contains(if family == "-4" { '.' } else { ':' }))
        .unwrap_or_else(|| panic!("no {family} address in {result}"));
    ip.split('/').next().unwrap().to_owned()
}

/// Two Calico networks, dual-stack: `testnet` on eth0, `othernet` on eth1.
fn two_networks(rig: &Rig) -> (Value, Value) {
    let ipam = json!({"type": "calico-ipam", "assign_ipv6": true});
    let first = rig.config("1.0.0", ipam);
    let mut second = first.clone();
    second["name"] = json!("othernet");
    (first, second)
}

#[test]
fn two_calico_networks_in_one_container_keep_their_own_routes() {
    let rig = Rig::new();
    let container = NetNs::new("cni-two");
    let path = netns_path(&container);
    let (net0, net1) = two_networks(&rig);
    let (eth0, eth1) = (
        env_if("pod2", &path, "", "eth0"),
        env_if("pod2", &path, "", "eth1"),
    );
    let add0 = rig.call("calico", "ADD", &eth0, &net0);
    assert_ok(&add0);
    let add1 = rig.call("calico", "ADD", &eth1, &net1);
    assert_ok(&add1);
    assert_ne!(address(&add0.json, "-4"), address(&add1.json, "-4"));

    // Both keep their gateway and default routes; the first attachment's have the lower
    // metric, so eth0 carries the container's traffic.
    let v4 = routes(&container, "-4");
    for line in [
        "default via 169.254.1.1 dev eth0 metric 1024",
        "default via 169.254.1.1 dev eth1 metric 1025",
        "169.254.1.1 dev eth0 scope link metric 1024",
        "169.254.1.1 dev eth1 scope link metric 1025",
    ] {
        assert!(v4.iter().any(|l| l == line), "{line:?} not in {v4:#?}");
    }
    let v6 = routes(&container, "-6");
    for dev in ["eth0 metric 1024", "eth1 metric 1025"] {
        assert!(
            v6.iter()
                .any(|l| l.starts_with("default via fe80::") && l.contains(dev)),
            "no IPv6 default on {dev}: {v6:#?}"
        );
    }
    assert_eq!(route_dev(&container, "192.0.2.1"), "eth0");
    assert_eq!(route_dev(&container, "2001:db8::1"), "eth0");
    // eth1 is the standby: what the container sends from its addresses leaves through eth1.
    let (a1, a1v6) = (address(&add1.json, "-4"), address(&add1.json, "-6"));
    let rules = container.run_ok("ip", &["rule"], "");
    assert!(
        rules.contains(&format!("1000:\tfrom {a1} lookup 1025")),
        "{rules}"
    );
    let rules6 = container.run_ok("ip", &["-6", "rule"], "");
    assert!(
        rules6.contains(&format!("1000:\tfrom {a1v6} lookup 1025")),
        "{rules6}"
    );
    let table = container.run_ok("ip", &["route", "show", "table", "1025"], "");
    assert!(
        table.contains("default via 169.254.1.1 dev eth1"),
        "{table}"
    );
    let from_eth1 = container.run_ok("ip", &["-o", "route", "get", "192.0.2.1", "from", &a1], "");
    assert!(from_eth1.contains("dev eth1"), "{from_eth1}");
    // Two endpoints, each with its network's profile.
    for (ifname, net) in [("eth0", "testnet"), ("eth1", "othernet")] {
        let endpoint = rig.get(&format!("{ENDPOINTS}/{ifname}")).expect(ifname);
        assert_eq!(endpoint["profile_ids"], json!([net]), "{ifname}");
    }
    let check = |vars: &[(&str, &str)], net: &Value, add: &Value| {
        rig.call("calico", "CHECK", vars, &with_prev(net.clone(), add))
    };
    assert_ok(&check(&eth0, &net0, &add0.json));
    assert_ok(&check(&eth1, &net1, &add1.json));

    // CHECK of eth1 notices its source rule gone.
    container.run_ok("ip", &["rule", "del", "from", &a1, "lookup", "1025"], "");
    let reply = check(&eth1, &net1, &add1.json);
    assert_eq!(reply.json["code"], 103, "{}", reply.json);
    let msg = reply.json["msg"].as_str().unwrap();
    assert!(
        msg.contains(&format!("the rule from {a1} lookup 1025 is missing")),
        "{msg}"
    );
    container.run_ok(
        "ip",
        &[
            "rule", "add", "from", &a1, "lookup", "1025", "priority", "1000",
        ],
        "",
    );
    assert_ok(&check(&eth1, &net1, &add1.json));

    // DEL of eth1 takes its routes, rules, endpoint and addresses and leaves eth0 as it was.
    assert_ok(&rig.call("calico", "DEL", &eth1, &with_prev(net1.clone(), &add1.json)));
    for family in ["-4", "-6"] {
        let rules = container.run_ok("ip", &[family, "rule"], "");
        assert!(!rules.contains("lookup 1025"), "{rules}");
    }
    let v4 = routes(&container, "-4");
    assert_eq!(
        v4,
        [
            "default via 169.254.1.1 dev eth0 metric 1024",
            "169.254.1.1 dev eth0 scope link metric 1024"
        ]
    );
    assert!(!routes(&container, "-6").iter().any(|l| l.contains("eth1")));
    assert_ok(&check(&eth0, &net0, &add0.json));
    assert_eq!(rig.get(&format!("{ENDPOINTS}/eth1")), None);
    assert_eq!(
        rig.keys("/calico/ipam/v2/handle/"),
        ["/calico/ipam/v2/handle/testnet.pod2"]
    );

    // eth1 again, then DEL of eth0: eth1's own default route takes over.
    let add1 = rig.call("calico", "ADD", &eth1, &net1);
    assert_ok(&add1);
    assert_ok(&rig.call("calico", "DEL", &eth0, &with_prev(net0.clone(), &add0.json)));
    assert_eq!(route_dev(&container, "192.0.2.1"), "eth1");
    assert_eq!(route_dev(&container, "2001:db8::1"), "eth1");
    assert_ok(&check(&eth1, &net1, &add1.json));
    assert_ok(&rig.call("calico", "DEL", &eth1, &with_prev(net1, &add1.json)));
    assert!(rig.keys("/calico/ipam/v2/handle/").is_empty());
    assert!(rig.keys("/calico/v1/host/").is_empty());
    assert_eq!(routes(&container, "-4"), Vec::<String>::new());
}

/// What Felix does for a workload on the host (a route to its address through its veth), and
/// somewhere for the host's own traffic to come from: `hostif` with 10.200.0.1 and the
/// host's default route, which proxy ARP for 169.254.1.1 needs.
fn host_routes(rig: &Rig, workloads: &[(&str, &Value)]) {
    rig.in_host(&[
        "link", "add", "hostif", "type", "veth", "peer", "name", "hostpeer",
    ]);
    rig.in_host(&["link", "set", "hostif", "up"]);
    rig.in_host(&["link", "set", "hostpeer", "up"]);
    rig.in_host(&["addr", "add", "10.200.0.1/32", "dev", "hostif"]);
    rig.in_host(&["route", "add", "default", "dev", "hostif"]);
    for (ip, result) in workloads {
        let veth = result["interfaces"][0]["name"].as_str().unwrap();
        rig.in_host(&["route", "add", ip, "dev", veth]);
    }
}

fn ping(rig: &Rig, ip: &str) -> bool {
    let out = rig.host.run("ping", &["-c", "1", "-W", "1", ip], "");
    out.status.success()
}

#[test]
fn the_standby_interface_answers_from_its_own_address() {
    calico_testkit::require_tool("ping");
    let rig = Rig::new();
    let container = NetNs::new("cni-reply");
    let path = netns_path(&container);
    let (net0, net1) = two_networks(&rig);
    let add0 = rig.call("calico", "ADD", &env_if("r", &path, "", "eth0"), &net0);
    assert_ok(&add0);
    let add1 = rig.call("calico", "ADD", &env_if("r", &path, "", "eth1"), &net1);
    assert_ok(&add1);
    let (a0, a1) = (address(&add0.json, "-4"), address(&add1.json, "-4"));
    host_routes(&rig, &[(&a0, &add0.json), (&a1, &add1.json)]);
    assert!(ping(&rig, &a0), "the owner's address does not answer");
    assert!(ping(&rig, &a1), "the standby's address does not answer");
    // Without its source rule the reply leaves through eth0, and the host's strict
    // reverse-path check on eth0's veth drops it: what the rule is for.
    container.run_ok("ip", &["rule", "del", "from", &a1, "lookup", "1025"], "");
    assert!(!ping(&rig, &a1), "answered without the rule");
}

#[test]
fn one_network_twice_in_a_container_holds_an_address_per_interface() {
    let rig = Rig::new();
    let container = NetNs::new("cni-twice");
    let path = netns_path(&container);
    let config = rig.config("0.4.0", json!({"type": "calico-ipam"}));
    let (eth0, eth1) = (
        env_if("pod2", &path, "", "eth0"),
        env_if("pod2", &path, "", "eth1"),
    );
    let add0 = rig.call("calico", "ADD", &eth0, &config);
    assert_ok(&add0);
    let add1 = rig.call("calico", "ADD", &eth1, &config);
    assert_ok(&add1);
    let (a0, a1) = (address(&add0.json, "-4"), address(&add1.json, "-4"));
    assert_ne!(a0, a1, "both interfaces got one address");
    assert_ok(&rig.call("calico", "DEL", &eth1, &config));
    // eth0's address is still assigned to its handle and on its interface.
    let handle = rig
        .get("/calico/ipam/v2/handle/testnet.pod2")
        .expect("handle");
    assert_eq!(handle["block"].as_object().unwrap().len(), 1, "{handle}");
    assert_eq!(rig.keys("/calico/ipam/v2/handle/").len(), 1);
    assert_ok(&rig.call(
        "calico",
        "CHECK",
        &eth0,
        &with_prev(config.clone(), &add0.json),
    ));
    assert_ok(&rig.call("calico", "DEL", &eth0, &config));
}

#[test]
fn check_fails_naming_the_route_or_mac_that_is_gone() {
    let rig = Rig::new();
    let container = NetNs::new("cni-chk");
    let path = netns_path(&container);
    let config = rig.config("1.0.0", json!({"type": "calico-ipam", "assign_ipv6": true}));
    let vars = env("chk", &path, "");
    let add = rig.call("calico", "ADD", &vars, &config);
    assert_ok(&add);
    let prev = with_prev(config.clone(), &add.json);
    let check = || rig.call("calico", "CHECK", &vars, &prev);
    assert_ok(&check());
    let expect_failure = |what: &str| {
        let reply = check();
        assert!(!reply.ok, "CHECK passed without {what}");
        assert_eq!(reply.json["code"], 103, "{}", reply.json);
        let msg = reply.json["msg"].as_str().unwrap().to_owned();
        assert!(msg.contains(what), "{msg}");
    };
    let ip = |args: &[&str]| container.run_ok("ip", args, "");

    ip(&[
        "route",
        "del",
        "default",
        "via",
        "169.254.1.1",
        "dev",
        "eth0",
    ]);
    expect_failure("the route default via 169.254.1.1 dev eth0 is missing");
    ip(&[
        "route",
        "add",
        "default",
        "via",
        "169.254.1.1",
        "dev",
        "eth0",
        "metric",
        "1024",
    ]);
    assert_ok(&check());

    ip(&["route", "del", "169.254.1.1", "dev", "eth0"]);
    expect_failure("the route 169.254.1.1 dev eth0 scope link is missing");
    ip(&[
        "route",
        "add",
        "169.254.1.1",
        "dev",
        "eth0",
        "scope",
        "link",
    ]);
    assert_ok(&check());

    ip(&["-6", "route", "del", "default", "dev", "eth0"]);
    expect_failure("the route default via fe80::");
    let gateway: Value = {
        let veth = add.json["interfaces"][0]["name"].as_str().unwrap();
        let out = rig.in_host(&["-j", "-6", "addr", "show", "dev", veth, "scope", "link"]);
        serde_json::from_str::<Value>(&out).unwrap()[0]["addr_info"][0]["local"].clone()
    };
    ip(&[
        "-6",
        "route",
        "add",
        "default",
        "via",
        gateway.as_str().unwrap(),
        "dev",
        "eth0",
    ]);
    assert_ok(&check());

    ip(&["link", "set", "dev", "eth0", "address", "c2:00:00:00:00:99"]);
    expect_failure("eth0 in the container has MAC c2:00:00:00:00:99, the ADD result says");
    assert_ok(&rig.call("calico", "DEL", &vars, &prev));
}

#[test]
fn declared_ips_and_mac_capabilities_set_the_address_and_mac() {
    let rig = Rig::new();
    let container = NetNs::new("cni-caps");
    let path = netns_path(&container);
    let mut config = rig.config("1.0.0", json!({"type": "calico-ipam"}));
    config["capabilities"] = json!({"ips": true, "mac": true, "portMappings": false});
    config["runtimeConfig"] = json!({"ips": ["10.80.7.7/24"], "mac": "c2:11:22:33:44:55"});
    let vars = env("caps", &path, "IgnoreUnknown=1");
    let add = rig.call("calico", "ADD", &vars, &config);
    assert_ok(&add);
    assert_eq!(
        add.json["ips"][0]["address"], "10.80.7.7/32",
        "{}",
        add.json
    );
    assert_eq!(add.json["interfaces"][1]["mac"], "c2:11:22:33:44:55");
    let link = container.run_ok("ip", &["-o", "link", "show", "eth0"], "");
    assert!(link.contains("link/ether c2:11:22:33:44:55"), "{link}");
    let endpoint = rig
        .get("/calico/v1/host/node1/workload/cni/caps/endpoint/eth0")
        .expect("endpoint");
    assert_eq!(endpoint["mac"], "c2:11:22:33:44:55");
    assert_eq!(endpoint["ipv4_nets"], json!(["10.80.7.7/32"]));
    let handle = rig
        .get("/calico/ipam/v2/handle/testnet.caps")
        .expect("handle");
    assert_eq!(handle["block"].as_object().unwrap().len(), 1, "{handle}");
    let prev = with_prev(config.clone(), &add.json);
    assert_ok(&rig.call("calico", "CHECK", &vars, &prev));
    assert_ok(&rig.call("calico", "DEL", &vars, &prev));
    assert!(rig.keys("/calico/ipam/v2/handle/").is_empty());

    // podman's way: CNI_ARGS MAC= (and IP=) without capabilities.
    let plain = rig.config("1.0.0", json!({"type": "calico-ipam"}));
    let args = "IgnoreUnknown=1;IP=10.80.7.8;MAC=c2:11:22:33:44:66";
    let vars = env("podman", &path, args);
    let add = rig.call("calico", "ADD", &vars, &plain);
    assert_ok(&add);
    assert_eq!(add.json["ips"][0]["address"], "10.80.7.8/32");
    let link = container.run_ok("ip", &["-o", "link", "show", "eth0"], "");
    assert!(link.contains("link/ether c2:11:22:33:44:66"), "{link}");
    assert_ok(&rig.call("calico", "DEL", &vars, &plain));
}

#[test]
fn capabilities_the_plugin_cannot_honour_are_refused_naming_the_field() {
    let rig = Rig::new();
    let container = NetNs::new("cni-nocap");
    let path = netns_path(&container);
    let vars = env("nocap", &path, "");
    let base = rig.config("1.0.0", json!({"type": "calico-ipam"}));
    let cases = [
        (
            json!({}),
            json!({"ips": ["10.80.7.9"]}),
            "runtimeConfig.ips: given, but the config does not declare",
        ),
        (
            json!({"mac": false}),
            json!({"mac": "c2:11:22:33:44:55"}),
            "runtimeConfig.mac: given, but the config does not declare",
        ),
        (
            json!({"portMappings": true}),
            json!({"portMappings": []}),
            "capabilities.portMappings: the calico plugin does not implement it",
        ),
        (
            json!({"mac": true}),
            json!({"mac": "ff:ff:ff:ff:ff:ff"}),
            "runtimeConfig.mac: \"ff:ff:ff:ff:ff:ff\" is a multicast address",
        ),
        (
            json!({"ips": true}),
            json!({"ips": ["10.99.0.1"]}),
            "10.99.0.1 is in no configured IP pool",
        ),
    ];
    for (capabilities, runtime_config, expected) in cases {
        let mut config = base.clone();
        config["capabilities"] = capabilities;
        config["runtimeConfig"] = runtime_config;
        let reply = rig.call("calico", "ADD", &vars, &config);
        assert!(!reply.ok, "{expected}: ADD passed");
        let msg = reply.json["msg"].as_str().unwrap();
        assert!(msg.contains(expected), "{msg}");
        assert!(
            [7, 101].contains(&reply.json["code"].as_u64().unwrap()),
            "{}",
            reply.json
        );
    }
    assert!(rig.keys("/calico/ipam/v2/handle/").is_empty());
    assert!(rig.keys("/calico/v1/host/").is_empty());
    assert!(!container.run_ok("ip", &["-o", "link"], "").contains("eth0"));
}

#[test]
fn etcd_errors_name_the_config_fields_not_command_line_flags() {
    let rig = Rig::new();
    let container = NetNs::new("cni-etcd");
    let path = netns_path(&container);
    let vars = env("etcd", &path, "");
    let mut config = rig.config("1.0.0", json!({"type": "calico-ipam"}));
    // Nothing listens on port 9 in the test's namespace: connection refused at once.
    config["etcd_endpoints"] = json!("http://127.0.0.1:9");
    for command in ["ADD", "DEL"] {
        let reply = rig.call("calico", command, &vars, &config);
        assert_eq!(reply.json["code"], 100, "{command}: {}", reply.json);
        let msg = reply.json["msg"].as_str().unwrap();
        assert!(
            msg.contains("check etcd_endpoints in the network configuration"),
            "{msg}"
        );
        // One line naming the endpoint and the cause.
        assert!(
            msg.contains(
                "cannot reach etcd at http://127.0.0.1:9: tcp connect error: Connection refused"
            ),
            "{msg}"
        );
        assert!(!msg.contains('\n'), "{msg}");
        assert!(!msg.contains("--etcd"), "{msg}");
    }
    // No etcd fields: the plugin reads ETCD_ENDPOINTS and the ETCD_* TLS files as every other
    // component does.
    let mut bare = config.clone();
    bare.as_object_mut().unwrap().remove("etcd_endpoints");
    let mut with_env = vars.clone();
    with_env.extend([
        ("ETCD_ENDPOINTS", "https://127.0.0.1:9"),
        ("ETCD_CERT_FILE", "/nonexistent/shared-cert.pem"),
        ("ETCD_KEY_FILE", "/nonexistent/shared-key.pem"),
    ]);
    let reply = rig.call("calico", "ADD", &with_env, &bare);
    assert_eq!(reply.json["code"], 100, "{}", reply.json);
    let msg = reply.json["msg"].as_str().unwrap();
    assert!(msg.contains("/nonexistent/shared-cert.pem"), "{msg}");
    config["etcd_endpoints"] = json!("https://127.0.0.1:9");
    config["etcd_cert_file"] = json!("/nonexistent/cert.pem");
    let reply = rig.call("calico", "ADD", &vars, &config);
    assert_eq!(reply.json["code"], 7, "{}", reply.json);
    assert!(
        reply.json["msg"]
            .as_str()
            .unwrap()
            .starts_with("etcd_key_file: missing, but etcd_cert_file is given"),
        "{}",
        reply.json
    );
    config["etcd_key_file"] = json!("/nonexistent/key.pem");
    let reply = rig.call("calico", "ADD", &vars, &config);
    assert_eq!(reply.json["code"], 100, "{}", reply.json);
    assert!(
        reply.json["msg"]
            .as_str()
            .unwrap()
            .starts_with("etcd_cert_file: cannot read client certificate /nonexistent/cert.pem"),
        "{}",
        reply.json
    );
    assert!(rig.keys("/calico/ipam/v2/handle/").is_empty());
}

/// An eth1 added before handles named the interface holds its address under the eth0 handle
/// (`<network>.<container id>`); DEL of eth1 still releases it, and only it.
#[test]
fn del_releases_an_older_interface_s_address_held_by_the_eth0_handle() {
    use calico_datastore::{Datastore, EtcdConfig, EtcdDatastore};
    use std::sync::Arc;
    let rig = Rig::new();
    let container = NetNs::new("cni-legacy");
    let path = netns_path(&container);
    let config = rig.config("1.0.0", json!({"type": "calico-ipam"}));
    let (eth0, eth1) = (
        env_if("old", &path, "", "eth0"),
        env_if("old", &path, "", "eth1"),
    );
    let add0 = rig.call("calico", "ADD", &eth0, &config);
    assert_ok(&add0);
    let add1 = rig.call("calico", "ADD", &eth1, &config);
    assert_ok(&add1);
    let a1: std::net::IpAddr = address(&add1.json, "-4").parse().unwrap();
    // Move eth1's address to the old handle, as the plugin used to assign it (from a thread in
    // the host namespace, where etcd listens).
    let endpoint = rig.etcd.endpoint();
    let host = calico_linux::Netns::named(rig.host.name());
    calico_linux::in_netns(&host, || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        runtime.block_on(async {
            let config = EtcdConfig {
                endpoints: vec![endpoint],
                ..EtcdConfig::default()
            };
            let store: Arc<dyn Datastore> = Arc::new(EtcdDatastore::connect(config).await.unwrap());
            let ipam = calico_ipam::Ipam::new(store.clone());
            ipam.release_ips(&[a1]).await.unwrap();
            let attributes = std::collections::BTreeMap::new();
            ipam.assign_ip(a1, "testnet.old", &attributes, "node1")
                .await
                .unwrap();
        });
        Ok(())
    })
    .unwrap();
    assert_eq!(rig.get("/calico/ipam/v2/handle/testnet.old.eth1"), None);
    assert_ok(&rig.call("calico", "DEL", &eth1, &config));
    assert_eq!(
        rig.get("/calico/v1/host/node1/workload/cni/old/endpoint/eth1"),
        None
    );
    // Only eth0's address is left, under its handle.
    let handle = rig
        .get("/calico/ipam/v2/handle/testnet.old")
        .expect("eth0's handle");
    assert_eq!(
        handle["block"].as_object().unwrap().values().next(),
        Some(&json!(1)),
        "{handle}"
    );
    assert_ok(&rig.call(
        "calico",
        "CHECK",
        &eth0,
        &with_prev(config.clone(), &add0.json),
    ));
    assert_ok(&rig.call("calico", "DEL", &eth0, &config));
    assert!(rig.keys("/calico/ipam/v2/handle/").is_empty());
}

/// A standby whose routes cannot be added (an equal route is in the way: never replaced) fails
/// naming the route as `ip route add` would take it, and undoes itself without touching the
/// first attachment.
#[test]
fn a_standby_whose_route_is_taken_fails_and_leaves_the_first_as_it_was() {
    let rig = Rig::new();
    let container = NetNs::new("cni-taken");
    let path = netns_path(&container);
    let (net0, net1) = two_networks(&rig);
    let eth0 = env_if("taken", &path, "", "eth0");
    let add0 = rig.call("calico", "ADD", &eth0, &net0);
    assert_ok(&add0);
    let before = routes(&container, "-4");
    let squat = [
        "route",
        "add",
        "169.254.1.1",
        "dev",
        "eth0",
        "metric",
        "1025",
        "table",
        "1025",
    ];
    container.run_ok("ip", &squat, "");
    let add1 = rig.call("calico", "ADD", &env_if("taken", &path, "", "eth1"), &net1);
    assert!(!add1.ok, "ADD passed: {}", add1.json);
    assert_eq!(add1.json["code"], 102, "{}", add1.json);
    let msg = add1.json["msg"].as_str().unwrap();
    assert!(msg.contains("File exists"), "{msg}");
    assert!(
        msg.contains("route add 169.254.1.1/32 dev eth1 scope link metric 1025 table 1025"),
        "{msg}"
    );
    assert!(!container.run_ok("ip", &["-o", "link"], "").contains("eth1"));
    assert_eq!(routes(&container, "-4"), before);
    for family in ["-4", "-6"] {
        let rules = container.run_ok("ip", &[family, "rule"], "");
        assert!(!rules.contains("lookup 1025"), "{rules}");
    }
    assert_eq!(
        rig.keys("/calico/ipam/v2/handle/"),
        ["/calico/ipam/v2/handle/testnet.taken"]
    );
    assert_ok(&rig.call(
        "calico",
        "CHECK",
        &eth0,
        &with_prev(net0.clone(), &add0.json),
    ));
    assert_ok(&rig.call("calico", "DEL", &eth0, &net0));
}
