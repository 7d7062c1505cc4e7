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

#[test]
fn a_jump_pushed_down_by_another_rule_is_moved_back_to_the_top() {
    let ns = NetNs::new("calico-jump-top");
    let iptables = Iptables::new(Netns::named(ns.name()));
    let chain = "*filter\n:cali-FORWARD - [0:0]\nCOMMIT\n";
    let foreign = "-d 10.65.0.2/32 -p tcp -m tcp --dport 5432 -j ACCEPT";
    let forward = |family| -> Vec<String> {
        let saved = iptables.save(family, "filter").unwrap();
        saved
            .lines()
            .filter_map(|l| l.strip_prefix("-A FORWARD "))
            .map(str::to_owned)
            .collect()
    };
    let family = Family::V4;
    iptables.restore(family, chain).unwrap();
    assert!(
        iptables
            .ensure_jump(family, "filter", "FORWARD", "cali-FORWARD")
            .unwrap()
    );
    // What Docker does: a rule inserted at the top, above ours.
    let docker = format!("*filter\n-I FORWARD 1 {foreign}\n-A FORWARD -j DROP\nCOMMIT\n");
    iptables.restore(family, &docker).unwrap();
    assert_eq!(forward(family), [foreign, "-j cali-FORWARD", "-j DROP"]);
    assert!(
        iptables
            .ensure_jump(family, "filter", "FORWARD", "cali-FORWARD")
            .unwrap(),
        "a jump that is not first is moved"
    );
    assert_eq!(
        forward(family),
        ["-j cali-FORWARD", foreign, "-j DROP"],
        "ours first, the others kept in their order"
    );
    assert!(
        !iptables
            .ensure_jump(family, "filter", "FORWARD", "cali-FORWARD")
            .unwrap()
    );
}
