//! Blocks, handles, affinities and the config exactly as Calico 1.4 (libcalico 0.15) writes
//! them (tests/fixtures/calico-1.4/), in a real etcd: read with their meaning, rewritten in
//! their own dialect (golden files `*.after-*.json`), and bad values reported by `check`
//! without breaking anything else.

mod common;

use std::collections::BTreeMap;

use calico_datastore::Datastore;
use calico_ipam::IpamError;
use common::{affinity_key, assert_golden, block_key, cluster, ip, request};

/// The three 1.4 blocks of pool 10.65.0.0/24, their handles, node1's and node2's affinities
/// and the config, as libcalico 0.15 leaves them.
async fn calico_1_4_cluster() -> common::Cluster {
    let c = cluster(&["10.65.0.0/24"]).await;
    for (cidr, name) in [
        ("10.65.0.0/26", "no-host-block"),
        ("10.65.0.64/26", "strict-block"),
        ("10.65.0.128/26", "pre-0.15-block"),
    ] {
        let fixture = format!("calico-1.4/{name}.json");
        c.put_fixture(&block_key(cidr), &fixture).await;
    }
    for (handle, name) in [
        ("ba11f1de-fc4d-46fd-9f15-424f4ef05a3a", "handle-ba11f1de"),
        ("node1-web", "handle-node1-web"),
        ("old", "handle-old"),
    ] {
        let key = format!("/calico/ipam/v2/handle/{handle}");
        c.put_fixture(&key, &format!("calico-1.4/{name}.json"))
            .await;
    }
    c.store
        .put(&affinity_key("node1", "10.65.0.64/26"), "")
        .await
        .unwrap();
    c.store
        .put(&affinity_key("node2", "10.65.0.128/26"), "")
        .await
        .unwrap();
    c.put_fixture("/calico/ipam/v2/config", "calico-1.4/config.json")
        .await;
    c
}

#[tokio::test]
async fn calico_1_4_blocks_read_with_their_meaning_and_check_finds_nothing_wrong() {
    let c = calico_1_4_cluster().await;
    let report = c.ipam.check().await.unwrap();
    assert!(report.invalid.is_empty(), "{:?}", report.invalid);
    assert!(report.handle_mismatches.is_empty(), "{report:?}");
    assert!(report.stale_affinities.is_empty(), "{report:?}");

    let blocks: BTreeMap<String, _> = c
        .ipam
        .all_blocks()
        .await
        .unwrap()
        .into_iter()
        .map(|b| (b.cidr.to_string(), b))
        .collect();
    assert_eq!(blocks.len(), 3);
    // `"affinity": ""` is a block of no host; `strict_affinity` is the strict flag.
    assert_eq!(blocks["10.65.0.0/26"].host(), None);
    assert!(!blocks["10.65.0.0/26"].strict_affinity);
    assert_eq!(blocks["10.65.0.64/26"].host(), Some("node1"));
    assert!(blocks["10.65.0.64/26"].strict_affinity);
    // A block from before libcalico 0.15 gets its free ordinals, lowest first.
    let old = &blocks["10.65.0.128/26"];
    assert_eq!(old.unallocated.as_ref().unwrap()[..3], [1, 3, 4]);

    // `handle_id` is the handle; secondary values need not be strings.
    let info = c.ipam.ip_info(ip("10.65.0.9")).await.unwrap().unwrap();
    assert_eq!(
        info.primary.as_deref(),
        Some("ba11f1de-fc4d-46fd-9f15-424f4ef05a3a")
    );
    let details = info.secondary.unwrap();
    assert_eq!(details["container-id"], "ba11f1de");
    assert_eq!(details["rack"], "1");
    // An address 1.4 assigned without a handle.
    let info = c.ipam.ip_info(ip("10.65.0.5")).await.unwrap().unwrap();
    assert_eq!(info.primary, None);
    let settings = c.ipam.settings().await.unwrap();
    assert!(settings.auto_allocate_blocks && !settings.strict_affinity);
}

#[tokio::test]
async fn rewritten_calico_1_4_blocks_keep_their_dialect_and_order() {
    let c = calico_1_4_cluster().await;
    // node1 fills its strict block: Calico 1.4's `unallocated` order, 1.4's spellings kept.
    let got = c
        .ipam
        .auto_assign(&request("node1", "node1-db", 1, 0))
        .await
        .unwrap();
    assert_eq!(got.ipv4, [ip("10.65.0.66")]);
    let stored = c.json(&block_key("10.65.0.64/26")).await.unwrap();
    assert_golden(&stored, "calico-1.4/strict-block.after-assign.json");

    // node2's block from before 0.15: lowest free first, and it gains `unallocated`.
    let got = c
        .ipam
        .auto_assign(&request("node2", "node2-db", 1, 0))
        .await
        .unwrap();
    assert_eq!(got.ipv4, [ip("10.65.0.129")]);
    let stored = c.json(&block_key("10.65.0.128/26")).await.unwrap();
    assert_golden(&stored, "calico-1.4/pre-0.15-block.after-assign.json");

    // Releasing in the block of no host: the address goes to the back of `unallocated`, the
    // attribute with a non-string secondary value is kept byte for byte, `""` stays `""`.
    let freed = c.ipam.release_ips(&[ip("10.65.0.5")]).await.unwrap();
    assert_eq!(freed, [(ip("10.65.0.5"), None)]);
    let stored = c.json(&block_key("10.65.0.0/26")).await.unwrap();
    assert_golden(&stored, "calico-1.4/no-host-block.after-release.json");

    // Its last address goes with its handle: an empty block of no host is deleted, and the
    // 1.4 handle record with it.
    let freed = c
        .ipam
        .release_by_handle("ba11f1de-fc4d-46fd-9f15-424f4ef05a3a")
        .await
        .unwrap();
    assert_eq!(freed, [ip("10.65.0.9")]);
    assert_eq!(c.json(&block_key("10.65.0.0/26")).await, None);
    assert_eq!(
        c.json("/calico/ipam/v2/handle/ba11f1de-fc4d-46fd-9f15-424f4ef05a3a")
            .await,
        None
    );
    // A host that needs a new block claims one as usual.
    let got = c
        .ipam
        .auto_assign(&request("node3", "node3-a", 1, 0))
        .await
        .unwrap();
    assert_eq!(c.keys("/calico/ipam/v2/host/node3/").await.len(), 1);
    assert!(!in_block(got.ipv4[0], "10.65.0.64/26"));
}

/// A used 1.4 block whose host gives it up (`ipam block release`, `ipam release --host-gone`,
/// `node remove`) keeps its addresses and is written back in 1.4's spelling: `"affinity": ""`
/// beside `strict_affinity` and `handle_id`, never our `null`.
#[tokio::test]
async fn a_used_calico_1_4_block_given_up_by_its_host_stays_in_1_4_spelling() {
    let c = calico_1_4_cluster().await;
    let cidr: ipnet::IpNet = "10.65.0.64/26".parse().unwrap();
    let outcome = c.ipam.release_affinity(cidr, "node1").await.unwrap();
    assert_eq!(outcome, calico_ipam::AffinityOutcome::Released);
    let stored = c.json(&block_key("10.65.0.64/26")).await.unwrap();
    assert_golden(&stored, "calico-1.4/strict-block.after-release.json");
    assert!(c.keys("/calico/ipam/v2/host/node1/").await.is_empty());

    // The same through a host that is gone: node2's block from before 0.15.
    let outcomes = c.ipam.release_host_affinities("node2", true).await.unwrap();
    assert_eq!(
        outcomes,
        [(
            "10.65.0.128/26".parse().unwrap(),
            calico_ipam::AffinityOutcome::Released
        )]
    );
    let stored = c.json(&block_key("10.65.0.128/26")).await.unwrap();
    assert_eq!(stored["affinity"], "", "{stored}");
    assert!(stored.get("strictAffinity").is_none(), "{stored}");
    // Read back, both are blocks of no host with their addresses.
    let report = c.ipam.check().await.unwrap();
    assert!(report.invalid.is_empty(), "{:?}", report.invalid);
}

#[tokio::test]
async fn a_strict_calico_1_4_block_is_neither_borrowed_from_nor_assigned_into_by_another_host() {
    let c = cluster(&["10.65.0.64/26"]).await; // one block: node1's strict one
    c.put_fixture(&block_key("10.65.0.64/26"), "calico-1.4/strict-block.json")
        .await;
    c.store
        .put(&affinity_key("node1", "10.65.0.64/26"), "")
        .await
        .unwrap();
    let error = c
        .ipam
        .auto_assign(&request("node2", "b", 1, 0))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("blocks with strict affinity (10.65.0.64/26 of host node1)"),
        "{error}"
    );
    let error = c
        .ipam
        .assign_ip(ip("10.65.0.70"), "b", &BTreeMap::new(), "node2")
        .await
        .unwrap_err();
    assert!(matches!(error, IpamError::InUse { .. }), "{error:?}");
    assert_eq!(
        error.to_string(),
        "10.65.0.70 cannot be assigned: block 10.65.0.64/26 is affine to host node1 and has \
         strict affinity (its strict_affinity flag), so host node2 may not assign from it"
    );
    // Its own host may.
    c.ipam
        .assign_ip(ip("10.65.0.70"), "a", &BTreeMap::new(), "node1")
        .await
        .unwrap();
}

#[tokio::test]
async fn values_an_older_calico_wrote_wrong_are_reported_by_check_and_break_nothing_else() {
    let c = calico_1_4_cluster().await;
    // A block whose affinity lacks `host:`, and a config no Calico accepts.
    let bad = common::fixture("calico-1.4/no-host-block.json")
        .replace(r#""affinity": """#, r#""affinity": "node9""#);
    c.store.put(&block_key("10.65.0.0/26"), &bad).await.unwrap();
    c.set_config(r#"{"auto_allocate_blocks": false, "strict_affinity": false}"#)
        .await;

    let report = c.ipam.check().await.unwrap();
    let lines: Vec<String> = report
        .invalid
        .iter()
        .map(|i| format!("{}: {}", i.key, i.reason))
        .collect();
    assert_eq!(
        lines,
        [
            "/calico/ipam/v2/config: auto_allocate_blocks: cannot be false while \
             strict_affinity is false (a host could neither claim a block nor borrow); set one \
             of them to true",
            "/calico/ipam/v2/assignment/ipv4/block/10.65.0.0-26: affinity: \"node9\" is not of \
             the form host:<hostname>",
        ]
    );
    assert!(report.invalid.iter().all(|i| !i.fix.is_empty()));
    // Assignment needs the config: the error names key and field.
    let error = c
        .ipam
        .auto_assign(&request("node2", "x", 1, 0))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with("/calico/ipam/v2/config holds an invalid value: auto_allocate_blocks:"),
        "{error}"
    );
    // Everything that does not need the bad values works.
    c.set_config(r#"{"auto_allocate_blocks": true, "strict_affinity": false}"#)
        .await;
    assert_eq!(c.ipam.all_blocks().await.unwrap().len(), 2);
    let got = c
        .ipam
        .auto_assign(&request("node3", "y", 1, 0))
        .await
        .unwrap();
    assert!(!in_block(got.ipv4[0], "10.65.0.0/26"), "{got:?}");
    c.ipam.release_by_handle("node1-web").await.unwrap();
    // A host whose own block is unreadable still assigns, from a new block.
    c.store
        .put(&affinity_key("node4", "10.65.0.0/26"), "")
        .await
        .unwrap();
    let got = c
        .ipam
        .auto_assign(&request("node4", "z", 1, 0))
        .await
        .unwrap();
    assert!(!in_block(got.ipv4[0], "10.65.0.0/26"), "{got:?}");
    // What the unreadable block holds is unknown: its affinity and the handle counting an
    // address in it are neither reported nor "repaired" away.
    let report = c.ipam.check().await.unwrap();
    assert!(report.stale_affinities.is_empty(), "{report:?}");
    assert!(report.handle_mismatches.is_empty(), "{report:?}");
    c.ipam.fix(&report).await.unwrap();
    let handle = "/calico/ipam/v2/handle/ba11f1de-fc4d-46fd-9f15-424f4ef05a3a";
    assert!(c.json(handle).await.is_some());
    let node4 = affinity_key("node4", "10.65.0.0/26");
    assert!(c.store.get(&node4).await.unwrap().is_some());
    // Releasing an address of the unreadable block names it.
    let error = c.ipam.release_ips(&[ip("10.65.0.9")]).await.unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("/calico/ipam/v2/assignment/ipv4/block/10.65.0.0-26 holds an invalid"),
        "{error}"
    );
}

fn in_block(ip: std::net::IpAddr, cidr: &str) -> bool {
    cidr.parse::<ipnet::IpNet>().unwrap().contains(&ip)
}
