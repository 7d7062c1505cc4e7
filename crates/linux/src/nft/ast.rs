//! The vocabulary of nf_tables that Calico uses: tables, chains, rules made of matches and
//! statements, sets and verdict maps, and the operations of one transaction.
//!
//! These are values: the dataplane builds them (pure), [`super::NfTables`] applies them. Every
//! type prints in `nft` syntax ([`std::fmt::Display`], in `display.rs`), so what Felix asks
//! for reads the way `nft list ruleset` shows it.
//!
//! Dependencies are explicit, never implied: a rule that matches an IPv4 address (or an IPv4
//! set) has [`Expr::NfProto`]`(V4)` earlier in it, a rule that matches ports or ICMP fields has
//! [`Expr::L4Proto`] earlier in it. The encoder refuses a rule that breaks this, naming the
//! expression, instead of guessing (the kernel would read the wrong bytes of the packet).

use std::net::IpAddr;

use ipnet::IpNet;

/// The address family of a table. Calico uses one `inet` table for IPv4 and IPv6 together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TableFamily {
    Inet,
}

/// An IP version, as `meta nfproto` tells them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum IpFamily {
    V4,
    V6,
}

/// A table: its family and name (`inet calico`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Table {
    pub family: TableFamily,
    pub name: String,
}

/// The netfilter hook of a base chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Hook {
    Prerouting,
    Input,
    Forward,
    Output,
    Postrouting,
}

/// The type of a base chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ChainType {
    Filter,
    Nat,
}

/// What happens to a packet that falls off the end of a base chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ChainPolicy {
    Accept,
    Drop,
}

/// Where a base chain hooks into the kernel. Priorities as `nft` names them: raw -300,
/// dstnat -100, filter 0, srcnat 100.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BaseChain {
    pub kind: ChainType,
    pub hook: Hook,
    pub priority: i32,
    pub policy: ChainPolicy,
}

/// A chain's identity and, for a base chain, its hook. Its rules are separate operations.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ChainSpec {
    pub name: String,
    pub base: Option<BaseChain>,
}

/// A verdict: the end of a rule that decides, or moves to another chain.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Verdict {
    Accept,
    Drop,
    /// Back to the chain that jumped here (or the base chain's policy).
    Return,
    /// To `chain`, then back here.
    Jump(String),
    /// To `chain`, never back here.
    Goto(String),
}

/// Which end of a packet a match or map key is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Dir {
    Src,
    Dst,
}

/// An interface name to match: a whole name (`cali12345`) or a prefix (`cali*`, the
/// iptables `cali+`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum IfName {
    Exact(String),
    Prefix(String),
}

/// Connection tracking states, as a bit set (`ct state established,related`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CtStates(pub u32);

impl CtStates {
    pub const INVALID: CtStates = CtStates(1);
    pub const ESTABLISHED: CtStates = CtStates(1 << 1);
    pub const RELATED: CtStates = CtStates(1 << 2);
    pub const NEW: CtStates = CtStates(1 << 3);
    pub const UNTRACKED: CtStates = CtStates(1 << 6);

    pub const fn union(self, other: CtStates) -> CtStates {
        CtStates(self.0 | other.0)
    }
}

/// An inclusive range of ports; `first == last` for one port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ports {
    pub first: u16,
    pub last: u16,
}

/// The key of a verdict map lookup: what the packet is looked up by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MapKey {
    /// `iifname vmap @m`
    Iifname,
    /// `oifname vmap @m`
    Oifname,
    /// `meta l4proto . th dport vmap @m` (the rule has no [`Expr::L4Proto`] requirement: the
    /// protocol is part of the key).
    L4ProtoDport,
}

/// One expression of a rule: a match (the rule goes on only if it holds) or a statement (it
/// does something). `negate` turns a match into its opposite.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Expr {
    // ---- matches ----
    /// `meta nfproto ipv4` / `ipv6`.
    NfProto(IpFamily),
    /// `meta l4proto 6` (`!=` when negated). The number is IANA's (6 tcp, 17 udp, 1 icmp,
    /// 58 ipv6-icmp, 132 sctp, …).
    L4Proto { proto: u8, negate: bool },
    /// `iifname "cali123"` / `iifname "cali*"`.
    Iifname { name: IfName, negate: bool },
    /// `oifname …`.
    Oifname { name: IfName, negate: bool },
    /// `ip saddr 10.65.0.0/16` / `ip6 daddr fd00::1` (a host address is a /32 or /128 net).
    /// Needs [`Expr::NfProto`] of the net's family earlier in the rule.
    Addr { dir: Dir, net: IpNet, negate: bool },
    /// `ip saddr @set` / `ip6 daddr != @set`: the set's key type decides the family, which
    /// must match an earlier [`Expr::NfProto`].
    AddrInSet {
        dir: Dir,
        family: IpFamily,
        set: String,
        negate: bool,
    },
    /// `th dport 80` / `th dport 1000-2000` / `th sport { 53, 67-68 }` (several ranges make an
    /// anonymous set, bound to the rule). Needs [`Expr::L4Proto`] (tcp, udp, sctp, udplite or
    /// dccp) earlier in the rule. Never empty.
    Ports {
        dir: Dir,
        ports: Vec<Ports>,
        negate: bool,
    },
    /// `icmp type 8` / `icmp type 3 icmp code 4` (v6: `icmpv6 type …`): both fields must
    /// hold; negated, the packet matches unless both hold. Needs [`Expr::L4Proto`] 1 (V4) or
    /// 58 (V6) earlier in the rule.
    Icmp {
        family: IpFamily,
        icmp_type: u8,
        code: Option<u8>,
        negate: bool,
    },
    /// `ct state established,related` (the packet's state is one of them) or, negated,
    /// `ct state != …`.
    CtState { states: CtStates, negate: bool },
    /// `meta mark & 0x1 == 0x1` (`!=` when negated).
    Mark { mask: u32, value: u32, negate: bool },
    /// `fib daddr type local`: the destination is one of this host's addresses.
    DaddrIsLocal,

    // ---- statements ----
    /// `counter`.
    Counter,
    /// `meta mark set meta mark & ~mask ^ value` (iptables' `--set-xmark value/mask`: the bits
    /// of `mask` are cleared, then `value` is XORed in).
    SetMark { mask: u32, value: u32 },
    /// `log prefix "…"` (to the kernel log), or `log prefix "…" group N` (to NFLOG group N).
    Log { prefix: String, group: Option<u16> },
    /// `notrack`: the packet bypasses connection tracking (raw-priority chains only).
    Notrack,
    /// `dnat ip to 10.65.0.5` / `dnat ip to 127.0.0.1:8775` (nat chains only; needs an earlier
    /// [`Expr::NfProto`] of the address's family).
    Dnat { addr: IpAddr, port: Option<u16> },
    /// `snat ip to 172.16.0.1` (nat chains only).
    Snat { addr: IpAddr },
    /// `masquerade` (postrouting nat chains only).
    Masquerade,
    /// A verdict; ends the rule.
    Verdict(Verdict),
    /// A lookup in a verdict map whose verdict ends the rule; a packet whose key is not in the
    /// map goes on to the next rule.
    Vmap { key: MapKey, map: String },
}

/// A rule: its expressions in order (matches, then statements, then at most one verdict or
/// vmap, last), and a comment that says what it is for (shown by `nft list`; at most 128
/// bytes, longer ones are cut).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rule {
    pub exprs: Vec<Expr>,
    pub comment: Option<String>,
}

/// What a set holds, and for a map what it maps to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SetKind {
    /// `type ipv4_addr` / `ipv6_addr`: host addresses (no intervals).
    Addrs(IpFamily),
    /// `type ipv4_addr; flags interval` / `ipv6_addr`: nets, which must not overlap.
    Nets(IpFamily),
    /// `type ifname : verdict`: interface name → verdict.
    IfnameVmap,
    /// `type inet_proto . inet_service : verdict; flags interval`: protocol and destination
    /// port range → verdict; the ranges of one protocol must not overlap.
    ProtoPortVmap,
}

/// A named set or verdict map of the table.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SetSpec {
    pub name: String,
    pub kind: SetKind,
    /// What it is for (kept in the set's user data; `nft list` shows it as a comment).
    pub comment: Option<String>,
}

/// One element of a set or map. Its variant must fit the set's [`SetKind`].
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Element {
    /// In an [`SetKind::Addrs`] set.
    Addr(IpAddr),
    /// In a [`SetKind::Nets`] set.
    Net(IpNet),
    /// In an [`SetKind::IfnameVmap`] map (whole names only).
    Ifname { name: String, verdict: Verdict },
    /// In a [`SetKind::ProtoPortVmap`] map.
    ProtoPorts {
        proto: u8,
        ports: Ports,
        verdict: Verdict,
    },
}

/// One operation of a transaction. "Add" of something that exists leaves it as it is (like
/// `nft add`); delete of something missing fails, as in the kernel. The kernel's exceptions,
/// which the fake shares: an existing base chain takes the policy of an `AddChain` with the
/// same hook, type and priority (another hook, type or priority is refused); an existing set
/// keeps its comment; a map element whose key exists with another verdict is refused (delete
/// it first, in the same batch).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Op {
    AddTable,
    /// The table and everything in it.
    DeleteTable,
    AddChain(ChainSpec),
    /// Deletes every rule of the chain.
    FlushChain(String),
    /// Deletes the chain and its rules; fails while a rule of another chain or a map element
    /// still jumps to it.
    DeleteChain(String),
    /// Appends a rule to the end of the chain.
    AddRule {
        chain: String,
        rule: Rule,
    },
    AddSet(SetSpec),
    /// Deletes every element of the set.
    FlushSet(String),
    /// Fails while a rule still uses it.
    DeleteSet(String),
    /// Adds elements; one that is there already is no change. Nets must not overlap the set's
    /// nets, and a protocol . port interval must not start or end inside another of its
    /// protocol (the kernel refuses both). An empty list does nothing.
    AddElements {
        set: String,
        elements: Vec<Element>,
    },
    /// Deletes elements by key (a map's verdict is not compared). A protocol . port interval
    /// is found by its first port: the kernel deletes the interval that holds it. An empty
    /// list does nothing.
    DeleteElements {
        set: String,
        elements: Vec<Element>,
    },
}

/// One transaction on one table: every operation happens, in order, or none does.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Batch {
    pub ops: Vec<Op>,
}

impl Batch {
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    pub fn push(&mut self, op: Op) {
        self.ops.push(op);
    }
}
