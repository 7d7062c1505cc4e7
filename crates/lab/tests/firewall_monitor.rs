//! Felix sees changes to its firewall as they happen (the nf_tables monitor), with the default
//! (90 s) refresh interval: after `nft flush ruleset` in a host's namespace (what a
//! distribution's nftables service does on reload), and, on the iptables backend, after
//! `iptables -F FORWARD` (iptables-nft's changes come on the same multicast group), the rules
//! are back and policy denies again within seconds. Each test prints the window measured
//! (the change → the firewall back as it was).

mod common;

use std::time::{Duration, Instant};

use calico_testkit::eventually;
use common::{Backend, OPEN, TestLab};

const W1: &str = "10.65.1.1";
const W2: &str = "10.65.2.1";

/// Far under the default refresh interval (90 s): only the monitor repairs this fast.
const WAIT: Duration = Duration::from_secs(10);

/// Inbound TCP 80 only.
const WEB: &str = r#"{"inbound_rules": [{"protocol": "tcp", "dst_ports": [80], "action": "allow"}], "outbound_rules": [{"action": "allow"}]}"#;

/// A client on host1, a server on host2 that allows only port 80.
fn lab() -> TestLab {
    let lab = TestLab::up(2, &[]);
    lab.put("/calico/v1/policy/profile/open/rules", OPEN);
    lab.put("/calico/v1/policy/profile/web/rules", WEB);
    lab.workload("host1", "client", W1, &["open"], &[]);
    lab.workload("host2", "server", W2, &["web"], &[]);
    lab.wait();
    assert!(!lab.tcp("client", W2, 443), "policy denies 443");
    lab
}

/// Runs `tamper` in host2 and waits for the firewall to be back as before: prints and returns
/// how long it was not.
fn window(lab: &TestLab, what: &str, tamper: impl FnOnce()) -> Duration {
    let before = sorted(&lab.firewall("host2"));
    let started = Instant::now();
    tamper();
    eventually("the firewall to be repaired", WAIT, || {
        let now = sorted(&lab.firewall("host2"));
        if now == before {
            Ok(())
        } else {
            let lost: Vec<&str> = before.lines().filter(|l| !now.contains(l)).collect();
            let new: Vec<&str> = now.lines().filter(|l| !before.contains(l)).collect();
            let log = std::fs::read_to_string(lab.state().log_path("felix-host2"));
            let log = log.unwrap_or_default();
            let tail = &log[log.len().saturating_sub(4000)..];
            Err(format!(
                "lost {lost:?}, new {new:?}; Felix's log ends:\n{tail}"
            ))
        }
    });
    let window = started.elapsed();
    eprintln!(
        "unprotected window after {what} ({} backend): {window:?} (to the firewall back as it was)",
        lab.backend.name()
    );
    window
}

/// The listing's lines sorted: a table made again lists its chains in the order they were
/// made, which a repair need not keep.
fn sorted(listing: &str) -> String {
    let mut lines: Vec<&str> = listing.lines().collect();
    lines.sort_unstable();
    lines.join("\n")
}

#[test]
fn a_flushed_ruleset_is_repaired_at_once() {
    let lab = lab();
    window(&lab, "nft flush ruleset", || {
        lab.nft("host2", &["flush", "ruleset"]);
    });
    assert!(lab.tcp("client", W2, 80), "the server's policy allows 80");
    assert!(!lab.tcp("client", W2, 443), "and denies 443 again");
}

#[test]
fn iptables_changes_to_forward_are_repaired_at_once() {
    let lab = lab();
    // The nftables backend has no jumps in FORWARD to lose: there, flushing it leaves policy
    // as it was.
    let changes: &[&[&str]] = match lab.backend {
        Backend::Iptables => &[&["-F", "FORWARD"], &["-D", "FORWARD", "1"]],
        Backend::Nftables => &[&["-F", "FORWARD"]],
    };
    for args in changes {
        window(&lab, &format!("iptables {}", args.join(" ")), || {
            let out = lab.in_host("host2", "iptables", args);
            assert!(out.status.success(), "iptables {args:?}: {out:?}");
        });
        assert!(!lab.tcp("client", W2, 443), "policy denies 443 again");
    }
}
