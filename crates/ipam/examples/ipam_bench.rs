//! IPAM throughput against a real etcd: allocations per second (auto-assign one IPv4 address,
//! release it again later) with 1, 4 and 16 concurrent allocators on 4 hosts, each figure also
//! as a ratio to 1 allocator measured in the same run.
//!
//! cargo run --release -p calico-ipam --example ipam_bench [-- ALLOCATIONS_PER_RUN]

use std::sync::Arc;
use std::time::Instant;

use calico_datastore::{Datastore, EtcdConfig, EtcdDatastore};
use calico_ipam::{AssignRequest, Ipam};
use calico_testkit::EtcdServer;

const HOSTS: usize = 4;

#[tokio::main(flavor = "multi_thread", worker_threads = 4)]
async fn main() {
    let total: usize = std::env::args()
        .nth(1)
        .map(|n| n.parse().expect("ALLOCATIONS_PER_RUN is a number"))
        .unwrap_or(2_000);
    let mut baseline = None;
    println!("allocators  allocations  seconds  allocations/s  × 1 allocator");
    for allocators in [1, 4, 16] {
        // A fresh etcd per run, so no run inherits another's blocks or history.
        let server = EtcdServer::start();
        let config = EtcdConfig {
            endpoints: vec![server.endpoint()],
            ..EtcdConfig::default()
        };
        let store = Arc::new(EtcdDatastore::connect(config).await.expect("etcd"));
        store
            .put(
                "/calico/v1/ipam/v4/pool/10.0.0.0-16",
                r#"{"cidr": "10.0.0.0/16"}"#,
            )
            .await
            .unwrap();
        let ipam = Ipam::new(store);
        let started = Instant::now();
        let mut tasks = Vec::new();
        for worker in 0..allocators {
            let ipam = ipam.clone();
            let count = total / allocators;
            tasks.push(tokio::spawn(async move {
                let mut held = Vec::new();
                for n in 0..count {
                    let request = AssignRequest {
                        host: format!("host{}", worker % HOSTS),
                        handle: format!("w{worker}-{n}"),
                        ipv4: 1,
                        ..AssignRequest::default()
                    };
                    let got = ipam.auto_assign(&request).await.expect("assign");
                    held.push(got.ipv4[0]);
                    // Keep about 20 per allocator, like pods coming and going.
                    if held.len() > 20 {
                        ipam.release_ips(&[held.remove(0)]).await.expect("release");
                    }
                }
            }));
        }
        for task in tasks {
            task.await.expect("allocator");
        }
        let seconds = started.elapsed().as_secs_f64();
        let done = (total / allocators) * allocators;
        let rate = done as f64 / seconds;
        let base = *baseline.get_or_insert(rate);
        println!(
            "{allocators:>10}  {done:>11}  {seconds:>7.2}  {rate:>13.0}  {:>13.2}",
            rate / base
        );
    }
}
