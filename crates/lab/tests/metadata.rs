//! The metadata path and the bootstrap whitelist, with real packets (000 §2.5.1 `MetadataAddr`,
//! §2.5.2 "How Calico uses iptables"): a workload's TCP to 169.254.169.254:80 is DNATed to
//! `MetadataAddr:MetadataPort` and, like DHCP and DNS to its host, accepted before the
//! workload's outbound policy; anything else to the host goes through that policy. With
//! `MetadataAddr=None` there is no metadata path.

mod common;

use common::{Backend, OPEN, TestLab, firewall, tcp};

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

/// The metadata DNAT rule as the host's firewall shows it, and the sign that the chain holding
/// it is hooked into the kernel's nat PREROUTING.
fn metadata_dnat(lab: &TestLab, port: &str) -> (String, String) {
    match lab.backend {
        Backend::Iptables => (
            format!(
                "-A cali-PREROUTING -d 169.254.169.254/32 -i cali+ -p tcp -m tcp --dport 80 \
                 -m comment --comment metadata -j DNAT --to-destination 127.0.0.1:{port}"
            ),
            "-A PREROUTING -j cali-PREROUTING".to_owned(),
        ),
        Backend::Nftables => (
            format!(
                "iifname \"cali*\" ip daddr 169.254.169.254 tcp dport 80 \
                 dnat ip to 127.0.0.1:{port} comment \"metadata\""
            ),
            "type nat hook prerouting priority dstnat; policy accept;".to_owned(),
        ),
    }
}

/// The host's chain that holds the metadata DNAT: `cali-PREROUTING` of the nat table (with the
/// rest of iptables-save), or `nat-prerouting` of the nftables table.
fn prerouting(lab: &TestLab) -> String {
    let text = lab.firewall("host1");
    match lab.backend {
        Backend::Iptables => text,
        Backend::Nftables => firewall::nft_block(&text, "chain", "nat-prerouting")
            .unwrap_or_else(|| panic!("no chain nat-prerouting:\n{text}"))
            .to_owned(),
    }
}

/// A DNAT anywhere in the host's firewall.
fn has_dnat(lab: &TestLab, text: &str) -> bool {
    match lab.backend {
        Backend::Iptables => text.contains("-j DNAT"),
        Backend::Nftables => text.contains(" dnat "),
    }
}

/// A rule that matches TCP to `port` anywhere in the host's firewall.
fn matches_port(lab: &TestLab, text: &str, port: &str) -> bool {
    match lab.backend {
        Backend::Iptables => text.contains(&format!("--dport {port}")),
        Backend::Nftables => text.contains(&format!("tcp dport {port}")),
    }
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

    // The rule that did it, as the kernel has it; and the whitelist rule for the port.
    let (rule, hook) = metadata_dnat(&lab, &port);
    let nat = prerouting(&lab);
    assert!(nat.contains(&rule), "{rule}\n{nat}");
    assert!(nat.contains(&hook), "{nat}");
    assert!(matches_port(&lab, &lab.firewall("host1"), &port));

    // Felix again, with MetadataAddr=None: the DNAT and the metadata whitelist rule go.
    lab.ok(&[
        "restart-felix",
        "host1",
        "--felix-config",
        "MetadataAddr=None",
    ]);
    lab.wait();
    let all = lab.firewall("host1");
    assert!(!has_dnat(&lab, &all), "{all}");
    assert!(prerouting(&lab).contains(&hook), "{all}");
    assert!(!matches_port(&lab, &all, &port), "{all}");
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
