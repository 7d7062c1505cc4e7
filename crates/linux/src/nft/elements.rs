//! Set elements: which kind of set each fits, and how the kernel treats elements beside each
//! other (the same key, overlapping intervals, intervals that reach the last address).

use std::collections::BTreeSet;
use std::net::IpAddr;

use ipnet::IpNet;

use super::forms::{family_of, family_of_net};
use super::{Batch, Element, IpFamily, NftError, Op, SetKind, summary};

/// Whether `e` is an element of a set of `kind`.
pub(super) fn fits(e: &Element, kind: SetKind) -> bool {
    match (e, kind) {
        (Element::Addr(a), SetKind::Addrs(f)) => family_of(a) == f,
        (Element::Net(n), SetKind::Nets(f)) => family_of_net(n) == f,
        (Element::Ifname { .. }, SetKind::IfnameVmap) => true,
        (Element::ProtoPorts { .. }, SetKind::ProtoPortVmap) => true,
        _ => false,
    }
}

pub(super) fn family_name(family: IpFamily) -> &'static str {
    match family {
        IpFamily::V4 => "IPv4",
        IpFamily::V6 => "IPv6",
    }
}

pub(super) fn kind_name(kind: SetKind) -> &'static str {
    match kind {
        SetKind::Addrs(IpFamily::V4) => "IPv4 addresses",
        SetKind::Addrs(IpFamily::V6) => "IPv6 addresses",
        SetKind::Nets(IpFamily::V4) => "IPv4 nets",
        SetKind::Nets(IpFamily::V6) => "IPv6 nets",
        SetKind::IfnameVmap => "interface name → verdict",
        SetKind::ProtoPortVmap => "protocol . port range → verdict",
    }
}

pub(super) fn element_kind(e: &Element) -> &'static str {
    match e {
        Element::Addr(IpAddr::V4(_)) => "an IPv4 address",
        Element::Addr(IpAddr::V6(_)) => "an IPv6 address",
        Element::Net(IpNet::V4(_)) => "an IPv4 net",
        Element::Net(IpNet::V6(_)) => "an IPv6 net",
        Element::Ifname { .. } => "an interface name → verdict",
        Element::ProtoPorts { .. } => "a protocol . port range → verdict",
    }
}

/// Whether two elements have the same key (a map's verdict aside).
pub(super) fn same_key(a: &Element, b: &Element) -> bool {
    match (a, b) {
        (Element::Ifname { name: x, .. }, Element::Ifname { name: y, .. }) => x == y,
        (
            Element::ProtoPorts {
                proto: p, ports: x, ..
            },
            Element::ProtoPorts {
                proto: q, ports: y, ..
            },
        ) => p == q && x == y,
        _ => a == b,
    }
}

/// Whether the kernel refuses `new` beside `old`: the same key with another verdict, or
/// overlapping intervals. A protocol . port interval (the pipapo backend) clashes when its
/// first or last port falls inside another interval of the protocol, not when it only
/// contains one.
pub(super) fn clashes(old: &Element, new: &Element) -> bool {
    match (old, new) {
        (Element::Net(a), Element::Net(b)) => {
            a != b && (a.contains(&b.network()) || b.contains(&a.network()))
        }
        (
            Element::Ifname {
                name: a,
                verdict: x,
            },
            Element::Ifname {
                name: b,
                verdict: y,
            },
        ) => a == b && x != y,
        (
            Element::ProtoPorts {
                proto: p,
                ports: a,
                verdict: x,
            },
            Element::ProtoPorts {
                proto: q,
                ports: b,
                verdict: y,
            },
        ) if p == q => {
            if a == b {
                return x != y;
            }
            let inside = |port: u16| a.first <= port && port <= a.last;
            inside(b.first) || inside(b.last)
        }
        _ => false,
    }
}

/// A net stored without an end element: it reaches the last address of its family.
fn is_open_net(e: &Element) -> bool {
    matches!(e, Element::Net(net) if super::encode::after(net).is_none())
}

/// Refuses a net that reaches the last address (`0.0.0.0/0`, `255.255.255.0/24`) where it
/// would overlap another net of its set. The kernel stores such a net as a start without an
/// end, which its overlap check cannot see: it would take the net and then answer lookups
/// wrongly. `current` gives a set's elements before the batch; each is followed through the
/// batch up to the operation that adds the net.
pub(super) fn open_nets(
    batch: &Batch,
    current: &mut dyn FnMut(&str) -> Result<BTreeSet<Element>, NftError>,
) -> Result<(), NftError> {
    let sets: BTreeSet<&str> = batch
        .ops
        .iter()
        .filter_map(|op| match op {
            Op::AddElements { set, elements } if elements.iter().any(is_open_net) => {
                Some(set.as_str())
            }
            _ => None,
        })
        .collect();
    for set in sets {
        let mut elements = current(set)?;
        for (index, op) in batch.ops.iter().enumerate() {
            match op {
                Op::DeleteTable => elements.clear(),
                Op::FlushSet(s) | Op::DeleteSet(s) if s == set => elements.clear(),
                Op::DeleteElements {
                    set: s,
                    elements: gone,
                } if s == set => {
                    elements.retain(|old| !gone.iter().any(|e| same_key(old, e)));
                }
                Op::AddElements {
                    set: s,
                    elements: new,
                } if s == set => {
                    for e in new {
                        if let Some(old) = elements
                            .iter()
                            .find(|old| is_open_net(e) && clashes(old, e))
                        {
                            return Err(NftError::Invalid {
                                index,
                                op: summary(op),
                                reason: format!(
                                    "element {e} overlaps element {old} of set {set} (the kernel cannot check a net that reaches the last address, so it is checked here)"
                                ),
                            });
                        }
                        elements.insert(e.clone());
                    }
                }
                _ => {}
            }
        }
    }
    Ok(())
}
