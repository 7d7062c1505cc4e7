//! nf_tables: how the kernel is programmed (docs/benchmarks.md). Two ways to change one
//! `inet` table of a network namespace this benchmark makes: this crate's netlink encoder
//! ([`Nft`], one transaction per change over one socket) and one `nft -f -` process per change
//! (the same transaction as `nft` text). The table holds what Calico's nftables backend writes at
//! size: 200 sets of 1,000 members, a verdict map of 400 interfaces, ~3,000 rules in ~400
//! chains. Then, for each way:
//!
//! - (a) replace one chain's 10 rules (flush the chain, add 10 rules);
//! - (b) add one set element;
//! - (c) load everything into an empty table;
//! - (d) read the whole table back (`Nft::read` against `nft list table`).
//!
//! Run as root: `cargo run --release -p calico-linux --example nft_bench`
//! (`NFT_BENCH_SAMPLES=<n>` for the samples of (a), (b); (c) and (d) take a tenth of them;
//! `NFT_BENCH_WAYS=netlink` or `=nft` for one way only).

use std::net::{IpAddr, Ipv4Addr};
use std::time::Instant;

use calico_linux::Netns;
use calico_linux::nft::*;
use calico_testkit::{NetNs, Tails, require_tool};
use ipnet::IpNet;

const SETS: usize = 200;
const MEMBERS: u32 = 1000;
const CHAINS: usize = 400;

fn table() -> Table {
    Table {
        family: TableFamily::Inet,
        name: "calico-bench".into(),
    }
}

fn set_name(i: usize) -> String {
    format!("v4-set-{i:03}")
}

/// Sets 0–149 hold addresses, 150–199 nets (/28s), 1,000 each, none shared.
fn sets() -> Vec<Op> {
    let mut ops = Vec::new();
    for i in 0..SETS {
        let base = 0x0a00_0000u32 + (i as u32) * 0x1_0000;
        let (kind, elements): (SetKind, Vec<Element>) = if i < 150 {
            let addrs = (0..MEMBERS).map(|m| Element::Addr(IpAddr::V4(Ipv4Addr::from(base + m))));
            (SetKind::Addrs(IpFamily::V4), addrs.collect())
        } else {
            let nets = (0..MEMBERS).map(|m| {
                Element::Net(IpNet::new(IpAddr::V4(Ipv4Addr::from(base + m * 16)), 28).unwrap())
            });
            (SetKind::Nets(IpFamily::V4), nets.collect())
        };
        ops.push(Op::AddSet(SetSpec {
            name: set_name(i),
            kind,
            comment: Some(format!("selector role == \"r{i}\"").replace('"', "'")),
        }));
        ops.push(Op::AddElements {
            set: set_name(i),
            elements,
        });
    }
    ops
}

fn tcp() -> Expr {
    Expr::L4Proto {
        proto: 6,
        negate: false,
    }
}

fn ports(list: &[(u16, u16)]) -> Expr {
    Expr::Ports {
        dir: Dir::Dst,
        ports: list
            .iter()
            .map(|&(first, last)| Ports { first, last })
            .collect(),
        negate: false,
    }
}

fn from_set(i: usize, dir: Dir) -> Expr {
    Expr::AddrInSet {
        dir,
        family: IpFamily::V4,
        set: set_name(i % SETS),
        negate: false,
    }
}

/// The rules of endpoint chain `i`: 7 or 8 (3,000 in 400 chains); `port` varies one of them.
fn endpoint_rules(i: usize, port: u16) -> Vec<Rule> {
    let v4 = Expr::NfProto(IpFamily::V4);
    let rule = |exprs: Vec<Expr>, comment: &str| Rule {
        exprs,
        comment: Some(format!("ep {i}: {comment}")),
    };
    let mut rules = vec![
        rule(
            vec![Expr::SetMark {
                mask: 0x10000,
                value: 0,
            }],
            "clear the accept mark",
        ),
        rule(
            vec![
                v4.clone(),
                from_set(i * 3, Dir::Src),
                tcp(),
                ports(&[(80, 80), (443, 443)]),
                Expr::Verdict(Verdict::Accept),
            ],
            "web from role a",
        ),
        rule(
            vec![
                v4.clone(),
                from_set(i * 7 + 1, Dir::Dst),
                Expr::L4Proto {
                    proto: 17,
                    negate: false,
                },
                ports(&[(53, 53)]),
                Expr::Verdict(Verdict::Accept),
            ],
            "dns",
        ),
        rule(
            vec![
                tcp(),
                ports(&[(port, port.saturating_add(1000))]),
                Expr::Counter,
                Expr::Verdict(Verdict::Drop),
            ],
            "deny a range",
        ),
        rule(
            vec![
                v4.clone(),
                Expr::Addr {
                    dir: Dir::Src,
                    net: "10.65.0.0/16".parse().unwrap(),
                    negate: true,
                },
                Expr::Log {
                    prefix: "calico-drop ".into(),
                    group: None,
                },
                Expr::Verdict(Verdict::Drop),
            ],
            "outside the pool",
        ),
        rule(
            vec![
                v4,
                Expr::L4Proto {
                    proto: 1,
                    negate: false,
                },
                Expr::Icmp {
                    family: IpFamily::V4,
                    icmp_type: 8,
                    code: None,
                    negate: false,
                },
                Expr::Verdict(Verdict::Accept),
            ],
            "ping",
        ),
        rule(
            vec![
                Expr::Mark {
                    mask: 0x10000,
                    value: 0x10000,
                    negate: false,
                },
                Expr::Verdict(Verdict::Return),
            ],
            "accepted by a policy",
        ),
    ];
    if i.is_multiple_of(2) {
        rules.push(rule(vec![Expr::Verdict(Verdict::Drop)], "end of tier"));
    }
    rules
}

fn iface(i: usize) -> String {
    format!("cali{i:05}")
}

/// Everything: the table, its sets, the dispatch map, the chains and their rules.
fn full() -> Batch {
    let mut ops = vec![Op::AddTable];
    ops.extend(sets());
    for i in 0..CHAINS {
        ops.push(Op::AddChain(ChainSpec {
            name: format!("ep-{i}"),
            base: None,
        }));
    }
    ops.push(Op::AddSet(SetSpec {
        name: "from-wl".into(),
        kind: SetKind::IfnameVmap,
        comment: Some("interface → endpoint chain".into()),
    }));
    let dispatch = (0..CHAINS).map(|i| Element::Ifname {
        name: iface(i),
        verdict: Verdict::Jump(format!("ep-{i}")),
    });
    ops.push(Op::AddElements {
        set: "from-wl".into(),
        elements: dispatch.collect(),
    });
    ops.push(Op::AddChain(ChainSpec {
        name: "filter-forward".into(),
        base: Some(BaseChain {
            kind: ChainType::Filter,
            hook: Hook::Forward,
            priority: 0,
            policy: ChainPolicy::Accept,
        }),
    }));
    let forward = [
        vec![
            Expr::CtState {
                states: CtStates::ESTABLISHED.union(CtStates::RELATED),
                negate: false,
            },
            Expr::Verdict(Verdict::Accept),
        ],
        vec![
            Expr::CtState {
                states: CtStates::INVALID,
                negate: false,
            },
            Expr::Verdict(Verdict::Drop),
        ],
        vec![Expr::Vmap {
            key: MapKey::Iifname,
            map: "from-wl".into(),
        }],
    ];
    for exprs in forward {
        ops.push(Op::AddRule {
            chain: "filter-forward".into(),
            rule: Rule {
                exprs,
                comment: None,
            },
        });
    }
    for i in 0..CHAINS {
        for rule in endpoint_rules(i, 1000) {
            ops.push(Op::AddRule {
                chain: format!("ep-{i}"),
                rule,
            });
        }
    }
    Batch { ops }
}

/// One way of applying a batch to the table of a namespace.
trait Way {
    fn apply(&self, batch: &Batch);
    fn read(&self) -> usize;
}

struct Netlink(Nft);

impl Way for Netlink {
    fn apply(&self, batch: &Batch) {
        self.0
            .apply(batch)
            .unwrap_or_else(|e| panic!("netlink: {e}"));
    }

    /// The number of rules and elements read.
    fn read(&self) -> usize {
        let t = self.0.read().unwrap().expect("the table");
        t.chains.values().map(|c| c.rules.len()).sum::<usize>()
            + t.sets.values().map(|s| s.elements.len()).sum::<usize>()
    }
}

struct NftCli(NetNs);

impl Way for NftCli {
    fn apply(&self, batch: &Batch) {
        let script = batch.script(&table()).to_string();
        let out = self.0.run("nft", &["-f", "-"], &script);
        assert!(
            out.status.success(),
            "nft -f: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// The bytes `nft list table` printed.
    fn read(&self) -> usize {
        self.0
            .run_ok("nft", &["list", "table", "inet", &table().name], "")
            .len()
    }
}

fn time(samples: usize, mut f: impl FnMut(usize)) -> Tails {
    let mut ms = Vec::with_capacity(samples);
    for i in 0..samples {
        let start = Instant::now();
        f(i);
        ms.push(start.elapsed().as_secs_f64() * 1000.0);
    }
    Tails::of(ms).expect("samples")
}

fn cell(t: &Tails) -> String {
    format!("{:.2} | {:.2} | {:.2}", t.median, t.p99, t.max)
}

fn main() {
    require_tool("nft");
    let samples: usize = std::env::var("NFT_BENCH_SAMPLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100);
    let few = (samples / 10).max(3);
    let full = full();
    let rules: usize = full
        .ops
        .iter()
        .filter(|op| matches!(op, Op::AddRule { .. }))
        .count();
    println!(
        "table: {SETS} sets × {MEMBERS} members, {CHAINS} endpoint chains + 1 base chain, {rules} rules, a {CHAINS}-entry verdict map"
    );

    let ns_netlink = NetNs::new("nft-bench-nl");
    let ns_cli = NetNs::new("nft-bench-cli");
    let netlink = Netlink(Nft::new(Netns::named(ns_netlink.name()), table()));
    let cli = NftCli(ns_cli);
    let ways: [(&str, &dyn Way); 2] = [
        ("netlink (this crate)", &netlink),
        ("nft -f - per change", &cli),
    ];

    let only = std::env::var("NFT_BENCH_WAYS").unwrap_or_default();
    let mut rows: Vec<(&str, Vec<Tails>)> = Vec::new();
    let drop_table = Batch {
        ops: vec![Op::AddTable, Op::DeleteTable],
    };
    for (name, way) in ways {
        if !only.is_empty() && !name.starts_with(only.as_str()) {
            continue;
        }
        eprintln!("{name}: (c) full load ×{few}");
        // Each load starts from no table (the delete is not timed).
        let mut ms = Vec::new();
        for _ in 0..few {
            way.apply(&drop_table);
            let start = Instant::now();
            way.apply(&full);
            ms.push(start.elapsed().as_secs_f64() * 1000.0);
        }
        let load = Tails::of(ms).expect("samples");
        eprintln!("{name}: (a) replace a chain's rules ×{samples}");
        let replace = time(samples, |n| {
            let i = (n * 37) % CHAINS;
            let mut batch = Batch {
                ops: vec![Op::FlushChain(format!("ep-{i}"))],
            };
            let mut rules = endpoint_rules(i, 2000 + n as u16);
            rules.extend(
                endpoint_rules(i + 1, 3000 + n as u16)
                    .into_iter()
                    .take(10 - rules.len()),
            );
            for rule in rules {
                batch.push(Op::AddRule {
                    chain: format!("ep-{i}"),
                    rule,
                });
            }
            way.apply(&batch);
        });
        eprintln!("{name}: (b) add one set element ×{samples}");
        let element = time(samples, |n| {
            let addr = IpAddr::V4(Ipv4Addr::from(0x0b00_0000u32 + n as u32));
            way.apply(&Batch {
                ops: vec![Op::AddElements {
                    set: set_name(n % 150),
                    elements: vec![Element::Addr(addr)],
                }],
            });
        });
        eprintln!("{name}: (d) read the table back ×{few}");
        let read = time(few, |_| {
            assert!(way.read() > 0);
        });
        rows.push((name, vec![replace, element, load, read]));
    }

    println!();
    println!(
        "| operation | netlink median | p99 | max (ms) | nft -f median | p99 | max (ms) | nft -f ÷ netlink (median) |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    let what = [
        format!("(a) replace one chain's 10 rules ({samples} samples)"),
        format!("(b) add one set element ({samples} samples)"),
        format!("(c) full load into an empty table ({few} samples)"),
        format!("(d) read the whole table back ({few} samples)"),
    ];
    if rows.len() < 2 {
        for (name, tails) in &rows {
            for (label, t) in what.iter().zip(tails) {
                println!("| {label} | {name}: {} |", cell(t));
            }
        }
        return;
    }
    for (k, label) in what.iter().enumerate() {
        let (a, b) = (&rows[0].1[k], &rows[1].1[k]);
        println!(
            "| {label} | {} | {} | {:.1}× |",
            cell(a),
            cell(b),
            b.median / a.median
        );
    }
}
