//! Address spaces through the built `calicoctl` against a real etcd: two spaces with one range,
//! and the refusals between objects, each naming the field and the objects.

mod common;

use common::{Ctl, doc};

const SETUP: &str = "apiVersion: projectcalico.org/v1
kind: addressSpaceConfig
metadata: {name: default}
spec: {translation_prefix: 'fd5a:5a5a::/80'}
---
apiVersion: projectcalico.org/v1
kind: addressSpace
metadata: {name: a}
spec: {id: 1}
---
apiVersion: projectcalico.org/v1
kind: addressSpace
metadata: {name: b}
spec: {id: 2}
---
apiVersion: projectcalico.org/v1
kind: ipPool
metadata: {name: 10.0.0.0/24, space: a}
spec: {}
---
apiVersion: projectcalico.org/v1
kind: ipPool
metadata: {name: 10.0.0.0/24, space: b}
spec: {}
---
apiVersion: projectcalico.org/v1
kind: ipPool
metadata: {name: 10.65.0.0/16}
spec: {}
";

#[test]
fn two_spaces_hold_one_range_and_the_rules_between_objects_refuse_by_name() {
    let ctl = Ctl::start();
    let applied = ctl.stdin(&["apply", "-f", "-"], SETUP);
    assert!(applied.status.success(), "{applied:?}");
    let stderr = String::from_utf8_lossy(&applied.stderr);
    assert!(
        stderr.contains("address spaces are stored and checked but not in effect yet"),
        "calicoctl says by name that what it stored has no effect yet: {stderr}"
    );
    let plain = ctl.stdin(&["apply", "-f", "-"], &doc("profile", "{name: p1}", "{}"));
    assert!(plain.status.success(), "{plain:?}");
    assert!(
        !String::from_utf8_lossy(&plain.stderr).contains("address spaces"),
        "no warning for what has nothing of spaces: {plain:?}"
    );
    assert_eq!(
        ctl.value("/calico/v1/ipam/space/b/v4/pool/10.0.0.0-24"),
        r#"{"cidr":"10.0.0.0/24","masquerade":false}"#
    );
    assert_eq!(ctl.value("/calico/v1/address_space/space/a"), r#"{"id":1}"#);
    let yaml = ctl.ok(&["get", "ipPool", "-o", "yaml"], "");
    assert!(yaml.contains("space: b"), "{yaml}");
    let again = ctl.ok(&["apply", "-f", "-"], &yaml);
    assert!(again.lines().all(|l| l.ends_with(" unchanged")), "{again}");

    let wep = |space: &str, addr: &str| {
        doc(
            "workloadEndpoint",
            "{name: port1, node: h1, orchestrator: openstack, workload: vm1}",
            &format!(
                "{{state: active, name: tap1, profile_ids: [], ipv4_nets: [{addr}/32], address_space: {space}}}"
            ),
        )
    };
    let revision = ctl.revision();
    for (bad, expected) in [
        (
            doc("ipPool", "{name: 10.0.0.128/25, space: a}", "{}"),
            "pool 10.0.0.128/25 of space \"a\" overlaps pool 10.0.0.0/24 of space \"a\"",
        ),
        (
            doc("ipPool", "{name: 10.65.1.0/24, space: a}", "{}"),
            "overlaps the shared pool 10.65.0.0/16",
        ),
        (
            doc("addressSpace", "{name: c}", "{id: 70000}"),
            "id: 70000 is outside the room",
        ),
        (wep("nope", "10.0.0.5"), "no address space \"nope\" exists"),
        (
            wep("a", "10.65.0.5"),
            "10.65.0.5 of space \"a\" is in the shared pool 10.65.0.0/16",
        ),
        (
            doc(
                "ipPool",
                "{name: 10.1.0.0/24, space: a}",
                "{masquerade: true}",
            ),
            "spec.masquerade: not in a private space yet",
        ),
    ] {
        let err = ctl.fails(&["apply", "-f", "-"], &bad);
        assert!(err.contains(expected), "expected {expected:?} in:\n{err}");
    }
    assert_eq!(ctl.revision(), revision, "nothing was written");
    ctl.ok(&["apply", "-f", "-"], &wep("a", "10.0.0.5"));
    let err = ctl.fails(&["delete", "addressSpace", "a"], "");
    assert!(err.contains("still used by pool 10.0.0.0/24"), "{err}");
}

#[test]
fn the_docs_address_space_example_is_accepted_and_stored_where_data_model_says() {
    let ctl = Ctl::start();
    let docs = include_str!("../../../docs/resources.md");
    let example = docs
        .split("```yaml\n")
        .filter_map(|block| block.split("```").next())
        .find(|block| block.starts_with("# A private space:"))
        .expect("docs/resources.md has the address space example");
    let out = ctl.ok(&["create", "-f", "-"], example);
    assert_eq!(out.lines().count(), 4, "{out}");
    assert_eq!(
        ctl.value("/calico/v1/address_space/config"),
        r#"{"translation_prefix":"fd5a:5a5a::/80"}"#
    );
    assert_eq!(
        ctl.value("/calico/v1/address_space/space/tenant-a"),
        r#"{"id":7}"#
    );
    assert_eq!(
        ctl.value("/calico/v1/address_space/network/3f1c2a9e-2b7d-4c0e-9a51-0d6f7b1e8c44"),
        r#"{"address_space":"tenant-a"}"#
    );
    assert_eq!(
        ctl.value("/calico/v1/ipam/space/tenant-a/v4/pool/10.0.0.0-24"),
        r#"{"cidr":"10.0.0.0/24","masquerade":false}"#
    );
}
