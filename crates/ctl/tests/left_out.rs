//! `calicoctl get profile` warns about the Neutron rules calico-neutron left out of a security
//! group's profile (`/calico/openstack/v1/left-out/<group>`), against a real etcd.

mod common;

use common::{Ctl, text};

const RULES: &str = r#"{"inbound_rules":[{"action":"allow"}],"outbound_rules":[]}"#;

fn put(ctl: &Ctl, key: &str, value: &str) {
    let out = ctl.etcdctl(&["put", key, value]);
    assert_eq!(out.trim(), "OK", "etcdctl put {key}");
}

#[test]
fn get_profile_warns_once_per_left_out_rule_in_table_and_yaml() {
    let ctl = Ctl::start();
    for group in ["g1", "g2"] {
        let profile = format!("/calico/v1/policy/profile/openstack-sg-{group}");
        put(&ctl, &format!("{profile}/rules"), RULES);
        put(&ctl, &format!("{profile}/tags"), &format!(r#"["{group}"]"#));
    }
    put(
        &ctl,
        "/calico/openstack/v1/left-out/g1",
        r#"{"rules":[{"id":"r-dccp","direction":"inbound","reason":"protocol \"dccp\": Calico 1.x has no such protocol"},{"id":"r-2","direction":"outbound","reason":"something else"}]}"#,
    );
    let expected = "warning: security group g1 rule r-dccp (inbound) is not enforced: protocol \
                    \"dccp\": Calico 1.x has no such protocol\n\
                    warning: security group g1 rule r-2 (outbound) is not enforced: something else\n";
    for output in [&[][..], &["-o", "yaml"][..]] {
        let args: Vec<&str> = ["get", "profile", "openstack-sg-g1"]
            .iter()
            .chain(output)
            .copied()
            .collect();
        let out = ctl.stdin(&args, "");
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert_eq!(text(&out.stderr), expected, "{args:?}");
        assert!(text(&out.stdout).contains("openstack-sg-g1"), "{args:?}");
    }
    // A group with nothing left out: no warning.
    let out = ctl.stdin(&["get", "profile", "openstack-sg-g2"], "");
    assert!(out.status.success());
    assert_eq!(text(&out.stderr), "");
    // Listing every profile warns about g1 only.
    let out = ctl.stdin(&["get", "profile"], "");
    assert_eq!(text(&out.stderr), expected);

    // A record that does not validate is named, not trusted.
    put(&ctl, "/calico/openstack/v1/left-out/g2", r#"{"rules":[]}"#);
    let out = ctl.stdin(&["get", "profile", "openstack-sg-g2"], "");
    assert!(out.status.success());
    let stderr = text(&out.stderr);
    assert!(
        stderr.starts_with(
            "warning: Validation failed for /calico/openstack/v1/left-out/g2, treating as missing"
        ),
        "{stderr}"
    );
}
