//! What an operation must satisfy before it is sent: names `nft` can print and parse, rules
//! whose dependencies are explicit (ast.rs), values the kernel would read the wrong way, and
//! elements of the kind their set holds. The encoder and the fake run the same checks, so both
//! refuse the same batches with the same [`NftError::Invalid`].

use ipnet::IpNet;

use super::elements::{element_kind, family_name, fits, kind_name};
use super::forms::{family_of, family_of_net};
use super::wire::{IFNAMSIZ, LOG_PREFIX_MAX, NAME_MAX};
use super::{
    CtStates, Element, Expr, IfName, IpFamily, MapKey, NftError, Op, Ports, Rule, SetKind, Verdict,
    summary,
};

/// The protocols whose transport header starts with source and destination ports.
pub(super) const PORT_PROTOCOLS: [u8; 5] = [6, 17, 33, 132, 136];

/// The kind of a set the batch refers to, when known (`None`: the kernel will tell).
pub(super) type Kinds<'a> = &'a dyn Fn(&str) -> Option<SetKind>;

/// Checks operation `index` of a batch.
pub(super) fn op(index: usize, op: &Op, kinds: Kinds<'_>) -> Result<(), NftError> {
    let invalid = |reason: String| NftError::Invalid {
        index,
        op: summary(op),
        reason,
    };
    match op {
        Op::AddTable | Op::DeleteTable => Ok(()),
        Op::AddChain(spec) => name("chain", &spec.name),
        Op::FlushChain(chain) | Op::DeleteChain(chain) => name("chain", chain),
        Op::AddRule { chain, rule } => name("chain", chain).and_then(|()| self::rule(rule, kinds)),
        Op::AddSet(spec) => name("set", &spec.name).and_then(|()| match &spec.comment {
            Some(c) => comment(c),
            None => Ok(()),
        }),
        Op::FlushSet(set) | Op::DeleteSet(set) => name("set", set),
        Op::AddElements { set, elements } | Op::DeleteElements { set, elements } => {
            name("set", set).and_then(|()| {
                let kind = kinds(set);
                elements
                    .iter()
                    .try_for_each(|e| element(e, kind).map_err(|r| format!("element {e}: {r}")))
            })
        }
    }
    .map_err(invalid)
}

/// Checks one element, and that it fits its set when the set's kind is known.
fn element(e: &Element, kind: Option<SetKind>) -> Result<(), String> {
    match e {
        Element::Addr(_) => {}
        Element::Net(net) => canonical_net(net)?,
        Element::Ifname { name, verdict } => {
            interface_name(name)?;
            self::verdict(verdict)?;
        }
        Element::ProtoPorts { ports, verdict, .. } => {
            port_range(ports)?;
            self::verdict(verdict)?;
        }
    }
    match kind {
        Some(kind) if !fits(e, kind) => Err(format!(
            "does not fit a set of {} (it is {})",
            kind_name(kind),
            element_kind(e)
        )),
        _ => Ok(()),
    }
}

/// A table, chain or set name: an `nft` identifier (it must also not be an nft keyword for the
/// `nft -f` text to parse; the kernel does not care).
pub(super) fn name(what: &str, name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if !first_ok || !rest_ok || name.len() > NAME_MAX {
        return Err(format!(
            "{what} name {name:?} is not a valid name: use a letter or '_' first, then letters, \
             digits, '_', '-' or '.', at most {NAME_MAX} bytes"
        ));
    }
    Ok(())
}

/// A comment or log prefix: no `"` (nft strings have no escapes) and no control characters.
fn text(what: &str, text: &str) -> Result<(), String> {
    match text.chars().find(|c| c.is_control() || *c == '"') {
        Some(bad) => Err(format!(
            "{what} {text:?} contains {bad:?}: '\"' and control characters cannot be written"
        )),
        None => Ok(()),
    }
}

fn comment(comment: &str) -> Result<(), String> {
    text("comment", comment)
}

fn rule(rule: &Rule, kinds: Kinds<'_>) -> Result<(), String> {
    if rule.exprs.is_empty() {
        return Err("a rule needs at least one expression".into());
    }
    if let Some(c) = &rule.comment {
        comment(c)?;
    }
    for (i, e) in rule.exprs.iter().enumerate() {
        let earlier = &rule.exprs[..i];
        let last = i + 1 == rule.exprs.len();
        expr(e, earlier, last, kinds).map_err(|r| format!("expression {} ({e}): {r}", i + 1))?;
    }
    Ok(())
}

fn has_nfproto(earlier: &[Expr], family: IpFamily) -> Result<(), String> {
    if earlier.contains(&Expr::NfProto(family)) {
        return Ok(());
    }
    Err(format!(
        "needs `{}` earlier in the rule",
        Expr::NfProto(family)
    ))
}

fn has_l4proto(earlier: &[Expr], ok: impl Fn(u8) -> bool, what: &str) -> Result<(), String> {
    let found = earlier.iter().any(|e| match e {
        Expr::L4Proto { proto, negate } => !negate && ok(*proto),
        _ => false,
    });
    if found {
        Ok(())
    } else {
        Err(format!("needs `meta l4proto` {what} earlier in the rule"))
    }
}

fn expr(e: &Expr, earlier: &[Expr], last: bool, kinds: Kinds<'_>) -> Result<(), String> {
    let has_ports = |p: u8| PORT_PROTOCOLS.contains(&p);
    match e {
        Expr::NfProto(_) | Expr::L4Proto { .. } | Expr::DaddrIsLocal => Ok(()),
        Expr::Counter | Expr::Notrack | Expr::Masquerade => Ok(()),
        Expr::Iifname { name, .. } | Expr::Oifname { name, .. } => ifname(name),
        Expr::Addr { net, .. } => {
            canonical_net(net)?;
            has_nfproto(earlier, family_of_net(net))
        }
        Expr::AddrInSet { family, set, .. } => {
            self::name("set", set)?;
            has_nfproto(earlier, *family)?;
            match kinds(set) {
                None => Ok(()),
                Some(SetKind::Addrs(f) | SetKind::Nets(f)) if f == *family => Ok(()),
                Some(kind) => Err(format!(
                    "set {set} holds {}, not {} addresses",
                    kind_name(kind),
                    family_name(*family)
                )),
            }
        }
        Expr::Ports { ports, .. } => {
            if ports.is_empty() {
                return Err("a port match needs at least one port".into());
            }
            ports.iter().try_for_each(port_range)?;
            has_l4proto(
                earlier,
                has_ports,
                "of a protocol with ports (6, 17, 33, 132, 136)",
            )
        }
        Expr::Icmp { family, .. } => {
            let proto = match family {
                IpFamily::V4 => 1,
                IpFamily::V6 => 58,
            };
            has_l4proto(earlier, |p| p == proto, &format!("{proto}"))
        }
        Expr::CtState { states, .. } => ct_states(*states),
        Expr::Mark { mask, value, .. } => mark(*mask, *value),
        Expr::SetMark { mask, value } => {
            if *mask == 0 && *value == 0 {
                return Err("clears no bit and sets none: leave it out".into());
            }
            Ok(())
        }
        Expr::Log { prefix, .. } => {
            text("log prefix", prefix)?;
            if prefix.len() > LOG_PREFIX_MAX {
                return Err(format!("log prefix is longer than {LOG_PREFIX_MAX} bytes"));
            }
            Ok(())
        }
        Expr::Dnat { addr, port } => {
            has_nfproto(earlier, family_of(addr))?;
            match port {
                Some(0) => Err("port 0 cannot be a NAT target".into()),
                Some(_) => has_l4proto(earlier, has_ports, "of a protocol with ports"),
                None => Ok(()),
            }
        }
        Expr::Snat { addr } => has_nfproto(earlier, family_of(addr)),
        Expr::Verdict(v) => terminal(last).and_then(|()| verdict(v)),
        Expr::Vmap { key, map } => {
            terminal(last)?;
            self::name("map", map)?;
            let wanted = match key {
                MapKey::Iifname | MapKey::Oifname => SetKind::IfnameVmap,
                MapKey::L4ProtoDport => SetKind::ProtoPortVmap,
            };
            match kinds(map) {
                Some(kind) if kind != wanted => Err(format!(
                    "map {map} is {}, a {} lookup needs {}",
                    kind_name(kind),
                    e,
                    kind_name(wanted)
                )),
                _ => Ok(()),
            }
        }
    }
}

fn terminal(last: bool) -> Result<(), String> {
    if last {
        Ok(())
    } else {
        Err("a verdict or vmap ends the rule: nothing may follow it".into())
    }
}

fn verdict(v: &Verdict) -> Result<(), String> {
    match v {
        Verdict::Jump(chain) | Verdict::Goto(chain) => name("chain", chain),
        _ => Ok(()),
    }
}

fn ifname(name: &IfName) -> Result<(), String> {
    let (text, prefix) = match name {
        IfName::Exact(n) => (n, false),
        IfName::Prefix(n) => (n, true),
    };
    if text.is_empty() {
        return Err(if prefix {
            "an empty interface prefix matches every interface: leave the match out".into()
        } else {
            "an interface name cannot be empty".into()
        });
    }
    interface_name(text)
}

/// An interface name (or prefix): 1 to 15 bytes the kernel allows in a name and `nft` can
/// quote.
fn interface_name(name: &str) -> Result<(), String> {
    if name.len() >= IFNAMSIZ {
        return Err(format!(
            "interface name {name:?} is longer than {} bytes",
            IFNAMSIZ - 1
        ));
    }
    match name
        .chars()
        .find(|c| !c.is_ascii_graphic() || matches!(c, '"' | '/' | '*' | '\\'))
    {
        Some(bad) => Err(format!("interface name {name:?} contains {bad:?}")),
        None => Ok(()),
    }
}

fn port_range(p: &Ports) -> Result<(), String> {
    if p.first > p.last {
        return Err(format!(
            "port range {}-{} ends before it starts",
            p.first, p.last
        ));
    }
    Ok(())
}

fn ct_states(states: CtStates) -> Result<(), String> {
    let known = CtStates::INVALID
        .union(CtStates::ESTABLISHED)
        .union(CtStates::RELATED)
        .union(CtStates::NEW)
        .union(CtStates::UNTRACKED);
    if states.0 == 0 {
        return Err("names no connection tracking state".into());
    }
    if states.0 & !known.0 != 0 {
        return Err(format!(
            "state bits {:#x} are not invalid, established, related, new or untracked",
            states.0 & !known.0
        ));
    }
    Ok(())
}

fn mark(mask: u32, value: u32) -> Result<(), String> {
    if mask == 0 {
        return Err("a mark match with an empty mask matches every packet".into());
    }
    if value & !mask != 0 {
        return Err(format!(
            "value {value:#010x} has bits outside mask {mask:#010x}: the match could never hold"
        ));
    }
    Ok(())
}

/// A net written as its network address (`10.65.0.0/16`, not `10.65.0.1/16`).
fn canonical_net(net: &IpNet) -> Result<(), String> {
    if net.trunc() != *net {
        return Err(format!(
            "{net} has host bits set: write {} (read-back gives the network)",
            net.trunc()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_nft_identifiers() {
        assert!(name("chain", "cali-fw-cali12345").is_ok());
        assert!(name("chain", "_x.y").is_ok());
        for bad in ["", "1abc", "a b", "a\"b", "__set%d", &"x".repeat(256)] {
            let e = name("chain", bad).unwrap_err();
            assert!(e.contains("not a valid name"), "{e}");
        }
    }
}
