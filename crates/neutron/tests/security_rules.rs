//! A security group rule Calico cannot express is refused when it is made, not left out in
//! silence: the driver's check (`openstack/networking_calico_rs/rules.py`) agrees with
//! calico-neutron's translation (`calico_openstack::rule`) rule for rule and word for word, and
//! the real neutron-server, through the `openstack` CLI and the API, answers 409 with the
//! reason and creates nothing. Needs scripts/setup-neutron.sh.

mod common;

use std::process::Command;

use calico_openstack::neutron::SecurityGroupRule;
use calico_openstack::server::driver_dir;
use common::neutron::{ADMIN_PASSWORD, Neutron};
use serde_json::{Value, json};

/// Rules Neutron itself accepts, expressible or not.
fn table() -> Vec<Value> {
    let rule = |fields: Value| {
        let mut base = json!({"id": "r", "direction": "ingress", "ethertype": "IPv4"});
        for (k, v) in fields.as_object().expect("an object") {
            base[k] = v.clone();
        }
        base
    };
    vec![
        rule(json!({})),
        rule(json!({"protocol": "tcp", "port_range_min": 22, "port_range_max": 22})),
        rule(json!({"protocol": "udp", "port_range_min": 53, "port_range_max": 54})),
        rule(json!({"protocol": "sctp", "port_range_min": 1, "port_range_max": 65535})),
        rule(json!({"protocol": "icmp", "port_range_min": 8, "port_range_max": 0})),
        rule(json!({"protocol": "icmp", "port_range_min": 254})),
        rule(json!({"protocol": "icmp", "port_range_min": 255})),
        rule(json!({"protocol": "icmp", "port_range_min": 255, "port_range_max": 0})),
        rule(json!({"ethertype": "IPv6", "protocol": "ipv6-icmp", "port_range_min": 255})),
        rule(json!({"ethertype": "IPv6", "protocol": "ipv6-icmp", "port_range_min": 128})),
        rule(json!({"protocol": "hopopt"})),
        rule(json!({"protocol": "0"})),
        rule(json!({"protocol": "ip"})),
        rule(json!({"protocol": "gre"})),
        rule(json!({"protocol": "47"})),
        rule(json!({"protocol": "dccp"})),
        rule(json!({"protocol": "dccp", "port_range_min": 5000, "port_range_max": 5001})),
        rule(json!({"protocol": "33", "port_range_min": 1, "port_range_max": 2})),
        rule(json!({"protocol": "vrrp"})),
        rule(json!({"remote_address_group_id": "ag-1"})),
        rule(json!({"remote_group_id": "sg-1", "protocol": "tcp"})),
        rule(json!({"remote_ip_prefix": "10.0.0.0/8"})),
        rule(json!({"direction": "egress", "protocol": "udplite"})),
    ]
}

/// `rules.reason` of each rule, as JSON (null: expressible).
fn python_reasons(rules: &[Value]) -> Vec<Option<String>> {
    let script = "import json, sys\nsys.path.insert(0, sys.argv[1])\n\
                  from networking_calico_rs import rules\n\
                  print(json.dumps([rules.reason(r) for r in json.load(sys.stdin)]))\n";
    let mut child = Command::new("/usr/bin/python3")
        .args(["-c", script])
        .arg(driver_dir())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("/usr/bin/python3 runs");
    use std::io::Write;
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(Value::Array(rules.to_vec()).to_string().as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("python3");
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).expect("a JSON list")
}

#[test]
fn the_drivers_check_and_the_translation_leave_out_the_same_rules_for_the_same_reasons() {
    let rules = table();
    let python = python_reasons(&rules);
    for (rule, python) in rules.iter().zip(python) {
        let neutron: SecurityGroupRule = serde_json::from_value(rule.clone()).expect("a rule");
        let rust = calico_openstack::rule::rule(&neutron)
            .err()
            .map(|e| e.reason);
        assert_eq!(python, rust, "{rule}");
    }
}

/// `openstack ARGS` as the admin: exit code and stdout + stderr.
fn openstack(neutron: &Neutron, args: &[&str]) -> (i32, String) {
    let out = Command::new("/usr/bin/openstack")
        .args(args)
        .env(
            "OS_AUTH_URL",
            neutron.auth_url.as_deref().expect("keystone"),
        )
        .env("OS_USERNAME", "admin")
        .env("OS_PASSWORD", ADMIN_PASSWORD)
        .env("OS_PROJECT_NAME", "admin")
        .env("OS_USER_DOMAIN_NAME", "Default")
        .env("OS_PROJECT_DOMAIN_NAME", "Default")
        .env("OS_IDENTITY_API_VERSION", "3")
        .output()
        .expect("/usr/bin/openstack runs");
    let text = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text.into_owned())
}

#[test]
fn neutron_refuses_a_rule_calico_cannot_express_with_the_reason_and_makes_nothing() {
    let neutron = Neutron::start();
    let group = neutron.create("security-groups", json!({"name": "strict"}));
    let group = group["id"].as_str().expect("an id").to_owned();
    let rules_of = |neutron: &Neutron| {
        let path = format!("/v2.0/security-group-rules?security_group_id={group}");
        neutron.call("GET", &path, None)["security_group_rules"]
            .as_array()
            .expect("a list")
            .len()
    };
    let before = rules_of(&neutron);

    let refused = [
        (
            vec!["--protocol", "hopopt"],
            "protocol \"hopopt\" (0): Calico cannot match protocol 0",
        ),
        (
            vec!["--protocol", "dccp", "--dst-port", "5000:5001"],
            "a port range with protocol \"dccp\" (33): Calico matches ports of tcp, udp, sctp \
             and udplite only",
        ),
        (
            vec!["--protocol", "icmp", "--icmp-type", "255"],
            "icmp_type: icmp type 255 is out of range 0-254",
        ),
    ];
    for (args, reason) in refused {
        let mut all = vec!["security", "group", "rule", "create", "--ingress"];
        all.extend(args.iter().copied());
        all.push(&group);
        let (code, out) = openstack(&neutron, &all);
        assert_ne!(code, 0, "{args:?} was accepted:\n{out}");
        eprintln!("openstack {}:\n{out}", all.join(" "));
        assert!(
            out.contains("Calico cannot express this security group rule") && out.contains(reason),
            "{args:?}: the CLI does not say why:\n{out}"
        );
    }
    // Through the API: protocol 0 by number, 409 with the reason.
    let body = json!({"security_group_rule": {"security_group_id": group, "direction": "ingress",
                                              "ethertype": "IPv4", "protocol": "0"}});
    let error = neutron
        .try_call("POST", "/v2.0/security-group-rules", Some(body))
        .expect_err("protocol 0 was accepted");
    assert!(
        error.contains("409") && error.contains("Calico cannot match protocol 0"),
        "{error}"
    );
    // A remote address group.
    let addresses = json!({"name": "office", "addresses": ["192.0.2.0/24"]});
    let address_group = neutron.create("address-groups", addresses);
    let address_group = address_group["id"].as_str().expect("an id");
    let body = json!({"security_group_rule": {"security_group_id": group, "direction": "ingress",
                                              "ethertype": "IPv4",
                                              "remote_address_group_id": address_group}});
    let error = neutron
        .try_call("POST", "/v2.0/security-group-rules", Some(body))
        .expect_err("a remote address group was accepted");
    assert!(
        error.contains("409") && error.contains("address groups are not supported"),
        "{error}"
    );
    assert_eq!(rules_of(&neutron), before, "a refused rule was created");

    // What Calico expresses is made as before.
    let (code, out) = openstack(
        &neutron,
        &[
            "security",
            "group",
            "rule",
            "create",
            "--ingress",
            "--protocol",
            "tcp",
            "--dst-port",
            "22",
            &group,
        ],
    );
    assert_eq!(code, 0, "{out}");
    assert_eq!(rules_of(&neutron), before + 1);
}
