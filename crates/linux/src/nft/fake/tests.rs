//! The fake's refusals, one by one (the differential test in `tests/nft.rs` checks them against
//! a real kernel).

use super::*;
use crate::nft::*;

fn table() -> Table {
    Table {
        family: TableFamily::Inet,
        name: "calico".into(),
    }
}

fn chain(name: &str) -> Op {
    Op::AddChain(ChainSpec {
        name: name.into(),
        base: None,
    })
}

fn base(name: &str, hook: Hook, kind: ChainType, policy: ChainPolicy) -> Op {
    Op::AddChain(ChainSpec {
        name: name.into(),
        base: Some(BaseChain {
            kind,
            hook,
            priority: 0,
            policy,
        }),
    })
}

fn rule(chain: &str, exprs: Vec<Expr>) -> Op {
    Op::AddRule {
        chain: chain.into(),
        rule: Rule {
            exprs,
            comment: None,
        },
    }
}

fn jump(to: &str) -> Expr {
    Expr::Verdict(Verdict::Jump(to.into()))
}

fn set(name: &str, kind: SetKind) -> Op {
    Op::AddSet(SetSpec {
        name: name.into(),
        kind,
        comment: None,
    })
}

fn add(set: &str, elements: Vec<Element>) -> Op {
    Op::AddElements {
        set: set.into(),
        elements,
    }
}

fn net(s: &str) -> Element {
    Element::Net(s.parse().unwrap())
}

fn applied(ops: Vec<Op>) -> FakeNft {
    let fake = FakeNft::new(table());
    fake.apply(&Batch { ops }).unwrap();
    fake
}

/// The index and errno of a refusal.
fn refusal(fake: &FakeNft, ops: Vec<Op>) -> (usize, String) {
    let before = fake.snapshot();
    match fake.apply(&Batch { ops }) {
        Err(NftError::Refused { index, reason, .. }) => {
            assert_eq!(fake.snapshot(), before, "a refused batch changes nothing");
            (index, reason.split(' ').next().unwrap().to_owned())
        }
        other => panic!("not refused: {other:?}"),
    }
}

#[test]
fn a_refused_batch_applies_none_of_its_operations() {
    let fake = applied(vec![Op::AddTable, chain("a")]);
    let (index, errno) = refusal(
        &fake,
        vec![
            chain("b"),
            rule("a", vec![Expr::Counter]),
            rule("nowhere", vec![Expr::Counter]),
        ],
    );
    assert_eq!((index, errno.as_str()), (2, "ENOENT"));
    assert!(!fake.snapshot().unwrap().chains.contains_key("b"));
    assert!(
        fake.applied().len() == 1,
        "only the first batch was applied"
    );
}

#[test]
fn jumps_need_a_chain_that_exists_and_is_no_base_chain() {
    let fake = applied(vec![
        Op::AddTable,
        chain("a"),
        base("in", Hook::Input, ChainType::Filter, ChainPolicy::Accept),
    ]);
    assert_eq!(
        refusal(&fake, vec![rule("a", vec![jump("b")])]),
        (0, "ENOENT".into())
    );
    assert_eq!(
        refusal(&fake, vec![rule("a", vec![jump("in")])]),
        (0, "EOPNOTSUPP".into())
    );
    assert_eq!(
        refusal(
            &fake,
            vec![rule(
                "a",
                vec![Expr::Vmap {
                    key: MapKey::Iifname,
                    map: "m".into()
                }]
            )]
        ),
        (0, "ENOENT".into())
    );
}

#[test]
fn a_chain_or_set_in_use_is_not_deleted() {
    let fake = applied(vec![
        Op::AddTable,
        chain("a"),
        chain("b"),
        chain("c"),
        rule("a", vec![jump("b")]),
        set("m", SetKind::IfnameVmap),
        add(
            "m",
            vec![Element::Ifname {
                name: "cali1".into(),
                verdict: Verdict::Goto("c".into()),
            }],
        ),
        set("s", SetKind::Addrs(IpFamily::V4)),
        rule(
            "a",
            vec![
                Expr::NfProto(IpFamily::V4),
                Expr::AddrInSet {
                    dir: Dir::Src,
                    family: IpFamily::V4,
                    set: "s".into(),
                    negate: false,
                },
                Expr::Counter,
            ],
        ),
    ]);
    assert_eq!(
        refusal(&fake, vec![Op::DeleteChain("b".into())]),
        (0, "EBUSY".into())
    );
    assert_eq!(
        refusal(&fake, vec![Op::DeleteChain("c".into())]),
        (0, "EBUSY".into()),
        "a map element jumps to it"
    );
    assert_eq!(
        refusal(&fake, vec![Op::DeleteSet("s".into())]),
        (0, "EBUSY".into())
    );
    // Without the references they go; a chain's own rules go with it.
    fake.apply(&Batch {
        ops: vec![
            Op::DeleteChain("a".into()),
            Op::DeleteChain("b".into()),
            Op::DeleteSet("s".into()),
            Op::FlushSet("m".into()),
            Op::DeleteChain("c".into()),
        ],
    })
    .unwrap();
    assert_eq!(fake.snapshot().unwrap().chains.len(), 0);
}

#[test]
fn elements_must_not_overlap_or_clash() {
    let fake = applied(vec![
        Op::AddTable,
        chain("a"),
        set("n", SetKind::Nets(IpFamily::V4)),
        add("n", vec![net("10.0.0.0/24"), net("10.0.1.0/24")]),
        set("pp", SetKind::ProtoPortVmap),
        add(
            "pp",
            vec![Element::ProtoPorts {
                proto: 6,
                ports: Ports {
                    first: 80,
                    last: 90,
                },
                verdict: Verdict::Accept,
            }],
        ),
    ]);
    assert_eq!(
        refusal(&fake, vec![add("n", vec![net("10.0.0.128/25")])]),
        (0, "EEXIST".into())
    );
    assert_eq!(
        refusal(&fake, vec![add("n", vec![net("10.0.0.0/16")])]),
        (0, "EEXIST".into())
    );
    let pp = |first, last, verdict| Element::ProtoPorts {
        proto: 6,
        ports: Ports { first, last },
        verdict,
    };
    assert_eq!(
        refusal(&fake, vec![add("pp", vec![pp(85, 100, Verdict::Drop)])]),
        (0, "EEXIST".into())
    );
    assert_eq!(
        refusal(&fake, vec![add("pp", vec![pp(80, 90, Verdict::Drop)])]),
        (0, "EEXIST".into()),
        "another verdict"
    );
    // The same element again is no change; an interval that only contains another is taken
    // (as the kernel's pipapo backend does).
    fake.apply(&Batch {
        ops: vec![
            add("n", vec![net("10.0.0.0/24")]),
            add(
                "pp",
                vec![pp(80, 90, Verdict::Accept), pp(1, 1000, Verdict::Drop)],
            ),
        ],
    })
    .unwrap();
    // A net that reaches the last address is checked before the kernel sees it.
    let e = fake
        .apply(&Batch {
            ops: vec![add("n", vec![net("0.0.0.0/0")])],
        })
        .unwrap_err();
    assert!(
        matches!(&e, NftError::Invalid { index: 0, reason, .. } if reason.contains("overlaps")),
        "{e}"
    );
}

#[test]
fn base_chains_keep_their_hook_and_take_a_new_policy() {
    let fake = applied(vec![
        Op::AddTable,
        base("in", Hook::Input, ChainType::Filter, ChainPolicy::Accept),
    ]);
    assert_eq!(
        refusal(
            &fake,
            vec![base(
                "in",
                Hook::Forward,
                ChainType::Filter,
                ChainPolicy::Accept
            )]
        ),
        (0, "EEXIST".into())
    );
    assert_eq!(
        refusal(
            &fake,
            vec![
                chain("x"),
                base("x", Hook::Input, ChainType::Filter, ChainPolicy::Accept)
            ]
        ),
        (1, "EEXIST".into())
    );
    assert_eq!(
        refusal(
            &fake,
            vec![base(
                "n",
                Hook::Forward,
                ChainType::Nat,
                ChainPolicy::Accept
            )]
        ),
        (0, "EOPNOTSUPP".into())
    );
    fake.apply(&Batch {
        ops: vec![
            base("in", Hook::Input, ChainType::Filter, ChainPolicy::Drop),
            chain("in"),
        ],
    })
    .unwrap();
    let spec = &fake.snapshot().unwrap().chains["in"].spec;
    assert_eq!(spec.base.unwrap().policy, ChainPolicy::Drop);
}

#[test]
fn what_a_base_chain_cannot_run_is_refused_where_it_becomes_reachable() {
    let fake = applied(vec![
        Op::AddTable,
        chain("a"),
        chain("b"),
        base("in", Hook::Input, ChainType::Filter, ChainPolicy::Accept),
    ]);
    // Masquerade in a chain no base chain reaches is fine until a filter chain jumps there;
    // the kernel validates at commit and names the rule that made the table invalid.
    let (index, errno) = refusal(
        &fake,
        vec![
            rule("a", vec![Expr::Masquerade]),
            rule("b", vec![Expr::Counter]),
            rule("in", vec![jump("a")]),
        ],
    );
    assert_eq!((index, errno.as_str()), (2, "EOPNOTSUPP"));
    // A refusal as the kernel takes an operation wins over one found at commit.
    let (index, _) = refusal(
        &fake,
        vec![
            rule("in", vec![jump("a")]),
            rule("a", vec![Expr::Masquerade]),
            rule("zz", vec![Expr::Counter]),
        ],
    );
    assert_eq!(index, 2);
    // Loops never end: the kernel finds them at its jump stack's depth.
    let (index, errno) = refusal(
        &fake,
        vec![
            rule("in", vec![jump("a")]),
            rule("a", vec![jump("b")]),
            rule("b", vec![jump("a")]),
        ],
    );
    assert_eq!((index, errno.as_str()), (2, "EMLINK"));
}

#[test]
fn read_back_gives_digests_and_cut_comments_and_injected_failures_change_nothing() {
    let long = "x".repeat(300);
    let fake = applied(vec![
        Op::AddTable,
        chain("a"),
        Op::AddRule {
            chain: "a".into(),
            rule: Rule {
                exprs: vec![Expr::Counter],
                comment: Some(long.clone()),
            },
        },
    ]);
    let read = fake.read().unwrap().unwrap();
    let r = &read.chains["a"].rules[0];
    assert_eq!(r.comment.as_deref(), Some(&long[..COMMENT_MAX]));
    assert_eq!(
        r.digest,
        Some(rule_digest(&Rule {
            exprs: vec![Expr::Counter],
            comment: Some(long)
        }))
    );
    fake.fail_next();
    let e = fake
        .apply(&Batch {
            ops: vec![Op::DeleteTable],
        })
        .unwrap_err();
    assert!(matches!(e, NftError::Socket { .. }));
    assert!(fake.snapshot().is_some());
    let other = fake.on_table(Table {
        family: TableFamily::Inet,
        name: "other".into(),
    });
    assert_eq!(other.read().unwrap(), None, "tables are separate");
}
