//! The batches the nf_tables tests write: one with every expression, set kind and operation,
//! and the set-up of the drift tests (the random batches are `random.rs`'s).

use super::*;

pub fn table(name: &str) -> Table {
    Table {
        family: TableFamily::Inet,
        name: name.into(),
    }
}

pub fn chain(name: &str) -> ChainSpec {
    ChainSpec {
        name: name.into(),
        base: None,
    }
}

pub fn base(name: &str, hook: Hook, kind: ChainType, priority: i32) -> ChainSpec {
    ChainSpec {
        name: name.into(),
        base: Some(BaseChain {
            kind,
            hook,
            priority,
            policy: ChainPolicy::Accept,
        }),
    }
}

pub fn rule(exprs: Vec<Expr>) -> Rule {
    Rule {
        exprs,
        comment: None,
    }
}

pub fn commented(exprs: Vec<Expr>, comment: &str) -> Rule {
    Rule {
        exprs,
        comment: Some(comment.into()),
    }
}

pub fn ports(dir: Dir, ranges: &[(u16, u16)], negate: bool) -> Expr {
    Expr::Ports {
        dir,
        ports: ranges
            .iter()
            .map(|&(first, last)| Ports { first, last })
            .collect(),
        negate,
    }
}

pub fn net(s: &str) -> IpNet {
    s.parse().unwrap()
}

pub fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

pub fn l4(proto: u8) -> Expr {
    Expr::L4Proto {
        proto,
        negate: false,
    }
}

pub fn v4() -> Expr {
    Expr::NfProto(IpFamily::V4)
}

pub fn v6() -> Expr {
    Expr::NfProto(IpFamily::V6)
}

pub fn addr(dir: Dir, s: &str, negate: bool) -> Expr {
    Expr::Addr {
        dir,
        net: net(s),
        negate,
    }
}

pub fn iif(name: IfName, negate: bool) -> Expr {
    Expr::Iifname { name, negate }
}

pub fn exact(s: &str) -> IfName {
    IfName::Exact(s.into())
}

pub fn prefix(s: &str) -> IfName {
    IfName::Prefix(s.into())
}

pub fn v(verdict: Verdict) -> Expr {
    Expr::Verdict(verdict)
}

pub fn icmp(family: IpFamily, icmp_type: u8, code: Option<u8>, negate: bool) -> Expr {
    Expr::Icmp {
        family,
        icmp_type,
        code,
        negate,
    }
}

pub fn set(name: &str, kind: SetKind, comment: Option<&str>) -> Op {
    Op::AddSet(SetSpec {
        name: name.into(),
        kind,
        comment: comment.map(Into::into),
    })
}

pub fn add(set: &str, elements: Vec<Element>) -> Op {
    Op::AddElements {
        set: set.into(),
        elements,
    }
}

pub fn pp(proto: u8, first: u16, last: u16, verdict: Verdict) -> Element {
    Element::ProtoPorts {
        proto,
        ports: Ports { first, last },
        verdict,
    }
}

pub fn ifv(name: &str, verdict: Verdict) -> Element {
    Element::Ifname {
        name: name.into(),
        verdict,
    }
}

pub fn rules(chain: &str, rules: Vec<Rule>) -> Vec<Op> {
    rules
        .into_iter()
        .map(|rule| Op::AddRule {
            chain: chain.into(),
            rule,
        })
        .collect()
}

/// One batch with every expression, every set kind and every operation.
pub fn everything_batch() -> Batch {
    use Dir::{Dst, Src};
    let jump = |c: &str| Verdict::Jump(c.into());
    let goto = |c: &str| Verdict::Goto(c.into());
    let mut ops = vec![
        Op::AddTable,
        Op::AddChain(base("filter-forward", Hook::Forward, ChainType::Filter, 0)),
        Op::AddChain(ChainSpec {
            name: "filter-input".into(),
            base: Some(BaseChain {
                kind: ChainType::Filter,
                hook: Hook::Input,
                priority: 10,
                policy: ChainPolicy::Drop,
            }),
        }),
        Op::AddChain(base("filter-output", Hook::Output, ChainType::Filter, 0)),
        Op::AddChain(base(
            "raw-prerouting",
            Hook::Prerouting,
            ChainType::Filter,
            -300,
        )),
        Op::AddChain(base(
            "nat-prerouting",
            Hook::Prerouting,
            ChainType::Nat,
            -100,
        )),
        Op::AddChain(base(
            "nat-postrouting",
            Hook::Postrouting,
            ChainType::Nat,
            100,
        )),
        Op::AddChain(chain("policy-a")),
        Op::AddChain(chain("policy-b")),
        Op::AddChain(chain("endpoint-x")),
        Op::AddChain(chain("doomed")),
        Op::DeleteChain("doomed".into()),
        set(
            "addrs-v4",
            SetKind::Addrs(IpFamily::V4),
            Some("workload addresses of profile web"),
        ),
        set("addrs-v6", SetKind::Addrs(IpFamily::V6), None),
        set("nets-v4", SetKind::Nets(IpFamily::V4), Some("nets")),
        set("nets-v6", SetKind::Nets(IpFamily::V6), None),
        set("by-iface", SetKind::IfnameVmap, Some("endpoint dispatch")),
        set("by-port", SetKind::ProtoPortVmap, None),
        set("doomed-set", SetKind::Addrs(IpFamily::V4), None),
        add("doomed-set", vec![Element::Addr(ip("1.2.3.4"))]),
        Op::FlushSet("doomed-set".into()),
        Op::DeleteSet("doomed-set".into()),
        add(
            "addrs-v4",
            vec![
                Element::Addr(ip("10.65.0.1")),
                Element::Addr(ip("10.65.0.2")),
            ],
        ),
        add("addrs-v6", vec![Element::Addr(ip("fd00::1"))]),
        add(
            "nets-v4",
            vec![
                Element::Net(net("10.65.0.0/24")),
                Element::Net(net("10.65.1.0/24")),
                Element::Net(net("192.168.0.0/16")),
                Element::Net(net("255.255.255.0/24")),
                Element::Net(net("10.66.0.0/24")),
            ],
        ),
        Op::DeleteElements {
            set: "nets-v4".into(),
            elements: vec![Element::Net(net("10.66.0.0/24"))],
        },
        add(
            "nets-v6",
            vec![
                Element::Net(net("fd00::/64")),
                Element::Net(net("fd01::/48")),
            ],
        ),
        add(
            "by-iface",
            vec![
                ifv("cali1", jump("policy-a")),
                ifv("cali2", goto("policy-b")),
                ifv("tap0", Verdict::Accept),
                ifv("tap1", Verdict::Drop),
                ifv("tap2", Verdict::Return),
            ],
        ),
        Op::DeleteElements {
            set: "by-iface".into(),
            elements: vec![ifv("tap2", Verdict::Return)],
        },
        add("by-port", vec![pp(6, 80, 80, jump("policy-a"))]),
        Op::FlushSet("by-port".into()),
        add(
            "by-port",
            vec![
                pp(6, 80, 80, jump("policy-a")),
                pp(17, 1000, 2000, Verdict::Drop),
                pp(132, 0, 65535, Verdict::Accept),
                pp(17, 53, 53, goto("policy-b")),
                pp(6, 443, 443, Verdict::Return),
            ],
        ),
        Op::DeleteElements {
            set: "by-port".into(),
            elements: vec![pp(6, 443, 443, Verdict::Return)],
        },
    ];
    ops.extend(rules(
        "policy-a",
        vec![commented(
            vec![Expr::Counter, v(Verdict::Accept)],
            "policy a: allow",
        )],
    ));
    ops.extend(rules("policy-b", vec![rule(vec![v(Verdict::Return)])]));
    ops.extend(rules("endpoint-x", vec![rule(vec![Expr::Counter])]));
    ops.push(Op::FlushChain("endpoint-x".into()));
    ops.extend(rules("endpoint-x", vec![rule(vec![v(Verdict::Drop)])]));
    let forward = vec![
        rule(vec![
            Expr::CtState {
                states: CtStates::ESTABLISHED.union(CtStates::RELATED),
                negate: false,
            },
            v(Verdict::Accept),
        ]),
        rule(vec![
            Expr::CtState {
                states: CtStates::INVALID,
                negate: false,
            },
            v(Verdict::Drop),
        ]),
        rule(vec![
            Expr::CtState {
                states: CtStates::NEW,
                negate: true,
            },
            Expr::Counter,
        ]),
        rule(vec![
            Expr::CtState {
                states: CtStates::INVALID.union(CtStates::UNTRACKED),
                negate: true,
            },
            Expr::Counter,
        ]),
        rule(vec![
            iif(prefix("cali"), false),
            Expr::Oifname {
                name: exact("eth0"),
                negate: true,
            },
            v(jump("policy-a")),
        ]),
        rule(vec![
            iif(prefix("tap"), true),
            Expr::Oifname {
                name: exact("cali1"),
                negate: false,
            },
            Expr::Counter,
        ]),
        rule(vec![
            iif(exact("cali12345678901"), false),
            iif(prefix("cali1"), false),
            Expr::Counter,
        ]),
        rule(vec![
            v4(),
            addr(Src, "10.65.0.0/16", false),
            addr(Dst, "10.65.0.0/23", true),
            Expr::Counter,
        ]),
        rule(vec![
            v4(),
            addr(Src, "10.0.0.0/8", false),
            addr(Dst, "10.65.0.1/32", false),
            v(Verdict::Accept),
        ]),
        rule(vec![
            v4(),
            addr(Src, "0.0.0.0/0", false),
            addr(Dst, "10.65.0.128/25", false),
            v(Verdict::Accept),
        ]),
        rule(vec![
            v6(),
            addr(Src, "fd00::/60", false),
            addr(Dst, "fd00::/64", false),
            addr(Src, "fd00::1/128", true),
            Expr::Counter,
        ]),
        rule(vec![v6(), addr(Dst, "::/0", false), Expr::Counter]),
        rule(vec![
            v4(),
            Expr::AddrInSet {
                dir: Src,
                family: IpFamily::V4,
                set: "addrs-v4".into(),
                negate: false,
            },
            Expr::AddrInSet {
                dir: Dst,
                family: IpFamily::V4,
                set: "nets-v4".into(),
                negate: true,
            },
            v(Verdict::Drop),
        ]),
        rule(vec![
            v6(),
            Expr::AddrInSet {
                dir: Dst,
                family: IpFamily::V6,
                set: "nets-v6".into(),
                negate: false,
            },
            Expr::AddrInSet {
                dir: Src,
                family: IpFamily::V6,
                set: "addrs-v6".into(),
                negate: true,
            },
            v(Verdict::Drop),
        ]),
        rule(vec![
            l4(6),
            ports(Dst, &[(80, 80)], false),
            v(Verdict::Accept),
        ]),
        rule(vec![
            l4(17),
            ports(Src, &[(53, 53)], true),
            ports(Dst, &[(1000, 2000)], false),
            v(Verdict::Accept),
        ]),
        rule(vec![
            l4(6),
            ports(Dst, &[(3000, 4000)], true),
            v(Verdict::Accept),
        ]),
        rule(vec![
            l4(6),
            ports(Dst, &[(443, 443), (22, 22), (80, 80)], false),
            v(Verdict::Accept),
        ]),
        rule(vec![
            l4(6),
            ports(Dst, &[(22, 22), (80, 80)], true),
            v(Verdict::Drop),
        ]),
        rule(vec![
            l4(17),
            ports(Dst, &[(53, 53), (67, 68), (1000, 2000)], false),
            v(Verdict::Accept),
        ]),
        rule(vec![
            l4(132),
            ports(Src, &[(0, 10), (65535, 65535)], false),
            v(Verdict::Accept),
        ]),
        rule(vec![
            l4(6),
            ports(Dst, &[(1, 5), (7, 9)], true),
            v(Verdict::Accept),
        ]),
        rule(vec![
            l4(6),
            ports(Dst, &[(50, 52), (53, 53)], false),
            v(Verdict::Accept),
        ]),
        rule(vec![
            Expr::L4Proto {
                proto: 6,
                negate: true,
            },
            Expr::Counter,
        ]),
        rule(vec![
            v4(),
            l4(1),
            icmp(IpFamily::V4, 8, None, false),
            v(Verdict::Accept),
        ]),
        rule(vec![
            v4(),
            l4(1),
            icmp(IpFamily::V4, 8, None, true),
            v(Verdict::Drop),
        ]),
        rule(vec![
            v4(),
            l4(1),
            icmp(IpFamily::V4, 3, Some(4), false),
            v(Verdict::Accept),
        ]),
        rule(vec![
            v4(),
            l4(1),
            icmp(IpFamily::V4, 3, Some(4), true),
            v(Verdict::Drop),
        ]),
        rule(vec![
            v6(),
            l4(58),
            icmp(IpFamily::V6, 128, Some(0), false),
            v(Verdict::Accept),
        ]),
        rule(vec![
            v6(),
            l4(58),
            icmp(IpFamily::V6, 135, None, true),
            v(Verdict::Drop),
        ]),
        rule(vec![
            v6(),
            l4(58),
            icmp(IpFamily::V6, 1, Some(4), true),
            v(Verdict::Drop),
        ]),
        rule(vec![
            Expr::Mark {
                mask: u32::MAX,
                value: 1,
                negate: false,
            },
            v(Verdict::Accept),
        ]),
        rule(vec![
            Expr::Mark {
                mask: u32::MAX,
                value: 2,
                negate: true,
            },
            Expr::Counter,
        ]),
        rule(vec![
            Expr::Mark {
                mask: 0xff,
                value: 1,
                negate: false,
            },
            v(Verdict::Accept),
        ]),
        rule(vec![
            Expr::Mark {
                mask: 0xff00,
                value: 0x100,
                negate: true,
            },
            v(Verdict::Drop),
        ]),
        rule(vec![Expr::SetMark {
            mask: u32::MAX,
            value: 5,
        }]),
        rule(vec![Expr::SetMark {
            mask: 0xf,
            value: 3,
        }]),
        rule(vec![Expr::SetMark {
            mask: 0,
            value: 0x10,
        }]),
        rule(vec![
            Expr::Log {
                prefix: "calico-drop ".into(),
                group: Some(3),
            },
            v(Verdict::Drop),
        ]),
        rule(vec![
            Expr::Log {
                prefix: "calico-packet: ".into(),
                group: None,
            },
            Expr::Counter,
        ]),
        rule(vec![Expr::Log {
            prefix: String::new(),
            group: None,
        }]),
        rule(vec![Expr::Log {
            prefix: String::new(),
            group: Some(2),
        }]),
        rule(vec![Expr::DaddrIsLocal, v(Verdict::Accept)]),
        commented(
            vec![Expr::Counter],
            "policy default/web rule 3: allow from role == \"db\"",
        ),
        commented(vec![Expr::Counter], &"long comment ".repeat(20)),
        rule(vec![Expr::Vmap {
            key: MapKey::Iifname,
            map: "by-iface".into(),
        }]),
        rule(vec![Expr::Vmap {
            key: MapKey::Oifname,
            map: "by-iface".into(),
        }]),
        rule(vec![Expr::Vmap {
            key: MapKey::L4ProtoDport,
            map: "by-port".into(),
        }]),
        rule(vec![v(jump("policy-b"))]),
        rule(vec![v(goto("endpoint-x"))]),
        rule(vec![v(Verdict::Return)]),
    ];
    // The comment with a '"' cannot be written: keep the rest of it.
    let forward: Vec<Rule> = forward
        .into_iter()
        .map(|mut r| {
            if let Some(c) = &mut r.comment {
                *c = c.replace('"', "'");
            }
            r
        })
        .collect();
    ops.extend(rules("filter-forward", forward));
    ops.extend(rules(
        "filter-input",
        vec![rule(vec![Expr::DaddrIsLocal, v(jump("endpoint-x"))])],
    ));
    ops.extend(rules(
        "filter-output",
        vec![rule(vec![
            v4(),
            addr(Dst, "169.254.169.254/32", false),
            v(Verdict::Accept),
        ])],
    ));
    ops.extend(rules(
        "raw-prerouting",
        vec![
            rule(vec![Expr::Notrack]),
            rule(vec![l4(17), ports(Dst, &[(53, 53)], false), Expr::Notrack]),
        ],
    ));
    ops.extend(rules(
        "nat-prerouting",
        vec![
            rule(vec![
                v4(),
                addr(Dst, "10.96.0.1/32", false),
                Expr::Dnat {
                    addr: ip("10.65.0.5"),
                    port: None,
                },
            ]),
            rule(vec![
                v4(),
                l4(6),
                ports(Dst, &[(80, 80)], false),
                Expr::Dnat {
                    addr: ip("127.0.0.1"),
                    port: Some(8775),
                },
            ]),
            rule(vec![
                v6(),
                Expr::Dnat {
                    addr: ip("fd00::5"),
                    port: None,
                },
            ]),
            rule(vec![
                v6(),
                l4(17),
                Expr::Dnat {
                    addr: ip("fd00::5"),
                    port: Some(53),
                },
            ]),
        ],
    ));
    ops.extend(rules(
        "nat-postrouting",
        vec![
            rule(vec![
                v4(),
                Expr::Snat {
                    addr: ip("172.16.0.1"),
                },
            ]),
            rule(vec![
                v6(),
                Expr::Snat {
                    addr: ip("fd00::9"),
                },
            ]),
            rule(vec![
                v4(),
                addr(Src, "10.65.0.0/16", false),
                addr(Dst, "10.65.0.0/16", true),
                Expr::Masquerade,
            ]),
        ],
    ));
    Batch { ops }
}

// ---- random batches for the differential test ----

/// What each case of the differential test starts from: chains, a base chain, one set of
/// each kind with a few elements, rules that jump and look up.
pub fn setup_batch() -> Batch {
    let mut ops = vec![
        Op::AddTable,
        Op::AddChain(chain("a")),
        Op::AddChain(chain("b")),
        Op::AddChain(chain("c")),
        Op::AddChain(base("in", Hook::Input, ChainType::Filter, 0)),
        set("s4", SetKind::Addrs(IpFamily::V4), None),
        set("n4", SetKind::Nets(IpFamily::V4), Some("nets")),
        set("n6", SetKind::Nets(IpFamily::V6), None),
        set("m", SetKind::IfnameVmap, None),
        set("pp", SetKind::ProtoPortVmap, None),
        add("s4", vec![Element::Addr(ip("10.0.0.1"))]),
        add(
            "n4",
            vec![
                Element::Net(net("10.0.0.0/24")),
                Element::Net(net("255.255.255.0/24")),
            ],
        ),
        add("n6", vec![Element::Net(net("fd00::/64"))]),
        add(
            "m",
            vec![
                ifv("if0", Verdict::Jump("a".into())),
                ifv("if1", Verdict::Accept),
            ],
        ),
        add(
            "pp",
            vec![
                pp(6, 80, 90, Verdict::Jump("b".into())),
                pp(17, 100, 100, Verdict::Drop),
            ],
        ),
    ];
    ops.extend(rules(
        "in",
        vec![rule(vec![Expr::Vmap {
            key: MapKey::Iifname,
            map: "m".into(),
        }])],
    ));
    ops.extend(rules(
        "a",
        vec![rule(vec![Expr::Vmap {
            key: MapKey::L4ProtoDport,
            map: "pp".into(),
        }])],
    ));
    ops.extend(rules(
        "b",
        vec![rule(vec![
            v4(),
            Expr::AddrInSet {
                dir: Dir::Src,
                family: IpFamily::V4,
                set: "n4".into(),
                negate: false,
            },
            v(Verdict::Jump("c".into())),
        ])],
    ));
    Batch { ops }
}
