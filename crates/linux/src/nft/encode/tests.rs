//! The encoder: message splits, sequence numbers, and what it refuses before sending.

use std::net::IpAddr;

use ipnet::IpNet;

use super::*;
use crate::nft::{Element, Ports, Verdict};

fn table() -> Table {
    Table {
        family: crate::nft::TableFamily::Inet,
        name: "calico".into(),
    }
}

fn unknown(_: &str) -> Option<SetKind> {
    None
}

#[test]
fn a_long_element_list_is_split_and_every_message_maps_to_its_operation() {
    let nets: Vec<Element> = (0..20_000u32)
        .map(|i| Element::Net(IpNet::new(IpAddr::V4((0x0a00_0000 + (i << 8)).into()), 24).unwrap()))
        .collect();
    let mut b = Batch::default();
    b.push(Op::AddTable);
    b.push(Op::AddSet(SetSpec {
        name: "nets".into(),
        kind: SetKind::Nets(IpFamily::V4),
        comment: None,
    }));
    b.push(Op::AddElements {
        set: "nets".into(),
        elements: nets,
    });
    b.push(Op::FlushChain("x".into()));
    let encoded = batch(&table(), &b, 100, &unknown).unwrap();
    let messages = messages(&encoded.bytes);
    let element_messages: Vec<_> = messages
        .iter()
        .filter(|m| m.kind == (NFNL_SUBSYS_NFTABLES << 8 | NFT_MSG_NEWSETELEM))
        .collect();
    assert!(
        element_messages.len() > 10,
        "{} messages",
        element_messages.len()
    );
    let mut total = 0;
    for m in &element_messages {
        assert_eq!(encoded.op_of(m.seq), Some(2));
        let list = attribute(&m.payload[4..], NFTA_SET_ELEM_LIST_ELEMENTS).unwrap();
        assert!(list.len() <= ELEMENTS_BUDGET);
        total += attributes(list).count();
    }
    assert_eq!(
        total, 40_000,
        "a start and an end per net, none lost at a split"
    );
    let last = messages.last().unwrap();
    assert_eq!(last.kind, NFNL_MSG_BATCH_END);
    assert_eq!(encoded.op_of(messages[messages.len() - 2].seq), Some(3));
    assert_eq!(
        encoded.op_of(100),
        None,
        "BATCH_BEGIN (errors at commit) is no operation"
    );
}

#[test]
fn a_rule_without_its_dependency_is_refused_naming_the_op_and_expression() {
    let mut b = Batch::default();
    b.push(Op::AddTable);
    b.push(Op::AddRule {
        chain: "c".into(),
        rule: Rule {
            exprs: vec![
                Expr::Ports {
                    dir: crate::nft::Dir::Dst,
                    ports: vec![Ports {
                        first: 80,
                        last: 80,
                    }],
                    negate: false,
                },
                Expr::Verdict(Verdict::Accept),
            ],
            comment: None,
        },
    });
    let e = batch(&table(), &b, 1, &unknown).unwrap_err();
    let NftError::Invalid { index, op, reason } = &e else {
        panic!("{e}")
    };
    assert_eq!(*index, 1);
    assert!(op.contains("add rule to chain c"), "{op}");
    assert!(
        reason.contains("th dport 80") && reason.contains("meta l4proto"),
        "{reason}"
    );
}

#[test]
fn elements_must_fit_their_set_as_the_batch_leaves_it() {
    let mut b = Batch::default();
    b.push(Op::AddSet(SetSpec {
        name: "s".into(),
        kind: SetKind::Nets(IpFamily::V4),
        comment: None,
    }));
    b.push(Op::AddElements {
        set: "s".into(),
        elements: vec![Element::Addr("10.0.0.1".parse().unwrap())],
    });
    let e = batch(&table(), &b, 1, &unknown).unwrap_err();
    assert!(
        e.to_string().contains("does not fit a set of IPv4 nets"),
        "{e}"
    );
    // Known before the batch, the same.
    let known = |s: &str| (s == "old").then_some(SetKind::IfnameVmap);
    let b = Batch {
        ops: vec![Op::AddElements {
            set: "old".into(),
            elements: vec![Element::Addr("10.0.0.1".parse().unwrap())],
        }],
    };
    assert!(batch(&table(), &b, 1, &known).is_err());
}

#[test]
fn an_empty_delete_sends_nothing_rather_than_a_flush() {
    let b = Batch {
        ops: vec![Op::DeleteElements {
            set: "s".into(),
            elements: vec![],
        }],
    };
    let encoded = batch(&table(), &b, 1, &unknown).unwrap();
    assert_eq!(messages(&encoded.bytes).len(), 2, "begin and end only");
}
