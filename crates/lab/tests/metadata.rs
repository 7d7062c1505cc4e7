//! The metadata path and the bootstrap whitelist, with real packets (000 §2.5.1 `MetadataAddr`,
//! §2.5.2 "How Calico uses iptables"): a workload's TCP to 169.254.169.254:80 is DNATed to
//! `MetadataAddr:MetadataPort` and, like DHCP and DNS to its host, accepted before the
//! workload's outbound policy; anything else to the host goes through that policy. With
//! `MetadataAddr=None` there is no metadata path.

mod common;

use common::{OPEN, TestLab, tcp};

const W1: &str = "10.65.1.1";
const W2: &str = "10.65.1.2";
/// Not the default 8775, so that the test shows `MetadataPort` is used.
const METADATA_PORT: u16 = 9697;
const DNS_PORT: u16 = 53;
const OTHER_PORT: u16 = 8080;
const METADATA: &str = "169.254.169.254";

/// Allows everything in, denies everything out.
const CLOSED: &str =
    r#"{"inbound_rules": [{"action": "allow"}], "outbound_rules": [{"action": "deny"}]}"#;

fn nat_rules(lab: &TestLab, host: &str) -> String {
    let out = lab.in_host(host, "iptables-save", &["-t", "nat"]);
    assert!(out.status.success(), "iptables-save runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn filter_rules(lab: &TestLab, host: &str) -> String {
    let out = lab.in_host(host, "iptables-save", &["-t", "filter"]);
    assert!(out.status.success(), "iptables-save runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn metadata_and_dns_are_allowed_before_policy_and_none_turns_metadata_off() {
    let port = METADATA_PORT.to_string();
    let lab = TestLab::up(
        1,
        &["MetadataAddr=127.0.0.1", &format!("MetadataPort={port}")],
    );
    lab.put("/calico/v1/policy/profile/closed/rules", CLOSED);
    lab.put("/calico/v1/policy/profile/open/rules", OPEN);
    lab.workload("host1", "vm", W1, &["closed"], &[]);
    lab.workload("host1", "open-vm", W2, &["open"], &[]);
    lab.wait();
    let host_ip = lab.state().host("host1").unwrap().ip.to_string();
    // Declared after the lab, so dropped (killed) before the lab goes down.
    let _server = lab.serve_in("host1", &[METADATA_PORT, DNS_PORT, OTHER_PORT]);

    let targets = [
        tcp(METADATA, 80),
        tcp(&host_ip, DNS_PORT),
        format!("udp:{host_ip}:{DNS_PORT}"),
        tcp(&host_ip, OTHER_PORT),
        tcp(&host_ip, METADATA_PORT),
    ];
    assert_eq!(
        lab.probe("vm", &targets),
        ["ok", "ok", "ok", "blocked", "blocked"],
        "a workload whose policy denies all outbound traffic reaches the metadata server \
         through 169.254.169.254:80 and DNS on its host (TCP and UDP), but not another port \
         of the host, nor the metadata port at the host's address\ntargets: {targets:?}\n{}",
        lab.felix_logs()
    );
    assert_eq!(
        lab.probe("open-vm", &targets[..1]),
        ["ok"],
        "the metadata path does not depend on policy either way"
    );

    // The rule that did it, as the kernel has it.
    let nat = nat_rules(&lab, "host1");
    assert!(
        nat.contains(&format!(
            "-A cali-PREROUTING -d 169.254.169.254/32 -i cali+ -p tcp -m tcp --dport 80 \
             -m comment --comment metadata -j DNAT --to-destination 127.0.0.1:{port}"
        )),
        "{nat}"
    );
    assert!(nat.contains("-A PREROUTING -j cali-PREROUTING"), "{nat}");

    // Felix again, with MetadataAddr=None: the DNAT and the metadata whitelist rule go.
    lab.ok(&[
        "restart-felix",
        "host1",
        "--felix-config",
        "MetadataAddr=None",
    ]);
    lab.wait();
    let nat = nat_rules(&lab, "host1");
    assert!(!nat.contains("DNAT"), "{nat}");
    assert!(nat.contains("-A PREROUTING -j cali-PREROUTING"), "{nat}");
    let filter = filter_rules(&lab, "host1");
    assert!(!filter.contains(&format!("--dport {port}")), "{filter}");
    // No old connection may carry the earlier translation.
    let _ = lab.in_host("host1", "conntrack", &["-D", "--orig-dst", METADATA]);

    let words = lab.probe("vm", &targets[..3]);
    assert_eq!(
        words,
        ["blocked", "ok", "ok"],
        "MetadataAddr=None: 169.254.169.254:80 is not reached; DNS still is\n{}",
        lab.felix_logs()
    );
    let word = &lab.probe("open-vm", &targets[..1])[0];
    assert!(
        !common::arrived(word),
        "MetadataAddr=None: even a workload whose policy allows it does not reach the metadata \
         server ({word})"
    );
}
