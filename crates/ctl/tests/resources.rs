//! Resource documents driven through the built `calicoctl` against a real etcd: create, apply,
//! replace, delete (-f and KIND NAME), get as table, wide, yaml and json, and every refusal.
//! The revision etcd reports shows what was (not) written.

mod common;

use common::{Ctl, doc};

/// One document of every kind (docs/resources.md shows the same).
const EVERY_KIND: &str = include_str!("resources/every-kind.yaml");

const KINDS: [&str; 10] = [
    "tier",
    "policy",
    "profile",
    "workloadEndpoint",
    "hostEndpoint",
    "ipPool",
    "bgpPeer",
    "node",
    "felixConfig",
    "ipamConfig",
];

#[test]
fn every_kind_is_created_in_one_transaction_listed_and_round_trips_unchanged() {
    let ctl = Ctl::start();
    let before = ctl.revision();
    let out = ctl.ok(&["create", "-f", "-"], EVERY_KIND);
    assert_eq!(out.lines().count(), 12, "{out}");
    assert!(out.lines().all(|line| line.ends_with(" created")), "{out}");
    assert_eq!(ctl.revision(), before + 1, "one transaction for the file");

    // The seed keys, in the seed form.
    assert_eq!(
        ctl.value("/calico/v1/policy/tier/my-tier/policy/web"),
        r#"{"selector":"role == \"webserver\"","order":100,"inbound_rules":[{"protocol":"tcp","dst_ports":[80],"action":"allow"}],"outbound_rules":[{"action":"allow"}]}"#
    );
    assert_eq!(
        ctl.value("/calico/v1/ipam/v4/pool/10.65.0.0-16"),
        r#"{"cidr":"10.65.0.0/16","ipip":"tunl0","masquerade":true}"#
    );
    assert_eq!(
        ctl.value("/calico/v1/policy/profile/prof1/tags"),
        r#"["prof1"]"#
    );
    assert_eq!(
        ctl.value("/calico/bgp/v1/host/host1/peer_v4/192.0.2.2"),
        r#"{"ip":"192.0.2.2","as_num":4259840010}"#
    );
    assert_eq!(ctl.value("/calico/bgp/v1/host/host1/as_num"), "64513");
    assert_eq!(ctl.value("/calico/v1/config/IptablesRefreshInterval"), "60");
    assert_eq!(
        ctl.value("/calico/v1/host/host1/config/LogSeverityScreen"),
        "debug"
    );
    assert_eq!(
        ctl.value("/calico/ipam/v2/config"),
        r#"{"auto_allocate_blocks":true,"strict_affinity":true}"#
    );

    // Tables: aligned, NAME first or after the scope.
    let table = ctl.ok(&["get", "policy"], "");
    assert_eq!(
        table,
        "NAME   TIER      ORDER   SELECTOR\nweb    my-tier   100     role == \"webserver\"\n"
    );
    let wide = ctl.ok(&["get", "workloadEndpoints", "-o", "wide"], "");
    assert!(
        wide.starts_with("NODE    ORCHESTRATOR   WORKLOAD   NAME   NETWORKS       INTERFACE"),
        "{wide}"
    );
    assert!(wide.contains("ee:ee:ee:ee:ee:ee"), "{wide}");
    let peers = ctl.ok(&["get", "bgppeers"], "");
    assert_eq!(
        peers,
        "NAME        NODE    AS\n192.0.2.1           64512\n192.0.2.2   host1   4259840010\n"
    );
    let nodes = ctl.ok(&["get", "node", "host1"], "");
    assert!(
        nodes.contains("host1   192.0.2.10          64513"),
        "{nodes}"
    );
    for kind in KINDS {
        let table = ctl.ok(&["get", kind], "");
        assert!(table.lines().count() >= 2, "{kind}: {table}");
    }

    // Everything back as YAML, applied: nothing moves.
    let mut all = String::new();
    for kind in KINDS {
        all.push_str(&ctl.ok(&["get", kind, "-o", "yaml"], ""));
    }
    let revision = ctl.revision();
    let out = ctl.ok(&["apply", "-f", "-"], &all);
    assert!(
        out.lines().all(|line| line.ends_with(" unchanged")),
        "{out}"
    );
    assert_eq!(out.lines().count(), 12, "{out}");
    assert_eq!(ctl.revision(), revision, "a round trip wrote something");
    // And as JSON, one object for one name.
    let json = ctl.ok(&["get", "policy", "web", "-o", "json"], "");
    assert!(
        json.starts_with("{\n  \"apiVersion\": \"projectcalico.org/v1\",\n  \"kind\": \"policy\""),
        "{json}"
    );
    let out = ctl.ok(&["replace", "-f", "-"], &json);
    assert_eq!(out, "policy \"web\" in tier \"my-tier\" unchanged\n");
    assert_eq!(ctl.revision(), revision);
}

#[test]
fn apply_replace_and_delete_change_exactly_the_resource_s_keys() {
    let ctl = Ctl::start();
    let profile = doc(
        "profile",
        "{name: p1}",
        "{inbound_rules: [{action: allow}], tags: [a, b], labels: {x: y}}",
    );
    assert_eq!(
        ctl.ok(&["apply", "-f", "-"], &profile),
        "profile \"p1\" created\n"
    );
    // Without tags and labels, their keys go; the rules key is rewritten.
    let rules_only = doc("profile", "{name: p1}", "{inbound_rules: [{action: deny}]}");
    let replace_missing = doc("profile", "{name: p2}", "{tags: [a]}");
    let err = ctl.fails(&["replace", "-f", "-"], &replace_missing);
    assert!(
        err.contains("document 1: profile \"p2\" does not exist (use create or apply)"),
        "{err}"
    );
    assert_eq!(
        ctl.ok(&["replace", "-f", "-"], &rules_only),
        "profile \"p1\" replaced\n"
    );
    let keys = ctl.etcdctl(&[
        "get",
        "--prefix",
        "--keys-only",
        "/calico/v1/policy/profile/",
    ]);
    assert_eq!(
        keys.split_whitespace().collect::<Vec<_>>(),
        ["/calico/v1/policy/profile/p1/rules"]
    );
    assert_eq!(
        ctl.value("/calico/v1/policy/profile/p1/rules"),
        r#"{"inbound_rules":[{"action":"deny"}],"outbound_rules":[]}"#
    );

    // A Felix configuration is its parameters: apply removes the ones the document drops.
    let felix = doc(
        "felixConfig",
        "{name: node.h1}",
        "{LogSeverityScreen: info, MetadataPort: 8775}",
    );
    ctl.ok(&["apply", "-f", "-"], &felix);
    let felix = doc(
        "felixConfig",
        "{name: node.h1}",
        "{LogSeverityScreen: warning}",
    );
    assert_eq!(
        ctl.ok(&["apply", "-f", "-"], &felix),
        "felixConfig \"node.h1\" replaced\n"
    );
    let keys = ctl.etcdctl(&["get", "--prefix", "--keys-only", "/calico/v1/host/h1/"]);
    assert_eq!(
        keys.split_whitespace().collect::<Vec<_>>(),
        ["/calico/v1/host/h1/config/LogSeverityScreen"]
    );

    // delete KIND NAME finds a policy in any tier; a tier goes only without its policies.
    ctl.ok(&["create", "-f", "-"], EVERY_KIND);
    let err = ctl.fails(&["delete", "tier", "my-tier"], "");
    assert!(
        err.contains("tier \"my-tier\" still has policies web"),
        "{err}"
    );
    assert_eq!(
        ctl.ok(&["delete", "policy", "web"], ""),
        "policy \"web\" in tier \"my-tier\" deleted\n"
    );
    ctl.ok(&["delete", "tier", "my-tier"], "");
    assert_eq!(
        ctl.ok(&["delete", "ipPool", "10.65.0.0/16"], ""),
        "ipPool \"10.65.0.0/16\" deleted\n"
    );
    let err = ctl.fails(&["delete", "bgpPeer", "192.0.2.9"], "");
    assert!(
        err.contains("bgpPeer \"192.0.2.9\" does not exist"),
        "{err}"
    );
    let err = ctl.fails(&["delete", "hostEndpoint", "eth9"], "");
    assert!(
        err.contains("metadata.node: missing (give it with a flag, or use -f)"),
        "{err}"
    );
    // delete -f: everything the file names, in one transaction; missing ones refuse the file.
    let err = ctl.fails(&["delete", "-f", "-"], EVERY_KIND);
    assert!(
        err.contains("document 1: tier \"my-tier\" does not exist"),
        "{err}"
    );
    assert!(
        err.contains("3 of 12 resources were refused; nothing was written"),
        "{err}"
    );
    let out = ctl.ok(&["delete", "-f", "-", "--skip-missing"], EVERY_KIND);
    assert!(
        out.contains("ipPool \"10.65.0.0/16\" skipped (not found)"),
        "{out}"
    );
    assert!(out.contains("node \"host1\" deleted"), "{out}");
    let left = ctl.etcdctl(&["get", "--prefix", "--keys-only", "/calico/"]);
    assert_eq!(
        left.split_whitespace().collect::<Vec<_>>(),
        [
            "/calico/v1/host/h1/config/LogSeverityScreen",
            "/calico/v1/policy/profile/p1/rules"
        ]
    );
    // The raw commands still work beside the resources.
    ctl.ok(&["delete", "/calico/v1/policy/profile/p1/rules"], "");
    assert!(ctl.ok(&["get", "profiles"], "").trim_end() == "NAME   TAGS   LABELS");
}

#[test]
fn invalid_files_are_refused_naming_document_field_and_reason_and_write_nothing() {
    let ctl = Ctl::start();
    let good = doc("ipPool", "{name: 10.66.0.0/16}", "{masquerade: true}");
    let cases: [(String, &str); 12] = [
        (
            doc("widget", "{name: a}", "{}"),
            "document 2 (line 6): kind: unknown kind \"widget\" (expected one of tier, policy,",
        ),
        (
            doc(
                "policy",
                "{name: a}",
                "{inbound_rules: [{action: allow, dst_ports: [80]}]}",
            ),
            "document 2 (line 6, policy \"a\"): spec.inbound_rules[0].dst_ports: ports need",
        ),
        (
            doc(
                "policy",
                "{name: a}",
                "{inbound_rules: [{action: allow, src_tagz: x}]}",
            ),
            "spec.inbound_rules[0].src_tagz: unknown field",
        ),
        (
            doc("policy", "{name: a, color: red}", "{}"),
            "metadata.color: unknown field for a policy (expected name, tier)",
        ),
        (
            doc("policy", "{name: a}", "{}").replace("spec:", "status: {}\nspec:"),
            "status: unknown field (expected apiVersion, kind, metadata, spec)",
        ),
        (
            doc("profile", "{name: \"bad name\"}", "{}"),
            "(line 6, profile \"bad name\"): metadata: ",
        ),
        (
            doc("ipPool", "{name: 10.65.0.1/16}", "{}"),
            "metadata.name: 10.65.0.1/16 has host bits set; the network is 10.65.0.0/16",
        ),
        (
            doc("ipPool", "{name: 10.65.0.0/16}", "{cidr: 10.65.0.0/16}"),
            "spec.cidr: set by metadata.name, not in spec",
        ),
        (
            doc("node", "{name: h1}", "{as_num: 99999999999}"),
            "spec.as_num: invalid AS number",
        ),
        (
            doc("felixConfig", "{name: default}", "{bgp_node_mesh: x}"),
            "spec.bgp_node_mesh: not a Felix parameter",
        ),
        (
            doc(
                "ipamConfig",
                "{name: default}",
                "{strict_affinity: false, auto_allocate_blocks: false}",
            ),
            "spec.auto_allocate_blocks: cannot be false while strict_affinity is false",
        ),
        (
            good.replace("projectcalico.org/v1", "v1"),
            "apiVersion: unknown version \"v1\" (expected projectcalico.org/v1)",
        ),
    ];
    let revision = ctl.revision();
    for (bad, expected) in cases {
        let file = format!("{good}---\n{bad}");
        let err = ctl.fails(&["apply", "-f", "-"], &file);
        assert!(err.contains(expected), "expected {expected:?} in:\n{err}");
        assert!(
            err.contains("of 2 documents are invalid; nothing was written"),
            "{err}"
        );
    }
    // Malformed YAML, and a resource named twice.
    let err = ctl.fails(&["create", "-f", "-"], &format!("{good}---\nkind: [a\n"));
    assert!(
        err.contains("invalid YAML in document 2") && err.contains("at line 6 column 7"),
        "{err}"
    );
    let err = ctl.fails(&["create", "-f", "-"], &format!("{good}---\n{good}"));
    assert!(
        err.contains("document 2: ipPool \"10.66.0.0/16\" is also document 1"),
        "{err}"
    );
    assert_eq!(ctl.revision(), revision, "something was written");

    // create refuses what exists, the whole file with it.
    ctl.ok(&["create", "-f", "-"], &good);
    let revision = ctl.revision();
    let other = doc("ipPool", "{name: 10.67.0.0/16}", "{}");
    let err = ctl.fails(&["create", "-f", "-"], &format!("{other}---\n{good}"));
    assert!(
        err.contains("document 2: ipPool \"10.66.0.0/16\" already exists (use apply or replace)"),
        "{err}"
    );
    assert_eq!(ctl.revision(), revision);
    let err = ctl.fails(&["get", "widgets"], "");
    assert!(err.contains("unknown resource kind \"widgets\""), "{err}");
    let err = ctl.fails(&["get", "ipPool", "10.99.0.0/16"], "");
    assert!(err.contains("ipPool \"10.99.0.0/16\" not found"), "{err}");
}

#[test]
fn json_input_lists_and_list_kinds_are_read() {
    let ctl = Ctl::start();
    let json = r#"[
      {"apiVersion": "projectcalico.org/v1", "kind": "tier", "metadata": {"name": "t1"}, "spec": {"order": 5}},
      {"apiVersion": "projectcalico.org/v1", "kind": "List", "items": [
        {"apiVersion": "projectcalico.org/v1", "kind": "policy", "metadata": {"name": "p1", "tier": "t1"}, "spec": {"selector": "all()"}}
      ]}
    ]"#;
    let out = ctl.ok(&["create", "-f", "-"], json);
    assert_eq!(
        out,
        "tier \"t1\" created\npolicy \"p1\" in tier \"t1\" created\n"
    );
    let err = ctl.fails(&["apply", "-f", "-"], r#"{"apiVersion": "projectcalico.org/v1", "kind": "tier", "metadata": {"name": "t2"}, "spec": {"order": "first"}}"#);
    assert!(
        err.contains("document 1 (line 1, tier \"t2\"): spec.order: invalid order \"first\""),
        "{err}"
    );
    let list = ctl.ok(&["get", "policies", "--tier", "t1", "-o", "json"], "");
    assert!(list.contains("\"kind\": \"List\""), "{list}");
    assert_eq!(
        ctl.ok(&["apply", "-f", "-"], &list),
        "policy \"p1\" in tier \"t1\" unchanged\n"
    );
    let yaml = ctl.ok(&["get", "tier", "t1", "-o", "yaml"], "");
    assert_eq!(
        yaml,
        "---\napiVersion: projectcalico.org/v1\nkind: tier\nmetadata:\n  name: t1\nspec:\n  order: 5\n"
    );
}

#[test]
fn every_example_of_the_docs_is_accepted_and_help_shows_examples() {
    let ctl = Ctl::start();
    let docs = include_str!("../../../docs/resources.md");
    let examples: Vec<&str> = docs
        .split("```yaml\n")
        .skip(1)
        .filter_map(|block| block.split("```").next())
        .filter(|block| block.starts_with("apiVersion: projectcalico.org/v1\nkind: "))
        .collect();
    assert_eq!(examples.len(), 10, "one example per kind");
    let out = ctl.ok(&["create", "-f", "-"], &examples.join("---\n"));
    assert_eq!(out.lines().count(), 10, "{out}");
    for command in ["create", "apply", "replace", "get", "delete"] {
        let help = ctl.ok(&[command, "--help"], "");
        assert!(
            help.contains("Examples:\n  calicoctl "),
            "{command}: {help}"
        );
    }
}
