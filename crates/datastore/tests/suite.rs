//! One suite, two backends: every behaviour of the `Datastore` trait is checked against the
//! in-memory store and against a real etcd started on a free loopback port. The etcd runs are
//! also killed and restarted mid-watch, and compacted under a resuming watch.

use std::collections::BTreeMap;
use std::time::Duration;

use calico_datastore::{
    Compare, Datastore, EtcdConfig, EtcdDatastore, Expect, KvPair, MemoryDatastore, TxnOp, Watch,
    WatchEvent,
};
use calico_testkit::EtcdServer;

const P: &str = "/calico/v1/policy/profile/";

/// A backend under test, with the faults the suite injects.
enum Harness {
    Memory(MemoryDatastore),
    Etcd {
        server: EtcdServer,
        client: EtcdDatastore,
    },
}

impl Harness {
    async fn memory() -> Harness {
        Harness::Memory(MemoryDatastore::new())
    }

    async fn etcd() -> Harness {
        let server = EtcdServer::start();
        let config = EtcdConfig {
            endpoints: vec![server.endpoint()],
            ..EtcdConfig::default()
        };
        let client = EtcdDatastore::connect(config).await.expect("etcd connects");
        Harness::Etcd { server, client }
    }

    fn store(&self) -> &dyn Datastore {
        match self {
            Harness::Memory(store) => store,
            Harness::Etcd { client, .. } => client,
        }
    }

    /// The store goes away (etcd is killed).
    fn outage(&mut self) {
        match self {
            Harness::Memory(store) => store.set_reachable(false),
            Harness::Etcd { server, .. } => server.stop(),
        }
    }

    /// The store comes back with its data (etcd restarts on the same ports and data dir).
    fn recover(&mut self) {
        match self {
            Harness::Memory(store) => store.set_reachable(true),
            Harness::Etcd { server, .. } => server.restart(),
        }
    }

    /// Compacts the history up to the current revision.
    async fn compact(&self) {
        match self {
            Harness::Memory(store) => store.compact(),
            Harness::Etcd { client, .. } => {
                let revision = client.revision().await.unwrap();
                client.compact(revision).await.unwrap();
            }
        }
    }
}

/// Runs each behaviour against both backends.
macro_rules! both_backends {
    ($($name:ident),* $(,)?) => {
        mod memory {
            $(#[tokio::test] async fn $name() { super::$name(super::Harness::memory().await).await })*
        }
        mod etcd {
            $(#[tokio::test] async fn $name() { super::$name(super::Harness::etcd().await).await })*
        }
    };
}

both_backends!(
    get_put_and_list_by_prefix,
    put_if_absent_writes_once,
    delete_and_delete_prefix_count,
    compare_and_swap_on_revision,
    transactions_are_all_or_nothing,
    watch_delivers_snapshot_then_changes,
    watch_resyncs_after_the_store_was_lost,
    resume_replays_the_changes_since_a_revision,
    resume_after_compaction_emits_exactly_the_differences,
    large_listings_and_snapshots_are_whole,
);

fn key(name: &str) -> String {
    format!("{P}{name}/rules")
}

async fn get_put_and_list_by_prefix(h: Harness) {
    let store = h.store();
    assert_eq!(store.get(&key("a")).await.unwrap(), None);
    let r1 = store.put(&key("b"), "1").await.unwrap();
    let r2 = store.put(&key("a"), "2").await.unwrap();
    assert!(r2 > r1, "revisions grow: {r1} then {r2}");
    // A sibling whose name extends the prefix without a '/' is not under it.
    store.put("/calico/v1/policy/profilez", "x").await.unwrap();
    let got = store.get(&key("a")).await.unwrap().unwrap();
    assert_eq!((got.value.as_str(), got.mod_revision), ("2", r2));
    let listed = store.list(P).await.unwrap();
    let keys: Vec<&str> = listed.iter().map(|p| p.key.as_str()).collect();
    assert_eq!(keys, [key("a"), key("b")]);
    let r3 = store.put(&key("b"), "3").await.unwrap();
    let b = store.get(&key("b")).await.unwrap().unwrap();
    assert_eq!((b.value.as_str(), b.mod_revision), ("3", r3));
    assert!(store.list("/nothing/").await.unwrap().is_empty());
}

/// More keys than one page and more bytes than one gRPC message (4 MiB) hold: the listing and
/// a watch's snapshot still have every key, in order, at one revision.
async fn large_listings_and_snapshots_are_whole(h: Harness) {
    let store = h.store();
    let small: Vec<TxnOp> = (0..2_100)
        .map(|n| TxnOp::Put {
            key: key(&format!("s{n:05}")),
            value: "1".to_owned(),
        })
        .collect();
    for batch in small.chunks(100) {
        assert!(store.transaction(&[], batch).await.unwrap());
    }
    let big = "x".repeat(200_000);
    for n in 0..25 {
        store.put(&key(&format!("b{n:02}")), &big).await.unwrap();
    }
    // Beside the prefix: neither in the listing nor in the snapshot.
    store.put("/calico/v1/policy/profilez", "x").await.unwrap();
    let listed = store.list(P).await.unwrap();
    assert_eq!(listed.len(), 2_125);
    let bytes: usize = listed.iter().map(|p| p.value.len()).sum();
    assert!(bytes > 4 << 20, "{bytes} bytes: more than one gRPC message");
    assert!(
        listed.windows(2).all(|w| w[0].key < w[1].key),
        "sorted, no repeats"
    );
    let mut watch = store.watch(P).await.unwrap();
    let snapshot = until_in_sync(&mut watch).await;
    assert_eq!(keys_of(&snapshot), keys_of_pairs(&listed));
}

fn keys_of_pairs(pairs: &[KvPair]) -> Vec<String> {
    pairs.iter().map(|p| p.key.clone()).collect()
}

async fn put_if_absent_writes_once(h: Harness) {
    let store = h.store();
    assert!(store.put_if_absent(&key("a"), "first").await.unwrap());
    assert!(!store.put_if_absent(&key("a"), "second").await.unwrap());
    assert_eq!(store.get(&key("a")).await.unwrap().unwrap().value, "first");
}

async fn delete_and_delete_prefix_count(h: Harness) {
    let store = h.store();
    for name in ["a", "b", "c"] {
        store.put(&key(name), "v").await.unwrap();
    }
    store.put("/calico/v1/Ready", "true").await.unwrap();
    assert!(store.delete(&key("a")).await.unwrap());
    assert!(!store.delete(&key("a")).await.unwrap());
    assert_eq!(store.delete_prefix(P).await.unwrap(), 2);
    assert_eq!(store.delete_prefix(P).await.unwrap(), 0);
    assert!(store.get("/calico/v1/Ready").await.unwrap().is_some());
}

async fn compare_and_swap_on_revision(h: Harness) {
    let store = h.store();
    let k = key("a");
    assert!(
        !store
            .compare_and_swap(&k, Expect::ModRevision(1), "x")
            .await
            .unwrap()
    );
    assert!(
        store
            .compare_and_swap(&k, Expect::Absent, "v1")
            .await
            .unwrap()
    );
    let rev = store.get(&k).await.unwrap().unwrap().mod_revision;
    assert!(
        !store
            .compare_and_swap(&k, Expect::Absent, "v2")
            .await
            .unwrap()
    );
    assert!(
        store
            .compare_and_swap(&k, Expect::ModRevision(rev), "v2")
            .await
            .unwrap()
    );
    // The revision moved on: a second writer holding the old one loses.
    assert!(
        !store
            .compare_and_swap(&k, Expect::ModRevision(rev), "v3")
            .await
            .unwrap()
    );
    assert_eq!(store.get(&k).await.unwrap().unwrap().value, "v2");
    let rev = store.get(&k).await.unwrap().unwrap().mod_revision;
    assert!(!store.compare_and_delete(&k, rev - 1).await.unwrap());
    assert!(store.compare_and_delete(&k, rev).await.unwrap());
    assert_eq!(store.get(&k).await.unwrap(), None);
}

async fn transactions_are_all_or_nothing(h: Harness) {
    let store = h.store();
    store.put(&key("held"), "v").await.unwrap();
    let ops = [
        TxnOp::Put {
            key: key("x"),
            value: "1".into(),
        },
        TxnOp::Put {
            key: key("y"),
            value: "2".into(),
        },
        TxnOp::Delete { key: key("held") },
    ];
    let failing = [
        Compare {
            key: key("x"),
            expect: Expect::Absent,
        },
        Compare {
            key: key("held"),
            expect: Expect::Absent,
        },
    ];
    assert!(!store.transaction(&failing, &ops).await.unwrap());
    assert_eq!(store.list(P).await.unwrap().len(), 1, "nothing written");
    let holding = [Compare {
        key: key("x"),
        expect: Expect::Absent,
    }];
    assert!(store.transaction(&holding, &ops).await.unwrap());
    let listed = store.list(P).await.unwrap();
    let keys: Vec<&str> = listed.iter().map(|p| p.key.as_str()).collect();
    assert_eq!(keys, [key("x"), key("y")]);
    assert_eq!(
        listed[0].mod_revision, listed[1].mod_revision,
        "one revision per transaction"
    );
}

async fn watch_delivers_snapshot_then_changes(h: Harness) {
    let store = h.store();
    store.put(&key("b"), "1").await.unwrap();
    store.put(&key("a"), "1").await.unwrap();
    store.put("/calico/v1/Ready", "true").await.unwrap();
    let mut watch = store.watch(P).await.unwrap();
    let snapshot = until_in_sync(&mut watch).await;
    assert_eq!(keys_of(&snapshot), [key("a"), key("b")]);

    let r1 = store.put(&key("c"), "1").await.unwrap();
    store
        .put("/calico/v1/config/LogSeverityScreen", "INFO")
        .await
        .unwrap();
    let r2 = store.put(&key("a"), "2").await.unwrap();
    store.delete(&key("b")).await.unwrap();
    assert_eq!(next(&mut watch).await, put(&key("c"), "1", r1));
    assert_eq!(next(&mut watch).await, put(&key("a"), "2", r2));
    match next(&mut watch).await {
        WatchEvent::Delete {
            key: deleted,
            mod_revision,
        } => {
            assert_eq!(deleted, key("b"));
            assert!(mod_revision > r2);
        }
        other => panic!("expected the delete of b, got {other:?}"),
    }
}

async fn watch_resyncs_after_the_store_was_lost(mut h: Harness) {
    for name in ["a", "b", "c"] {
        h.store().put(&key(name), "1").await.unwrap();
    }
    let mut watch = h.store().watch(P).await.unwrap();
    let mut mirror = Mirror::default();
    mirror.apply_until_in_sync(&mut watch).await;

    h.outage();
    h.recover();
    // Changes right after the store is back: the watch may see them live or in its resync,
    // but it must deliver each exactly once, deletions included.
    h.store().delete(&key("a")).await.unwrap();
    h.store().put(&key("b"), "2").await.unwrap();
    h.store().put(&key("d"), "1").await.unwrap();
    let saw_resync = mirror
        .apply_until_equal(&mut watch, &h.store().list(P).await.unwrap())
        .await;
    assert!(saw_resync, "no InSync after the store came back");
}

async fn resume_replays_the_changes_since_a_revision(h: Harness) {
    let store = h.store();
    store.put(&key("a"), "1").await.unwrap();
    store.put(&key("b"), "1").await.unwrap();
    let known = store.list(P).await.unwrap();
    let revision = known.iter().map(|p| p.mod_revision).max().unwrap();
    let r1 = store.put(&key("a"), "2").await.unwrap();
    store.delete(&key("b")).await.unwrap();
    let mut watch = store.resume_watch(P, known, revision).await.unwrap();
    assert_eq!(next(&mut watch).await, put(&key("a"), "2", r1));
    assert!(
        matches!(next(&mut watch).await, WatchEvent::Delete { key, mod_revision }
        if key == self::key("b") && mod_revision == r1 + 1)
    );
}

async fn resume_after_compaction_emits_exactly_the_differences(h: Harness) {
    let store = h.store();
    for name in ["a", "b", "c"] {
        store.put(&key(name), "1").await.unwrap();
    }
    let known = store.list(P).await.unwrap();
    let revision = known.iter().map(|p| p.mod_revision).max().unwrap();
    // While the consumer is away: b vanishes, c changes, d appears, a is untouched.
    store.delete(&key("b")).await.unwrap();
    let rc = store.put(&key("c"), "2").await.unwrap();
    let rd = store.put(&key("d"), "1").await.unwrap();
    h.compact().await;
    let mut watch = store.resume_watch(P, known, revision).await.unwrap();
    let events = until_in_sync(&mut watch).await;
    let (puts, deletes): (Vec<_>, Vec<_>) =
        events.iter().partition(|e| matches!(e, WatchEvent::Put(_)));
    assert_eq!(
        puts,
        [&put(&key("c"), "2", rc), &put(&key("d"), "1", rd)],
        "{events:?}"
    );
    assert_eq!(deletes.len(), 1, "{events:?}");
    assert!(matches!(deletes[0], WatchEvent::Delete { key, .. } if *key == self::key("b")));
    // And it follows live changes afterwards.
    let ra = store.put(&key("a"), "2").await.unwrap();
    assert_eq!(next(&mut watch).await, put(&key("a"), "2", ra));
}

// ---- etcd only: connection errors and TLS ----

/// etcd: a key written with a TTL (a lease) vanishes when nobody writes it again; the watch
/// sees the delete.
#[tokio::test]
async fn keys_written_with_a_ttl_expire() {
    let Harness::Etcd {
        server: _server,
        client,
    } = Harness::etcd().await
    else {
        unreachable!()
    };
    let status = "/calico/felix/v1/host/h1/status";
    let mut watch = client.watch("/calico/felix/").await.unwrap();
    until_in_sync(&mut watch).await;
    client
        .put_with_ttl(status, "{}", Duration::from_secs(1))
        .await
        .unwrap();
    assert!(client.get(status).await.unwrap().is_some());
    assert!(matches!(next(&mut watch).await, WatchEvent::Put(_)));
    let expired = tokio::time::timeout(Duration::from_secs(15), next(&mut watch))
        .await
        .expect("the key expires within seconds of its TTL");
    assert!(
        matches!(&expired, WatchEvent::Delete { key, .. } if key == status),
        "{expired:?}"
    );
    assert!(client.get(status).await.unwrap().is_none());
}

#[tokio::test]
async fn an_unreachable_etcd_is_named_in_the_error() {
    let refusing = calico_testkit::refusing_port();
    let endpoint = refusing.url();
    let config = EtcdConfig {
        endpoints: vec![endpoint.clone()],
        connect_timeout: Duration::from_secs(2),
        ..EtcdConfig::default()
    };
    let error = EtcdDatastore::connect(config)
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains(&endpoint), "{error}");
    assert!(error.contains("ETCD_ENDPOINTS"), "{error}");
}

#[tokio::test]
async fn several_endpoints_work_when_one_is_down() {
    let server = EtcdServer::start();
    let refusing = calico_testkit::refusing_port();
    let dead = refusing.url();
    let config = EtcdConfig {
        endpoints: vec![server.endpoint(), dead],
        ..EtcdConfig::default()
    };
    let store = EtcdDatastore::connect(config).await.unwrap();
    store.put("/calico/v1/Ready", "true").await.unwrap();
    assert_eq!(
        store.get("/calico/v1/Ready").await.unwrap().unwrap().value,
        "true"
    );
}

#[tokio::test]
async fn tls_settings_are_checked_before_connecting() {
    let missing = EtcdConfig {
        endpoints: vec!["https://127.0.0.1:2379".into()],
        ca_file: Some("/nonexistent/ca.pem".into()),
        ..EtcdConfig::default()
    };
    let error = EtcdDatastore::connect(missing)
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("/nonexistent/ca.pem"), "{error}");
    let half = EtcdConfig {
        endpoints: vec!["https://127.0.0.1:2379".into()],
        cert_file: Some("/tmp/cert.pem".into()),
        ..EtcdConfig::default()
    };
    let error = EtcdDatastore::connect(half).await.unwrap_err().to_string();
    assert!(error.contains("--etcd-key-file"), "{error}");
    let plain = EtcdConfig {
        ca_file: Some("/tmp/ca.pem".into()),
        ..EtcdConfig::default()
    };
    let error = EtcdDatastore::connect(plain).await.unwrap_err().to_string();
    assert!(error.contains("https://"), "{error}");
}

#[tokio::test]
async fn tls_with_client_certificates() {
    let pki = calico_testkit::Pki::generate();
    let server = EtcdServer::start_tls(pki.server_tls());
    let config = EtcdConfig {
        endpoints: vec![server.endpoint()],
        ca_file: Some(pki.ca_cert()),
        cert_file: Some(pki.client_cert()),
        key_file: Some(pki.client_key()),
        ..EtcdConfig::default()
    };
    let store = EtcdDatastore::connect(config.clone()).await.unwrap();
    store.put("/calico/v1/Ready", "true").await.unwrap();
    assert_eq!(store.list("/calico/").await.unwrap().len(), 1);
    // Without a client certificate etcd refuses the connection.
    let anonymous = EtcdConfig {
        cert_file: None,
        key_file: None,
        connect_timeout: Duration::from_secs(3),
        ..config
    };
    // etcd closes the TLS connection, with an alert or without a word depending on timing:
    // either way the error says what is missing.
    let error = EtcdDatastore::connect(anonymous)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("no client certificate was given") && error.contains("--etcd-cert-file"),
        "{error}"
    );
}

// ---- helpers ----

/// The next event, or a failure after a generous deadline (the watch may be backing off).
async fn next(watch: &mut Watch) -> WatchEvent {
    tokio::time::timeout(Duration::from_secs(30), watch.next())
        .await
        .expect("no watch event within 30s")
        .expect("the watch ended")
}

/// Everything up to and including the next `InSync` (which is not returned).
async fn until_in_sync(watch: &mut Watch) -> Vec<WatchEvent> {
    let mut events = Vec::new();
    loop {
        match next(watch).await {
            WatchEvent::InSync { .. } => return events,
            event => events.push(event),
        }
    }
}

fn put(key: &str, value: &str, mod_revision: i64) -> WatchEvent {
    WatchEvent::Put(KvPair {
        key: key.to_owned(),
        value: value.to_owned(),
        mod_revision,
    })
}

fn keys_of(events: &[WatchEvent]) -> Vec<String> {
    events
        .iter()
        .map(|e| match e {
            WatchEvent::Put(pair) => pair.key.clone(),
            other => panic!("expected only puts, got {other:?}"),
        })
        .collect()
}

/// What a consumer builds from the events; refuses duplicates and deletes of unknown keys.
#[derive(Default)]
struct Mirror {
    state: BTreeMap<String, (String, i64)>,
}

impl Mirror {
    fn apply(&mut self, event: WatchEvent) {
        match event {
            WatchEvent::Put(pair) => {
                let before = self
                    .state
                    .insert(pair.key.clone(), (pair.value, pair.mod_revision));
                assert_ne!(
                    before.map(|b| b.1),
                    Some(pair.mod_revision),
                    "{} delivered twice",
                    pair.key
                );
            }
            WatchEvent::Delete { key, .. } => {
                assert!(self.state.remove(&key).is_some(), "delete of unknown {key}");
            }
            WatchEvent::InSync { .. } => {}
        }
    }

    async fn apply_until_in_sync(&mut self, watch: &mut Watch) {
        for event in until_in_sync(watch).await {
            self.apply(event);
        }
    }

    /// Applies events until the mirror equals `expected`; returns whether an `InSync` came.
    async fn apply_until_equal(&mut self, watch: &mut Watch, expected: &[KvPair]) -> bool {
        let expected: BTreeMap<String, (String, i64)> = expected
            .iter()
            .map(|p| (p.key.clone(), (p.value.clone(), p.mod_revision)))
            .collect();
        let mut saw_in_sync = false;
        while self.state != expected || !saw_in_sync {
            let event = next(watch).await;
            saw_in_sync |= matches!(event, WatchEvent::InSync { .. });
            self.apply(event);
        }
        saw_in_sync
    }
}
