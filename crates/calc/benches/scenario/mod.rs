//! The scale scenario shared by `examples/scale.rs` and `benches/calc.rs`: endpoints on hosts of
//! 100 each, 1,000 profiles, 2,000 policies in 5 tiers.

#![allow(dead_code, reason = "each user takes what it needs")]

/// The reference cluster of docs/benchmarks.md, generated deterministically.
pub struct Scenario {
    endpoints: usize,
    hosts: usize,
    profiles: usize,
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
        let value = format!(
            r#"{{"state": "active", "name": "cali{i:x}", "profile_ids": ["p{}"], "ipv4_nets": ["10.{}.{}.{}/32"], "labels": {{"app": "app{}", "env": "{env}", "pod": "pod-{i}"}}}}"#,
            i % self.profiles,
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

    pub fn label_changes(&self, count: usize) -> Vec<(String, String)> {
        (0..count)
            .map(|n| self.endpoint((n * 7919) % self.endpoints, 1 + n))
            .collect()
    }

    pub fn policy_edits(&self, count: usize) -> Vec<(String, String)> {
        (0..count)
            .map(|n| {
                let tier = n % self.tiers;
                let policy = (n * 31) % self.policies_per_tier;
                self.policy(tier, policy, 1 + n % 3)
            })
            .collect()
    }
}
