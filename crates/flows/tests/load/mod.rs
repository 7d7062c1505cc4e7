//! Records the size of what Felix sends for a Kubernetes pod, a new key each: the load of the
//! memory tests (`memory.rs` against the real binary, `estimate.rs` against the allocator).

#![allow(dead_code)] // each test file uses part of this

pub const BATCH: usize = 1000;

/// Record `n`: a key of its own (workload `w<n>` to a pod of its own), labels on both sides
/// and a two-step trail, the size of what Felix sends for a Kubernetes pod.
pub fn record(n: usize, now: u64) -> String {
    let end = now - 2;
    let labels = |app: &str| {
        format!(
            r#"{{"app":"{app}","pod-template-hash":"7d9f8c{:05}","projectcalico.org/namespace":"shop","projectcalico.org/orchestrator":"k8s"}}"#,
            n % 100_000
        )
    };
    format!(
        r#"{{"reporter":"node-{r}","start_time":{},"end_time":{end},"source":{{"kind":"wep","key":"/calico/v1/host/node-{r}/workload/k8s/shop.frontend-{n}/endpoint/eth0","profiles":["kns.shop","ksa.shop.default"],"labels":{}}},"destination":{{"kind":"wep","key":"/calico/v1/host/node-{r}/workload/k8s/shop.cart-{n}/endpoint/eth0","profiles":["kns.shop","ksa.shop.default"],"labels":{}}},"protocol":"tcp","dst_port":8080,"direction":"ingress","action":"allow","policies":{{"enforced":[{{"kind":"policy","tier":"platform","name":"platform.allow-dns","rule_index":0,"action":"next-tier"}},{{"kind":"policy","tier":"default","name":"default.cart-from-frontend","rule_index":1,"action":"allow"}}]}},"packets_in":2,"bytes_in":120,"packets_out":3,"bytes_out":240,"connections_started":1}}"#,
        end - 10,
        labels("frontend"),
        labels("cart"),
        r = n % 7,
    )
}

pub fn body(first: usize, now: u64) -> Vec<u8> {
    let records: Vec<String> = (first..first + BATCH).map(|n| record(n, now)).collect();
    format!(r#"{{"records":[{}]}}"#, records.join(",")).into_bytes()
}
