//! Claiming and releasing one host's affinity to one block, and a gone host's affinities,
//! against a real etcd: the block's `affinity` and the host's key change together.

mod common;

use calico_datastore::Datastore;
use calico_ipam::AffinityOutcome;
use common::{affinity_key, cluster, request};
use ipnet::IpNet;

fn net(text: &str) -> IpNet {
    text.parse().unwrap()
}

#[tokio::test]
async fn one_block_is_claimed_and_released_with_its_key() {
    let c = cluster(&["10.90.0.0/24"]).await;
    let cidr = net("10.90.0.64/26");
    let key = affinity_key("node1", "10.90.0.64/26");
    assert_eq!(
        c.ipam.claim_affinity(cidr, "node1").await.unwrap(),
        AffinityOutcome::Claimed
    );
    assert_eq!(
        c.block("10.90.0.64/26").await.unwrap().host(),
        Some("node1")
    );
    assert!(c.store.get(&key).await.unwrap().is_some());
    assert_eq!(
        c.ipam.claim_affinity(cidr, "node1").await.unwrap(),
        AffinityOutcome::AlreadyClaimed
    );
    let refused = c.ipam.claim_affinity(cidr, "node2").await.unwrap();
    assert_eq!(
        refused,
        AffinityOutcome::Refused(
            "block 10.90.0.64/26 is affine to host node1; release it there first \
             (calicoctl ipam block release 10.90.0.64/26 --host node1)"
                .into()
        )
    );
    // node1 assigns from its claimed block first.
    let got = c
        .ipam
        .auto_assign(&request("node1", "w", 1, 0))
        .await
        .unwrap();
    assert!(cidr.contains(&got.ipv4[0]), "{got:?}");
    // Released while holding an address: kept, affine to no host, key gone.
    assert_eq!(
        c.ipam.release_affinity(cidr, "node1").await.unwrap(),
        AffinityOutcome::Released
    );
    assert_eq!(c.block("10.90.0.64/26").await.unwrap().host(), None);
    assert!(c.store.get(&key).await.unwrap().is_none());
    // A block of no host can be claimed (1.4 refused; we let the operator decide).
    assert_eq!(
        c.ipam.claim_affinity(cidr, "node2").await.unwrap(),
        AffinityOutcome::Claimed
    );
    c.ipam.release_by_handle("w").await.unwrap();
    // Released empty: deleted with its key.
    assert_eq!(
        c.ipam.release_affinity(cidr, "node2").await.unwrap(),
        AffinityOutcome::Deleted
    );
    assert_eq!(c.block("10.90.0.64/26").await, None);
    assert!(c.keys("/calico/ipam/v2/host/").await.is_empty());
}

#[tokio::test]
async fn what_is_not_a_block_of_an_enabled_pool_is_refused_with_the_reason() {
    let c = cluster(&["10.91.0.0/24"]).await;
    let refusal = |outcome| match outcome {
        AffinityOutcome::Refused(why) => why,
        other => panic!("expected a refusal, got {other:?}"),
    };
    let why = refusal(
        c.ipam
            .claim_affinity(net("10.91.0.0/25"), "h")
            .await
            .unwrap(),
    );
    assert_eq!(
        why,
        "10.91.0.0/25 is not a block of pool 10.91.0.0/24: its blocks are /26 (this address's \
         is 10.91.0.0/26)"
    );
    let why = refusal(
        c.ipam
            .claim_affinity(net("10.99.0.0/26"), "h")
            .await
            .unwrap(),
    );
    assert_eq!(why, "10.99.0.0/26 is in no configured IP pool");
    let why = refusal(
        c.ipam
            .release_affinity(net("10.91.0.0/26"), "h")
            .await
            .unwrap(),
    );
    assert_eq!(why, "block 10.91.0.0/26 does not exist");
    assert!(
        c.keys("/calico/")
            .await
            .iter()
            .all(|k| !k.contains("/ipam/v2/"))
    );
}

#[tokio::test]
async fn a_gone_host_gives_up_every_block_and_its_addresses_stay() {
    let c = cluster(&["10.92.0.0/24", "fd00:92::/120"]).await;
    let kept = c
        .ipam
        .auto_assign(&request("gone", "kept", 1, 1))
        .await
        .unwrap();
    let empty = net("10.92.0.192/26");
    c.ipam.claim_affinity(empty, "gone").await.unwrap();
    // Without --host-gone, only the empty block goes.
    assert_eq!(
        c.ipam.release_empty_affinities("gone").await.unwrap(),
        [empty]
    );
    assert_eq!(c.keys("/calico/ipam/v2/host/gone/").await.len(), 2);
    let mut outcomes = c.ipam.release_host_affinities("gone", true).await.unwrap();
    outcomes.sort_by_key(|(cidr, _)| *cidr);
    let expected: Vec<(IpNet, AffinityOutcome)> = [kept.ipv4[0], kept.ipv6[0]]
        .iter()
        .map(|ip| {
            let prefix = if ip.is_ipv4() { 26 } else { 122 };
            (
                IpNet::new(*ip, prefix).unwrap().trunc(),
                AffinityOutcome::Released,
            )
        })
        .collect();
    assert_eq!(outcomes, expected);
    assert!(c.keys("/calico/ipam/v2/host/").await.is_empty());
    // The addresses are still assigned to their handle, in blocks of no host.
    let mut held = c.ipam.addresses_of("kept").await.unwrap();
    held.sort();
    assert_eq!(held, [kept.ipv4[0], kept.ipv6[0]]);
    let blocks = c.ipam.all_blocks().await.unwrap();
    assert!(blocks.iter().all(|b| b.host().is_none()), "{blocks:?}");
    // Another host may now borrow from them, and nobody claims them by accident.
    let report = c.ipam.check().await.unwrap();
    assert!(report.stale_affinities.is_empty() && report.handle_mismatches.is_empty());
}
