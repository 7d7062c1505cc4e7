//! IPAM against a real etcd: what an operator sees in the keys after assigning and releasing,
//! the error cases, and many allocators racing on several hosts.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::Arc;

use calico_datastore::Datastore;
use calico_ipam::IpamError;
use calico_model::Key;
use common::{add_pool, cluster, ip, request};
use ipnet::IpNet;

#[tokio::test]
async fn a_host_claims_an_affine_block_and_fills_it_before_claiming_another() {
    let c = cluster(&["10.20.0.0/24", "fd00:20::/120"]).await;
    let first = c
        .ipam
        .auto_assign(&request("node1", "h1", 2, 1))
        .await
        .unwrap();
    assert_eq!(first.ipv4.len(), 2);
    assert_eq!(first.ipv6.len(), 1);
    let block4 = IpNet::new(first.ipv4[0], 26).unwrap().trunc();
    assert!(first.ipv4.iter().all(|a| block4.contains(a)), "{first:?}");
    // The seed's keys: an affine block, the host's affinity, the handle counting both.
    let block = c.block(&block4.to_string()).await.expect("block written");
    assert_eq!(block.affinity.as_deref(), Some("host:node1"));
    assert_eq!(block.attributes[0].primary.as_deref(), Some("h1"));
    assert_eq!(
        block.attributes[0].secondary.as_ref().unwrap()["container"],
        "h1"
    );
    let affinities = c.keys("/calico/ipam/v2/host/node1/ipv4/block/").await;
    assert_eq!(
        affinities,
        [Key::BlockAffinity {
            hostname: "node1".into(),
            cidr: block4
        }
        .to_string()]
    );
    let handle = c.handle("h1").await.expect("handle written");
    assert_eq!(handle.block[&block4], 2);
    assert_eq!(
        handle.block.len(),
        2,
        "one IPv4 and one IPv6 block: {handle:?}"
    );
    let block6 = IpNet::new(first.ipv6[0], 122).unwrap().trunc();
    assert_eq!(handle.block[&block6], 1);

    // 62 more fill the /26; the 63rd needs a second block of the same host.
    let more = c
        .ipam
        .auto_assign(&request("node1", "h2", 63, 0))
        .await
        .unwrap();
    let blocks: BTreeSet<IpNet> = more
        .ipv4
        .iter()
        .map(|a| IpNet::new(*a, 26).unwrap().trunc())
        .collect();
    assert_eq!(blocks.len(), 2, "{blocks:?}");
    assert!(blocks.contains(&block4));
    assert_eq!(
        c.keys("/calico/ipam/v2/host/node1/ipv4/block/").await.len(),
        2
    );
    let all: BTreeSet<IpAddr> = first.ipv4.iter().chain(&more.ipv4).copied().collect();
    assert_eq!(all.len(), 65, "an address was handed out twice");
}

#[tokio::test]
async fn release_by_address_and_by_handle_frees_and_updates_the_handle() {
    let c = cluster(&["10.21.0.0/24"]).await;
    let got = c
        .ipam
        .auto_assign(&request("node1", "h1", 3, 0))
        .await
        .unwrap();
    let freed = c.ipam.release_ips(&got.ipv4[..1]).await.unwrap();
    assert_eq!(freed, [(got.ipv4[0], Some("h1".to_owned()))]);
    let block = IpNet::new(got.ipv4[0], 26).unwrap().trunc();
    assert_eq!(c.handle("h1").await.unwrap().block[&block], 2);
    assert_eq!(c.ipam.ip_info(got.ipv4[0]).await.unwrap(), None);
    let info = c
        .ipam
        .ip_info(got.ipv4[1])
        .await
        .unwrap()
        .expect("assigned");
    assert_eq!(info.primary.as_deref(), Some("h1"));

    // Releasing a free address changes nothing.
    assert!(c.ipam.release_ips(&got.ipv4[..1]).await.unwrap().is_empty());

    let mut freed = c.ipam.release_by_handle("h1").await.unwrap();
    freed.sort();
    assert_eq!(freed, got.ipv4[1..]);
    assert_eq!(c.handle("h1").await, None, "the handle record is gone");
    // Idempotent: a second release (a repeated CNI DEL) finds nothing and succeeds.
    assert!(c.ipam.release_by_handle("h1").await.unwrap().is_empty());
    // The empty block keeps its affinity until the host gives it up.
    assert!(c.block(&block.to_string()).await.is_some());
    assert_eq!(
        c.ipam.release_empty_affinities("node1").await.unwrap(),
        [block]
    );
    assert_eq!(c.block(&block.to_string()).await, None);
    assert!(c.keys("/calico/ipam/v2/host/").await.is_empty());
}

#[tokio::test]
async fn a_specific_address_is_assigned_once_and_only_inside_an_enabled_pool() {
    let c = cluster(&["10.22.0.0/24"]).await;
    let attrs = BTreeMap::new();
    c.ipam
        .assign_ip(ip("10.22.0.77"), "static", &attrs, "node2")
        .await
        .unwrap();
    let block = c
        .block("10.22.0.64/26")
        .await
        .expect("the block was claimed");
    assert_eq!(block.host(), Some("node2"));
    let again = c
        .ipam
        .assign_ip(ip("10.22.0.77"), "other", &attrs, "node2")
        .await;
    match again {
        Err(e @ IpamError::InUse { .. }) => {
            assert_eq!(
                e.to_string(),
                "10.22.0.77 is already assigned to handle static"
            )
        }
        other => panic!("expected InUse, got {other:?}"),
    }
    let outside = c
        .ipam
        .assign_ip(ip("10.99.0.1"), "x", &attrs, "node2")
        .await;
    assert!(
        matches!(outside, Err(IpamError::NotInPool { .. })),
        "{outside:?}"
    );
    add_pool(c.store.as_ref(), "10.23.0.0/24", true).await;
    let disabled = c
        .ipam
        .assign_ip(ip("10.23.0.5"), "x", &attrs, "node2")
        .await;
    assert!(
        disabled
            .as_ref()
            .is_err_and(|e| e.to_string().contains("pool 10.23.0.0/24 is disabled")),
        "{disabled:?}"
    );
    // An automatic assignment on another host borrows nothing here: it claims its own block.
    let got = c
        .ipam
        .auto_assign(&request("node3", "h3", 1, 0))
        .await
        .unwrap();
    assert!(!IpNet::from(ip("10.22.0.64")).contains(&got.ipv4[0]));
    assert_ne!(
        IpNet::new(got.ipv4[0], 26).unwrap().trunc().to_string(),
        "10.22.0.64/26"
    );
}

#[tokio::test]
async fn disabled_pools_give_nothing_and_a_short_pool_fails_without_leaking() {
    let c = cluster(&[]).await;
    add_pool(c.store.as_ref(), "10.30.0.0/24", true).await;
    let none = c.ipam.auto_assign(&request("node1", "h", 1, 0)).await;
    assert!(
        none.as_ref()
            .is_err_and(|e| e.to_string().contains("no enabled IPv4 pool")),
        "{none:?}"
    );
    // A /30 pool is one block of 4 addresses.
    add_pool(c.store.as_ref(), "10.31.0.0/30", false).await;
    let mut asked = request("node1", "big", 5, 0);
    asked.ipv4_pools = vec!["10.31.0.0/30".parse().unwrap()];
    let error = c.ipam.auto_assign(&asked).await.unwrap_err();
    let text = error.to_string();
    assert!(
        text.contains("asked for 5 IPv4") && text.contains("only 4"),
        "{text}"
    );
    assert_eq!(c.handle("big").await, None, "nothing is left assigned");
    // The block the failed request claimed is given up again: block and affinity are gone.
    assert_eq!(c.block("10.31.0.0/30").await, None);
    assert!(c.keys("/calico/ipam/v2/host/").await.is_empty());
    // Naming a pool that does not exist, or a disabled one, names the field.
    asked.ipv4_pools = vec!["10.32.0.0/24".parse().unwrap()];
    let error = c.ipam.auto_assign(&asked).await.unwrap_err().to_string();
    assert_eq!(
        error,
        "ipv4_pools: 10.32.0.0/24 is not a configured IP pool"
    );
    asked.ipv4_pools = vec!["10.30.0.0/24".parse().unwrap()];
    let error = c.ipam.auto_assign(&asked).await.unwrap_err().to_string();
    assert!(
        error.starts_with("ipv4_pools: pool 10.30.0.0/24 is disabled"),
        "{error}"
    );
    // IPv4 succeeded but IPv6 cannot: the IPv4 addresses are released again.
    let both = c.ipam.auto_assign(&request("node1", "dual", 1, 1)).await;
    let error = both.unwrap_err().to_string();
    assert!(error.contains("IPv6") || error.contains("ipv6"), "{error}");
    assert_eq!(c.handle("dual").await, None);
    // The IPv4 block it claimed for that is given up too.
    assert_eq!(c.block("10.31.0.0/30").await, None);
    assert!(c.keys("/calico/ipam/v2/host/").await.is_empty());
}

#[tokio::test]
async fn borrowing_happens_only_when_no_block_is_left_and_never_with_strict_affinity() {
    let c = cluster(&["10.40.0.0/26"]).await; // exactly one block
    let a = c
        .ipam
        .auto_assign(&request("node-a", "a", 1, 0))
        .await
        .unwrap();
    let b = c
        .ipam
        .auto_assign(&request("node-b", "b", 1, 0))
        .await
        .unwrap();
    // node-b could claim nothing, so it borrowed from node-a's block.
    let block = c.block("10.40.0.0/26").await.unwrap();
    assert_eq!(block.host(), Some("node-a"));
    assert!(block.cidr.contains(&b.ipv4[0]) && a.ipv4 != b.ipv4);
    assert!(c.keys("/calico/ipam/v2/host/node-b/").await.is_empty());

    c.store
        .put("/calico/ipam/v2/config", r#"{"strict_affinity": true}"#)
        .await
        .unwrap();
    let refused = c.ipam.auto_assign(&request("node-b", "b2", 1, 0)).await;
    let text = refused.unwrap_err().to_string();
    assert!(text.contains("strict affinity forbids borrowing"), "{text}");
    // node-a still assigns from its own block.
    c.ipam
        .auto_assign(&request("node-a", "a2", 1, 0))
        .await
        .unwrap();
}

#[tokio::test]
async fn check_reports_leaks_and_fix_releases_them() {
    let c = cluster(&["10.50.0.0/24"]).await;
    let used = c
        .ipam
        .auto_assign(&request("node1", "used", 1, 0))
        .await
        .unwrap();
    let leaked = c
        .ipam
        .auto_assign(&request("node1", "leaked", 2, 0))
        .await
        .unwrap();
    let endpoint = serde_json::json!({
        "state": "active", "name": "cali0123456789a", "profile_ids": [],
        "ipv4_nets": [format!("{}/32", used.ipv4[0])], "ipv6_nets": []
    });
    c.store
        .put(
            "/calico/v1/host/node1/workload/cni/c1/endpoint/eth0",
            &endpoint.to_string(),
        )
        .await
        .unwrap();
    // A handle record that disagrees with the blocks.
    let block = IpNet::new(used.ipv4[0], 26).unwrap().trunc();
    let wrong = serde_json::json!({"id": "used", "block": {block.to_string(): 7}});
    c.store
        .put("/calico/ipam/v2/handle/used", &wrong.to_string())
        .await
        .unwrap();

    let report = c.ipam.check().await.unwrap();
    let mut leaks: Vec<IpAddr> = report.leaks.iter().map(|l| l.ip).collect();
    leaks.sort();
    assert_eq!(leaks, leaked.ipv4);
    assert_eq!(report.handle_mismatches.len(), 1);
    assert_eq!(report.handle_mismatches[0].handle, "used");

    let fixed = c.ipam.fix(&report).await.unwrap();
    assert_eq!((fixed.released, fixed.handles_rewritten), (2, 1));
    assert!(c.ipam.check().await.unwrap().is_clean());
    assert_eq!(c.handle("used").await.unwrap().block[&block], 1);
    assert_eq!(c.handle("leaked").await, None);
}

/// 16 allocators on 4 hosts make and release 2,000 allocations (one IPv4 and one IPv6 address
/// each). The IPv4 pool has two blocks for four hosts, so two hosts must borrow: no address is
/// ever held twice, and afterwards the blocks, the handles and the affinities agree.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_allocators_never_hand_out_an_address_twice() {
    const ALLOCATORS: usize = 16;
    const HOSTS: usize = 4;
    const ALLOCATIONS: usize = 2_000;
    let c = cluster(&["10.60.0.0/25", "fd00:60::/118"]).await;
    let held: Arc<std::sync::Mutex<BTreeMap<IpAddr, String>>> = Arc::default();
    let mut tasks = Vec::new();
    for worker in 0..ALLOCATORS {
        let ipam = c.ipam.clone();
        let held = held.clone();
        tasks.push(tokio::spawn(async move {
            let host = format!("host{}", worker % HOSTS);
            let mut mine: Vec<(String, Vec<IpAddr>)> = Vec::new();
            for n in 0..ALLOCATIONS / ALLOCATORS {
                let handle = format!("w{worker}-{n}");
                let got = ipam
                    .auto_assign(&request(&host, &handle, 1, 1))
                    .await
                    .unwrap_or_else(|e| panic!("{handle}: {e}"));
                let ips: Vec<IpAddr> = got.ipv4.iter().chain(&got.ipv6).copied().collect();
                {
                    let mut held = held.lock().unwrap();
                    for ip in &ips {
                        if let Some(other) = held.insert(*ip, handle.clone()) {
                            panic!("{ip} handed to {handle} while {other} held it");
                        }
                    }
                }
                mine.push((handle, ips));
                // Keep 6 per allocator (at most 112 of the 128 IPv4 addresses held at once);
                // release the oldest, alternating the two ways.
                if mine.len() > 6 {
                    let (old, ips) = mine.remove(0);
                    {
                        let mut held = held.lock().unwrap();
                        for ip in &ips {
                            held.remove(ip);
                        }
                    }
                    if n % 2 == 0 {
                        let freed = ipam.release_by_handle(&old).await.unwrap();
                        assert_eq!(freed.len(), 2, "{old}");
                    } else {
                        let freed = ipam.release_ips(&ips).await.unwrap();
                        assert_eq!(freed.len(), 2, "{old}");
                    }
                }
            }
            mine.len()
        }));
    }
    let mut kept = 0;
    for task in tasks {
        kept += task.await.expect("allocator task");
    }
    let held = held.lock().unwrap().clone();
    assert_eq!(held.len(), kept * 2);

    // The datastore says the same: every held address assigned to its handle, nothing else.
    let blocks = c.ipam.all_blocks().await.unwrap();
    let mut assigned = BTreeMap::new();
    for block in &blocks {
        for (ip, attribute) in calico_ipam::block::allocated(block) {
            assigned.insert(ip, attribute.primary.clone().unwrap());
        }
    }
    assert_eq!(assigned, held);
    let report = c.ipam.check().await.unwrap();
    assert!(
        report.handle_mismatches.is_empty(),
        "{:?}",
        report.handle_mismatches
    );
    assert!(
        report.stale_affinities.is_empty(),
        "{:?}",
        report.stale_affinities
    );
    // Without endpoints every held address counts as unused; after releasing them, none.
    assert_eq!(report.leaks.len(), held.len());
    let handles: BTreeSet<String> = held.values().cloned().collect();
    for handle in &handles {
        c.ipam.release_by_handle(handle).await.unwrap();
    }
    let report = c.ipam.check().await.unwrap();
    assert!(report.is_clean(), "{report:?}");
    assert!(c.keys("/calico/ipam/v2/handle/").await.is_empty());
}
