//! A Calico 1.4 datastore moved in: the seeds' `etcdctl set` commands (etcd v2 API) into an etcd
//! started with `--enable-v2`, `calicoctl datastore migrate --from-v2 --apply` into the lab's
//! etcd, and the lab's Felix programs what arrived, as real packets show.

mod common;

use std::path::PathBuf;
use std::process::Command;

use calico_testkit::etcd_v2::EtcdV2Server;
use common::{BIN, OPEN, TestLab};

const W1: &str = "10.65.1.1";
const W2: &str = "10.65.2.1";

/// Seed 000 §2.4.7, literally.
const WEBSERVER: &str = r#"{
  "selector": "role==\"webserver\"",
  "order": 100,
  "inbound_rules": [
    {"protocol": "tcp", "dst_ports": [80], "action": "allow"}
  ],
  "outbound_rules": [
    {"action": "allow"}
  ]
}"#;

fn calicoctl() -> PathBuf {
    let path = PathBuf::from(BIN).with_file_name("calicoctl");
    assert!(
        path.is_file(),
        "{} is missing: build it first (cargo build -p calico-ctl; scripts/test.sh does)",
        path.display()
    );
    path
}

#[test]
fn a_migrated_v2_datastore_is_programmed_by_felix() {
    let lab = TestLab::up(2, &[]);
    lab.workload("host1", "web", W1, &["prof1"], &["role=webserver"]);
    lab.workload("host2", "client", W2, &["prof1"], &[]);
    lab.wait();
    assert!(
        !lab.tcp("client", W1, 80),
        "profile prof1 does not exist yet: everything drops"
    );

    let v2 = EtcdV2Server::start();
    v2.set("/calico/v1/policy/profile/prof1/rules", OPEN);
    v2.set("/calico/v1/policy/profile/prof1/tags", r#"["A", "B", "C"]"#);
    v2.set(
        "/calico/v1/policy/tier/my-tier/metadata",
        r#"{"order": 100}"#,
    );
    v2.set("/calico/v1/policy/tier/my-tier/policy/webserver", WEBSERVER);
    v2.set("/calico/v1/Ready", "true");
    let out = Command::new(calicoctl())
        .args(["--etcd-endpoints", &lab.state().client_endpoint])
        .args([
            "datastore",
            "migrate",
            "--from-v2",
            &v2.endpoint(),
            "--apply",
        ])
        .output()
        .expect("calicoctl runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("wrote 4 keys"),
        "Ready was already true: {stdout}"
    );
    lab.wait();

    assert!(
        lab.tcp("client", W1, 80),
        "my-tier's webserver policy allows 80"
    );
    assert!(
        !lab.tcp("client", W1, 8080),
        "the end of my-tier drops the rest"
    );
    assert!(
        lab.tcp("web", W2, 8080),
        "webserver allows outbound; prof1 lets it in"
    );
}
