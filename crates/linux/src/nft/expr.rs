//! One rule's expressions as nf_tables expressions: the loads, compares and statements `nft`
//! builds from the same text (display.rs), with 32-bit register numbers.
//!
//! ```text
//!   ip saddr 10.65.0.0/16   → payload load 2b @ network + 12 → r0; cmp eq r0 0a41
//!   ip saddr 10.65.0.0/23   → payload load 4b @ network + 12 → r0; bitwise r0 & fffffe00; cmp eq
//!   th dport { 53, 67-68 }  → payload load 2b @ transport + 2 → r0; lookup r0 in __set%d (id n)
//!   ct state new,related    → ct load state → r0; bitwise r0 & 0xc; cmp neq r0 0
//!   icmp type 3 icmp code 4 → payload load 2b @ transport + 0 → r0; cmp eq r0 0304
//!   icmp type . icmp code != { 3 . 4 } → type → r0; code → r1; lookup r0 in __set%d, inverted
//!   meta l4proto . th dport vmap @m → meta l4proto → r0; payload th dport → r1; lookup r0 → verdict
//! ```

use std::net::IpAddr;

use ipnet::IpNet;

use super::forms::{PortMatch, family_of, family_of_net, port_match};
use super::wire::*;
use super::{Dir, Expr, IfName, IpFamily, MapKey, Verdict};

/// The first 32-bit register: every load goes here (an IPv6 address fills four).
pub(super) const R0: u32 = 8;
/// The second field of a concatenation (`meta l4proto . th dport`) goes here.
const R1: u32 = 9;
/// A NAT target's port, after an IPv6 address in R0..R3.
const R4: u32 = 12;
const VERDICT_REG: u32 = 0;

const NFT_META_MARK: u32 = 3;
const NFT_META_IIFNAME: u32 = 6;
const NFT_META_OIFNAME: u32 = 7;
const NFT_META_NFPROTO: u32 = 15;
const NFT_META_L4PROTO: u32 = 16;
const NFT_CT_STATE: u32 = 0;
const NFT_PAYLOAD_NETWORK_HEADER: u32 = 1;
const NFT_PAYLOAD_TRANSPORT_HEADER: u32 = 2;
const NFT_CMP_EQ: u32 = 0;
const NFT_CMP_NEQ: u32 = 1;
const NFT_RANGE_EQ: u32 = 0;
const NFT_RANGE_NEQ: u32 = 1;
const NFT_LOOKUP_F_INV: u32 = 1;
const NFTA_FIB_F_DADDR: u32 = 2;
const NFT_FIB_RESULT_ADDRTYPE: u32 = 3;
const RTN_LOCAL: u32 = 2;
const NFT_NAT_SNAT: u32 = 0;
const NFT_NAT_DNAT: u32 = 1;
const NF_NAT_RANGE_PROTO_SPECIFIED: u32 = 2;
const NF_ACCEPT: u32 = 1;
const NF_DROP: u32 = 0;
const NFT_JUMP: i32 = -3;
const NFT_GOTO: i32 = -4;
const NFT_RETURN: i32 = -5;

/// Writes the expressions of one rule into `NFTA_RULE_EXPRESSIONS`; `anon` gives the set id
/// of each anonymous port set, in the order the rule's port lists need them.
pub(super) fn exprs(w: &mut Writer, exprs: &[crate::nft::Expr], anon: &[u32]) {
    let mut anon = anon.iter();
    w.nest(NFTA_RULE_EXPRESSIONS, |w| {
        for e in exprs {
            expr(w, e, &mut anon);
        }
    });
}

fn element(w: &mut Writer, name: &str, data: impl FnOnce(&mut Writer)) {
    w.nest(NFTA_LIST_ELEM, |w| {
        w.put_str(NFTA_EXPR_NAME, name);
        w.nest(NFTA_EXPR_DATA, data);
    });
}

fn meta_load(w: &mut Writer, key: u32, dreg: u32) {
    element(w, "meta", |w| {
        w.put_u32(2, key); // NFTA_META_KEY
        w.put_u32(1, dreg); // NFTA_META_DREG
    });
}

fn meta_set(w: &mut Writer, key: u32, sreg: u32) {
    element(w, "meta", |w| {
        w.put_u32(2, key); // NFTA_META_KEY
        w.put_u32(3, sreg); // NFTA_META_SREG
    });
}

fn cmp(w: &mut Writer, negate: bool, data: &[u8]) {
    element(w, "cmp", |w| {
        w.put_u32(1, R0); // NFTA_CMP_SREG
        w.put_u32(2, if negate { NFT_CMP_NEQ } else { NFT_CMP_EQ });
        w.put_value(3, data); // NFTA_CMP_DATA
    });
}

fn payload(w: &mut Writer, base: u32, offset: u32, len: u32, dreg: u32) {
    element(w, "payload", |w| {
        w.put_u32(1, dreg); // NFTA_PAYLOAD_DREG
        w.put_u32(2, base);
        w.put_u32(3, offset);
        w.put_u32(4, len);
    });
}

fn bitwise(w: &mut Writer, mask: &[u8], xor: &[u8]) {
    element(w, "bitwise", |w| {
        w.put_u32(1, R0); // NFTA_BITWISE_SREG
        w.put_u32(2, R0); // NFTA_BITWISE_DREG
        w.put_u32(3, mask.len() as u32);
        w.put_value(4, mask);
        w.put_value(5, xor);
    });
}

fn lookup(w: &mut Writer, set: &str, id: Option<u32>, verdict: bool, negate: bool) {
    element(w, "lookup", |w| {
        w.put_u32(2, R0); // NFTA_LOOKUP_SREG
        if verdict {
            w.put_u32(3, VERDICT_REG); // NFTA_LOOKUP_DREG
        }
        w.put_str(1, set); // NFTA_LOOKUP_SET
        if let Some(id) = id {
            w.put_u32(4, id); // NFTA_LOOKUP_SET_ID
        }
        if negate {
            w.put_u32(5, NFT_LOOKUP_F_INV);
        }
    });
}

fn immediate(w: &mut Writer, dreg: u32, value: &[u8]) {
    element(w, "immediate", |w| {
        w.put_u32(1, dreg); // NFTA_IMMEDIATE_DREG
        w.put_value(2, value);
    });
}

/// `NFTA_DATA_VERDICT` of `v`, inside the current nest.
pub(super) fn verdict_data(w: &mut Writer, v: &Verdict) {
    w.nest(NFTA_DATA_VERDICT, |w| {
        let (code, chain) = match v {
            Verdict::Accept => (NF_ACCEPT, None),
            Verdict::Drop => (NF_DROP, None),
            Verdict::Return => (NFT_RETURN as u32, None),
            Verdict::Jump(c) => (NFT_JUMP as u32, Some(c)),
            Verdict::Goto(c) => (NFT_GOTO as u32, Some(c)),
        };
        w.put_u32(NFTA_VERDICT_CODE, code);
        if let Some(chain) = chain {
            w.put_str(NFTA_VERDICT_CHAIN, chain);
        }
    });
}

/// The verdict a decoded `NFTA_DATA_VERDICT` stands for.
pub(super) fn verdict_of(code: u32, chain: Option<String>) -> Option<Verdict> {
    match (code as i32, chain) {
        (c, _) if c as u32 == NF_ACCEPT => Some(Verdict::Accept),
        (c, _) if c as u32 == NF_DROP => Some(Verdict::Drop),
        (NFT_RETURN, _) => Some(Verdict::Return),
        (NFT_JUMP, Some(chain)) => Some(Verdict::Jump(chain)),
        (NFT_GOTO, Some(chain)) => Some(Verdict::Goto(chain)),
        _ => None,
    }
}

/// An interface name as the kernel compares it: the whole name padded to `IFNAMSIZ`, or only
/// the bytes of a prefix.
pub(super) fn ifname_bytes(name: &IfName) -> Vec<u8> {
    match name {
        IfName::Exact(n) => padded_name(n),
        IfName::Prefix(p) => p.as_bytes().to_vec(),
    }
}

pub(super) fn padded_name(name: &str) -> Vec<u8> {
    let mut bytes = name.as_bytes().to_vec();
    bytes.resize(IFNAMSIZ, 0);
    bytes
}

pub(super) fn addr_bytes(addr: &IpAddr) -> Vec<u8> {
    match addr {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    }
}

/// Where an address field is in the network header: offset and length.
fn addr_field(family: IpFamily, dir: Dir) -> (u32, u32) {
    match (family, dir) {
        (IpFamily::V4, Dir::Src) => (12, 4),
        (IpFamily::V4, Dir::Dst) => (16, 4),
        (IpFamily::V6, Dir::Src) => (8, 16),
        (IpFamily::V6, Dir::Dst) => (24, 16),
    }
}

/// `ip saddr <net>`: a whole-byte prefix loads only its bytes; any other prefix loads the
/// address and masks it (as nft does, so both print the same).
fn addr_match(w: &mut Writer, dir: Dir, net: &IpNet, negate: bool) {
    let family = family_of_net(net);
    let (offset, len) = addr_field(family, dir);
    let bytes = addr_bytes(&net.network());
    let prefix = u32::from(net.prefix_len());
    if prefix == len * 8 {
        payload(w, NFT_PAYLOAD_NETWORK_HEADER, offset, len, R0);
        cmp(w, negate, &bytes);
    } else if prefix > 0 && prefix % 8 == 0 {
        payload(w, NFT_PAYLOAD_NETWORK_HEADER, offset, prefix / 8, R0);
        cmp(w, negate, &bytes[..(prefix / 8) as usize]);
    } else {
        payload(w, NFT_PAYLOAD_NETWORK_HEADER, offset, len, R0);
        bitwise(w, &addr_bytes(&net.netmask()), &vec![0; len as usize]);
        cmp(w, negate, &bytes);
    }
}

fn port_offset(dir: Dir) -> u32 {
    match dir {
        Dir::Src => 0,
        Dir::Dst => 2,
    }
}

fn ports(
    w: &mut Writer,
    dir: Dir,
    list: &[super::Ports],
    negate: bool,
    anon: &mut dyn Iterator<Item = &u32>,
) {
    payload(w, NFT_PAYLOAD_TRANSPORT_HEADER, port_offset(dir), 2, R0);
    match port_match(list) {
        PortMatch::One(port) => cmp(w, negate, &port.to_be_bytes()),
        PortMatch::Range(p) => element(w, "range", |w| {
            w.put_u32(1, R0); // NFTA_RANGE_SREG
            w.put_u32(2, if negate { NFT_RANGE_NEQ } else { NFT_RANGE_EQ });
            w.put_value(3, &p.first.to_be_bytes());
            w.put_value(4, &p.last.to_be_bytes());
        }),
        PortMatch::Singles(_) | PortMatch::Intervals(_) => {
            let id = *anon.next().expect("an anonymous set per port list");
            lookup(w, "__set%d", Some(id), false, negate);
        }
    }
}

fn nat(w: &mut Writer, kind: u32, addr: &IpAddr, port: Option<u16>) {
    immediate(w, R0, &addr_bytes(addr));
    if let Some(port) = port {
        immediate(w, R4, &port.to_be_bytes());
    }
    let family = match family_of(addr) {
        IpFamily::V4 => NFPROTO_IPV4,
        IpFamily::V6 => NFPROTO_IPV6,
    };
    element(w, "nat", |w| {
        w.put_u32(1, kind); // NFTA_NAT_TYPE
        w.put_u32(2, u32::from(family)); // NFTA_NAT_FAMILY
        w.put_u32(3, R0); // NFTA_NAT_REG_ADDR_MIN
        if port.is_some() {
            w.put_u32(5, R4); // NFTA_NAT_REG_PROTO_MIN
            w.put_u32(7, NF_NAT_RANGE_PROTO_SPECIFIED); // NFTA_NAT_FLAGS
        }
    });
}

fn expr(w: &mut Writer, e: &Expr, anon: &mut dyn Iterator<Item = &u32>) {
    match e {
        Expr::NfProto(family) => {
            meta_load(w, NFT_META_NFPROTO, R0);
            let proto = match family {
                IpFamily::V4 => NFPROTO_IPV4,
                IpFamily::V6 => NFPROTO_IPV6,
            };
            cmp(w, false, &[proto]);
        }
        Expr::L4Proto { proto, negate } => {
            meta_load(w, NFT_META_L4PROTO, R0);
            cmp(w, *negate, &[*proto]);
        }
        Expr::Iifname { name, negate } => {
            meta_load(w, NFT_META_IIFNAME, R0);
            cmp(w, *negate, &ifname_bytes(name));
        }
        Expr::Oifname { name, negate } => {
            meta_load(w, NFT_META_OIFNAME, R0);
            cmp(w, *negate, &ifname_bytes(name));
        }
        Expr::Addr { dir, net, negate } => addr_match(w, *dir, net, *negate),
        Expr::AddrInSet {
            dir,
            family,
            set,
            negate,
        } => {
            let (offset, len) = addr_field(*family, *dir);
            payload(w, NFT_PAYLOAD_NETWORK_HEADER, offset, len, R0);
            lookup(w, set, None, false, *negate);
        }
        Expr::Ports {
            dir,
            ports: list,
            negate,
        } => ports(w, *dir, list, *negate, anon),
        Expr::Icmp {
            icmp_type,
            code,
            negate,
            ..
        } => match code {
            None => {
                payload(w, NFT_PAYLOAD_TRANSPORT_HEADER, 0, 1, R0);
                cmp(w, *negate, &[*icmp_type]);
            }
            Some(code) if !negate => {
                payload(w, NFT_PAYLOAD_TRANSPORT_HEADER, 0, 2, R0);
                cmp(w, false, &[*icmp_type, *code]);
            }
            // Not both: type . code looked up in a one-element anonymous set.
            Some(_) => {
                payload(w, NFT_PAYLOAD_TRANSPORT_HEADER, 0, 1, R0);
                payload(w, NFT_PAYLOAD_TRANSPORT_HEADER, 1, 1, R1);
                let id = *anon
                    .next()
                    .expect("an anonymous set per negated icmp type . code");
                lookup(w, "__set%d", Some(id), false, true);
            }
        },
        Expr::CtState { states, negate } => {
            element(w, "ct", |w| {
                w.put_u32(2, NFT_CT_STATE); // NFTA_CT_KEY
                w.put_u32(1, R0); // NFTA_CT_DREG
            });
            bitwise(w, &states.0.to_ne_bytes(), &[0; 4]);
            // Some state in the mask (`!= 0`), or none of them (`== 0`).
            cmp(w, !*negate, &[0; 4]);
        }
        Expr::Mark {
            mask,
            value,
            negate,
        } => {
            meta_load(w, NFT_META_MARK, R0);
            if *mask != u32::MAX {
                bitwise(w, &mask.to_ne_bytes(), &[0; 4]);
            }
            cmp(w, *negate, &value.to_ne_bytes());
        }
        Expr::DaddrIsLocal => {
            element(w, "fib", |w| {
                w.put_u32(3, NFTA_FIB_F_DADDR); // NFTA_FIB_FLAGS
                w.put_u32(2, NFT_FIB_RESULT_ADDRTYPE); // NFTA_FIB_RESULT
                w.put_u32(1, R0); // NFTA_FIB_DREG
            });
            cmp(w, false, &RTN_LOCAL.to_ne_bytes());
        }
        Expr::Counter => element(w, "counter", |_| {}),
        Expr::SetMark { mask, value } => {
            if *mask == u32::MAX {
                immediate(w, R0, &value.to_ne_bytes());
            } else {
                meta_load(w, NFT_META_MARK, R0);
                bitwise(w, &(!mask).to_ne_bytes(), &value.to_ne_bytes());
            }
            meta_set(w, NFT_META_MARK, R0);
        }
        Expr::Log { prefix, group } => element(w, "log", |w| {
            if !prefix.is_empty() {
                w.put_str(2, prefix); // NFTA_LOG_PREFIX
            }
            if let Some(group) = group {
                w.put(1, &group.to_be_bytes()); // NFTA_LOG_GROUP
            }
        }),
        Expr::Notrack => w.nest(NFTA_LIST_ELEM, |w| w.put_str(NFTA_EXPR_NAME, "notrack")),
        Expr::Dnat { addr, port } => nat(w, NFT_NAT_DNAT, addr, *port),
        Expr::Snat { addr } => nat(w, NFT_NAT_SNAT, addr, None),
        Expr::Masquerade => element(w, "masq", |_| {}),
        Expr::Verdict(v) => element(w, "immediate", |w| {
            w.put_u32(1, VERDICT_REG); // NFTA_IMMEDIATE_DREG
            w.nest(2, |w| verdict_data(w, v)); // NFTA_IMMEDIATE_DATA
        }),
        Expr::Vmap { key, map } => {
            match key {
                MapKey::Iifname => meta_load(w, NFT_META_IIFNAME, R0),
                MapKey::Oifname => meta_load(w, NFT_META_OIFNAME, R0),
                MapKey::L4ProtoDport => {
                    meta_load(w, NFT_META_L4PROTO, R0);
                    payload(w, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2, R1);
                }
            }
            lookup(w, map, None, true, false);
        }
    }
}
