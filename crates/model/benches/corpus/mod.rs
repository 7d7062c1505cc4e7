//! A reproducible corpus of selectors and label sets for the selector benchmarks and the oracle
//! test (`tests/selector_corpus.rs`, and calc's `benches/selector_corpus.rs`, which include this
//! file by path).
//!
//! Selectors use the whole 1.4 grammar (`==`, `!=`, `in {}`, `not in {}`, `has()`, `!`, `&&`,
//! `||`, parentheses, `all()`), nest at most three operators deep and average about 90 bytes, with
//! random spacing and both quote styles. Names come from a pool of 40 (Kubernetes style:
//! `calico/k8s_ns`, `app.kubernetes.io/name`), each with 12 values; both selectors and label sets
//! favour the first names, as real clusters favour `app` and the namespace, so a useful share of
//! pairs match. The same seed always gives the same corpus.

#![allow(dead_code)] // each includer uses part of the corpus

/// Label names: the first ones are drawn most often.
pub const NAMES: [&str; 40] = [
    "app",
    "calico/k8s_ns",
    "role",
    "env",
    "tier",
    "app.kubernetes.io/name",
    "version",
    "team",
    "k8s-app",
    "release",
    "component",
    "app.kubernetes.io/instance",
    "pod-template-hash",
    "zone",
    "region",
    "owner",
    "stage",
    "track",
    "project",
    "service",
    "cost-center",
    "controller-revision-hash",
    "statefulset.kubernetes.io/pod-name",
    "app.kubernetes.io/part-of",
    "app.kubernetes.io/version",
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/component",
    "topology.kubernetes.io/zone",
    "helm.sh/chart",
    "security.example.com/level",
    "backup",
    "monitoring",
    "canary",
    "shard",
    "cluster",
    "customer",
    "network.example.com/segment",
    "data_class",
    "build",
    "os",
];

const VALUES: [&str; 12] = [
    "web",
    "db",
    "cache",
    "prod",
    "dev",
    "staging",
    "v1",
    "v2",
    "frontend",
    "backend",
    "kube-system",
    "default",
];

/// A tiny xorshift generator: no dependency, same sequence everywhere.
#[derive(Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Uniform in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// True with probability `percent` / 100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.next_u64() % 100 < percent
    }

    /// A name index skewed towards the front of [`NAMES`] (the smaller of two draws).
    fn name(&mut self) -> &'static str {
        NAMES[self.below(NAMES.len()).min(self.below(NAMES.len()))]
    }

    /// One of the 12 values of a name (the pool is shared, the pairing is per name).
    fn value(&mut self, name: &str) -> String {
        let value = VALUES[self.below(VALUES.len())];
        if name.len().is_multiple_of(3) {
            format!("{value}-{}", name.len())
        } else {
            value.to_owned()
        }
    }
}

/// `count` selectors from `seed`.
pub fn selectors(count: usize, seed: u64) -> Vec<String> {
    let mut rng = Rng::new(seed);
    (0..count).map(|_| expr(&mut rng, 0)).collect()
}

/// `count` label sets of 3 to 7 labels (5 on average) from `seed`.
pub fn label_sets(count: usize, seed: u64) -> Vec<Vec<(String, String)>> {
    let mut rng = Rng::new(seed);
    (0..count)
        .map(|_| {
            let mut labels: Vec<(String, String)> = Vec::new();
            let wanted = 3 + rng.below(5);
            while labels.len() < wanted {
                let name = rng.name();
                if labels.iter().all(|(n, _)| n != name) {
                    let value = rng.value(name);
                    labels.push((name.to_owned(), value));
                }
            }
            labels
        })
        .collect()
}

/// An expression at nesting `depth` (0 at the top; operators nest at most three deep).
fn expr(rng: &mut Rng, depth: usize) -> String {
    if depth == 3 || rng.chance(if depth == 0 { 15 } else { 55 }) {
        return leaf(rng);
    }
    match rng.below(10) {
        0..=4 => join(rng, depth, "&&"),
        5..=7 => join(rng, depth, "||"),
        _ => format!("!({})", expr(rng, depth + 1)),
    }
}

fn join(rng: &mut Rng, depth: usize, op: &str) -> String {
    let count = 2 + usize::from(rng.chance(25));
    let operands: Vec<String> = (0..count)
        .map(|_| {
            let operand = expr(rng, depth + 1);
            // Parenthesise anything compound (`||` inside `&&` needs it; the rest is noise the
            // parser must accept).
            if operand.contains("&&") || operand.contains("||") {
                format!("({operand})")
            } else {
                operand
            }
        })
        .collect();
    let sep = format!("{}{op}{}", space(rng), space(rng));
    operands.join(&sep)
}

fn leaf(rng: &mut Rng) -> String {
    let name = rng.name();
    let (s1, s2) = (space(rng), space(rng));
    match rng.below(20) {
        0..=5 => format!("{name}{s1}=={s2}{}", quoted(rng, name)),
        6..=8 => format!("{name}{s1}!={s2}{}", quoted(rng, name)),
        9..=11 => format!("{name} in{s2}{}", set(rng, name)),
        12..=13 => format!("{name} not in{s2}{}", set(rng, name)),
        14..=16 => format!("has({s1}{name}{s2})"),
        17..=18 => format!("!has({name})"),
        _ => "all()".to_owned(),
    }
}

fn set(rng: &mut Rng, name: &str) -> String {
    let members: Vec<String> = (0..rng.below(4)).map(|_| quoted(rng, name)).collect();
    format!("{{{}}}", members.join(", "))
}

fn quoted(rng: &mut Rng, name: &str) -> String {
    let value = rng.value(name);
    if rng.chance(30) {
        format!("'{value}'")
    } else {
        format!("\"{value}\"")
    }
}

fn space(rng: &mut Rng) -> &'static str {
    match rng.below(10) {
        0 => "",
        1 => "  ",
        _ => " ",
    }
}
