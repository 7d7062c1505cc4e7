//! The kernel tools, for real, inside a network namespace made for each test.

use calico_linux::{Family, Ipset, Iptables, Netns};
use calico_testkit::NetNs;

#[test]
fn restore_save_and_jumps_in_a_namespace() {
    let ns = NetNs::new("calico-linux");
    let iptables = Iptables::new(Netns::named(ns.name()));
    let input = "*filter\n:cali-test - [0:0]\n-A cali-test -p tcp --dport 22 -j ACCEPT\nCOMMIT\n";
    for family in [Family::V4, Family::V6] {
        iptables.restore(family, input).unwrap();
        assert!(
            iptables
                .save(family, "filter")
                .unwrap()
                .contains("-A cali-test")
        );
        assert!(
            iptables
                .ensure_jump(family, "filter", "INPUT", "cali-test")
                .unwrap()
        );
        assert!(
            !iptables
                .ensure_jump(family, "filter", "INPUT", "cali-test")
                .unwrap(),
            "only once"
        );
        assert_eq!(
            iptables.chains(family, "filter", "cali-").unwrap(),
            ["cali-test"]
        );
    }
    // Bad input fails with the tool's own message, and changes nothing (atomic).
    let bad = "*filter\n:cali-test - [0:0]\n-A cali-test -p nosuchproto -j ACCEPT\nCOMMIT\n";
    let err = iptables.restore(Family::V4, bad).unwrap_err().to_string();
    assert!(err.contains("iptables-restore"), "{err}");
    assert!(
        iptables
            .save(Family::V4, "filter")
            .unwrap()
            .contains("--dport 22")
    );
}

#[test]
fn ipsets_in_a_namespace() {
    let ns = NetNs::new("calico-ipset");
    let ipset = Ipset::new(Netns::named(ns.name()));
    ipset
        .restore("create cali4-x hash:ip family inet\nadd cali4-x 10.0.0.1\nadd cali4-x 10.0.0.2\n")
        .unwrap();
    assert_eq!(ipset.names().unwrap(), ["cali4-x"]);
    let mut members = ipset.members("cali4-x").unwrap();
    members.sort();
    assert_eq!(members, ["10.0.0.1", "10.0.0.2"]);
    let err = ipset.restore("add cali4-nope 10.0.0.1\n").unwrap_err();
    assert!(err.to_string().contains("ipset restore"), "{err}");
}

#[test]
fn a_missing_tool_says_so() {
    let err = Netns::current()
        .run("no-such-tool-xyz", &[], "")
        .unwrap_err();
    assert!(err.to_string().contains("is it installed"), "{err}");
}
