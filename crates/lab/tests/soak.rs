//! The chaos soak, short: `calico-lab soak` for a minute on three hosts and three etcd members,
//! with kills, partitions and member restarts closer together than in the ten-minute run of
//! docs/reliability.md. It passes only if no established flow lost an echo outside a BGP route
//! withdrawal, every host's routes match its endpoints, sampled flows match `policy explain`,
//! `calicoctl ipam check` is clean and nothing is left behind; and the report must show that
//! the chaos happened.

mod common;

use common::TestLab;

#[test]
fn a_minute_of_chaos_loses_nothing_and_leaves_nothing_behind() {
    let lab = TestLab::up_with(3, &["--etcd-members", "3"]);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("soak.json");
    let json = json.to_str().unwrap();
    let out = lab.cli(&[
        "soak",
        "--seconds",
        "60",
        "--seed",
        "20261124",
        "--kill-every",
        "3",
        "--partition-every",
        "15",
        "--max-partition",
        "15",
        "--member-every",
        "15",
        "--samples",
        "20",
        "--json",
        json,
    ]);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "the soak failed:\n{text}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    let count = |field: &str| report[field].as_u64().unwrap_or(0);
    assert!(count("kills_total") >= 10, "too few kills:\n{text}");
    for process in ["felix", "node", "bird"] {
        assert!(
            report["kills"][process].as_u64().unwrap_or(0) >= 1,
            "no {process} was killed:\n{text}"
        );
    }
    assert!(count("partitions") >= 1, "no partition:\n{text}");
    assert!(
        count("member_restarts") >= 1,
        "no etcd member restart:\n{text}"
    );
    assert!(
        count("workloads_added") >= 3 && count("policy_edits") >= 3,
        "too little churn:\n{text}"
    );
    let flows = report["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 3, "one flow per host:\n{text}");
    for flow in flows {
        assert!(
            flow["sent"].as_u64().unwrap() > 200,
            "a flow ran only briefly:\n{text}"
        );
        assert_eq!(flow["sent"], flow["echoed"], "{text}");
    }
    assert_eq!(count("sampled_flows"), 20, "{text}");
    assert_eq!(report["ipam_clean"], true, "{text}");
}
