//! The plugins driven the way runtimes drive them: the built `calico` binary run with `CNI_*`
//! variables and the config on stdin, inside a test-made "host" namespace (where etcd runs
//! too), plugging test-made "container" namespaces. Checked with `ip` and `etcdctl`.

mod common;

use std::process::Command;

use calico_testkit::{EtcdServer, NetNs, output_with_stdin, require_tool};
use common::{Rig, assert_ok, env, netns_path, with_prev};
use serde_json::{Value, json};

const VERSIONS: [&str; 4] = ["0.3.0", "0.3.1", "0.4.0", "1.0.0"];

#[test]
fn every_spec_version_adds_checks_and_deletes() {
    let rig = Rig::new();
    for (i, version) in VERSIONS.iter().enumerate() {
        let container = NetNs::new("cni-ctr");
        let path = netns_path(&container);
        let id = format!("ctr{i}");
        let config = rig.config(version, json!({"type": "calico-ipam"}));
        let vars = env(&id, &path, "IgnoreUnknown=1");
        let add = rig.call("calico", "ADD", &vars, &config);
        assert_ok(&add);
        let result = &add.json;
        assert_eq!(result["cniVersion"], *version);
        let address = result["ips"][0]["address"].as_str().unwrap().to_owned();
        assert!(
            address.starts_with("10.80.") && address.ends_with("/32"),
            "{result}"
        );
        assert_eq!(
            result["ips"][0].get("version").is_some(),
            *version != "1.0.0",
            "{result}"
        );
        assert_eq!(result["interfaces"][1]["sandbox"], path.as_str());
        let veth = result["interfaces"][0]["name"].as_str().unwrap().to_owned();
        assert!(veth.starts_with("cali") && veth.len() == 15, "{veth}");

        // The container: its address, the on-link gateway and the default route through it.
        let addresses = container.run_ok("ip", &["-o", "addr", "show", "dev", "eth0"], "");
        assert!(addresses.contains(&address), "{addresses}");
        let routes = container.run_ok("ip", &["route"], "");
        assert!(
            routes.contains("default via 169.254.1.1 dev eth0"),
            "{routes}"
        );
        assert!(routes.contains("169.254.1.1 dev eth0"), "{routes}");
        // The host side: up, with proxy ARP for the gateway.
        let link = rig.in_host(&["-o", "link", "show", &veth]);
        assert!(link.contains("UP"), "{link}");
        let proxy_arp = rig.host.run_ok(
            "cat",
            &[&format!("/proc/sys/net/ipv4/conf/{veth}/proxy_arp")],
            "",
        );
        assert_eq!(proxy_arp.trim(), "1");
        // The rest of the settings Felix applies too (one list: `workload_interface_sysctls`).
        for (setting, value) in [
            ("rp_filter", "1"),
            ("route_localnet", "1"),
            ("forwarding", "1"),
        ] {
            let got = rig.host.run_ok(
                "cat",
                &[&format!("/proc/sys/net/ipv4/conf/{veth}/{setting}")],
                "",
            );
            assert_eq!(got.trim(), value, "{setting}");
        }
        // The endpoint Felix reads, and the network's default profile.
        let key = format!("/calico/v1/host/node1/workload/cni/{id}/endpoint/eth0");
        let endpoint = rig.get(&key).expect("the endpoint is written");
        assert_eq!(endpoint["name"], veth.as_str());
        assert_eq!(endpoint["ipv4_nets"], json!([address]));
        assert_eq!(endpoint["profile_ids"], json!(["testnet"]));
        assert_eq!(endpoint["mac"], result["interfaces"][1]["mac"]);
        let rules = rig
            .get("/calico/v1/policy/profile/testnet/rules")
            .expect("profile");
        assert_eq!(rules["inbound_rules"][0]["src_tag"], "testnet");
        assert_eq!(
            rig.get("/calico/v1/policy/profile/testnet/tags").unwrap(),
            json!(["testnet"])
        );

        let prev = with_prev(config.clone(), result);
        if *version >= "0.4.0" {
            assert_ok(&rig.call("calico", "CHECK", &vars, &prev));
            // CHECK notices a container that no longer matches its result.
            container.run_ok("ip", &["addr", "del", &address, "dev", "eth0"], "");
            let check = rig.call("calico", "CHECK", &vars, &prev);
            assert!(!check.ok, "CHECK passed without the address");
            assert_eq!(check.json["code"], 103, "{}", check.json);
            assert!(
                check.json["msg"]
                    .as_str()
                    .unwrap()
                    .contains("is not on eth0"),
                "{}",
                check.json
            );
        } else {
            let check = rig.call("calico", "CHECK", &vars, &prev);
            assert_eq!(check.json["code"], 1, "CHECK before 0.4.0: {}", check.json);
        }

        assert_ok(&rig.call("calico", "DEL", &vars, &prev));
        assert_eq!(rig.get(&key), None, "endpoint left behind");
        assert!(
            !rig.in_host(&["-o", "link"]).contains(&veth),
            "veth left behind"
        );
        assert!(
            rig.keys("/calico/ipam/v2/handle/").is_empty(),
            "handle left behind"
        );
        // DEL again (runtimes repeat it) still succeeds.
        assert_ok(&rig.call("calico", "DEL", &vars, &prev));
    }
}

#[test]
fn kubernetes_pods_get_k8s_endpoints_and_dual_stack_routes() {
    let rig = Rig::new();
    let container = NetNs::new("cni-k8s");
    let path = netns_path(&container);
    let config = rig.config(
        "1.0.0",
        json!({"type": "calico-ipam", "assign_ipv6": "true"}),
    );
    let args = "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-1;K8S_POD_INFRA_CONTAINER_ID=abc";
    let vars = env("abc", &path, args);
    let add = rig.call("calico", "ADD", &vars, &config);
    assert_ok(&add);
    let ips: Vec<&str> = add.json["ips"]
        .as_array()
        .unwrap()
        .iter()
        .map(|ip| ip["address"].as_str().unwrap())
        .collect();
    assert_eq!(ips.len(), 2, "{}", add.json);
    assert!(
        ips[1].starts_with("fd00:80::") && ips[1].ends_with("/128"),
        "{ips:?}"
    );
    let key = "/calico/v1/host/node1/workload/k8s/default.web-1/endpoint/eth0";
    let endpoint = rig.get(key).expect("k8s endpoint");
    assert_eq!(endpoint["ipv6_nets"], json!([ips[1]]));
    // IPv6 default route through the host side's link-local address, which answers at once.
    let routes = container.run_ok("ip", &["-6", "route"], "");
    let veth = add.json["interfaces"][0]["name"].as_str().unwrap();
    let host_ll = rig.in_host(&["-6", "-o", "addr", "show", "dev", veth, "scope", "link"]);
    let gateway = host_ll
        .split_whitespace()
        .skip_while(|w| *w != "inet6")
        .nth(1)
        .expect("the host side has a link-local address")
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    assert!(
        routes.contains(&format!("default via {gateway} dev eth0")),
        "{routes}\n{host_ll}"
    );
    assert!(!host_ll.contains("tentative"), "{host_ll}");
    // The IPAM attributes say which pod holds the address.
    let handle = rig
        .get("/calico/ipam/v2/handle/testnet.abc")
        .expect("handle");
    assert_eq!(handle["block"].as_object().unwrap().len(), 2);
    assert_ok(&rig.call("calico", "DEL", &vars, &config));
    assert_eq!(rig.get(key), None);
}

#[test]
fn a_failed_add_leaves_no_address_veth_or_endpoint() {
    let rig = Rig::new();
    let container = NetNs::new("cni-fail");
    let path = netns_path(&container);
    // An MTU the kernel refuses: ADD fails after IPAM assigned and the veth exists.
    let mut config = rig.config("0.4.0", json!({"type": "calico-ipam"}));
    config["mtu"] = json!(1);
    let vars = env("failing", &path, "");
    let add = rig.call("calico", "ADD", &vars, &config);
    assert!(!add.ok, "ADD should fail: {}", add.json);
    assert_eq!(add.json["code"], 102, "{}", add.json);
    assert_eq!(add.json["cniVersion"], "0.4.0");
    assert!(
        add.json["msg"].as_str().unwrap().contains("set mtu 1"),
        "{}",
        add.json
    );
    assert!(
        !container.run_ok("ip", &["-o", "link"], "").contains("eth0"),
        "the container side is left behind"
    );
    assert!(
        rig.keys("/calico/ipam/v2/handle/").is_empty(),
        "address left assigned"
    );
    assert!(
        rig.keys("/calico/v1/host/").is_empty(),
        "endpoint left behind"
    );
    assert!(
        !rig.in_host(&["-o", "link"]).contains("cali"),
        "veth left behind"
    );
    let blocks = rig.keys("/calico/ipam/v2/assignment/");
    for key in blocks {
        let block = rig.get(&key).unwrap();
        assert!(
            block["allocations"]
                .as_array()
                .unwrap()
                .iter()
                .all(Value::is_null),
            "{block}"
        );
    }
}

#[test]
fn a_repeated_add_leaves_the_first_one_working() {
    let rig = Rig::new();
    let container = NetNs::new("cni-again");
    let path = netns_path(&container);
    let config = rig.config("1.0.0", json!({"type": "calico-ipam"}));
    let vars = env("again", &path, "");
    let first = rig.call("calico", "ADD", &vars, &config);
    assert_ok(&first);
    let address = first.json["ips"][0]["address"].as_str().unwrap().to_owned();
    let again = rig.call("calico", "ADD", &vars, &config);
    assert!(
        !again.ok,
        "a second ADD without DEL should fail: {}",
        again.json
    );
    assert!(
        again.json["msg"]
            .as_str()
            .unwrap()
            .contains("eth0 already exists"),
        "{}",
        again.json
    );
    // The first ADD's interface, address, endpoint and IPAM handle are all still there.
    let addresses = container.run_ok("ip", &["-o", "addr", "show", "dev", "eth0"], "");
    assert!(addresses.contains(&address), "{addresses}");
    let key = "/calico/v1/host/node1/workload/cni/again/endpoint/eth0";
    assert!(rig.get(key).is_some(), "the endpoint was removed");
    assert_eq!(rig.keys("/calico/ipam/v2/handle/").len(), 1);
    assert_ok(&rig.call(
        "calico",
        "CHECK",
        &vars,
        &with_prev(config.clone(), &first.json),
    ));
    assert_ok(&rig.call("calico", "DEL", &vars, &config));
}

#[test]
fn del_succeeds_for_unknown_containers_and_without_a_namespace() {
    let rig = Rig::new();
    let config = rig.config("1.0.0", json!({"type": "calico-ipam"}));
    // DEL of something never added.
    assert_ok(&rig.call("calico", "DEL", &env("never", "", ""), &config));
    // ADD, then the container is gone and DEL comes with an empty CNI_NETNS (containerd).
    let container = NetNs::new("cni-gone");
    let path = netns_path(&container);
    let add = rig.call("calico", "ADD", &env("gone", &path, ""), &config);
    assert_ok(&add);
    let veth = add.json["interfaces"][0]["name"]
        .as_str()
        .unwrap()
        .to_owned();
    drop(container);
    assert_ok(&rig.call("calico", "DEL", &env("gone", "", ""), &config));
    assert!(rig.keys("/calico/v1/host/").is_empty());
    assert!(rig.keys("/calico/ipam/v2/handle/").is_empty());
    assert!(!rig.in_host(&["-o", "link"]).contains(&veth));
}

/// DEL tries everything: with etcd unreachable it still takes the container's interface out
/// (and fails naming etcd); the runtime's next DEL finishes the job.
#[test]
fn del_with_etcd_unreachable_removes_the_interface_and_a_retry_finishes() {
    let rig = Rig::new();
    let container = NetNs::new("cni-del-etcd");
    let path = netns_path(&container);
    let vars = env("deletcd", &path, "");
    let config = rig.config("1.0.0", json!({"type": "calico-ipam"}));
    assert_ok(&rig.call("calico", "ADD", &vars, &config));
    let mut unreachable = config.clone();
    // Nothing listens on port 9 in the host namespace: connection refused at once.
    unreachable["etcd_endpoints"] = json!("http://127.0.0.1:9");
    let del = rig.call("calico", "DEL", &vars, &unreachable);
    assert!(!del.ok, "{}", del.json);
    assert_eq!(del.json["code"], 100, "{}", del.json);
    let links = container.run_ok("ip", &["-o", "link"], "");
    assert_eq!(links.lines().count(), 1, "only lo is left: {links}");
    assert_eq!(
        rig.keys("/calico/ipam/v2/handle/").len(),
        1,
        "IPAM untouched"
    );
    assert_ok(&rig.call("calico", "DEL", &vars, &config));
    assert!(rig.keys("/calico/ipam/v2/handle/").is_empty());
    assert!(rig.keys("/calico/v1/host/").is_empty());
    assert!(!rig.in_host(&["-o", "link"]).contains("cali"));
}

#[test]
fn repeated_add_and_del_cycles_leak_nothing() {
    let rig = Rig::new();
    let container = NetNs::new("cni-cycle");
    let path = netns_path(&container);
    let config = rig.config("0.3.1", json!({"type": "calico-ipam", "assign_ipv6": true}));
    for cycle in 0..5 {
        let id = format!("cycle{cycle}");
        let add = rig.call("calico", "ADD", &env(&id, &path, ""), &config);
        assert_ok(&add);
        assert_ok(&rig.call(
            "calico",
            "DEL",
            &env(&id, &path, ""),
            &with_prev(config.clone(), &add.json),
        ));
        let links = container.run_ok("ip", &["-o", "link"], "");
        assert!(!links.contains("eth0"), "cycle {cycle}: {links}");
    }
    assert!(rig.keys("/calico/ipam/v2/handle/").is_empty());
    assert!(rig.keys("/calico/v1/host/").is_empty());
}

#[test]
fn bad_input_gets_spec_error_objects() {
    let rig = Rig::new();
    let container = NetNs::new("cni-bad");
    let path = netns_path(&container);
    let vars = env("bad", &path, "");
    let reply = rig.call_raw("calico", "ADD", &vars, b"{not json");
    assert!(!reply.ok);
    assert_eq!(reply.json["code"], 6, "{}", reply.json);
    let reply = rig.call_raw("calico", "ADD", &vars, b"");
    assert_eq!(reply.json["code"], 6, "{}", reply.json);
    let old = rig.config("0.2.0", json!({"type": "calico-ipam"}));
    let reply = rig.call("calico", "ADD", &vars, &old);
    assert_eq!(reply.json["code"], 1, "{}", reply.json);
    let mut bad_pool = rig.config(
        "1.0.0",
        json!({"type": "calico-ipam", "ipv4_pools": ["10.81.0.0/16"]}),
    );
    let reply = rig.call("calico", "ADD", &vars, &bad_pool);
    assert_eq!(reply.json["code"], 7, "{}", reply.json);
    assert!(
        reply.json["msg"]
            .as_str()
            .unwrap()
            .contains("ipam.ipv4_pools: 10.81.0.0/16 is not a configured IP pool"),
        "{}",
        reply.json
    );
    bad_pool["ipam"]["type"] = json!("no-such-ipam");
    let reply = rig.call("calico", "ADD", &vars, &bad_pool);
    assert!(
        reply.json["msg"]
            .as_str()
            .unwrap()
            .contains("not found in CNI_PATH"),
        "{}",
        reply.json
    );
    let reply = rig.call(
        "calico",
        "ADD",
        &env("bad", "/run/netns/does-not-exist", ""),
        &rig.config("1.0.0", json!({"type": "calico-ipam"})),
    );
    assert_eq!(reply.json["code"], 3, "{}", reply.json);
    let reply = rig.call("calico", "ADD", &[("CNI_CONTAINERID", "x")], &old);
    assert_eq!(reply.json["code"], 4, "{}", reply.json);
    // Nothing was left behind by any of them.
    assert!(rig.keys("/calico/ipam/v2/handle/").is_empty());
    // VERSION lists what this plugin speaks, in the version asked for.
    let version = rig.call("calico", "VERSION", &[], &json!({"cniVersion": "0.4.0"}));
    assert_ok(&version);
    assert_eq!(version.json["cniVersion"], "0.4.0");
    assert_eq!(version.json["supportedVersions"], json!(VERSIONS));
}

#[test]
fn another_ipam_plugin_named_in_the_config_is_used() {
    require_tool("/usr/lib/cni/host-local");
    let rig = Rig::new();
    let container = NetNs::new("cni-hl");
    let path = netns_path(&container);
    let data_dir = rig.scratch.join("host-local");
    let ipam = json!({
        "type": "host-local",
        "dataDir": data_dir,
        "ranges": [[{"subnet": "10.90.0.0/24"}]],
    });
    let config = rig.config("1.0.0", ipam);
    let add = rig.call("calico", "ADD", &env("hl", &path, ""), &config);
    assert_ok(&add);
    let address = add.json["ips"][0]["address"].as_str().unwrap();
    assert!(address.starts_with("10.90.0."), "{}", add.json);
    let addresses = container.run_ok("ip", &["-o", "addr", "show", "dev", "eth0"], "");
    assert!(
        addresses.contains(address.split('/').next().unwrap()),
        "{addresses}"
    );
    assert!(
        rig.keys("/calico/ipam/v2/handle/").is_empty(),
        "calico-ipam was not to be used"
    );
    assert_ok(&rig.call("calico", "DEL", &env("hl", &path, ""), &config));
    let leases = std::fs::read_dir(data_dir.join("testnet")).unwrap().count();
    assert_eq!(
        leases, 2,
        "host-local keeps only its lock and last-reserved files after DEL"
    );
}

/// `calico-ipam` touches no kernel state, so it runs in the test's own namespace here, against an
/// etcd that demands TLS client certificates.
#[test]
fn etcd_over_tls_with_the_config_s_certificate_files() {
    let pki = calico_testkit::Pki::generate();
    let etcd = EtcdServer::start_tls(pki.server_tls());
    let mut config = json!({
        "cniVersion": "1.0.0",
        "name": "tlsnet",
        "type": "calico",
        "etcd_endpoints": etcd.endpoint(),
        "etcd_ca_cert_file": pki.ca_cert(),
        "etcd_cert_file": pki.client_cert(),
        "etcd_key_file": pki.client_key(),
        "nodename": "node1",
        "ipam": {"type": "calico-ipam", "ipv4_pools": ["10.85.0.0/24"]},
    });
    let run = |command: &str, config: &Value| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_calico-ipam"));
        cmd.env_clear()
            .env("CNI_COMMAND", command)
            .env("CNI_CONTAINERID", "tls1")
            .env("CNI_NETNS", "/proc/self/ns/net")
            .env("CNI_IFNAME", "eth0");
        let out = output_with_stdin(&mut cmd, &config.to_string());
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        (out.status.success(), stdout)
    };
    // No pool yet: the error comes from IPAM, so the TLS connection worked.
    let (ok, out) = run("ADD", &config);
    assert!(
        !ok && out.contains("ipam.ipv4_pools: 10.85.0.0/24 is not a configured IP pool"),
        "{out}"
    );
    let store_config = calico_datastore::EtcdConfig {
        endpoints: vec![etcd.endpoint()],
        ca_file: Some(pki.ca_cert()),
        cert_file: Some(pki.client_cert()),
        key_file: Some(pki.client_key()),
        ..calico_datastore::EtcdConfig::default()
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let store = runtime
        .block_on(calico_datastore::EtcdDatastore::connect(store_config))
        .unwrap();
    use calico_datastore::Datastore as _;
    runtime
        .block_on(store.put(
            "/calico/v1/ipam/v4/pool/10.85.0.0-24",
            r#"{"cidr": "10.85.0.0/24"}"#,
        ))
        .unwrap();
    let (ok, out) = run("ADD", &config);
    assert!(ok, "{out}");
    assert!(out.contains("\"address\":\"10.85.0."), "{out}");
    let handle = runtime
        .block_on(store.get("/calico/ipam/v2/handle/tlsnet.tls1"))
        .unwrap();
    assert!(handle.is_some(), "the handle was written over TLS");
    let (ok, out) = run("DEL", &config);
    assert!(ok, "{out}");
    // Without the client certificate etcd refuses, and the error says it is etcd (code 100).
    config.as_object_mut().unwrap().remove("etcd_cert_file");
    config.as_object_mut().unwrap().remove("etcd_key_file");
    let (ok, out) = run("ADD", &config);
    assert!(!ok, "{out}");
    let error: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(error["code"], 100, "{error}");
}
