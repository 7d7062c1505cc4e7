//! Calico's IPAM semantics against a real etcd: the free-address order, strict affinity on
//! every way of assigning, empty blocks of no host deleted, and the IPAM config
//! (`strict_affinity`, `auto_allocate_blocks`).

mod common;

use std::collections::BTreeMap;

use calico_datastore::Datastore;
use calico_ipam::{AffinityOutcome, IpamError, IpamSettings};
use common::{affinity_key, block_key, cluster, ip, request};

#[tokio::test]
async fn a_released_address_is_handed_out_again_last() {
    let c = cluster(&["10.80.0.0/30"]).await; // one block of four
    let assign = |handle: &'static str, n: usize| {
        let ipam = c.ipam.clone();
        async move {
            let got = ipam.auto_assign(&request("node1", handle, n, 0)).await;
            got.unwrap().ipv4
        }
    };
    assert_eq!(assign("a", 1).await, [ip("10.80.0.0")]);
    c.ipam.release_by_handle("a").await.unwrap();
    // Not 10.80.0.0 again: it went to the back of the free list.
    assert_eq!(assign("b", 1).await, [ip("10.80.0.1")]);
    assert_eq!(
        c.block("10.80.0.0/30").await.unwrap().unallocated,
        Some(vec![2, 3, 0])
    );
    c.ipam.release_ips(&[ip("10.80.0.1")]).await.unwrap();
    assert_eq!(
        assign("c", 3).await,
        [ip("10.80.0.2"), ip("10.80.0.3"), ip("10.80.0.0")]
    );
    assert_eq!(assign("d", 1).await, [ip("10.80.0.1")]);
}

#[tokio::test]
async fn strict_affinity_in_the_config_refuses_an_address_in_another_hosts_block() {
    let c = cluster(&["10.81.0.0/24"]).await;
    let a = c
        .ipam
        .auto_assign(&request("node-a", "a", 1, 0))
        .await
        .unwrap();
    let block = ipnet::IpNet::new(a.ipv4[0], 26).unwrap().trunc();
    let other = block.hosts().nth(9).unwrap();
    // Without strict affinity an explicit address in another host's block is fine (1.4 too).
    let none = BTreeMap::new();
    c.ipam
        .assign_ip(other, "b1", &none, "node-b")
        .await
        .unwrap();
    c.ipam.release_ips(&[other]).await.unwrap();
    // With it, no.
    c.set_config(r#"{"strict_affinity": true}"#).await;
    let error = c
        .ipam
        .assign_ip(other, "b2", &none, "node-b")
        .await
        .unwrap_err();
    assert!(matches!(error, IpamError::InUse { .. }), "{error:?}");
    assert_eq!(
        error.to_string(),
        format!(
            "{other} cannot be assigned: block {block} is affine to host node-a and \
             strict_affinity is true in /calico/ipam/v2/config, so host node-b may not assign \
             from it"
        )
    );
    c.ipam
        .assign_ip(other, "a2", &none, "node-a")
        .await
        .unwrap();
}

#[tokio::test]
async fn an_empty_block_of_no_host_is_deleted_with_its_last_address() {
    let c = cluster(&["10.82.0.0/24"]).await;
    let got = c
        .ipam
        .auto_assign(&request("gone", "w1", 2, 0))
        .await
        .unwrap();
    let cidr = ipnet::IpNet::new(got.ipv4[0], 26).unwrap().trunc();
    let outcome = c.ipam.release_affinity(cidr, "gone").await.unwrap();
    assert_eq!(outcome, AffinityOutcome::Released);
    let block = c.block(&cidr.to_string()).await.unwrap();
    assert_eq!(block.host(), None);
    // One address by address, the other by handle: the block goes with the last one.
    c.ipam.release_ips(&got.ipv4[..1]).await.unwrap();
    assert!(c.block(&cidr.to_string()).await.is_some());
    c.ipam.release_by_handle("w1").await.unwrap();
    assert_eq!(c.block(&cidr.to_string()).await, None);
    assert!(
        c.keys("/calico/ipam/v2/")
            .await
            .iter()
            .all(|k| !k.contains("block"))
    );
}

/// `auto_allocate_blocks` false is valid only with `strict_affinity` (Calico 1.4's rule), so a
/// host then assigns only from the blocks an operator claimed for it.
#[tokio::test]
async fn without_auto_allocate_blocks_a_host_assigns_only_from_blocks_claimed_for_it() {
    let c = cluster(&["10.83.0.0/24"]).await;
    let a_block: ipnet::IpNet = "10.83.0.64/26".parse().unwrap();
    let claimed = c.ipam.claim_affinity(a_block, "node-a").await.unwrap();
    assert_eq!(claimed, AffinityOutcome::Claimed);
    c.set_config(r#"{"auto_allocate_blocks": false, "strict_affinity": true}"#)
        .await;
    let got = c
        .ipam
        .auto_assign(&request("node-a", "a", 1, 0))
        .await
        .unwrap();
    assert!(a_block.contains(&got.ipv4[0]), "{got:?}");
    // A host without a block gets nothing, and is told why; it claims nothing.
    let error = c
        .ipam
        .auto_assign(&request("node-c", "c", 1, 0))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains(
            "the host's blocks are full, auto_allocate_blocks is false (no new block) and \
             strict affinity forbids borrowing"
        ) && error.contains("calicoctl ipam block claim"),
        "{error}"
    );
    assert_eq!(
        c.ipam.all_blocks().await.unwrap().len(),
        1,
        "no block claimed"
    );
    assert!(c.keys("/calico/ipam/v2/host/node-c/").await.is_empty());
    // Once an operator claims a block for it, it assigns from there.
    let c_block: ipnet::IpNet = "10.83.0.128/26".parse().unwrap();
    c.ipam.claim_affinity(c_block, "node-c").await.unwrap();
    let got = c
        .ipam
        .auto_assign(&request("node-c", "c", 1, 0))
        .await
        .unwrap();
    assert!(c_block.contains(&got.ipv4[0]), "{got:?}");
}

#[tokio::test]
async fn the_config_is_validated_as_calico_1_4_did_and_may_change_while_blocks_exist() {
    let c = cluster(&["10.84.0.0/26"]).await; // one block
    assert_eq!(c.ipam.settings().await.unwrap(), IpamSettings::default());
    let both_off = IpamSettings {
        strict_affinity: false,
        auto_allocate_blocks: false,
    };
    let error = c
        .ipam
        .set_settings(&both_off)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("auto_allocate_blocks: cannot be false while strict_affinity is false"),
        "{error}"
    );
    assert_eq!(
        c.json("/calico/ipam/v2/config").await,
        None,
        "nothing written"
    );
    c.set_config(r#"{"strict_affinity": "yes"}"#).await;
    let error = c.ipam.settings().await.unwrap_err().to_string();
    assert!(
        error.contains("strict_affinity: expected true or false, found \"yes\""),
        "{error}"
    );
    c.set_config(r#"{"strictAffinity": true}"#).await;
    let error = c.ipam.settings().await.unwrap_err().to_string();
    assert!(error.contains("strictAffinity: unknown field"), "{error}");

    // Blocks exist, and the config changes anyway: strict affinity applies at once.
    c.ipam.set_settings(&IpamSettings::default()).await.unwrap();
    c.ipam
        .auto_assign(&request("node-a", "a", 1, 0))
        .await
        .unwrap();
    let strict = IpamSettings {
        strict_affinity: true,
        auto_allocate_blocks: true,
    };
    c.ipam.set_settings(&strict).await.unwrap();
    assert_eq!(
        c.json("/calico/ipam/v2/config").await.unwrap(),
        serde_json::json!({"auto_allocate_blocks": true, "strict_affinity": true})
    );
    let error = c
        .ipam
        .auto_assign(&request("node-b", "b", 1, 0))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("strict affinity forbids borrowing"),
        "{error}"
    );
    // node-a's block, created before the change, is untouched and still its.
    assert!(c.json(&block_key("10.84.0.0/26")).await.is_some());
    assert!(
        c.store
            .get(&affinity_key("node-a", "10.84.0.0/26"))
            .await
            .unwrap()
            .is_some()
    );
}
