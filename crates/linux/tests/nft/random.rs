//! The random batches of the differential test: operations on a few tables, chains and sets,
//! mostly well formed, sometimes naming what is missing or of the wrong kind, so the fake and
//! the kernel are compared on what they refuse as well as on what they accept.

use super::*;
use proptest::prelude::*;

const CHAINS: [&str; 4] = ["a", "b", "c", "in"];

fn verdict() -> impl Strategy<Value = Verdict> {
    prop_oneof![
        Just(Verdict::Accept),
        Just(Verdict::Drop),
        Just(Verdict::Return),
        prop::sample::select(&["a", "b", "c", "in", "zz"][..])
            .prop_map(|c| Verdict::Jump(c.into())),
        prop::sample::select(&["a", "b", "c"][..]).prop_map(|c| Verdict::Goto(c.into())),
    ]
}

fn set_name() -> impl Strategy<Value = &'static str> {
    prop::sample::select(&["s4", "n4", "n6", "m", "pp", "x"][..])
}

/// Mostly one of `names`, sometimes any set (of the wrong kind, or missing).
fn likely(names: &'static [&'static str]) -> impl Strategy<Value = &'static str> {
    prop_oneof![6 => prop::sample::select(names), 1 => set_name()]
}

fn kind_of(set: &str) -> Option<SetKind> {
    match set {
        "s4" => Some(SetKind::Addrs(IpFamily::V4)),
        "n4" => Some(SetKind::Nets(IpFamily::V4)),
        "n6" => Some(SetKind::Nets(IpFamily::V6)),
        "m" => Some(SetKind::IfnameVmap),
        "pp" => Some(SetKind::ProtoPortVmap),
        _ => None,
    }
}

fn any_kind() -> impl Strategy<Value = SetKind> {
    prop_oneof![
        Just(SetKind::Addrs(IpFamily::V4)),
        Just(SetKind::Nets(IpFamily::V4)),
        Just(SetKind::Nets(IpFamily::V6)),
        Just(SetKind::IfnameVmap),
        Just(SetKind::ProtoPortVmap),
    ]
}

fn element_of(kind: SetKind) -> BoxedStrategy<Element> {
    let nets4 = [
        "10.0.0.0/24",
        "10.0.1.0/24",
        "10.0.0.0/23",
        "10.0.0.128/25",
        "0.0.0.0/0",
        "255.255.255.0/24",
        "10.0.2.0/24",
        "10.0.0.7/32",
    ];
    let nets6 = ["fd00::/64", "fd00::/48", "fd01::/64", "::/0", "fd00::1/128"];
    match kind {
        SetKind::Addrs(_) => prop::sample::select(&["10.0.0.1", "10.0.0.2", "10.0.0.3"][..])
            .prop_map(|a| Element::Addr(ip(a)))
            .boxed(),
        SetKind::Nets(IpFamily::V4) => prop::sample::select(nets4.to_vec())
            .prop_map(|n| Element::Net(net(n)))
            .boxed(),
        SetKind::Nets(IpFamily::V6) => prop::sample::select(nets6.to_vec())
            .prop_map(|n| Element::Net(net(n)))
            .boxed(),
        SetKind::IfnameVmap => (prop::sample::select(&["if0", "if1", "if2"][..]), verdict())
            .prop_map(|(n, v)| ifv(n, v))
            .boxed(),
        SetKind::ProtoPortVmap => (
            prop::sample::select(&[6u8, 17][..]),
            prop::sample::select(
                &[
                    (80u16, 80u16),
                    (80, 90),
                    (85, 85),
                    (1, 65535),
                    (90, 100),
                    (100, 100),
                    (70, 79),
                ][..],
            ),
            verdict(),
        )
            .prop_map(|(p, (a, b), v)| pp(p, a, b, v))
            .boxed(),
    }
}

fn elements(set: &'static str) -> BoxedStrategy<Vec<Element>> {
    let kind = kind_of(set);
    match kind {
        Some(kind) => {
            let one =
                prop_oneof![30 => element_of(kind), 1 => any_kind().prop_flat_map(element_of)];
            proptest::collection::vec(one, 1..4).boxed()
        }
        None => any_kind()
            .prop_flat_map(|k| proptest::collection::vec(element_of(k), 1..4))
            .boxed(),
    }
}

fn matches() -> impl Strategy<Value = Vec<Expr>> {
    use Dir::{Dst, Src};
    prop_oneof![
        Just(vec![]),
        Just(vec![v4(), addr(Src, "10.0.0.0/8", false)]),
        Just(vec![l4(6), ports(Dst, &[(80, 80), (443, 443)], false)]),
        Just(vec![v4(), l4(1), icmp(IpFamily::V4, 8, None, false)]),
        Just(vec![Expr::CtState {
            states: CtStates::NEW,
            negate: false
        }]),
        Just(vec![iif(prefix("cali"), false)]),
        likely(&["s4", "n4"]).prop_map(|s| vec![
            v4(),
            Expr::AddrInSet {
                dir: Src,
                family: IpFamily::V4,
                set: s.into(),
                negate: false
            }
        ]),
        likely(&["n6"]).prop_map(|s| vec![
            v6(),
            Expr::AddrInSet {
                dir: Dst,
                family: IpFamily::V6,
                set: s.into(),
                negate: true
            }
        ]),
        // A dependency left out: refused before it is sent.
        Just(vec![ports(Dst, &[(80, 80)], false)]),
    ]
}

fn statement() -> impl Strategy<Value = Vec<Expr>> {
    prop_oneof![
        6 => Just(vec![]),
        2 => Just(vec![Expr::Counter]),
        1 => Just(vec![Expr::Log { prefix: "x ".into(), group: None }]),
        1 => Just(vec![Expr::Notrack]),
        1 => Just(vec![Expr::Masquerade]),
        1 => Just(vec![v4(), Expr::Dnat { addr: ip("10.0.0.9"), port: None }]),
    ]
}

fn terminal() -> impl Strategy<Value = Vec<Expr>> {
    prop_oneof![
        2 => Just(vec![]),
        4 => verdict().prop_map(|v| vec![Expr::Verdict(v)]),
        1 => likely(&["m"]).prop_map(|m| vec![Expr::Vmap { key: MapKey::Iifname, map: m.into() }]),
        1 => likely(&["pp"]).prop_map(|m| vec![Expr::Vmap { key: MapKey::L4ProtoDport, map: m.into() }]),
    ]
}

fn random_rule() -> impl Strategy<Value = Rule> {
    (
        matches(),
        statement(),
        terminal(),
        proptest::option::of(Just("r".to_owned())),
    )
        .prop_map(|(m, s, t, comment)| {
            let mut exprs = m;
            exprs.extend(s);
            exprs.extend(t);
            if exprs.is_empty() {
                exprs.push(Expr::Counter);
            }
            Rule { exprs, comment }
        })
}

fn chain_spec() -> impl Strategy<Value = ChainSpec> {
    prop_oneof![
        4 => prop::sample::select(&CHAINS[..3]).prop_map(chain),
        2 => Just(base("in", Hook::Input, ChainType::Filter, 0)),
        1 => Just(ChainSpec { name: "in".into(), base: Some(BaseChain { kind: ChainType::Filter, hook: Hook::Input, priority: 0, policy: ChainPolicy::Drop }) }),
        1 => Just(base("in", Hook::Forward, ChainType::Filter, 0)),
        1 => Just(chain("in")),
        1 => Just(base("post", Hook::Postrouting, ChainType::Nat, 100)),
        1 => Just(base("a", Hook::Output, ChainType::Filter, 0)),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let chain_name =
        || prop::sample::select(&["a", "b", "c", "in", "post"][..]).prop_map(String::from);
    prop_oneof![
        1 => Just(Op::AddTable),
        3 => chain_spec().prop_map(Op::AddChain),
        1 => chain_name().prop_map(Op::FlushChain),
        2 => chain_name().prop_map(Op::DeleteChain),
        6 => (chain_name(), random_rule()).prop_map(|(chain, rule)| Op::AddRule { chain, rule }),
        3 => (set_name(), any_kind(), proptest::option::of(Just("c".to_owned()))).prop_map(|(s, k, comment)| {
            Op::AddSet(SetSpec { name: s.into(), kind: kind_of(s).unwrap_or(k), comment })
        }),
        1 => set_name().prop_map(|s| Op::FlushSet(s.into())),
        1 => set_name().prop_map(|s| Op::DeleteSet(s.into())),
        6 => set_name().prop_flat_map(|s| elements(s).prop_map(move |elements| Op::AddElements { set: s.into(), elements })),
        3 => set_name().prop_flat_map(|s| elements(s).prop_map(move |elements| Op::DeleteElements { set: s.into(), elements })),
        1 => Just(Op::DeleteTable),
    ]
}

pub fn batch_strategy() -> impl Strategy<Value = Batch> {
    (
        proptest::bool::weighted(0.7),
        proptest::collection::vec(op(), 1..7),
    )
        .prop_map(|(table_first, mut ops)| {
            if table_first {
                ops.insert(0, Op::AddTable);
            }
            Batch { ops }
        })
}
