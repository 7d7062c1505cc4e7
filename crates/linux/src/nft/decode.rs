//! The kernel's dumps back into the values of ast.rs, as far as a read-back needs them: chains
//! with their hooks, rules by handle with the comment and digest of their user data, sets by
//! their flags, key types and comment, and set elements (an interval set's start and end
//! elements paired back into nets).

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;

use super::expr::verdict_of;
use super::wire::*;
use super::{BaseChain, ChainPolicy, ChainSpec, ChainType, Element, Hook, IpFamily, Ports};
use super::{RuleSnapshot, SetKind, SetSpec, Verdict};

/// The attributes of a dumped message (after `nfgenmsg`).
fn attrs(payload: &[u8]) -> Result<&[u8], String> {
    payload
        .get(4..)
        .ok_or_else(|| "a message shorter than its header".into())
}

fn required<'a>(data: &'a [u8], kind: u16, what: &str) -> Result<&'a [u8], String> {
    attribute(data, kind).ok_or_else(|| format!("no {what}"))
}

fn required_string(data: &[u8], kind: u16, what: &str) -> Result<String, String> {
    string(required(data, kind, what)?).ok_or_else(|| format!("{what} is not UTF-8"))
}

fn required_u32(data: &[u8], kind: u16, what: &str) -> Result<u32, String> {
    be32(required(data, kind, what)?).ok_or_else(|| format!("{what} is not 32 bits"))
}

/// A chain of a chain dump: its table and spec.
pub(super) fn chain(payload: &[u8]) -> Result<(String, ChainSpec), String> {
    let a = attrs(payload)?;
    let table = required_string(a, NFTA_CHAIN_TABLE, "table name")?;
    let name = required_string(a, NFTA_CHAIN_NAME, "chain name")?;
    let base = match attribute(a, NFTA_CHAIN_HOOK) {
        None => None,
        Some(hook) => Some(base_chain(a, hook).map_err(|e| format!("chain {name}: {e}"))?),
    };
    Ok((table, ChainSpec { name, base }))
}

fn base_chain(a: &[u8], hook: &[u8]) -> Result<BaseChain, String> {
    let number = required_u32(hook, NFTA_HOOK_HOOKNUM, "hook number")?;
    let priority = required_u32(hook, NFTA_HOOK_PRIORITY, "hook priority")? as i32;
    let hook = match number {
        0 => Hook::Prerouting,
        1 => Hook::Input,
        2 => Hook::Forward,
        3 => Hook::Output,
        4 => Hook::Postrouting,
        other => return Err(format!("hook {other} is not one of ours")),
    };
    let kind = match required_string(a, NFTA_CHAIN_TYPE, "chain type")?.as_str() {
        "filter" => ChainType::Filter,
        "nat" => ChainType::Nat,
        other => return Err(format!("chain type {other} is not one of ours")),
    };
    let policy = match attribute(a, NFTA_CHAIN_POLICY).and_then(be32) {
        Some(0) => ChainPolicy::Drop,
        _ => ChainPolicy::Accept,
    };
    Ok(BaseChain {
        kind,
        hook,
        priority,
        policy,
    })
}

/// A rule of a rule dump: its table, chain and what a read-back keeps of it.
pub(super) fn rule(payload: &[u8]) -> Result<(String, String, RuleSnapshot), String> {
    let a = attrs(payload)?;
    let table = required_string(a, NFTA_RULE_TABLE, "table name")?;
    let chain = required_string(a, NFTA_RULE_CHAIN, "chain name")?;
    let handle = be64(required(a, NFTA_RULE_HANDLE, "rule handle")?)
        .ok_or_else(|| "a rule handle that is not 64 bits".to_owned())?;
    let mut snapshot = RuleSnapshot {
        handle,
        digest: None,
        comment: None,
    };
    for (kind, value) in attribute(a, NFTA_RULE_USERDATA)
        .map(udata)
        .into_iter()
        .flatten()
    {
        match kind {
            UDATA_RULE_COMMENT => snapshot.comment = string(value),
            UDATA_RULE_DIGEST => snapshot.digest = value.try_into().ok().map(u64::from_be_bytes),
            _ => {}
        }
    }
    Ok((table, chain, snapshot))
}

/// A set of a set dump: its table and spec, or `None` for an anonymous set (part of a rule).
pub(super) fn set(payload: &[u8]) -> Result<Option<(String, SetSpec)>, String> {
    let a = attrs(payload)?;
    let table = required_string(a, NFTA_SET_TABLE, "table name")?;
    let name = required_string(a, NFTA_SET_NAME, "set name")?;
    // The kernel leaves out flags that are 0.
    let flags = attribute(a, NFTA_SET_FLAGS).and_then(be32).unwrap_or(0);
    if flags & NFT_SET_ANONYMOUS != 0 {
        return Ok(None);
    }
    let key_type = required_u32(a, NFTA_SET_KEY_TYPE, "key type").unwrap_or(0);
    let key_len = required_u32(a, NFTA_SET_KEY_LEN, "key length")?;
    let data_type = attribute(a, NFTA_SET_DATA_TYPE).and_then(be32);
    let kind = set_kind(flags, key_type, key_len, data_type)
        .ok_or_else(|| format!("set {name} (flags {flags:#x}, key type {key_type}, key length {key_len}) is not a kind this crate writes"))?;
    let comment = attribute(a, NFTA_SET_USERDATA)
        .into_iter()
        .flat_map(udata)
        .find(|(k, _)| *k == UDATA_SET_COMMENT)
        .and_then(|(_, v)| string(v));
    Ok(Some((
        table,
        SetSpec {
            name,
            kind,
            comment,
        },
    )))
}

fn set_kind(flags: u32, key_type: u32, key_len: u32, data: Option<u32>) -> Option<SetKind> {
    let interval = flags & NFT_SET_INTERVAL != 0;
    let family = |key_len| match key_len {
        4 => Some(IpFamily::V4),
        16 => Some(IpFamily::V6),
        _ => None,
    };
    if flags & NFT_SET_MAP == 0 {
        if !matches!(key_type, TYPE_IPADDR | TYPE_IP6ADDR) {
            return None;
        }
        let f = family(key_len)?;
        return Some(if interval {
            SetKind::Nets(f)
        } else {
            SetKind::Addrs(f)
        });
    }
    if data != Some(NFT_DATA_VERDICT) {
        return None;
    }
    match (key_type, key_len, interval) {
        (TYPE_IFNAME, 16, false) => Some(SetKind::IfnameVmap),
        (t, 8, true) if t == TYPE_INET_PROTOCOL << TYPE_BITS | TYPE_INET_SERVICE => {
            Some(SetKind::ProtoPortVmap)
        }
        _ => None,
    }
}

/// One element as the kernel holds it.
#[derive(Debug, Clone)]
pub(super) struct Raw {
    key: Vec<u8>,
    key_end: Option<Vec<u8>>,
    end: bool,
    verdict: Option<Verdict>,
}

/// The elements of one message of an element dump.
pub(super) fn raw_elements(payload: &[u8], out: &mut Vec<Raw>) -> Result<(), String> {
    let a = attrs(payload)?;
    let Some(list) = attribute(a, NFTA_SET_ELEM_LIST_ELEMENTS) else {
        return Ok(());
    };
    for (_, e) in attributes(list) {
        let value = |kind| attribute(e, kind).and_then(|d| attribute(d, NFTA_DATA_VALUE));
        let key = value(NFTA_SET_ELEM_KEY).ok_or("an element without a key")?;
        let flags = attribute(e, NFTA_SET_ELEM_FLAGS)
            .and_then(be32)
            .unwrap_or(0);
        let verdict =
            match attribute(e, NFTA_SET_ELEM_DATA).and_then(|d| attribute(d, NFTA_DATA_VERDICT)) {
                None => None,
                Some(v) => {
                    let code = attribute(v, NFTA_VERDICT_CODE)
                        .and_then(be32)
                        .ok_or("a verdict without a code")?;
                    let chain = attribute(v, NFTA_VERDICT_CHAIN).and_then(string);
                    Some(
                        verdict_of(code, chain)
                            .ok_or_else(|| format!("verdict code {code} is not one of ours"))?,
                    )
                }
            };
        out.push(Raw {
            key: key.to_vec(),
            key_end: value(NFTA_SET_ELEM_KEY_END).map(<[u8]>::to_vec),
            end: flags & NFT_SET_ELEM_INTERVAL_END != 0,
            verdict,
        });
    }
    Ok(())
}

/// The elements of a set of `kind`, from its kernel elements.
pub(super) fn elements(kind: SetKind, raw: Vec<Raw>) -> Result<BTreeSet<Element>, String> {
    match kind {
        SetKind::Addrs(_) => raw
            .iter()
            .map(|r| addr(&r.key).map(Element::Addr))
            .collect(),
        SetKind::Nets(_) => nets(raw),
        SetKind::IfnameVmap => raw
            .into_iter()
            .map(|r| {
                let end = r.key.iter().position(|b| *b == 0).unwrap_or(r.key.len());
                let name = String::from_utf8(r.key[..end].to_vec())
                    .map_err(|_| "an interface name that is not UTF-8")?;
                let verdict = r.verdict.ok_or("a map element without a verdict")?;
                Ok(Element::Ifname { name, verdict })
            })
            .collect(),
        SetKind::ProtoPortVmap => raw
            .into_iter()
            .map(|r| {
                let key_end = r.key_end.as_deref().unwrap_or(&r.key);
                let (Some(&proto), Some(first), Some(last)) =
                    (r.key.first(), port(&r.key), port(key_end))
                else {
                    return Err("a protocol . port key of the wrong length".to_owned());
                };
                let verdict = r.verdict.ok_or("a map element without a verdict")?;
                Ok(Element::ProtoPorts {
                    proto,
                    ports: Ports { first, last },
                    verdict,
                })
            })
            .collect(),
    }
}

fn port(key: &[u8]) -> Option<u16> {
    Some(u16::from_be_bytes(key.get(4..6)?.try_into().ok()?))
}

fn addr(key: &[u8]) -> Result<IpAddr, String> {
    match key.len() {
        4 => Ok(Ipv4Addr::from(<[u8; 4]>::try_from(key).expect("4 bytes")).into()),
        16 => Ok(Ipv6Addr::from(<[u8; 16]>::try_from(key).expect("16 bytes")).into()),
        n => Err(format!("an address key of {n} bytes")),
    }
}

/// Pairs each interval start with the first end after it (none: open to the last address) and
/// writes each interval as the nets that cover it exactly: one net for what this crate wrote.
fn nets(raw: Vec<Raw>) -> Result<BTreeSet<Element>, String> {
    let mut starts = Vec::new();
    let mut ends = Vec::new();
    for r in raw {
        if r.end {
            ends.push(r.key)
        } else {
            starts.push(r.key)
        }
    }
    ends.sort();
    let mut found = BTreeSet::new();
    for start in starts {
        let bits = (start.len() * 8) as u32;
        let first = number(&start);
        let after = ends.partition_point(|e| *e <= start);
        let last = match ends.get(after).filter(|e| e.len() == start.len()) {
            Some(end) => number(end) - 1,
            None if bits == 32 => u128::from(u32::MAX),
            None => u128::MAX,
        };
        for net in cover(first, last, bits) {
            found.insert(Element::Net(net));
        }
    }
    Ok(found)
}

fn number(key: &[u8]) -> u128 {
    key.iter().fold(0u128, |n, b| n << 8 | u128::from(*b))
}

/// The fewest nets that cover `first..=last` of a `bits`-bit address space.
fn cover(mut first: u128, last: u128, bits: u32) -> Vec<IpNet> {
    let mut nets = Vec::new();
    loop {
        // The largest aligned block at `first` that stays within `last`.
        let mut size_bits = if first == 0 {
            bits
        } else {
            first.trailing_zeros().min(bits)
        };
        while size_bits > 0 && block_end(first, size_bits).is_none_or(|end| end > last) {
            size_bits -= 1;
        }
        let prefix = (bits - size_bits) as u8;
        let net = match bits {
            32 => IpNet::new(IpAddr::V4(Ipv4Addr::from(first as u32)), prefix),
            _ => IpNet::new(IpAddr::V6(Ipv6Addr::from(first)), prefix),
        };
        nets.push(net.expect("a prefix within the address length"));
        match block_end(first, size_bits) {
            Some(end) if end < last => first = end + 1,
            _ => return nets,
        }
    }
}

fn block_end(first: u128, size_bits: u32) -> Option<u128> {
    if size_bits >= 128 {
        return (first == 0).then_some(u128::MAX);
    }
    first.checked_add((1u128 << size_bits) - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(key: &[u8], end: bool) -> Raw {
        Raw {
            key: key.to_vec(),
            key_end: None,
            end,
            verdict: None,
        }
    }

    fn net(s: &str) -> Element {
        Element::Net(s.parse().unwrap())
    }

    #[test]
    fn interval_elements_pair_into_the_nets_written_in_any_dump_order() {
        // Adjacent nets, a net open to the end, and the kernel's reverse order.
        let elements = vec![
            raw(&[255, 255, 255, 0], false),
            raw(&[10, 0, 2, 0], true),
            raw(&[10, 0, 1, 0], false),
            raw(&[10, 0, 1, 0], true),
            raw(&[10, 0, 0, 0], false),
            raw(&[0, 0, 0, 0], true),
        ];
        let got = elements_of(SetKind::Nets(IpFamily::V4), elements);
        let want: BTreeSet<Element> = [
            net("10.0.0.0/24"),
            net("10.0.1.0/24"),
            net("255.255.255.0/24"),
        ]
        .into();
        assert_eq!(got, want);
        let all = elements_of(SetKind::Nets(IpFamily::V6), vec![raw(&[0; 16], false)]);
        assert_eq!(all, [net("::/0")].into());
    }

    fn elements_of(kind: SetKind, raw: Vec<Raw>) -> BTreeSet<Element> {
        elements(kind, raw).unwrap()
    }

    #[test]
    fn a_range_that_is_no_single_net_reads_as_the_nets_that_cover_it() {
        let nets = cover(
            u128::from(u32::from(Ipv4Addr::new(10, 0, 0, 1))),
            u128::from(u32::from(Ipv4Addr::new(10, 0, 0, 6))),
            32,
        );
        let text: Vec<String> = nets.iter().map(ToString::to_string).collect();
        assert_eq!(
            text,
            ["10.0.0.1/32", "10.0.0.2/31", "10.0.0.4/31", "10.0.0.6/32"]
        );
        assert_eq!(
            cover(0, u128::from(u32::MAX), 32)[0].to_string(),
            "0.0.0.0/0"
        );
    }
}
