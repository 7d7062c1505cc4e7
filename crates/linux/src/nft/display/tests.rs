//! The `nft` text of a rule (and its digest) and of a batch.

use super::*;
use crate::nft::{Ports, rule_digest};

fn web_rule() -> Rule {
    Rule {
        exprs: vec![
            Expr::NfProto(IpFamily::V4),
            Expr::AddrInSet {
                dir: crate::nft::Dir::Src,
                family: IpFamily::V4,
                set: "v4-web".into(),
                negate: false,
            },
            Expr::L4Proto {
                proto: 6,
                negate: false,
            },
            Expr::Ports {
                dir: crate::nft::Dir::Dst,
                ports: vec![
                    Ports {
                        first: 443,
                        last: 443,
                    },
                    Ports {
                        first: 80,
                        last: 80,
                    },
                ],
                negate: false,
            },
            Expr::Verdict(Verdict::Jump("pol-in-default.web".into())),
        ],
        comment: Some("policy default.web rule 1".into()),
    }
}

#[test]
fn a_rule_prints_as_nft_reads_it_and_its_digest_is_fnv_1a_of_that_text() {
    let text = web_rule().to_string();
    assert_eq!(
        text,
        "meta nfproto ipv4 ip saddr @v4-web meta l4proto 6 th dport { 80, 443 } jump pol-in-default.web comment \"policy default.web rule 1\""
    );
    // FNV-1a 64, written out: the digest must not change with a crate version.
    let fnv = text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    assert_eq!(rule_digest(&web_rule()), fnv);
    let mut other = web_rule();
    other.comment = None;
    assert_ne!(rule_digest(&other), fnv, "the comment is part of the rule");
}

#[test]
fn a_batch_prints_as_an_nft_script_that_flushes_maps_as_maps() {
    let table = Table {
        family: TableFamily::Inet,
        name: "calico".into(),
    };
    let batch = Batch {
        ops: vec![
            Op::AddTable,
            Op::AddChain(ChainSpec {
                name: "filter-forward".into(),
                base: Some(BaseChain {
                    kind: ChainType::Filter,
                    hook: Hook::Forward,
                    priority: 0,
                    policy: ChainPolicy::Accept,
                }),
            }),
            Op::AddSet(SetSpec {
                name: "from-wl".into(),
                kind: SetKind::IfnameVmap,
                comment: Some("dispatch".into()),
            }),
            Op::FlushSet("from-wl".into()),
            Op::FlushSet("old".into()),
            Op::AddElements {
                set: "from-wl".into(),
                elements: vec![Element::Ifname {
                    name: "cali1".into(),
                    verdict: Verdict::Goto("x".into()),
                }],
            },
            Op::DeleteElements {
                set: "from-wl".into(),
                elements: vec![Element::Ifname {
                    name: "cali2".into(),
                    verdict: Verdict::Drop,
                }],
            },
            Op::AddElements {
                set: "from-wl".into(),
                elements: vec![],
            },
            Op::DeleteSet("from-wl".into()),
            Op::DeleteTable,
        ],
    };
    let script = batch
        .script(&table)
        .with_kinds([("old".to_owned(), SetKind::ProtoPortVmap)])
        .to_string();
    assert_eq!(
        script,
        "add table inet calico\n\
         add chain inet calico filter-forward { type filter hook forward priority 0; policy accept; }\n\
         add map inet calico from-wl { type ifname : verdict; comment \"dispatch\"; }\n\
         flush map inet calico from-wl\n\
         flush map inet calico old\n\
         add element inet calico from-wl { \"cali1\" : goto x }\n\
         delete element inet calico from-wl { \"cali2\" }\n\
         delete set inet calico from-wl\n\
         delete table inet calico\n"
    );
}
