//! nf_tables over netlink on a real kernel, in namespaces each test makes and removes:
//! - every expression and set kind, written by the encoder in one namespace and by `nft -f`
//!   (from the batch's `nft` text) in another, lists identically with the real `nft`;
//! - a read-back gives exactly the digests, comments and elements written;
//! - a refused batch names the operation and leaves nothing applied;
//! - packets through a veth pair are dropped by port, by set membership and by vmap dispatch;
//! - random batches are accepted or refused alike by the kernel and by `FakeNft`, and leave
//!   the same table (the differential test that keeps the fake honest).

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use calico_linux::fake::FakeNft;
use calico_linux::nft::*;
use calico_linux::{Netns, in_netns};
use calico_testkit::{NetNs, require_tool};
use ipnet::IpNet;

#[path = "nft/cases.rs"]
mod cases;
#[path = "nft/random.rs"]
mod random;
use cases::*;
use random::batch_strategy;

fn nft_handle(ns: &NetNs, table: &Table) -> Nft {
    Nft::new(Netns::named(ns.name()), table.clone())
}

/// `nft list table` in `ns`, with every `{ … }` list sorted (hash sets list in the order of
/// their hash, which is seeded per set) and continuation lines joined.
fn listing(ns: &NetNs, table: &Table) -> String {
    let out = ns.run_ok("nft", &["list", "table", "inet", &table.name], "");
    normalize(&out)
}

fn normalize(listing: &str) -> String {
    let mut joined = String::new();
    for line in listing.lines() {
        let trimmed = line.trim();
        if joined.ends_with(',')
            || joined.ends_with('{')
                && trimmed.starts_with(|c: char| c != '}')
                && !joined.ends_with(" {")
        {
            joined.push(' ');
            joined.push_str(trimmed);
        } else {
            joined.push('\n');
            joined.push_str(trimmed);
        }
    }
    let mut out = String::new();
    let mut rest = joined.as_str();
    while let Some(open) = rest.find("{ ") {
        let Some(close) = rest[open..].find(" }") else {
            break;
        };
        let inner = &rest[open + 2..open + close];
        out.push_str(&rest[..open]);
        if inner.contains(';') || inner.contains('\n') {
            out.push_str(&rest[open..open + close + 2]);
        } else {
            let mut items: Vec<&str> = inner.split(", ").collect();
            items.sort();
            out.push_str(&format!("{{ {} }}", items.join(", ")));
        }
        rest = &rest[open + close + 2..];
    }
    out.push_str(rest);
    out
}

fn nft_f(ns: &NetNs, script: &str) -> std::process::Output {
    ns.run("nft", &["-f", "-"], script)
}

#[test]
fn every_expression_and_set_kind_lists_the_same_through_netlink_and_nft_f() {
    require_tool("nft");
    let table = table("calico-t1");
    let batch = everything_batch();
    let ours = NetNs::new("nft-enc");
    let theirs = NetNs::new("nft-cli");
    nft_handle(&ours, &table).apply(&batch).unwrap();
    let script = batch.script(&table).to_string();
    let out = nft_f(&theirs, &script);
    assert!(
        out.status.success(),
        "nft -f refused our text: {}\n{script}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (a, b) = (listing(&ours, &table), listing(&theirs, &table));
    if a != b {
        let diff: Vec<String> = a
            .lines()
            .zip(b.lines())
            .filter(|(x, y)| x != y)
            .map(|(x, y)| format!("netlink: {x}\nnft -f:  {y}"))
            .collect();
        panic!(
            "listings differ:\n{}\n\nnetlink listing:\n{a}",
            diff.join("\n")
        );
    }
    // The text nft lists for rules written by nft itself reads back too (without digests).
    let read = nft_handle(&theirs, &table).read().unwrap().unwrap();
    let mine = nft_handle(&ours, &table).read().unwrap().unwrap();
    assert_eq!(
        read.sets, mine.sets,
        "elements and set specs read back alike"
    );
    for (name, chain) in &read.chains {
        assert!(chain.rules.iter().all(|r| r.digest.is_none()), "{name}");
        let comments: Vec<_> = chain.rules.iter().map(|r| &r.comment).collect();
        let mine_comments: Vec<_> = mine.chains[name].rules.iter().map(|r| &r.comment).collect();
        assert_eq!(comments, mine_comments, "{name}");
    }
}

#[test]
fn read_gives_back_exactly_the_digests_comments_and_elements_written() {
    let ns = NetNs::new("nft-read");
    let table = table("calico-rd");
    let kernel = nft_handle(&ns, &table);
    assert_eq!(kernel.read().unwrap(), None, "no table yet");
    let mut batch = everything_batch();
    // Enough elements to need many messages.
    let many: Vec<Element> = (0..20_000u32)
        .map(|i| Element::Net(IpNet::new(IpAddr::V4((0x0b00_0000 + (i << 8)).into()), 24).unwrap()))
        .collect();
    batch.push(Op::AddSet(SetSpec {
        name: "many".into(),
        kind: SetKind::Nets(IpFamily::V4),
        comment: Some("x".repeat(200)),
    }));
    batch.push(Op::AddElements {
        set: "many".into(),
        elements: many,
    });
    kernel.apply(&batch).unwrap();
    let fake = FakeNft::new(table.clone());
    fake.apply(&batch).unwrap();
    let read = kernel.read().unwrap().unwrap();
    assert_eq!(
        without_handles(&read),
        without_handles(&fake.read().unwrap().unwrap())
    );
    assert_eq!(read.sets["many"].elements.len(), 20_000);
    assert_eq!(
        read.sets["many"].spec.comment.as_deref().map(str::len),
        Some(COMMENT_MAX),
        "cut, as written"
    );
    let fwd = &read.chains["filter-forward"];
    let rules: Vec<&Rule> = batch
        .ops
        .iter()
        .filter_map(|op| match op {
            Op::AddRule { chain, rule } if chain == "filter-forward" => Some(rule),
            _ => None,
        })
        .collect();
    let digests: Vec<Option<u64>> = rules.iter().map(|r| Some(rule_digest(r))).collect();
    assert_eq!(
        fwd.rules.iter().map(|r| r.digest).collect::<Vec<_>>(),
        digests
    );
    // A handle's `handle()` reads the same from another thread.
    let other = kernel.handle();
    let again = std::thread::spawn(move || other.read().unwrap().unwrap())
        .join()
        .unwrap();
    assert_eq!(again, read);
}

fn without_handles(s: &TableSnapshot) -> TableSnapshot {
    let mut s = s.clone();
    for c in s.chains.values_mut() {
        for r in &mut c.rules {
            r.handle = 0;
        }
    }
    s
}

#[test]
fn a_refused_batch_names_its_operation_and_applies_nothing() {
    let ns = NetNs::new("nft-refuse");
    let table = table("calico-rf");
    let kernel = nft_handle(&ns, &table);
    kernel.apply(&everything_batch()).unwrap();
    let before = kernel.read().unwrap().unwrap();

    let cases: Vec<(Batch, usize, &str)> = vec![
        (
            Batch {
                ops: vec![
                    Op::AddChain(chain("fresh")),
                    Op::AddRule {
                        chain: "nowhere".into(),
                        rule: rule(vec![Expr::Counter]),
                    },
                ],
            },
            1,
            "ENOENT",
        ),
        (
            Batch {
                ops: vec![
                    Op::AddChain(chain("fresh")),
                    Op::DeleteChain("policy-a".into()),
                ],
            },
            1,
            "EBUSY",
        ),
        (
            Batch {
                ops: vec![
                    Op::FlushChain("filter-forward".into()),
                    Op::AddElements {
                        set: "nets-v4".into(),
                        elements: vec![Element::Net("10.65.0.0/25".parse().unwrap())],
                    },
                ],
            },
            1,
            "EEXIST",
        ),
        (
            Batch {
                ops: vec![
                    Op::FlushSet("nets-v4".into()),
                    Op::DeleteSet("nets-v4".into()),
                ],
            },
            1,
            "EBUSY",
        ),
        // Validated at commit: the rule that puts masquerade where filter-forward reaches it.
        (
            Batch {
                ops: vec![
                    Op::AddRule {
                        chain: "policy-b".into(),
                        rule: rule(vec![Expr::Counter]),
                    },
                    Op::AddRule {
                        chain: "endpoint-x".into(),
                        rule: rule(vec![Expr::Masquerade]),
                    },
                ],
            },
            1,
            "EOPNOTSUPP",
        ),
        // A loop: found where the jumps never end.
        (
            Batch {
                ops: vec![
                    Op::AddRule {
                        chain: "policy-b".into(),
                        rule: rule(vec![Expr::Verdict(Verdict::Jump("policy-a".into()))]),
                    },
                    Op::AddRule {
                        chain: "policy-a".into(),
                        rule: rule(vec![Expr::Verdict(Verdict::Jump("policy-b".into()))]),
                    },
                ],
            },
            1,
            "EMLINK",
        ),
    ];
    for (batch, index, errno) in cases {
        let e = kernel.apply(&batch).unwrap_err();
        let NftError::Refused {
            index: got,
            op,
            reason,
        } = &e
        else {
            panic!("{e}")
        };
        assert_eq!(*got, index, "{e}");
        assert!(reason.starts_with(errno), "{e}");
        assert!(op.contains(&summary_word(&batch.ops[index])), "{op}");
        assert_eq!(
            kernel.read().unwrap().unwrap(),
            before,
            "nothing of {batch:?} applied"
        );
        // The fake refuses the same operation.
        let fake = FakeNft::new(table.clone());
        fake.apply(&everything_batch()).unwrap();
        match fake.apply(&batch) {
            Err(NftError::Refused {
                index: i, reason, ..
            }) => {
                assert_eq!(i, index);
                assert!(reason.starts_with(errno), "{reason}");
            }
            other => panic!("fake: {other:?}"),
        }
    }
    // An element of the wrong kind is refused before anything is sent.
    let e = kernel
        .apply(&Batch {
            ops: vec![Op::AddElements {
                set: "nets-v4".into(),
                elements: vec![Element::Addr("10.9.9.9".parse().unwrap())],
            }],
        })
        .unwrap_err();
    assert!(
        matches!(&e, NftError::Invalid { index: 0, reason, .. } if reason.contains("does not fit a set of IPv4 nets")),
        "{e}"
    );
}

fn summary_word(op: &Op) -> String {
    match op {
        Op::AddRule { chain, .. } | Op::FlushChain(chain) | Op::DeleteChain(chain) => chain.clone(),
        Op::AddElements { set, .. }
        | Op::DeleteElements { set, .. }
        | Op::FlushSet(set)
        | Op::DeleteSet(set) => set.clone(),
        _ => String::new(),
    }
}

#[test]
fn probe_says_nf_tables_works_here() {
    let ns = NetNs::new("nft-probe");
    probe(&Netns::named(ns.name())).unwrap();
    let missing = probe(&Netns::named("no-such-namespace-xyz")).unwrap_err();
    assert!(
        missing.to_string().contains("no-such-namespace-xyz"),
        "{missing}"
    );
}

// ---- packets ----

/// Two namespaces joined by a veth pair: client 10.99.0.1 in `client`, server 10.99.0.2 in
/// `server` (interface `srv0`).
fn pair() -> (NetNs, NetNs) {
    let client = NetNs::new("nft-cl");
    let server = NetNs::new("nft-sv");
    client.run_ok(
        "ip",
        &[
            "link",
            "add",
            "cl0",
            "type",
            "veth",
            "peer",
            "name",
            "srv0",
            "netns",
            server.name(),
        ],
        "",
    );
    client.run_ok("ip", &["addr", "add", "10.99.0.1/24", "dev", "cl0"], "");
    client.run_ok("ip", &["link", "set", "cl0", "up"], "");
    server.run_ok("ip", &["addr", "add", "10.99.0.2/24", "dev", "srv0"], "");
    server.run_ok("ip", &["link", "set", "srv0", "up"], "");
    (client, server)
}

fn listen(ns: &NetNs, port: u16) -> TcpListener {
    in_netns(&Netns::named(ns.name()), || {
        TcpListener::bind(("10.99.0.2", port))
    })
    .unwrap()
}

/// Whether a TCP connection from the client reaches the server's port (a dropped SYN times
/// out: the handshake never completes).
fn connects(client: &NetNs, port: u16) -> bool {
    let to = SocketAddr::from(([10, 99, 0, 2], port));
    in_netns(&Netns::named(client.name()), || {
        Ok(TcpStream::connect_timeout(&to, Duration::from_millis(1500)).is_ok())
    })
    .unwrap()
}

#[test]
fn packets_are_dropped_by_port_by_set_membership_and_by_vmap_dispatch() {
    let (client, server) = pair();
    let _listeners: Vec<TcpListener> = (80..=85).map(|p| listen(&server, p)).collect();
    assert!(connects(&client, 81), "before any rule");
    let table = table("calico-pk");
    let kernel = nft_handle(&server, &table);
    let tcp = || Expr::L4Proto {
        proto: 6,
        negate: false,
    };
    let batch = Batch {
        ops: vec![
            Op::AddTable,
            Op::AddSet(SetSpec {
                name: "blocked".into(),
                kind: SetKind::Nets(IpFamily::V4),
                comment: None,
            }),
            Op::AddElements {
                set: "blocked".into(),
                elements: vec![Element::Net("10.99.0.0/30".parse().unwrap())],
            },
            Op::AddSet(SetSpec {
                name: "ports".into(),
                kind: SetKind::ProtoPortVmap,
                comment: None,
            }),
            Op::AddSet(SetSpec {
                name: "by-iface".into(),
                kind: SetKind::IfnameVmap,
                comment: None,
            }),
            Op::AddChain(chain("iface-srv0")),
            Op::AddRule {
                chain: "iface-srv0".into(),
                rule: rule(vec![Expr::Vmap {
                    key: MapKey::L4ProtoDport,
                    map: "ports".into(),
                }]),
            },
            Op::AddElements {
                set: "ports".into(),
                elements: vec![
                    Element::ProtoPorts {
                        proto: 6,
                        ports: Ports {
                            first: 83,
                            last: 83,
                        },
                        verdict: Verdict::Drop,
                    },
                    Element::ProtoPorts {
                        proto: 6,
                        ports: Ports {
                            first: 84,
                            last: 85,
                        },
                        verdict: Verdict::Accept,
                    },
                ],
            },
            Op::AddElements {
                set: "by-iface".into(),
                elements: vec![Element::Ifname {
                    name: "srv0".into(),
                    verdict: Verdict::Jump("iface-srv0".into()),
                }],
            },
            Op::AddChain(base("input", Hook::Input, ChainType::Filter, 0)),
            Op::AddRule {
                chain: "input".into(),
                rule: rule(vec![
                    tcp(),
                    ports(Dir::Dst, &[(81, 81)], false),
                    Expr::Verdict(Verdict::Drop),
                ]),
            },
            Op::AddRule {
                chain: "input".into(),
                rule: rule(vec![
                    Expr::NfProto(IpFamily::V4),
                    Expr::AddrInSet {
                        dir: Dir::Src,
                        family: IpFamily::V4,
                        set: "blocked".into(),
                        negate: false,
                    },
                    tcp(),
                    ports(Dir::Dst, &[(82, 82)], false),
                    Expr::Verdict(Verdict::Drop),
                ]),
            },
            Op::AddRule {
                chain: "input".into(),
                rule: rule(vec![Expr::Vmap {
                    key: MapKey::Iifname,
                    map: "by-iface".into(),
                }]),
            },
        ],
    };
    kernel.apply(&batch).unwrap();
    let reach: BTreeMap<u16, bool> = (80..=85).map(|p| (p, connects(&client, p))).collect();
    let want: BTreeMap<u16, bool> = [
        (80, true),
        (81, false),
        (82, false),
        (83, false),
        (84, true),
        (85, true),
    ]
    .into();
    assert_eq!(
        reach, want,
        "80 open; 81 by port; 82 by set; 83 by the vmaps; 84-85 accepted by the map"
    );
    // Membership and dispatch change with elements alone.
    kernel
        .apply(&Batch {
            ops: vec![
                Op::DeleteElements {
                    set: "blocked".into(),
                    elements: vec![Element::Net("10.99.0.0/30".parse().unwrap())],
                },
                Op::DeleteElements {
                    set: "by-iface".into(),
                    elements: vec![Element::Ifname {
                        name: "srv0".into(),
                        verdict: Verdict::Drop,
                    }],
                },
            ],
        })
        .unwrap();
    assert!(
        connects(&client, 82) && connects(&client, 83),
        "no longer in the set, no longer dispatched"
    );
    assert!(!connects(&client, 81), "the port rule stays");
}

// ---- the differential test ----

mod differential {
    use super::*;
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestRunner};

    #[test]
    fn the_fake_refuses_what_the_kernel_refuses_and_keeps_the_same_table() {
        let ns = NetNs::new("nft-diff");
        let table = table("calico-df");
        let kernel = nft_handle(&ns, &table);
        let cases = std::env::var("NFT_DIFF_CASES")
            .ok()
            .and_then(|c| c.parse().ok())
            .unwrap_or(400);
        let mut runner = TestRunner::new(Config {
            cases,
            failure_persistence: None,
            ..Config::default()
        });
        // What the kernel answered, by kind: the batches must reach both sides of each refusal.
        let seen = std::sync::Mutex::new(BTreeMap::<String, usize>::new());
        let result = runner.run(
            &proptest::collection::vec(batch_strategy(), 1..8),
            |batches| {
                // A fresh table for each case.
                let _ = kernel.apply(&Batch {
                    ops: vec![Op::AddTable, Op::DeleteTable],
                });
                let fake = FakeNft::new(table.clone());
                let setup = setup_batch();
                kernel.apply(&setup).unwrap();
                fake.apply(&setup).unwrap();
                for (step, batch) in batches.iter().enumerate() {
                    let k = kernel.apply(batch);
                    let f = fake.apply(batch);
                    let outcome = match &k {
                        Ok(()) => "accepted".to_owned(),
                        Err(NftError::Refused { reason, .. }) => {
                            reason.split(' ').next().unwrap_or_default().to_owned()
                        }
                        Err(NftError::Invalid { .. }) => "invalid".to_owned(),
                        Err(e) => e.to_string(),
                    };
                    *seen.lock().unwrap().entry(outcome).or_default() += 1;
                    let verdict = |r: &Result<(), NftError>| match r {
                        Ok(()) => None,
                        Err(NftError::Refused { index, .. } | NftError::Invalid { index, .. }) => {
                            Some(*index)
                        }
                        Err(e) => panic!("{e}"),
                    };
                    prop_assert_eq!(
                        verdict(&k),
                        verdict(&f),
                        "step {}: kernel {:?}, fake {:?}\nbatch:\n{}",
                        step,
                        k,
                        f,
                        batch.script(&table)
                    );
                    let (ks, fs) = (kernel.read().unwrap(), fake.read().unwrap());
                    prop_assert_eq!(
                        ks.as_ref().map(without_handles),
                        fs.as_ref().map(without_handles),
                        "step {}: tables differ after\n{}",
                        step,
                        batch.script(&table)
                    );
                }
                Ok(())
            },
        );
        if let Err(e) = result {
            panic!("{e}");
        }
        let seen = seen.into_inner().unwrap();
        eprintln!("kernel answers: {seen:?}");
        // (Kernel 6.18 finds loops by their depth: EMLINK.)
        for outcome in [
            "accepted",
            "invalid",
            "ENOENT",
            "EEXIST",
            "EBUSY",
            "EOPNOTSUPP",
            "EMLINK",
        ] {
            assert!(
                seen.get(outcome).copied().unwrap_or(0) >= cases as usize / 50,
                "too few {outcome} batches to compare: {seen:?}"
            );
        }
    }
}
