//! What `startup_bench` measured, and its tables: what Felix wrote, each start, each site and
//! backend, printed as docs/benchmarks.md shows them.

use std::time::Duration;

use calico_testkit::Tails;

use super::common::{Backend, sample};

/// What Felix says it wrote.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct Written {
    pub iptables_bytes: u64,
    pub ipset_bytes: u64,
    pub chains: u64,
    pub nft_ops: u64,
}

impl Written {
    pub fn from_scrape(text: &str) -> Written {
        let get = |n: &str| sample(text, n).unwrap_or(0.0) as u64;
        Written {
            iptables_bytes: get(r#"felix_dataplane_written_bytes_total{tool="iptables"}"#),
            ipset_bytes: get(r#"felix_dataplane_written_bytes_total{tool="ipset"}"#),
            chains: get("felix_dataplane_written_chains_total"),
            nft_ops: get("felix_dataplane_written_nft_ops_total"),
        }
    }

    pub fn minus(self, earlier: Written) -> Written {
        Written {
            iptables_bytes: self.iptables_bytes - earlier.iptables_bytes,
            ipset_bytes: self.ipset_bytes - earlier.ipset_bytes,
            chains: self.chains - earlier.chains,
            nft_ops: self.nft_ops - earlier.nft_ops,
        }
    }

    /// The larger of each counter.
    pub fn max(self, other: Written) -> Written {
        Written {
            iptables_bytes: self.iptables_bytes.max(other.iptables_bytes),
            ipset_bytes: self.ipset_bytes.max(other.ipset_bytes),
            chains: self.chains.max(other.chains),
            nft_ops: self.nft_ops.max(other.nft_ops),
        }
    }
}

/// One start of Felix, measured.
pub struct Start {
    /// Spawn to fully programmed.
    pub took: Duration,
    pub at_ready: Written,
    pub settled: Written,
    pub rss_mib: f64,
    /// CPU seconds until programmed: Felix's own, and its waited-for children's
    /// (`iptables-restore`, `iptables-save`, `ipset`).
    pub cpu: (f64, f64),
    /// The full sync as Felix's log says it: chains and sets written, time taken.
    pub sync_log: String,
}

/// A restart under a running ping: the start measured, echoes sent and lost.
pub struct Restart {
    pub signal: &'static str,
    pub start: Start,
    pub echoes: (u64, u64),
}

/// What one site measured.
pub struct SiteReport {
    pub cold: Start,
    pub kernel: Vec<(String, Option<usize>, Duration)>,
    pub ping_ok: bool,
    pub restarts: Vec<Restart>,
    /// Felix's log of each start: `cold`, `KILL`, `TERM`, ….
    pub logs: Vec<(&'static str, String)>,
}

/// One backend's sites: the baseline and those at size.
pub struct BackendReport {
    pub backend: Backend,
    pub base: SiteReport,
    pub big: Vec<SiteReport>,
}

impl BackendReport {
    /// The starts of `phase` (`cold`, `KILL`, `TERM`) of the baseline or of the sites at size.
    pub fn starts(&self, at_size: bool, phase: &str) -> Vec<&Start> {
        let sites: Vec<&SiteReport> = if at_size {
            self.big.iter().collect()
        } else {
            vec![&self.base]
        };
        sites
            .into_iter()
            .flat_map(|s| {
                let cold = (phase == "cold").then_some(&s.cold);
                let restarts = s.restarts.iter().filter(|r| r.signal == phase);
                cold.into_iter().chain(restarts.map(|r| &r.start))
            })
            .collect()
    }

    pub fn restarts(&self, signal: &str) -> Vec<&Restart> {
        self.big
            .iter()
            .flat_map(|s| s.restarts.iter().filter(|r| r.signal == signal))
            .collect()
    }
}

fn tails(values: impl IntoIterator<Item = f64>) -> Tails {
    Tails::of(values).expect("at least one sample")
}

fn median(values: impl IntoIterator<Item = f64>) -> f64 {
    tails(values).median
}

fn kib(bytes: u64) -> String {
    format!("{:.1} KiB", bytes as f64 / 1024.0)
}

const PHASES: [(&str, &str); 3] = [
    ("cold", "cold start (empty kernel)"),
    ("KILL", "restart after SIGKILL"),
    ("TERM", "restart after SIGTERM"),
];

pub fn print_times(reports: &[BackendReport], base_endpoints: u32, size: (u32, u32)) {
    println!(
        "| Felix start → fully programmed | backend | {base_endpoints} endpoints, 0 policies: median | \
         {} endpoints, {} policies: median | p99 | max | samples | at size ÷ baseline (median) | ÷ iptables (median) |",
        size.0, size.1
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for (phase, what) in PHASES {
        let iptables = reports
            .iter()
            .find(|r| r.backend == Backend::Iptables)
            .map(|r| median(r.starts(true, phase).iter().map(|s| s.took.as_secs_f64())));
        for r in reports {
            let base = median(r.starts(false, phase).iter().map(|s| s.took.as_secs_f64()));
            let big: Vec<f64> = r
                .starts(true, phase)
                .iter()
                .map(|s| s.took.as_secs_f64())
                .collect();
            let n = big.len();
            let t = tails(big);
            let vs = iptables.map_or(String::new(), |i| format!("{:.3}×", t.median / i));
            println!(
                "| {what} | {} | {base:.2} s | {:.2} s | {:.2} s | {:.2} s | {n} | {:.1}× | {vs} |",
                r.backend.name(),
                t.median,
                t.p99,
                t.max,
                t.median / base
            );
        }
    }
}

pub fn print_written(reports: &[BackendReport], size: (u32, u32), settle: Duration) {
    println!();
    println!(
        "| written by Felix ({} endpoints, {} policies; the most of any sample) | backend | \
         iptables-restore | ipset restore | chains | nf_tables operations | more in the {} s after | full sync (Felix's log, first sample) |",
        size.0,
        size.1,
        settle.as_secs()
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    for (phase, what) in PHASES {
        for r in reports {
            let starts = r.starts(true, phase);
            let most = starts
                .iter()
                .fold(Written::default(), |m, s| m.max(s.at_ready));
            let later = starts.iter().fold(Written::default(), |m, s| {
                m.max(s.settled.minus(s.at_ready))
            });
            let later = if later == Written::default() {
                "nothing".to_owned()
            } else {
                format!(
                    "{} B, {} B, {} chains, {} ops",
                    later.iptables_bytes, later.ipset_bytes, later.chains, later.nft_ops
                )
            };
            println!(
                "| {what} | {} | {} | {} | {} | {} | {later} | {} |",
                r.backend.name(),
                kib(most.iptables_bytes),
                kib(most.ipset_bytes),
                most.chains,
                most.nft_ops,
                starts[0].sync_log
            );
        }
    }
    println!();
    for r in reports {
        let dumps: Vec<String> = r.big[0]
            .kernel
            .iter()
            .map(|(what, bytes, took)| {
                let size = bytes.map_or(String::new(), |b| format!("{}, ", kib(b as u64)));
                format!("{what} {size}{:.2} s", took.as_secs_f64())
            })
            .collect();
        println!(
            "{}: the kernel's firewall at size, as dumped: {}. Baseline cold start wrote {} \
             to iptables-restore, {} to ipset, {} nf_tables operations.",
            r.backend.name(),
            dumps.join("; "),
            kib(r.base.cold.at_ready.iptables_bytes),
            kib(r.base.cold.at_ready.ipset_bytes),
            r.base.cold.at_ready.nft_ops
        );
    }
}

pub fn print_echoes(reports: &[BackendReport]) {
    println!();
    println!(
        "| ping -i 0.01 workload 0 → 1 through the host | backend | restarts | echoes sent | lost | most lost in one restart |"
    );
    println!("| --- | --- | --- | --- | --- | --- |");
    for r in reports {
        let ok = r.big.iter().filter(|s| s.ping_ok).count();
        println!(
            "| after each cold start (3 echoes) | {} | {} | {} | {} | |",
            r.backend.name(),
            r.big.len(),
            3 * r.big.len(),
            if ok == r.big.len() {
                "0".to_owned()
            } else {
                format!("{} pings failed", r.big.len() - ok)
            }
        );
    }
    for (phase, what) in &PHASES[1..] {
        for r in reports {
            let restarts = r.restarts(phase);
            let sent: u64 = restarts.iter().map(|x| x.echoes.0).sum();
            let lost: u64 = restarts.iter().map(|x| x.echoes.1).sum();
            let most = restarts.iter().map(|x| x.echoes.1).max().unwrap_or(0);
            println!(
                "| across a {what} | {} | {} | {sent} | {lost} | {most} |",
                r.backend.name(),
                restarts.len()
            );
        }
    }
}

pub fn print_resources(reports: &[BackendReport]) {
    println!();
    println!(
        "| Felix at size (medians) | backend | RSS 3 s after programmed (baseline) | RSS at size | CPU until programmed: Felix | its iptables/ipset children |"
    );
    println!("| --- | --- | --- | --- | --- | --- |");
    for (phase, what) in PHASES {
        for r in reports {
            let base = r.starts(false, phase);
            let big = r.starts(true, phase);
            println!(
                "| {what} | {} | {:.1} MiB | {:.1} MiB | {:.1} s | {:.1} s |",
                r.backend.name(),
                median(base.iter().map(|s| s.rss_mib)),
                median(big.iter().map(|s| s.rss_mib)),
                median(big.iter().map(|s| s.cpu.0)),
                median(big.iter().map(|s| s.cpu.1)),
            );
        }
    }
    println!();
    for r in reports {
        let warnings: Vec<&str> = r
            .big
            .iter()
            .flat_map(|s| &s.logs)
            .flat_map(|(_, log)| log.lines())
            .filter(|l| l.contains("WARN") || l.contains("ERROR"))
            .collect();
        println!(
            "Felix's logs at size, {}: {} warnings/errors",
            r.backend.name(),
            warnings.len()
        );
        for line in warnings.iter().take(10) {
            println!("  {line}");
        }
    }
}
