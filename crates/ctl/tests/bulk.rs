//! Files of many resources against a real etcd: written in transactions of as many whole
//! resources as etcd's operation limit allows (etcd's revision counts them), applied unchanged
//! without a write, deleted the same way; and a conflict in one transaction leaves exactly the
//! transactions before it written, which the command says.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use calico_ctl::cli::{FileArgs, TxnArgs};
use calico_ctl::resource::store::Mode;
use calico_datastore::{
    Compare, Datastore, DatastoreError, EtcdConfig, EtcdDatastore, KvPair, TxnOp, Watch,
};
use common::{Ctl, text};

/// `count` profiles, each with rules, tags and labels (three keys).
fn profiles(count: usize) -> String {
    (0..count)
        .map(|n| {
            format!(
                "---\napiVersion: projectcalico.org/v1\nkind: profile\nmetadata: {{name: p{n}}}\n\
                 spec: {{inbound_rules: [{{action: allow, src_tag: p{n}}}], tags: [p{n}], \
                 labels: {{n: \"{n}\"}}}}\n"
            )
        })
        .collect()
}

#[test]
fn a_file_is_written_in_transactions_of_whole_resources_up_to_the_limit() {
    let ctl = Ctl::start();
    let file = profiles(100);
    // 30 operations per transaction: 10 profiles (3 compares, 3 writes each) per transaction.
    let before = ctl.revision();
    let out = ctl.ok(&["create", "-f", "-", "--max-txn-ops", "30"], &file);
    assert_eq!(out.lines().count(), 100);
    assert!(out.lines().all(|line| line.ends_with(" created")), "{out}");
    assert_eq!(ctl.revision(), before + 10, "ten transactions");
    assert_eq!(ctl.keys("/calico/v1/policy/profile/").len(), 300);

    // Unchanged: nothing is written at all.
    let before = ctl.revision();
    let out = ctl.ok(&["apply", "-f", "-"], &file);
    assert!(
        out.lines().all(|line| line.ends_with(" unchanged")),
        "{out}"
    );
    assert_eq!(ctl.revision(), before);

    // etcd's default limit (128): 42 profiles per transaction.
    let before = ctl.revision();
    let out = ctl.ok(&["delete", "-f", "-"], &file);
    assert!(out.lines().all(|line| line.ends_with(" deleted")), "{out}");
    assert_eq!(ctl.revision(), before + 3, "100 profiles in 42 + 42 + 16");
    assert!(ctl.keys("/calico/").is_empty());

    // More than etcd allows: refused by etcd, nothing written, and the flag named.
    let stderr = ctl.fails(&["create", "-f", "-", "--max-txn-ops", "300"], &file);
    assert!(
        stderr.contains("too many operations")
            && stderr.contains("give calicoctl --max-txn-ops with etcd's value")
            && stderr.contains("nothing was written"),
        "{stderr}"
    );
    assert!(ctl.keys("/calico/").is_empty());
}

/// The real datastore, with another writer that creates `key` just before transaction
/// number `at` (counted from 1) of the command.
struct AnotherWriter {
    store: EtcdDatastore,
    transactions: AtomicUsize,
    at: usize,
    key: String,
}

#[async_trait]
impl Datastore for AnotherWriter {
    async fn get(&self, key: &str) -> Result<Option<KvPair>, DatastoreError> {
        self.store.get(key).await
    }

    async fn list(&self, prefix: &str) -> Result<Vec<KvPair>, DatastoreError> {
        self.store.list(prefix).await
    }

    async fn put(&self, key: &str, value: &str) -> Result<i64, DatastoreError> {
        self.store.put(key, value).await
    }

    async fn delete(&self, key: &str) -> Result<bool, DatastoreError> {
        self.store.delete(key).await
    }

    async fn delete_prefix(&self, prefix: &str) -> Result<u64, DatastoreError> {
        self.store.delete_prefix(prefix).await
    }

    async fn transaction(
        &self,
        compares: &[Compare],
        ops: &[TxnOp],
    ) -> Result<bool, DatastoreError> {
        if self.transactions.fetch_add(1, Ordering::SeqCst) + 1 == self.at {
            self.store.put(&self.key, r#"["theirs"]"#).await?;
        }
        self.store.transaction(compares, ops).await
    }

    async fn watch(&self, prefix: &str) -> Result<Watch, DatastoreError> {
        self.store.watch(prefix).await
    }

    async fn resume_watch(
        &self,
        prefix: &str,
        known: Vec<KvPair>,
        revision: i64,
    ) -> Result<Watch, DatastoreError> {
        self.store.resume_watch(prefix, known, revision).await
    }
}

#[tokio::test]
async fn a_conflict_in_one_transaction_leaves_those_before_it_written_and_says_so() {
    let ctl = Ctl::start();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("profiles.yaml");
    std::fs::write(&path, profiles(100)).unwrap();
    let store = EtcdDatastore::connect(EtcdConfig {
        endpoints: vec![ctl.etcd.endpoint()],
        ..EtcdConfig::default()
    })
    .await
    .unwrap();
    // Transactions of 42 profiles: p0-p41, p42-p83, p84-p99. Another writer creates p50's tags
    // (which the second transaction expects absent) just before it.
    let writer = AnotherWriter {
        store,
        transactions: AtomicUsize::new(0),
        at: 2,
        key: "/calico/v1/policy/profile/p50/tags".to_owned(),
    };
    let args = FileArgs {
        filename: path,
        txn: TxnArgs { max_txn_ops: 128 },
    };
    let mut out = Vec::new();
    let error = calico_ctl::commands::resource::write(&writer, &args, Mode::Create, &mut out)
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "transaction 2 of 3 (profile \"p42\" to profile \"p83\") changed while this command ran \
         (another writer): the 42 resources before it were done (listed above); documents 43 to \
         84 and the 16 after them were not written; run the command again"
    );
    let listed: Vec<String> = (0..42)
        .map(|n| format!("profile \"p{n}\" created"))
        .collect();
    assert_eq!(text(&out).lines().collect::<Vec<_>>(), listed);
    // In etcd: exactly the first transaction's 42 profiles, and the other writer's key.
    let mut expected: Vec<String> = (0..42)
        .flat_map(|n| {
            ["labels", "rules", "tags"].map(|k| format!("/calico/v1/policy/profile/p{n}/{k}"))
        })
        .chain(["/calico/v1/policy/profile/p50/tags".to_owned()])
        .collect();
    expected.sort();
    assert_eq!(ctl.keys("/calico/"), expected);

    // A conflict in the first transaction writes nothing.
    ctl.etcdctl(&["del", "--prefix", "/calico/"]);
    let writer = AnotherWriter {
        transactions: AtomicUsize::new(0),
        at: 1,
        key: "/calico/v1/policy/profile/p10/tags".to_owned(),
        ..writer
    };
    let mut out = Vec::new();
    let error = calico_ctl::commands::resource::write(&writer, &args, Mode::Apply, &mut out)
        .await
        .unwrap_err();
    assert!(
        error.to_string().starts_with(
            "transaction 1 of 3 (profile \"p0\" to profile \"p41\") changed while this command \
             ran (another writer): nothing was written; documents 1 to 42 and the 58 after them \
             were not written"
        ),
        "{error}"
    );
    assert!(out.is_empty());
    assert_eq!(ctl.keys("/calico/"), ["/calico/v1/policy/profile/p10/tags"]);
}
