//! `calico-fanout` for real: the binary against a real etcd, read through
//! `calico_datastore::FanoutClient` as Felix reads it, and by Felix itself.
//!
//! Needs etcd (etcd-server); the Felix test also needs root, iptables and the calico-felix
//! binary beside calico-fanout (`cargo build -p calico-felix`).

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use calico_datastore::{
    Datastore, EtcdConfig, EtcdDatastore, FanoutClient, TxnOp, Watch, WatchEvent,
};
use calico_testkit::{EtcdServer, NetNs, eventually, free_port};

const FANOUT: &str = env!("CARGO_BIN_EXE_calico-fanout");

/// calico-fanout, killed on drop; its log in a temp dir.
struct Fanout {
    child: Child,
    address: String,
    dir: tempfile::TempDir,
}

impl Fanout {
    fn start(etcd: &EtcdServer, port: u16) -> Fanout {
        let dir = tempfile::tempdir().expect("temp dir");
        let log = std::fs::File::create(dir.path().join("fanout.log")).expect("log file");
        let address = format!("127.0.0.1:{port}");
        let child = Command::new(FANOUT)
            .args(["--listen", &address, "--etcd-endpoints", &etcd.endpoint()])
            .stdin(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("calico-fanout starts");
        let fanout = Fanout {
            child,
            address,
            dir,
        };
        eventually("calico-fanout listening", Duration::from_secs(10), || {
            TcpStream::connect(&fanout.address)
                .map(drop)
                .map_err(|e| format!("{e}; log:\n{}", fanout.log()))
        });
        fanout
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("fanout.log")).unwrap_or_default()
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Fanout {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A process killed on drop.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

const P: &str = "/calico/v1/policy/profile/";

fn key(name: &str) -> String {
    format!("{P}{name}/rules")
}

async fn next(watch: &mut Watch) -> WatchEvent {
    tokio::time::timeout(Duration::from_secs(30), watch.next())
        .await
        .expect("no event within 30 s")
        .expect("the watch ended")
}

/// Events up to the next `InSync` (not returned), as (key, value) with `None` for a delete.
async fn until_in_sync(watch: &mut Watch) -> Vec<(String, Option<String>)> {
    let mut events = Vec::new();
    loop {
        match next(watch).await {
            WatchEvent::InSync { .. } => return events,
            WatchEvent::Put(pair) => events.push((pair.key, Some(pair.value))),
            WatchEvent::Delete { key, .. } => events.push((key, None)),
        }
    }
}

async fn change(watch: &mut Watch) -> (String, Option<String>) {
    loop {
        match next(watch).await {
            WatchEvent::InSync { .. } => continue,
            WatchEvent::Put(pair) => return (pair.key, Some(pair.value)),
            WatchEvent::Delete { key, .. } => return (key, None),
        }
    }
}

fn put(key: &str, value: &str) -> (String, Option<String>) {
    (key.to_owned(), Some(value.to_owned()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_get_the_snapshot_and_every_change_through_restarts_of_either_side() {
    let mut etcd = EtcdServer::start();
    etcd.put(&key("a"), "a1");
    etcd.put(&key("b"), "b1");
    etcd.put("/calico/ipam/v2/host/h/ipv4/block/10.0.0.0-26", "{}");
    let port = free_port();
    let mut fanout = Fanout::start(&etcd, port);
    let client = FanoutClient::new(&fanout.address);
    let mut watch = client.watch(P);
    assert_eq!(
        until_in_sync(&mut watch).await,
        [put(&key("a"), "a1"), put(&key("b"), "b1")]
    );

    // Changes, a delete and a transaction of several keys, in order.
    etcd.put(&key("c"), "c1");
    assert_eq!(change(&mut watch).await, put(&key("c"), "c1"));
    let out = etcd.etcdctl(&["del", &key("a")]);
    assert!(out.status.success());
    assert_eq!(change(&mut watch).await, (key("a"), None));
    let store = EtcdDatastore::connect(EtcdConfig {
        endpoints: vec![etcd.endpoint()],
        ..EtcdConfig::default()
    })
    .await
    .unwrap();
    let ops = [("d", "d1"), ("e", "e1")].map(|(name, value)| TxnOp::Put {
        key: key(name),
        value: value.to_owned(),
    });
    assert!(store.transaction(&[], &ops).await.unwrap());
    assert_eq!(change(&mut watch).await, put(&key("d"), "d1"));
    assert_eq!(change(&mut watch).await, put(&key("e"), "e1"));

    // A second agent starting now sees the same state.
    let mut second = client.watch(P);
    let snapshot = until_in_sync(&mut second).await;
    let keys: Vec<&str> = snapshot.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, [key("b"), key("c"), key("d"), key("e")]);

    // calico-fanout restarted, with a change made while it was down: the agent's watch
    // resyncs from the new process and delivers exactly what changed.
    fanout.stop();
    etcd.put(&key("b"), "b2");
    let mut fanout = Fanout::start(&etcd, port);
    assert_eq!(change(&mut watch).await, put(&key("b"), "b2"));
    etcd.put(&key("f"), "f1");
    assert_eq!(change(&mut watch).await, put(&key("f"), "f1"));

    // etcd restarted under calico-fanout: its watch resyncs, agents follow.
    etcd.restart();
    etcd.put(&key("g"), "g1");
    assert_eq!(change(&mut watch).await, put(&key("g"), "g1"));
    assert!(
        fanout.log().contains("in sync"),
        "the log says when a feed is in sync:\n{}",
        fanout.log()
    );
    fanout.stop();
}

#[test]
fn a_prefix_that_is_not_served_is_refused_by_name() {
    let etcd = EtcdServer::start();
    let fanout = Fanout::start(&etcd, free_port());
    let mut stream = TcpStream::connect(&fanout.address).unwrap();
    stream
        .write_all(b"{\"snapshot\":\"/calico/ipam/v2/\"}\n")
        .unwrap();
    let mut answer = String::new();
    BufReader::new(stream).read_line(&mut answer).unwrap();
    assert!(
        answer.contains(r#""error""#)
            && answer.contains("/calico/ipam/v2/")
            && answer.contains("/calico/v1/"),
        "{answer}"
    );
}

/// Felix with `FanoutAddr` programs what etcd says, read through calico-fanout.
#[test]
fn felix_reads_its_watches_through_the_fanout() {
    let felix = PathBuf::from(FANOUT).with_file_name("calico-felix");
    assert!(
        felix.is_file(),
        "{} is missing: cargo build -p calico-felix",
        felix.display()
    );
    let ns = NetNs::new("fanout-felix");
    let etcd = EtcdServer::start_in_netns(ns.name());
    etcd.put("/calico/v1/Ready", "true");
    let port = free_port();
    // calico-fanout in the namespace too, where Felix can reach it on its loopback.
    let dir = tempfile::tempdir().unwrap();
    let fanout_log = dir.path().join("fanout.log");
    let address = format!("127.0.0.1:{port}");
    let _fanout = Command::new("nsenter")
        .arg(format!("--net=/run/netns/{}", ns.name()))
        .arg(FANOUT)
        .args(["--listen", &address, "--etcd-endpoints", &etcd.endpoint()])
        .stdin(Stdio::null())
        .stderr(std::fs::File::create(&fanout_log).unwrap())
        .spawn()
        .map(Running)
        .expect("calico-fanout starts");
    let felix_log = dir.path().join("felix.log");
    let _felix = Command::new("nsenter")
        .arg(format!("--net=/run/netns/{}", ns.name()))
        .arg(&felix)
        .env("FELIX_ETCDENDPOINTS", etcd.endpoint())
        .env("FELIX_FELIXHOSTNAME", "h1")
        .env("FELIX_FANOUTADDR", &address)
        .env("FELIX_LOGFILEPATH", "none")
        .stdin(Stdio::null())
        .stderr(std::fs::File::create(&felix_log).unwrap())
        .stdout(
            std::fs::File::options()
                .append(true)
                .open(&felix_log)
                .unwrap(),
        )
        .spawn()
        .map(Running)
        .expect("calico-felix starts");
    let logs = || {
        format!(
            "felix:\n{}\nfanout:\n{}",
            std::fs::read_to_string(&felix_log).unwrap_or_default(),
            std::fs::read_to_string(&fanout_log).unwrap_or_default()
        )
    };
    etcd.put(
        "/calico/v1/host/h1/workload/k8s/ns.web/endpoint/eth0",
        r#"{"state": "active", "name": "caliweb", "mac": "ee:ee:ee:00:00:01", "profile_ids": ["web"], "ipv4_nets": ["10.65.0.7/32"]}"#,
    );
    let chains = || ns.run_ok("iptables-save", &[], "");
    eventually("the endpoint's chains", Duration::from_secs(30), || {
        chains()
            .contains("cali-wi-caliweb")
            .then_some(())
            .ok_or_else(logs)
    });
    // A profile written later reaches Felix through the fan-out's change stream.
    etcd.put(
        "/calico/v1/policy/profile/web/rules",
        r#"{"inbound_rules": [{"action": "allow", "protocol": "tcp", "dst_ports": [8080]}], "outbound_rules": []}"#,
    );
    eventually("the profile's rule", Duration::from_secs(30), || {
        chains()
            .contains("-m multiport --dports 8080")
            .then_some(())
            .ok_or_else(logs)
    });
    assert!(
        logs().contains("reading the datastore through calico-fanout"),
        "{}",
        logs()
    );
}
