//! The scale scenario shared by `examples/scale.rs` and `benches/calc.rs`: endpoints on hosts of
//! 100 each, 1,000 profiles, 100 namespace profiles, 2,000 policies in 5 tiers and one policy for
//! every endpoint.
//!
//! Besides `==` selectors it has the kinds an index answers less directly: each namespace
//! profile allows `namespace == "nsK" || role == "monitoring"` (an `||`), and the policy for
//! every endpoint (`all()`) allows egress to `role != "monitoring"` (a `!=`, matching nearly
//! every endpoint).

#![allow(dead_code, reason = "each user takes what it needs")]

/// The reference cluster of docs/benchmarks.md, generated deterministically.
pub struct Scenario {
    endpoints: usize,
    hosts: usize,
    profiles: usize,
    namespaces: usize,
    apps: usize,
    tiers: usize,
    policies_per_tier: usize,
}

impl Scenario {
    pub fn new(endpoints: usize) -> Scenario {
        Scenario {
            endpoints,
            hosts: (endpoints / 100).max(1),
            profiles: 1_000,
            namespaces: 100,
            apps: 500,
            tiers: 5,
            policies_per_tier: 400,
        }
    }

    pub fn endpoint(&self, i: usize, generation: usize) -> (String, String) {
        // Contiguous blocks of 100 per host, so a host's endpoints are as diverse as the
        // cluster's (profiles and apps vary with i).
        let host = (i / 100) % self.hosts;
        let key = format!("/calico/v1/host/host-{host}/workload/k8s/ns.pod-{i}/endpoint/eth0");
        let env = if (i + generation).is_multiple_of(2) {
            "prod"
        } else {
            "dev"
        };
        // One endpoint in 1,000 is a monitoring agent (in every namespace's `||` set).
        let role = if i % 1_000 == 999 {
            r#", "role": "monitoring""#
        } else {
            ""
        };
        let value = format!(
            r#"{{"state": "active", "name": "cali{i:x}", "profile_ids": ["p{}", "ns{}"], "ipv4_nets": ["10.{}.{}.{}/32"], "labels": {{"app": "app{}", "env": "{env}", "pod": "pod-{i}"{role}}}}}"#,
            i % self.profiles,
            i % self.namespaces,
            (i >> 16) & 0xff,
            (i >> 8) & 0xff,
            i & 0xff,
            i % self.apps
        );
        (key, value)
    }

    pub fn policy(&self, tier: usize, n: usize, generation: usize) -> (String, String) {
        let key = format!("/calico/v1/policy/tier/tier-{tier}/policy/policy-{n}");
        let app = (tier * self.policies_per_tier + n) % self.apps;
        let peer = (app + 1 + generation) % self.apps;
        let value = format!(
            r#"{{"selector": "app == 'app{app}'", "order": {n}, "inbound_rules": [{{"protocol": "tcp", "src_selector": "app == 'app{peer}' && env == 'prod'", "dst_ports": [8080], "action": "allow"}}, {{"action": "next-tier"}}], "outbound_rules": [{{"action": "next-tier"}}]}}"#
        );
        (key, value)
    }

    pub fn initial_updates(&self, mut apply: impl FnMut(&str, &str)) {
        let mut push = |(key, value): (String, String)| apply(&key, &value);
        for p in 0..self.profiles {
            let next = (p + 1) % self.profiles;
            push((
                format!("/calico/v1/policy/profile/p{p}/rules"),
                format!(
                    r#"{{"inbound_rules": [{{"src_tag": "tag{next}", "action": "allow"}}], "outbound_rules": [{{"action": "allow"}}]}}"#
                ),
            ));
            push((
                format!("/calico/v1/policy/profile/p{p}/tags"),
                format!(r#"["tag{p}"]"#),
            ));
            push((
                format!("/calico/v1/policy/profile/p{p}/labels"),
                format!(r#"{{"team": "team{}"}}"#, p % 50),
            ));
        }
        for k in 0..self.namespaces {
            push((
                format!("/calico/v1/policy/profile/ns{k}/rules"),
                format!(
                    r#"{{"inbound_rules": [{{"src_selector": "namespace == 'ns{k}' || role == 'monitoring'", "action": "allow"}}], "outbound_rules": [{{"action": "allow"}}]}}"#
                ),
            ));
            push(self.namespace_labels(k, 0));
        }
        push((
            "/calico/v1/policy/tier/tier-0/policy/egress".to_owned(),
            r#"{"selector": "all()", "order": 1000, "outbound_rules": [{"dst_selector": "role != 'monitoring'", "action": "allow"}, {"action": "next-tier"}], "inbound_rules": [{"action": "next-tier"}]}"#.to_owned(),
        ));
        for tier in 0..self.tiers {
            push((
                format!("/calico/v1/policy/tier/tier-{tier}/metadata"),
                format!(r#"{{"order": {tier}}}"#),
            ));
            for n in 0..self.policies_per_tier {
                push(self.policy(tier, n, 0));
            }
        }
        for i in 0..self.endpoints {
            push(self.endpoint(i, 0));
        }
    }

    /// The labels of namespace profile `k` (every endpoint in the namespace inherits them).
    pub fn namespace_labels(&self, k: usize, generation: usize) -> (String, String) {
        (
            format!("/calico/v1/policy/profile/ns{k}/labels"),
            format!(r#"{{"namespace": "ns{k}", "generation": "g{generation}"}}"#),
        )
    }

    /// How many endpoints each namespace holds.
    pub fn namespace_size(&self) -> usize {
        self.endpoints.div_ceil(self.namespaces)
    }

    /// The `n`th relabel of a namespace profile, touching [`Scenario::namespace_size`]
    /// endpoints.
    pub fn namespace_relabel(&self, n: usize) -> (String, String) {
        self.namespace_labels((n * 37) % self.namespaces, 1 + n)
    }

    /// The `n`th endpoint label change: endpoints spread over the cluster (1 in 100 local).
    pub fn label_change(&self, n: usize) -> (String, String) {
        self.endpoint((n * 7919) % self.endpoints, 1 + n)
    }

    pub fn label_changes(&self, count: usize) -> Vec<(String, String)> {
        (0..count).map(|n| self.label_change(n)).collect()
    }

    /// The `n`th policy edit: a policy's rule selects another app.
    pub fn policy_edit(&self, n: usize) -> (String, String) {
        let tier = n % self.tiers;
        let policy = (n * 31) % self.policies_per_tier;
        self.policy(tier, policy, 1 + n % 3)
    }

    pub fn policy_edits(&self, count: usize) -> Vec<(String, String)> {
        (0..count).map(|n| self.policy_edit(n)).collect()
    }
}
