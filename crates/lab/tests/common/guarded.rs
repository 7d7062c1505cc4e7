//! The lab the flow-log tests share: a client on host1 and a web workload on host2 (profile
//! `open`), behind tier `guard` whose policy `no-redis` denies TCP 6379 to the web workload and
//! passes port 80 on to the next tier; flow logs on, sent to the lab's aggregator.

use super::{OPEN, TestLab};

pub const CLIENT: &str = "10.65.1.1";
pub const WEB: &str = "10.65.2.1";

/// The lab up and programmed, and the aggregator's URL.
pub fn guarded_web() -> (TestLab, String) {
    let lab = TestLab::up_with_flows(2, &[]);
    let url = lab
        .state()
        .flows_url
        .expect("calico-lab up starts the flow aggregator");
    lab.put("/calico/v1/policy/profile/open/rules", OPEN);
    lab.workload("host1", "client", CLIENT, &["open"], &["role=client"]);
    lab.workload("host2", "web", WEB, &["open"], &["role=web"]);
    lab.put("/calico/v1/policy/tier/guard/metadata", r#"{"order": 10}"#);
    lab.put(
        "/calico/v1/policy/tier/guard/policy/no-redis",
        r#"{"selector": "role == \"web\"", "order": 1,
            "inbound_rules": [{"action": "next-tier", "protocol": "tcp", "dst_ports": [80]},
                              {"action": "deny", "protocol": "tcp", "dst_ports": [6379]}],
            "outbound_rules": [{"action": "next-tier"}]}"#,
    );
    lab.wait();
    (lab, url)
}
