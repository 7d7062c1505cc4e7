//! The per-host lanes and the hints against a real etcd: allocators of one host in one process
//! share transactions, processes (separate `Ipam`s, each with its own lanes and hints) stay
//! safe against each other, what another process changes is never hidden by a hint, and an
//! assignment whose caller stops waiting leaves nothing assigned.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use calico_datastore::{Datastore, WatchEvent};
use calico_ipam::Ipam;
use common::{add_pool, cluster, request};
use ipnet::IpNet;

fn block_of(ip: IpAddr) -> IpNet {
    let prefix = if ip.is_ipv4() { 26 } else { 122 };
    IpNet::new(ip, prefix).unwrap().trunc()
}

/// etcd's revision: every successful write or transaction moves it by one.
async fn revision(store: &dyn Datastore) -> i64 {
    store.put("/bench/marker", "").await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn allocators_of_one_host_in_one_process_share_transactions() {
    const ALLOCATORS: usize = 8;
    const EACH: usize = 10;
    let c = cluster(&["10.70.0.0/24"]).await;
    // The block exists first, so that every assignment below can be served together.
    c.ipam
        .auto_assign(&request("node1", "first", 1, 0))
        .await
        .unwrap();
    let before = revision(c.store.as_ref()).await;
    let mut tasks = Vec::new();
    for worker in 0..ALLOCATORS {
        let ipam = c.ipam.clone();
        tasks.push(tokio::spawn(async move {
            let mut got = Vec::new();
            for n in 0..EACH {
                let handle = format!("w{worker}-{n}");
                let assigned = ipam.auto_assign(&request("node1", &handle, 1, 0)).await;
                got.extend(assigned.unwrap().ipv4);
            }
            got
        }));
    }
    let mut all = BTreeSet::new();
    for task in tasks {
        for ip in task.await.unwrap() {
            assert!(all.insert(ip), "{ip} handed out twice");
        }
    }
    assert_eq!(all.len(), ALLOCATORS * EACH);
    // One write per batch, not one per assignment (the marker itself is one more).
    let writes = revision(c.store.as_ref()).await - before - 1;
    assert!(
        writes < (ALLOCATORS * EACH) as i64,
        "{writes} writes for {} assignments: none shared a transaction",
        ALLOCATORS * EACH
    );
    let report = c.ipam.check().await.unwrap();
    assert!(report.handle_mismatches.is_empty(), "{report:?}");
    assert_eq!(report.leaks.len(), all.len() + 1, "only the held addresses");
}

/// Two processes (two `Ipam`s over their own connections' worth of lanes and hints) with 8
/// allocators each on the same 2 hosts: no address is ever held twice, and afterwards blocks,
/// handles and affinities agree.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn processes_that_share_hosts_never_hand_out_an_address_twice() {
    const PER_PROCESS: usize = 8;
    const ALLOCATIONS: usize = 30;
    let c = cluster(&["10.71.0.0/25", "fd00:71::/120"]).await;
    let processes = [c.ipam.clone(), Ipam::new(c.store.clone())];
    let held: Arc<Mutex<BTreeMap<IpAddr, String>>> = Arc::default();
    let mut tasks = Vec::new();
    for (p, ipam) in processes.iter().enumerate() {
        for worker in 0..PER_PROCESS {
            let (ipam, held) = (ipam.clone(), held.clone());
            tasks.push(tokio::spawn(async move {
                let host = format!("host{}", worker % 2);
                let mut mine: Vec<(String, Vec<IpAddr>)> = Vec::new();
                for n in 0..ALLOCATIONS {
                    let handle = format!("p{p}-w{worker}-{n}");
                    let got = ipam.auto_assign(&request(&host, &handle, 1, 1)).await;
                    let got = got.unwrap_or_else(|e| panic!("{handle}: {e}"));
                    let ips: Vec<IpAddr> = got.ipv4.iter().chain(&got.ipv6).copied().collect();
                    for ip in &ips {
                        let mut held = held.lock().unwrap();
                        if let Some(other) = held.insert(*ip, handle.clone()) {
                            panic!("{ip} handed to {handle} while {other} held it");
                        }
                    }
                    mine.push((handle, ips));
                    if mine.len() > 3 {
                        let (old, ips) = mine.remove(0);
                        for ip in &ips {
                            held.lock().unwrap().remove(ip);
                        }
                        let freed = if n % 2 == 0 {
                            ipam.release_by_handle(&old).await.unwrap().len()
                        } else {
                            ipam.release_ips(&ips).await.unwrap().len()
                        };
                        assert_eq!(freed, 2, "{old}");
                    }
                }
            }));
        }
    }
    for task in tasks {
        task.await.expect("allocator task");
    }
    let held: Vec<IpAddr> = held.lock().unwrap().keys().copied().collect();
    assert_eq!(held.len(), 2 * PER_PROCESS * 3 * 2);
    let freed = processes[1].release_ips(&held).await.unwrap();
    assert_eq!(freed.len(), held.len());
    let report = c.ipam.check().await.unwrap();
    assert!(report.is_clean(), "{report:?}");
    assert!(c.keys("/calico/ipam/v2/handle/").await.is_empty());
}

#[tokio::test]
async fn what_another_process_changes_is_never_hidden_by_a_hint() {
    let c = cluster(&["10.72.0.0/24"]).await;
    let other = Ipam::new(c.store.clone());
    let first = c.ipam.auto_assign(&request("node1", "a1", 1, 0)).await;
    let first = block_of(first.unwrap().ipv4[0]);

    // The pool is disabled elsewhere: no assignment from its blocks.
    add_pool(c.store.as_ref(), "10.72.0.0/24", true).await;
    let refused = c.ipam.auto_assign(&request("node1", "a2", 1, 0)).await;
    let refused = refused.unwrap_err().to_string();
    assert!(refused.contains("no enabled IPv4 pool"), "{refused}");
    add_pool(c.store.as_ref(), "10.72.0.0/24", false).await;

    // The config is broken elsewhere: assignments say so.
    c.set_config(r#"{"auto_allocate_blocks": false, "strict_affinity": false}"#)
        .await;
    let refused = c.ipam.auto_assign(&request("node1", "a2", 1, 0)).await;
    let refused = refused.unwrap_err().to_string();
    assert!(refused.starts_with("/calico/ipam/v2/config"), "{refused}");
    c.set_config(r#"{"auto_allocate_blocks": true, "strict_affinity": false}"#)
        .await;

    // The host's block is given up elsewhere: the host claims another.
    other.release_host_affinities("node1", true).await.unwrap();
    let next = c.ipam.auto_assign(&request("node1", "a3", 1, 0)).await;
    let next = next.unwrap().ipv4[0];
    assert_ne!(
        block_of(next),
        first,
        "{next} is in the block node1 gave up"
    );

    // The handle gets another address elsewhere: releasing one keeps the other counted.
    let more = other.auto_assign(&request("node1", "a3", 1, 0)).await;
    let more = more.unwrap().ipv4[0];
    let freed = c.ipam.release_ips(&[next]).await.unwrap();
    assert_eq!(freed, [(next, Some("a3".to_owned()))]);
    assert_eq!(c.ipam.addresses_of("a3").await.unwrap(), [more]);
    let report = c.ipam.check().await.unwrap();
    assert!(report.handle_mismatches.is_empty(), "{report:?}");
    assert!(report.stale_affinities.is_empty(), "{report:?}");
}

#[tokio::test]
async fn an_assignment_whose_caller_stops_waiting_leaves_nothing_behind() {
    let c = cluster(&["10.73.0.0/24"]).await;
    let mut watch = c.store.watch("/calico/ipam/v2/").await.unwrap();
    let next = async |watch: &mut calico_datastore::Watch| {
        let event = tokio::time::timeout(Duration::from_secs(10), watch.next()).await;
        event
            .expect("an IPAM change within 10 s")
            .expect("the watch goes on")
    };
    assert!(matches!(next(&mut watch).await, WatchEvent::InSync { .. }));
    let asked = request("node1", "gone", 1, 0);
    let mut assign = Box::pin(c.ipam.auto_assign(&asked));
    // One poll hands the job to the host's lane; then the caller gives up.
    assert!(futures::poll!(&mut assign).is_pending());
    drop(assign);
    // The lane finishes the assignment, finds nobody waiting and gives everything back: the
    // address and its handle, and the block (with the host's affinity) it claimed for it.
    let (mut live, mut assigned) = (BTreeSet::new(), false);
    while !assigned || !live.is_empty() {
        match next(&mut watch).await {
            WatchEvent::Put(pair) => {
                assigned |= pair.key == "/calico/ipam/v2/handle/gone";
                live.insert(pair.key);
            }
            WatchEvent::Delete { key, .. } => {
                live.remove(&key);
            }
            WatchEvent::InSync { .. } => {}
        }
    }
    assert!(c.ipam.check().await.unwrap().is_clean());
}
