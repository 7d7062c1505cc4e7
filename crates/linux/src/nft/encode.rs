//! A [`Batch`] as one nf_tables transaction: `NFNL_MSG_BATCH_BEGIN`, the messages of every
//! operation, `NFNL_MSG_BATCH_END`, in one buffer for one `sendmsg`.
//!
//! Each message carries its own sequence number; [`Encoded::op_of`] maps the sequence number of
//! an error back to the operation it came from. One operation can be several messages: a rule
//! with a list of port ranges is an anonymous set, its elements and the rule bound to it; a
//! long element list is split so that each message's element attribute stays under netlink's
//! 64 KiB attribute limit.
//!
//! ```text
//!   set kind         key type                    key len  flags                  elements
//!   Addrs(V4)        ipv4_addr (7)               4        —                      key
//!   Nets(V6)         ipv6_addr (8)               16       interval               start; end+1 [END]
//!   IfnameVmap       ifname (41)                 16       map                    key → verdict
//!   ProtoPortVmap    inet_proto . inet_service   8        interval map concat    key, key_end → verdict
//! ```

use std::collections::BTreeMap;

use super::check;
use super::expr;
use super::forms::{PortMatch, cut_comment, port_match};
use super::wire::*;
use super::{Batch, ChainPolicy, ChainType, Expr, Hook, IpFamily, NftError, Op, Rule};
use super::{SetKind, SetSpec, Table, rule_digest};

mod sets;

pub(super) use sets::after;
use sets::{SetLayout, element, key_element};

/// The budget of one message's element list (the attribute length is 16 bits).
const ELEMENTS_BUDGET: usize = 48 * 1024;

/// A batch ready to send.
#[derive(Debug)]
pub(super) struct Encoded {
    pub bytes: Vec<u8>,
    /// One past the last sequence number used.
    pub next_seq: u32,
    /// `(first sequence number of the operation's messages, operation index)`, ascending.
    starts: Vec<(u32, usize)>,
}

impl Encoded {
    /// The operation a message of this batch belongs to.
    pub fn op_of(&self, seq: u32) -> Option<usize> {
        let at = self.starts.partition_point(|(first, _)| *first <= seq);
        at.checked_sub(1).map(|i| self.starts[i].1)
    }
}

/// Encodes `batch` for `table`, sequence numbers from `first_seq`. `known` gives the kinds of
/// sets that exist before the batch (for the checks of elements and lookups).
pub(super) fn batch(
    table: &Table,
    batch: &Batch,
    first_seq: u32,
    known: check::Kinds<'_>,
) -> Result<Encoded, NftError> {
    let mut enc = Encoder {
        table: &table.name,
        w: Writer::new(),
        seq: first_seq,
        set_id: 0,
    };
    let mut kinds = BatchKinds::default();
    let seq = enc.next_seq();
    enc.w.begin_batch(NFNL_MSG_BATCH_BEGIN, seq);
    enc.w.end();
    let mut starts = Vec::with_capacity(batch.ops.len());
    for (index, op) in batch.ops.iter().enumerate() {
        check::op(index, op, &|set: &str| kinds.get(set, known))?;
        kinds.apply(op);
        starts.push((enc.seq, index));
        enc.op(op);
    }
    let seq = enc.next_seq();
    enc.w.begin_batch(NFNL_MSG_BATCH_END, seq);
    enc.w.end();
    Ok(Encoded {
        bytes: enc.w.buf,
        next_seq: enc.seq,
        starts,
    })
}

/// The kinds of sets as the batch changes them.
#[derive(Debug, Default)]
struct BatchKinds {
    /// Sets the batch created (`Some`) or deleted (`None`).
    changed: BTreeMap<String, Option<SetKind>>,
    /// The batch deleted the table: nothing from before is left.
    cleared: bool,
}

impl BatchKinds {
    fn get(&self, set: &str, known: check::Kinds<'_>) -> Option<SetKind> {
        match self.changed.get(set) {
            Some(kind) => *kind,
            None if self.cleared => None,
            None => known(set),
        }
    }

    fn apply(&mut self, op: &Op) {
        match op {
            Op::AddSet(spec) => {
                // A set that exists keeps its kind (the kernel refuses another one).
                let slot = self.changed.entry(spec.name.clone()).or_insert(None);
                slot.get_or_insert(spec.kind);
            }
            Op::DeleteSet(set) => {
                self.changed.insert(set.clone(), None);
            }
            Op::DeleteTable => {
                self.changed.clear();
                self.cleared = true;
            }
            _ => {}
        }
    }
}

struct Encoder<'a> {
    table: &'a str,
    w: Writer,
    seq: u32,
    /// The last `NFTA_SET_ID` given (named and anonymous sets of this batch).
    set_id: u32,
}

impl Encoder<'_> {
    fn next_seq(&mut self) -> u32 {
        let seq = self.seq;
        self.seq = self.seq.wrapping_add(1);
        seq
    }

    fn begin(&mut self, kind: u16, flags: u16) {
        let seq = self.next_seq();
        self.w.begin(kind, NLM_F_REQUEST | flags, seq, NFPROTO_INET);
    }

    fn op(&mut self, op: &Op) {
        let table = self.table;
        match op {
            Op::AddTable => {
                self.begin(NFT_MSG_NEWTABLE, NLM_F_CREATE);
                self.w.put_str(NFTA_TABLE_NAME, table);
                self.w.put_u32(NFTA_TABLE_FLAGS, 0);
                self.w.end();
            }
            Op::DeleteTable => {
                self.begin(NFT_MSG_DELTABLE, 0);
                self.w.put_str(NFTA_TABLE_NAME, table);
                self.w.end();
            }
            Op::AddChain(spec) => {
                self.begin(NFT_MSG_NEWCHAIN, NLM_F_CREATE);
                self.w.put_str(NFTA_CHAIN_TABLE, table);
                self.w.put_str(NFTA_CHAIN_NAME, &spec.name);
                if let Some(base) = &spec.base {
                    self.w.nest(NFTA_CHAIN_HOOK, |w| {
                        w.put_u32(NFTA_HOOK_HOOKNUM, hook_number(base.hook));
                        w.put_u32(NFTA_HOOK_PRIORITY, base.priority as u32);
                    });
                    let policy = match base.policy {
                        ChainPolicy::Drop => 0,
                        ChainPolicy::Accept => 1,
                    };
                    self.w.put_u32(NFTA_CHAIN_POLICY, policy);
                    let kind = match base.kind {
                        ChainType::Filter => "filter",
                        ChainType::Nat => "nat",
                    };
                    self.w.put_str(NFTA_CHAIN_TYPE, kind);
                }
                self.w.end();
            }
            Op::FlushChain(chain) => {
                self.begin(NFT_MSG_DELRULE, 0);
                self.w.put_str(NFTA_RULE_TABLE, table);
                self.w.put_str(NFTA_RULE_CHAIN, chain);
                self.w.end();
            }
            Op::DeleteChain(chain) => {
                self.begin(NFT_MSG_DELCHAIN, 0);
                self.w.put_str(NFTA_CHAIN_TABLE, table);
                self.w.put_str(NFTA_CHAIN_NAME, chain);
                self.w.end();
            }
            Op::AddRule { chain, rule } => self.rule(chain, rule),
            Op::AddSet(spec) => self.set(spec),
            Op::FlushSet(set) => {
                // No element list: every element goes.
                self.begin(NFT_MSG_DELSETELEM, 0);
                self.w.put_str(NFTA_SET_ELEM_LIST_TABLE, table);
                self.w.put_str(NFTA_SET_ELEM_LIST_SET, set);
                self.w.end();
            }
            Op::DeleteSet(set) => {
                self.begin(NFT_MSG_DELSET, 0);
                self.w.put_str(NFTA_SET_TABLE, table);
                self.w.put_str(NFTA_SET_NAME, set);
                self.w.end();
            }
            Op::AddElements { set, elements } => {
                let mut scratch = Writer::new();
                let ends = elements
                    .iter()
                    .map(|e| {
                        element(&mut scratch, e, true);
                        scratch.len()
                    })
                    .collect();
                self.elements(NFT_MSG_NEWSETELEM, set, None, &scratch.buf, ends);
            }
            Op::DeleteElements { set, elements } => {
                let mut scratch = Writer::new();
                let ends = elements
                    .iter()
                    .map(|e| {
                        element(&mut scratch, e, false);
                        scratch.len()
                    })
                    .collect();
                self.elements(NFT_MSG_DELSETELEM, set, None, &scratch.buf, ends);
            }
        }
    }

    /// Element messages for `set`: `encoded` holds the `NFTA_LIST_ELEM`s back to back, `ends`
    /// where each element of the operation ends (a net's start and end stay together). An
    /// empty list sends nothing (an empty delete would flush the set).
    fn elements(
        &mut self,
        kind: u16,
        set: &str,
        id: Option<u32>,
        encoded: &[u8],
        ends: Vec<usize>,
    ) {
        let mut from = 0;
        while from < encoded.len() {
            let limit = from + ELEMENTS_BUDGET;
            let to = ends
                .iter()
                .copied()
                .take_while(|end| *end <= limit)
                .last()
                .filter(|end| *end > from)
                .unwrap_or_else(|| *ends.iter().find(|end| **end > from).expect("an end"));
            let flags = if kind == NFT_MSG_NEWSETELEM {
                NLM_F_CREATE
            } else {
                0
            };
            self.begin(kind, flags);
            self.w.put_str(NFTA_SET_ELEM_LIST_TABLE, self.table);
            self.w.put_str(NFTA_SET_ELEM_LIST_SET, set);
            if let Some(id) = id {
                self.w.put_u32(NFTA_SET_ELEM_LIST_SET_ID, id);
            }
            self.w.nest(NFTA_SET_ELEM_LIST_ELEMENTS, |w| {
                w.buf.extend_from_slice(&encoded[from..to]);
            });
            self.w.end();
            from = to;
        }
    }

    fn set(&mut self, spec: &SetSpec) {
        self.set_id += 1;
        let id = self.set_id;
        self.begin(NFT_MSG_NEWSET, NLM_F_CREATE);
        self.w.put_str(NFTA_SET_TABLE, self.table);
        self.w.put_str(NFTA_SET_NAME, &spec.name);
        let layout = SetLayout::of(spec.kind);
        self.w.put_u32(NFTA_SET_FLAGS, layout.flags);
        self.w.put_u32(NFTA_SET_KEY_TYPE, layout.key_type);
        self.w.put_u32(NFTA_SET_KEY_LEN, layout.key_len);
        if layout.flags & NFT_SET_MAP != 0 {
            self.w.put_u32(NFTA_SET_DATA_TYPE, NFT_DATA_VERDICT);
            self.w.put_u32(NFTA_SET_DATA_LEN, 0);
        }
        self.w.put_u32(NFTA_SET_ID, id);
        if spec.kind == SetKind::ProtoPortVmap {
            // The lengths of the concatenated fields, which select the pipapo backend.
            self.w.nest(NFTA_SET_DESC, |w| {
                w.nest(NFTA_SET_DESC_CONCAT, |w| {
                    for len in [1, 2] {
                        w.nest(NFTA_LIST_ELEM, |w| w.put_u32(NFTA_SET_FIELD_LEN, len));
                    }
                });
            });
        }
        let mut udata = layout.udata;
        if let Some(comment) = &spec.comment {
            let mut text = cut_comment(comment).as_bytes().to_vec();
            text.push(0);
            put_udata(&mut udata, UDATA_SET_COMMENT, &text);
        }
        self.w.put(NFTA_SET_USERDATA, &udata);
        self.w.end();
    }

    fn rule(&mut self, chain: &str, rule: &Rule) {
        // The rule's anonymous sets first, in the order its expressions use them.
        let mut anon = Vec::new();
        for e in &rule.exprs {
            match e {
                Expr::Ports { ports, .. } => match port_match(ports) {
                    PortMatch::Singles(singles) => anon.push(self.port_set(&singles, &[])),
                    PortMatch::Intervals(ranges) => anon.push(self.port_set(&[], &ranges)),
                    PortMatch::One(_) | PortMatch::Range(_) => {}
                },
                Expr::Icmp {
                    family,
                    icmp_type,
                    code: Some(code),
                    negate: true,
                } => {
                    anon.push(self.icmp_set(*family, *icmp_type, *code));
                }
                _ => {}
            }
        }
        self.begin(NFT_MSG_NEWRULE, NLM_F_CREATE | NLM_F_APPEND);
        self.w.put_str(NFTA_RULE_TABLE, self.table);
        self.w.put_str(NFTA_RULE_CHAIN, chain);
        expr::exprs(&mut self.w, &rule.exprs, &anon);
        self.w.put(NFTA_RULE_USERDATA, &rule_udata(rule));
        self.w.end();
    }

    /// An anonymous set of one ICMP type . code (`icmp type . icmp code != { 3 . 4 }`): the
    /// negation of both fields, which `nft list` shows as what it is. Returns its set id.
    fn icmp_set(&mut self, family: IpFamily, icmp_type: u8, code: u8) -> u32 {
        self.set_id += 1;
        let id = self.set_id;
        let key_type = match family {
            IpFamily::V4 => TYPE_ICMP_TYPE << TYPE_BITS | TYPE_ICMP_CODE,
            IpFamily::V6 => TYPE_ICMP6_TYPE << TYPE_BITS | TYPE_ICMPV6_CODE,
        };
        self.begin(NFT_MSG_NEWSET, NLM_F_CREATE);
        self.w.put_str(NFTA_SET_TABLE, self.table);
        self.w.put_str(NFTA_SET_NAME, "__set%d");
        self.w
            .put_u32(NFTA_SET_FLAGS, NFT_SET_ANONYMOUS | NFT_SET_CONSTANT);
        self.w.put_u32(NFTA_SET_KEY_TYPE, key_type);
        self.w.put_u32(NFTA_SET_KEY_LEN, 8);
        self.w.put_u32(NFTA_SET_ID, id);
        self.w
            .nest(NFTA_SET_DESC, |w| w.put_u32(NFTA_SET_DESC_SIZE, 1));
        let mut udata = Vec::new();
        put_udata(&mut udata, UDATA_SET_KEYBYTEORDER, &0u32.to_ne_bytes());
        self.w.put(NFTA_SET_USERDATA, &udata);
        self.w.end();
        let mut scratch = Writer::new();
        key_element(&mut scratch, &[icmp_type, 0, 0, 0, code, 0, 0, 0], 0, false);
        let ends = vec![scratch.len()];
        self.elements(NFT_MSG_NEWSETELEM, "__set%d", Some(id), &scratch.buf, ends);
        id
    }

    /// An anonymous set of ports for one rule (`th dport { … }`), and its elements; returns its
    /// set id. Single ports make a hash set; ranges an interval set, whose elements are each
    /// range's start and the port after its end (none after 65535), preceded by an end at 0
    /// when the first range starts later (the shape nft gives it).
    fn port_set(&mut self, singles: &[u16], ranges: &[super::Ports]) -> u32 {
        self.set_id += 1;
        let id = self.set_id;
        let mut scratch = Writer::new();
        let mut ends = Vec::new();
        let mut open = false;
        let mut add = |w: &mut Writer, port: u16, flags: u32, open: bool| {
            key_element(w, &port.to_be_bytes(), flags, open);
            ends.push(w.len());
        };
        for port in singles {
            add(&mut scratch, *port, 0, false);
        }
        if ranges.first().is_some_and(|r| r.first > 0) {
            add(&mut scratch, 0, NFT_SET_ELEM_INTERVAL_END, false);
        }
        for r in ranges {
            open = r.last == u16::MAX;
            add(&mut scratch, r.first, 0, open);
            if !open {
                add(&mut scratch, r.last + 1, NFT_SET_ELEM_INTERVAL_END, false);
            }
        }
        let count = ends.len() as u32;
        let interval = !ranges.is_empty();
        self.begin(NFT_MSG_NEWSET, NLM_F_CREATE);
        self.w.put_str(NFTA_SET_TABLE, self.table);
        self.w.put_str(NFTA_SET_NAME, "__set%d");
        let flags =
            NFT_SET_ANONYMOUS | NFT_SET_CONSTANT | if interval { NFT_SET_INTERVAL } else { 0 };
        self.w.put_u32(NFTA_SET_FLAGS, flags);
        self.w.put_u32(NFTA_SET_KEY_TYPE, TYPE_INET_SERVICE);
        self.w.put_u32(NFTA_SET_KEY_LEN, 2);
        self.w.put_u32(NFTA_SET_ID, id);
        self.w.nest(NFTA_SET_DESC, |w| {
            w.put_u32(NFTA_SET_DESC_SIZE, count + u32::from(open))
        });
        let mut udata = Vec::new();
        put_udata(
            &mut udata,
            UDATA_SET_KEYBYTEORDER,
            &BYTEORDER_BIG.to_ne_bytes(),
        );
        self.w.put(NFTA_SET_USERDATA, &udata);
        self.w.end();
        self.elements(NFT_MSG_NEWSETELEM, "__set%d", Some(id), &scratch.buf, ends);
        id
    }
}

/// A rule's user data: its comment (which `nft list` shows) and its digest (which nft ignores).
fn rule_udata(rule: &Rule) -> Vec<u8> {
    let mut udata = Vec::new();
    if let Some(comment) = &rule.comment {
        let mut text = cut_comment(comment).as_bytes().to_vec();
        text.push(0);
        put_udata(&mut udata, UDATA_RULE_COMMENT, &text);
    }
    put_udata(
        &mut udata,
        UDATA_RULE_DIGEST,
        &rule_digest(rule).to_be_bytes(),
    );
    udata
}

pub(super) fn hook_number(hook: Hook) -> u32 {
    match hook {
        Hook::Prerouting => 0,
        Hook::Input => 1,
        Hook::Forward => 2,
        Hook::Output => 3,
        Hook::Postrouting => 4,
    }
}

/// A request outside a batch (a get or a dump) for the table.
pub(super) fn request(kind: u16, flags: u16, seq: u32, attrs: impl FnOnce(&mut Writer)) -> Vec<u8> {
    let mut w = Writer::new();
    w.begin(kind, NLM_F_REQUEST | flags, seq, NFPROTO_INET);
    attrs(&mut w);
    w.end();
    w.buf
}

#[cfg(test)]
mod tests;
