//! ADD killed at each of its steps, then DEL: the `calico` plugin crashed (a real abort, no
//! undo) by `CALICO_CNI_ABORT_AFTER` right after IPAM, after the veth, and after the endpoint
//! write; the runtime's DEL of the same container must leave no address assigned, no
//! interface on either side and no endpoint key.

mod common;

use calico_testkit::NetNs;
use common::{Rig, assert_ok, env, netns_path};
use serde_json::{Value, json};

/// SIGABRT: what `std::process::abort` ends the process with.
const SIGABRT: i32 = 6;

#[test]
fn del_after_add_crashed_right_after_ipam_leaves_nothing() {
    let (rig, crashed) = crash_after("ipam");
    // IPAM assigned; nothing else was done.
    assert_eq!(
        handles(&rig),
        std::slice::from_ref(&crashed.handle),
        "the handle is there"
    );
    assert!(!has_interface(&crashed.container, "eth0"), "no veth yet");
    assert_eq!(rig.get(&crashed.key), None, "no endpoint yet");
    del_leaves_nothing(&rig, &crashed);
}

#[test]
fn del_after_add_crashed_right_after_the_veth_leaves_nothing() {
    let (rig, crashed) = crash_after("veth");
    assert_eq!(
        handles(&rig),
        std::slice::from_ref(&crashed.handle),
        "the handle is there"
    );
    assert!(
        has_interface(&crashed.container, "eth0"),
        "the container side is there"
    );
    assert!(
        rig.in_host(&["-o", "link"]).contains("cali"),
        "the host side is there"
    );
    assert_eq!(rig.get(&crashed.key), None, "no endpoint yet");
    del_leaves_nothing(&rig, &crashed);
}

#[test]
fn del_after_add_crashed_right_after_the_endpoint_write_leaves_nothing() {
    let (rig, crashed) = crash_after("endpoint");
    assert_eq!(
        handles(&rig),
        std::slice::from_ref(&crashed.handle),
        "the handle is there"
    );
    assert!(
        has_interface(&crashed.container, "eth0"),
        "the veth is there"
    );
    let endpoint = rig.get(&crashed.key).expect("the endpoint is written");
    assert_eq!(endpoint["profile_ids"], json!(["testnet"]), "{endpoint}");
    del_leaves_nothing(&rig, &crashed);
}

#[test]
fn a_misspelt_abort_step_is_refused_naming_the_variable() {
    let rig = Rig::new();
    let container = NetNs::new("cni-crash-typo");
    let path = netns_path(&container);
    let mut vars = env("typo", &path, "");
    vars.push(("CALICO_CNI_ABORT_AFTER", "vet"));
    let add = rig.call("calico", "ADD", &vars, &config(&rig));
    assert!(!add.ok && add.signal.is_none(), "{add:?}");
    assert_eq!(add.json["code"], 4, "{}", add.json);
    assert!(
        add.json["msg"]
            .as_str()
            .unwrap()
            .starts_with("CALICO_CNI_ABORT_AFTER=\"vet\" is not one of ipam, veth, endpoint"),
        "{}",
        add.json
    );
    assert!(handles(&rig).is_empty(), "nothing assigned");
}

/// A container whose ADD crashed.
struct Crashed {
    container: NetNs,
    vars: Vec<(&'static str, String)>,
    key: String,
    handle: String,
}

/// Runs ADD with `CALICO_CNI_ABORT_AFTER=step` and checks it crashed (killed by SIGABRT,
/// printing no result).
fn crash_after(step: &str) -> (Rig, Crashed) {
    let rig = Rig::new();
    let container = NetNs::new(&format!("cni-crash-{step}"));
    let path = netns_path(&container);
    let id = format!("crash-{step}");
    let vars: Vec<(&'static str, String)> = env(&id, &path, "")
        .into_iter()
        .map(|(k, v)| (k, v.to_owned()))
        .collect();
    let mut crashing = borrowed(&vars);
    crashing.push(("CALICO_CNI_ABORT_AFTER", step));
    let add = rig.call("calico", "ADD", &crashing, &config(&rig));
    assert_eq!(
        (add.ok, add.signal),
        (false, Some(SIGABRT)),
        "ADD should abort after {step}: {add:?}"
    );
    assert_eq!(add.json, Value::Null, "a crash prints no result");
    assert!(
        add.stderr
            .contains(&format!("aborting after the {step} step")),
        "{}",
        add.stderr
    );
    let crashed = Crashed {
        container,
        vars,
        key: format!("/calico/v1/host/node1/workload/cni/{id}/endpoint/eth0"),
        handle: format!("/calico/ipam/v2/handle/testnet.{id}"),
    };
    (rig, crashed)
}

/// DEL of the crashed container succeeds and leaves no address, interface or key.
fn del_leaves_nothing(rig: &Rig, crashed: &Crashed) {
    let del = rig.call("calico", "DEL", &borrowed(&crashed.vars), &config(rig));
    assert_ok(&del);
    assert!(handles(rig).is_empty(), "handle left: {:?}", handles(rig));
    for block in rig.keys("/calico/ipam/v2/assignment/") {
        let value = rig.get(&block).expect("block");
        let allocations = value["allocations"].as_array().expect("allocations");
        assert!(
            allocations.iter().all(Value::is_null),
            "address left assigned in {block}: {value}"
        );
    }
    assert_eq!(rig.get(&crashed.key), None, "endpoint key left behind");
    assert!(
        rig.keys("/calico/v1/host/").is_empty(),
        "keys left under the host: {:?}",
        rig.keys("/calico/v1/host/")
    );
    let host_links = rig.in_host(&["-o", "link"]);
    assert!(!host_links.contains("cali"), "host veth left: {host_links}");
    let links = crashed.container.run_ok("ip", &["-o", "link"], "");
    assert_eq!(
        links.lines().count(),
        1,
        "the container keeps only lo: {links}"
    );
    let addresses = crashed
        .container
        .run_ok("ip", &["-o", "addr", "show", "scope", "global"], "");
    assert!(addresses.trim().is_empty(), "addresses left: {addresses}");
    // A runtime repeats DEL; it still succeeds.
    assert_ok(&rig.call("calico", "DEL", &borrowed(&crashed.vars), &config(rig)));
}

fn config(rig: &Rig) -> Value {
    rig.config("1.0.0", json!({"type": "calico-ipam", "assign_ipv6": true}))
}

fn handles(rig: &Rig) -> Vec<String> {
    rig.keys("/calico/ipam/v2/handle/")
}

fn has_interface(container: &NetNs, name: &str) -> bool {
    container
        .run("ip", &["link", "show", "dev", name], "")
        .status
        .success()
}

fn borrowed<'a>(vars: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    vars.iter().map(|(k, v)| (*k, v.as_str())).collect()
}
