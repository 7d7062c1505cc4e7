//! What a new user's files and habits meet, through the built `calicoctl` against a real etcd:
//! the backup round trip of a kind with no resources, documents with an empty `spec` of every
//! kind, YAML that YAML 1.1 tools read back the same, nesting and duplicate keys refused before
//! anything is written, and upstream's short names for the kinds.

mod common;

use common::{Ctl, doc};

/// One document of every kind (docs/resources.md shows the same).
const EVERY_KIND: &str = include_str!("resources/every-kind.yaml");

#[test]
fn the_backup_of_a_kind_without_resources_applies_as_nothing_to_change() {
    let ctl = Ctl::start();
    let revision = ctl.revision();
    for format in ["yaml", "json"] {
        let backup = ctl.ok(&["get", "policy", "-o", format], "");
        assert!(backup.contains("List"), "{backup}");
        for command in [
            &["apply", "-f", "-"][..],
            &["create", "-f", "-"],
            &["delete", "-f", "-"],
        ] {
            let out = ctl.ok(command, &backup);
            assert_eq!(out, "the input lists no resources: nothing to change\n");
        }
    }
    assert_eq!(ctl.revision(), revision);
    // A file without any document is still a mistake.
    for nothing in ["", "# policies\n", "---\n"] {
        let err = ctl.fails(&["apply", "-f", "-"], nothing);
        assert!(err.contains("no resource documents in the input"), "{err}");
    }
}

/// `spec: {}` (or no spec) of every kind is written, and then exists, or refused by name:
/// never `created` with nothing written.
#[test]
fn an_empty_spec_is_written_or_refused_by_name_for_every_kind() {
    let ctl = Ctl::start();
    let kinds = [
        ("tier", "{name: t1}", "t1"),
        ("policy", "{name: p1}", "p1"),
        ("profile", "{name: pr1}", "pr1"),
        (
            "workloadEndpoint",
            "{name: e1, node: h1, orchestrator: o, workload: w}",
            "e1",
        ),
        ("hostEndpoint", "{name: e1, node: h1}", "e1"),
        ("ipPool", "{name: 10.70.0.0/16}", "10.70.0.0/16"),
        ("bgpPeer", "{name: 192.0.2.9}", "192.0.2.9"),
        ("node", "{name: h1}", "h1"),
        ("felixConfig", "{name: default}", "default"),
        ("ipamConfig", "{name: default}", "default"),
    ];
    let mut written = Vec::new();
    for (kind, metadata, name) in kinds {
        for spec in ["spec: {}\n", ""] {
            let document = doc(kind, metadata, "{}").replace("spec: {}\n", spec);
            let revision = ctl.revision();
            let out = ctl.stdin(&["create", "-f", "-"], &document);
            if !out.status.success() {
                let err = common::text(&out.stderr);
                assert!(err.contains(": spec"), "{kind}: {err}");
                assert_eq!(ctl.revision(), revision, "{kind}: refused but written");
                continue;
            }
            assert_eq!(
                ctl.revision(),
                revision + 1,
                "{kind}: created but not written"
            );
            ctl.ok(&["get", kind, name], "");
            let err = ctl.fails(&["create", "-f", "-"], &document);
            assert!(err.contains("already exists"), "{kind}: {err}");
            ctl.ok(&["delete", "-f", "-"], &document);
            written.push(kind);
        }
    }
    written.dedup();
    assert_eq!(
        written,
        ["tier", "policy", "profile", "ipPool", "ipamConfig"],
        "the kinds written with an empty spec"
    );
    // Calico's empty profile: its rules key, without rules.
    ctl.ok(&["create", "-f", "-"], &doc("profile", "{name: pr1}", "{}"));
    assert_eq!(
        ctl.value("/calico/v1/policy/profile/pr1/rules"),
        r#"{"inbound_rules":[],"outbound_rules":[]}"#
    );
    for (kind, metadata, field) in [
        ("node", "{name: h1}", "a node is its keys"),
        (
            "felixConfig",
            "{name: node.h1}",
            "a Felix configuration is its parameters",
        ),
    ] {
        let err = ctl.fails(&["apply", "-f", "-"], &doc(kind, metadata, "{}"));
        assert!(
            err.contains("document 1 (line 1, ")
                && err.contains(&format!("): spec: empty: {field}")),
            "{kind}: {err}"
        );
    }
}

/// What `get -o yaml` prints reads back the same in YAML 1.1 tools: port ranges, label values
/// such as yes, on or ~ are quoted.
#[test]
fn get_yaml_quotes_what_yaml_1_1_would_read_as_something_else() {
    let ctl = Ctl::start();
    let profile = doc(
        "profile",
        "{name: p1}",
        r#"{inbound_rules: [{action: allow, protocol: tcp, dst_ports: [80, "20:30"]}],
            labels: {"on": "yes", "off": "no", n: "y", tilde: "~", octal: "012", t: "2001-12-14",
                     zone: "us-east", ip: "192.0.2.1"}}"#,
    );
    ctl.ok(&["create", "-f", "-"], &profile);
    let yaml = ctl.ok(&["get", "profile", "p1", "-o", "yaml"], "");
    for line in [
        "    - \"20:30\"\n",
        "    \"on\": \"yes\"\n",
        "    \"off\": \"no\"\n",
        "    \"n\": \"y\"\n",
        "    tilde: \"~\"\n",
        "    octal: \"012\"\n",
        "    t: \"2001-12-14\"\n",
        "    zone: us-east\n",
        "    ip: \"192.0.2.1\"\n",
    ] {
        assert!(yaml.contains(line), "{line:?} not in:\n{yaml}");
    }
    let revision = ctl.revision();
    assert_eq!(
        ctl.ok(&["apply", "-f", "-"], &yaml),
        "profile \"p1\" unchanged\n"
    );
    assert_eq!(ctl.revision(), revision);
}

#[test]
fn deeply_nested_yaml_is_refused_before_it_is_parsed() {
    let ctl = Ctl::start();
    let levels = 100_000;
    let deep = format!(
        "{}x: {}{}\n",
        doc("tier", "{name: t1}", "{}"),
        "[".repeat(levels),
        "]".repeat(levels)
    );
    let err = ctl.fails(&["apply", "-f", "-"], &deep);
    assert!(
        err.contains(
            "invalid YAML: more than 64 levels of [ ] and { } one inside another at line 5 \
             column 68 (refused before parsing"
        ),
        "{err}"
    );
    // Within the limit, the parser has its say (here: a field that is not one).
    let nested = format!("x: {}{}\n", "[".repeat(60), "]".repeat(60));
    let err = ctl.fails(&["apply", "-f", "-"], &nested);
    assert!(!err.contains("levels"), "{err}");
}

#[test]
fn a_key_given_twice_is_refused_in_json_as_in_yaml() {
    let ctl = Ctl::start();
    let json = r#"{"apiVersion": "projectcalico.org/v1", "kind": "policy",
  "metadata": {"name": "p1"},
  "spec": {"inbound_rules": [{"action": "deny", "action": "allow"}]}}"#;
    let err = ctl.fails(&["apply", "-f", "-"], json);
    assert!(
        err.contains("invalid JSON: duplicate entry with key \"action\" at line 3"),
        "{err}"
    );
    let yaml = doc(
        "policy",
        "{name: p1}",
        "{inbound_rules: [{action: deny, action: allow}]}",
    );
    let err = ctl.fails(&["apply", "-f", "-"], &yaml);
    assert!(err.contains("duplicate entry with key \"action\""), "{err}");
    assert!(ctl.keys("/calico/").is_empty());
}

#[test]
fn upstream_short_names_and_plurals_name_the_kinds() {
    let ctl = Ctl::start();
    ctl.ok(&["create", "-f", "-"], EVERY_KIND);
    for (names, header) in [
        ("pol pols policies", "NAME   TIER"),
        ("pro pros profiles", "NAME    TAGS"),
        ("wep weps workloadendpoints", "NODE    ORCHESTRATOR"),
        ("hep heps hostendpoints", "NODE    NAME"),
        ("ipp ipps pool pools ippools", "NAME           IPIP"),
        ("bgpp bgpps bp bps bgppeers", "NAME        NODE"),
        ("no nos nodes", "NAME    IPV4"),
        ("felixconfigurations felixconfigs", "NAME"),
        (
            "ipamconfigurations ipamconfigs",
            "NAME      STRICT-AFFINITY",
        ),
    ] {
        for name in names.split(' ') {
            let table = ctl.ok(&["get", name], "");
            assert!(table.starts_with(header), "{name}: {table}");
            assert!(table.lines().count() >= 2, "{name}: {table}");
        }
    }
}
