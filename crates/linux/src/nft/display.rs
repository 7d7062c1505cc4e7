//! The values of ast.rs in `nft` syntax. A rule prints as `nft -f` takes it, and `nft -f` builds
//! from that text exactly the expressions the encoder sends (the tests compare `nft list` of
//! both), so a rule's text is also its identity ([`super::rule_digest`]).
//!
//! A batch prints as an `nft -f` script for its table ([`Batch::script`]).

use std::collections::BTreeMap;
use std::fmt::{self, Display, Formatter, Write};

use ipnet::IpNet;

use super::forms::{PortMatch, cut_comment, family_of, family_of_net, port_match};
use super::{
    BaseChain, Batch, ChainPolicy, ChainSpec, ChainType, CtStates, Dir, Element, Expr, Hook,
    IfName, IpFamily, MapKey, Op, Rule, SetKind, SetSpec, Table, TableFamily, Verdict,
};

impl Display for TableFamily {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            TableFamily::Inet => f.write_str("inet"),
        }
    }
}

impl Display for Table {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.family, self.name)
    }
}

impl Display for Verdict {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Verdict::Accept => f.write_str("accept"),
            Verdict::Drop => f.write_str("drop"),
            Verdict::Return => f.write_str("return"),
            Verdict::Jump(chain) => write!(f, "jump {chain}"),
            Verdict::Goto(chain) => write!(f, "goto {chain}"),
        }
    }
}

fn family(family: IpFamily) -> &'static str {
    match family {
        IpFamily::V4 => "ip",
        IpFamily::V6 => "ip6",
    }
}

fn dir(dir: Dir) -> &'static str {
    match dir {
        Dir::Src => "saddr",
        Dir::Dst => "daddr",
    }
}

fn port_dir(dir: Dir) -> &'static str {
    match dir {
        Dir::Src => "sport",
        Dir::Dst => "dport",
    }
}

fn not(negate: bool) -> &'static str {
    if negate { "!= " } else { "" }
}

impl Display for IfName {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            IfName::Exact(name) => write!(f, "\"{name}\""),
            IfName::Prefix(prefix) => write!(f, "\"{prefix}*\""),
        }
    }
}

/// A net as `nft` reads it: a host net as its address.
struct Net<'a>(&'a IpNet);

impl Display for Net<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        if self.0.prefix_len() == self.0.max_prefix_len() {
            write!(f, "{}", self.0.addr())
        } else {
            write!(f, "{}", self.0)
        }
    }
}

impl Display for PortMatch {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            PortMatch::One(port) => write!(f, "{port}"),
            PortMatch::Range(p) => write!(f, "{}-{}", p.first, p.last),
            PortMatch::Singles(ports) => {
                let items: Vec<String> = ports.iter().map(u16::to_string).collect();
                write!(f, "{{ {} }}", items.join(", "))
            }
            PortMatch::Intervals(ranges) => {
                let items: Vec<String> = ranges
                    .iter()
                    .map(|p| match p.first == p.last {
                        true => p.first.to_string(),
                        false => format!("{}-{}", p.first, p.last),
                    })
                    .collect();
                write!(f, "{{ {} }}", items.join(", "))
            }
        }
    }
}

/// The names of the states, in the kernel's bit order.
fn state_names(states: CtStates) -> Vec<&'static str> {
    [
        (CtStates::INVALID, "invalid"),
        (CtStates::ESTABLISHED, "established"),
        (CtStates::RELATED, "related"),
        (CtStates::NEW, "new"),
        (CtStates::UNTRACKED, "untracked"),
    ]
    .into_iter()
    .filter(|(bit, _)| states.0 & bit.0 != 0)
    .map(|(_, name)| name)
    .collect()
}

fn ct_state(f: &mut Formatter<'_>, states: CtStates, negate: bool) -> fmt::Result {
    let names = state_names(states);
    match (negate, names.len()) {
        (false, _) => write!(f, "ct state {}", names.join(",")),
        // `ct state != a,b` would compare the whole value: none of the states is a mask test.
        (true, 1) => write!(f, "ct state & {} == 0", names[0]),
        (true, _) => write!(f, "ct state & ({}) == 0", names.join(" | ")),
    }
}

fn icmp(
    f: &mut Formatter<'_>,
    fam: IpFamily,
    kind: u8,
    code: Option<u8>,
    negate: bool,
) -> fmt::Result {
    let proto = match fam {
        IpFamily::V4 => "icmp",
        IpFamily::V6 => "icmpv6",
    };
    match (code, negate) {
        (None, _) => write!(f, "{proto} type {}{kind}", not(negate)),
        (Some(code), false) => write!(f, "{proto} type {kind} {proto} code {code}"),
        // Not (type and code): the pair looked up in a set (nft has no other way to say it).
        (Some(code), true) => write!(f, "{proto} type . {proto} code != {{ {kind} . {code} }}"),
    }
}

impl Display for Expr {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Expr::NfProto(IpFamily::V4) => f.write_str("meta nfproto ipv4"),
            Expr::NfProto(IpFamily::V6) => f.write_str("meta nfproto ipv6"),
            Expr::L4Proto { proto, negate } => write!(f, "meta l4proto {}{proto}", not(*negate)),
            Expr::Iifname { name, negate } => write!(f, "iifname {}{name}", not(*negate)),
            Expr::Oifname { name, negate } => write!(f, "oifname {}{name}", not(*negate)),
            Expr::Addr {
                dir: d,
                net,
                negate,
            } => {
                let fam = family_of_net(net);
                write!(
                    f,
                    "{} {} {}{}",
                    family(fam),
                    dir(*d),
                    not(*negate),
                    Net(net)
                )
            }
            Expr::AddrInSet {
                dir: d,
                family: fam,
                set,
                negate,
            } => {
                write!(f, "{} {} {}@{set}", family(*fam), dir(*d), not(*negate))
            }
            Expr::Ports {
                dir: d,
                ports,
                negate,
            } => {
                write!(
                    f,
                    "th {} {}{}",
                    port_dir(*d),
                    not(*negate),
                    port_match(ports)
                )
            }
            Expr::Icmp {
                family: fam,
                icmp_type,
                code,
                negate,
            } => icmp(f, *fam, *icmp_type, *code, *negate),
            Expr::CtState { states, negate } => ct_state(f, *states, *negate),
            Expr::Mark {
                mask,
                value,
                negate,
            } if *mask == u32::MAX => {
                write!(f, "meta mark {}{value:#010x}", not(*negate))
            }
            Expr::Mark {
                mask,
                value,
                negate,
            } => {
                let op = if *negate { "!=" } else { "==" };
                write!(f, "meta mark & {mask:#010x} {op} {value:#010x}")
            }
            Expr::DaddrIsLocal => f.write_str("fib daddr type local"),
            Expr::Counter => f.write_str("counter"),
            Expr::SetMark { mask, value } if *mask == u32::MAX => {
                write!(f, "meta mark set {value:#010x}")
            }
            Expr::SetMark { mask, value } => {
                write!(
                    f,
                    "meta mark set meta mark & {:#010x} ^ {value:#010x}",
                    !mask
                )
            }
            Expr::Log { prefix, group } => {
                f.write_str("log")?;
                if !prefix.is_empty() {
                    write!(f, " prefix \"{prefix}\"")?;
                }
                match group {
                    Some(group) => write!(f, " group {group}"),
                    None => Ok(()),
                }
            }
            Expr::Notrack => f.write_str("notrack"),
            Expr::Dnat { addr, port } => match (addr, port) {
                (std::net::IpAddr::V4(a), Some(p)) => write!(f, "dnat ip to {a}:{p}"),
                (std::net::IpAddr::V4(a), None) => write!(f, "dnat ip to {a}"),
                (std::net::IpAddr::V6(a), Some(p)) => write!(f, "dnat ip6 to [{a}]:{p}"),
                (std::net::IpAddr::V6(a), None) => write!(f, "dnat ip6 to {a}"),
            },
            Expr::Snat { addr } => {
                let fam = family_of(addr);
                write!(f, "snat {} to {addr}", family(fam))
            }
            Expr::Masquerade => f.write_str("masquerade"),
            Expr::Verdict(v) => write!(f, "{v}"),
            Expr::Vmap { key, map } => match key {
                MapKey::Iifname => write!(f, "iifname vmap @{map}"),
                MapKey::Oifname => write!(f, "oifname vmap @{map}"),
                MapKey::L4ProtoDport => write!(f, "meta l4proto . th dport vmap @{map}"),
            },
        }
    }
}

impl Display for Rule {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        for (i, e) in self.exprs.iter().enumerate() {
            if i > 0 {
                f.write_char(' ')?;
            }
            write!(f, "{e}")?;
        }
        if let Some(comment) = &self.comment {
            write!(f, " comment \"{}\"", cut_comment(comment))?;
        }
        Ok(())
    }
}

fn hook(hook: Hook) -> &'static str {
    match hook {
        Hook::Prerouting => "prerouting",
        Hook::Input => "input",
        Hook::Forward => "forward",
        Hook::Output => "output",
        Hook::Postrouting => "postrouting",
    }
}

impl Display for BaseChain {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            ChainType::Filter => "filter",
            ChainType::Nat => "nat",
        };
        let policy = match self.policy {
            ChainPolicy::Accept => "accept",
            ChainPolicy::Drop => "drop",
        };
        write!(
            f,
            "{{ type {kind} hook {} priority {}; policy {policy}; }}",
            hook(self.hook),
            self.priority
        )
    }
}

impl Display for ChainSpec {
    /// What follows `add chain inet <table>`: the name, and a base chain's hook.
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match &self.base {
            Some(base) => write!(f, "{} {base}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

impl Display for SetKind {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            SetKind::Addrs(IpFamily::V4) => f.write_str("type ipv4_addr;"),
            SetKind::Addrs(IpFamily::V6) => f.write_str("type ipv6_addr;"),
            SetKind::Nets(IpFamily::V4) => f.write_str("type ipv4_addr; flags interval;"),
            SetKind::Nets(IpFamily::V6) => f.write_str("type ipv6_addr; flags interval;"),
            SetKind::IfnameVmap => f.write_str("type ifname : verdict;"),
            SetKind::ProtoPortVmap => {
                f.write_str("type inet_proto . inet_service : verdict; flags interval;")
            }
        }
    }
}

impl SetKind {
    /// `map` for a verdict map, `set` for a set: the word `nft` wants before the name.
    pub fn keyword(self) -> &'static str {
        match self {
            SetKind::IfnameVmap | SetKind::ProtoPortVmap => "map",
            SetKind::Addrs(_) | SetKind::Nets(_) => "set",
        }
    }
}

impl Display for SetSpec {
    /// What follows `add set inet <table>` (or `add map`): the name and the declaration.
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(f, "{} {{ {}", self.name, self.kind)?;
        if let Some(comment) = &self.comment {
            write!(f, " comment \"{}\";", cut_comment(comment))?;
        }
        f.write_str(" }")
    }
}

/// An element's key alone, as `delete element` names it.
struct Key<'a>(&'a Element);

impl Display for Key<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self.0 {
            Element::Addr(a) => write!(f, "{a}"),
            Element::Net(n) => write!(f, "{n}"),
            Element::Ifname { name, .. } => write!(f, "\"{name}\""),
            Element::ProtoPorts { proto, ports, .. } if ports.first == ports.last => {
                write!(f, "{proto} . {}", ports.first)
            }
            Element::ProtoPorts { proto, ports, .. } => {
                write!(f, "{proto} . {}-{}", ports.first, ports.last)
            }
        }
    }
}

impl Display for Element {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(f, "{}", Key(self))?;
        match self {
            Element::Ifname { verdict, .. } | Element::ProtoPorts { verdict, .. } => {
                write!(f, " : {verdict}")
            }
            Element::Addr(_) | Element::Net(_) => Ok(()),
        }
    }
}

/// A short description of an operation, for errors: what it does and to what.
pub(crate) fn summary(op: &Op) -> String {
    match op {
        Op::AddTable => "add table".into(),
        Op::DeleteTable => "delete table".into(),
        Op::AddChain(spec) => format!("add chain {spec}"),
        Op::FlushChain(chain) => format!("flush chain {chain}"),
        Op::DeleteChain(chain) => format!("delete chain {chain}"),
        Op::AddRule { chain, rule } => format!("add rule to chain {chain}: {rule}"),
        Op::AddSet(spec) => format!("add {} {spec}", spec.kind.keyword()),
        Op::FlushSet(set) => format!("flush set {set}"),
        Op::DeleteSet(set) => format!("delete set {set}"),
        Op::AddElements { set, elements } => {
            format!("add {} element(s) to set {set}", elements.len())
        }
        Op::DeleteElements { set, elements } => {
            format!("delete {} element(s) from set {set}", elements.len())
        }
    }
}

/// A batch as an `nft -f` script for one table ([`Batch::script`]).
#[derive(Debug, Clone)]
pub struct Script<'a> {
    table: &'a Table,
    batch: &'a Batch,
    kinds: BTreeMap<String, SetKind>,
}

impl Batch {
    /// The batch as an `nft -f` script for `table`. `nft` wants `flush map` for a map: the
    /// kinds of the sets the batch creates are known, give the others with
    /// [`Script::with_kinds`] (an unknown one is flushed as a set).
    pub fn script<'a>(&'a self, table: &'a Table) -> Script<'a> {
        Script {
            table,
            batch: self,
            kinds: BTreeMap::new(),
        }
    }
}

impl Script<'_> {
    /// The kinds of sets that exist before the batch.
    pub fn with_kinds(mut self, kinds: impl IntoIterator<Item = (String, SetKind)>) -> Self {
        self.kinds.extend(kinds);
        self
    }
}

impl Display for Script<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let t = self.table;
        let mut kinds = self.kinds.clone();
        for op in &self.batch.ops {
            match op {
                Op::AddTable => writeln!(f, "add table {t}")?,
                Op::DeleteTable => writeln!(f, "delete table {t}")?,
                Op::AddChain(spec) => writeln!(f, "add chain {t} {spec}")?,
                Op::FlushChain(chain) => writeln!(f, "flush chain {t} {chain}")?,
                Op::DeleteChain(chain) => writeln!(f, "delete chain {t} {chain}")?,
                Op::AddRule { chain, rule } => writeln!(f, "add rule {t} {chain} {rule}")?,
                Op::AddSet(spec) => {
                    kinds.entry(spec.name.clone()).or_insert(spec.kind);
                    writeln!(f, "add {} {t} {spec}", spec.kind.keyword())?
                }
                Op::FlushSet(set) => {
                    let word = kinds.get(set).map_or("set", |k| k.keyword());
                    writeln!(f, "flush {word} {t} {set}")?
                }
                Op::DeleteSet(set) => writeln!(f, "delete set {t} {set}")?,
                Op::AddElements { set, elements } if !elements.is_empty() => {
                    let items: Vec<String> = elements.iter().map(Element::to_string).collect();
                    writeln!(f, "add element {t} {set} {{ {} }}", items.join(", "))?
                }
                Op::DeleteElements { set, elements } if !elements.is_empty() => {
                    let items: Vec<String> = elements.iter().map(|e| Key(e).to_string()).collect();
                    writeln!(f, "delete element {t} {set} {{ {} }}", items.join(", "))?
                }
                Op::AddElements { .. } | Op::DeleteElements { .. } => {}
            }
            match op {
                Op::DeleteSet(set) => {
                    kinds.remove(set);
                }
                Op::DeleteTable => kinds.clear(),
                _ => {}
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
