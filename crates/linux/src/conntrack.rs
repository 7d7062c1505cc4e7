//! Forgetting the connections of removed addresses, so that a removed endpoint's flows do not
//! outlive it (and cannot be picked up by the next workload given the same address); and
//! listing the connections with their packet and byte counters ([`connections`]), for flow logs.
//!
//! This talks ctnetlink (`NETLINK_NETFILTER`, subsystem `CTNETLINK`) on its own socket: one dump
//! of the family's table, matched against every address of the batch in the original and reply
//! directions (both ends, and NAT's rewritten ends), then one delete per matching entry by its
//! original tuple. Running `conntrack -D` twice per address cost ~14 ms a run; a dump of an
//! empty table is a few syscalls.
//!
//! ```text
//!   request:  nlmsghdr │ nfgenmsg{family, v0, res 0} │ attributes…
//!   entry:    CTA_TUPLE_ORIG{CTA_TUPLE_IP{src, dst}, CTA_TUPLE_PROTO{…}}  CTA_TUPLE_REPLY{…}  CTA_ZONE?
//!   delete:   the entry's CTA_TUPLE_ORIG, byte for byte, and its CTA_ZONE
//! ```

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use netlink_sys::{Socket, SocketAddr, protocols::NETLINK_NETFILTER};

use crate::nfnl::{Writer, align, messages, whole_attributes};
use crate::{Netns, in_netns};

/// Why connections could not be forgotten.
#[derive(Debug, thiserror::Error)]
pub enum ConntrackError {
    #[error("cannot open a ctnetlink socket in {netns}: {reason}")]
    Open { netns: String, reason: String },
    #[error("ctnetlink {operation} failed: {reason}")]
    Request {
        operation: &'static str,
        reason: String,
    },
}

const NFNL_SUBSYS_CTNETLINK: u16 = 1;
const IPCTNL_MSG_CT_GET: u16 = 1;
const IPCTNL_MSG_CT_DELETE: u16 = 2;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_ACK: u16 = 0x4;
const NLM_F_DUMP: u16 = 0x300;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const CTA_TUPLE_ORIG: u16 = 1;
const CTA_TUPLE_REPLY: u16 = 2;
const CTA_ZONE: u16 = 18;
const CTA_TUPLE_PROTO: u16 = 2;
const CTA_PROTO_NUM: u16 = 1;
const CTA_PROTO_SRC_PORT: u16 = 2;
const CTA_PROTO_DST_PORT: u16 = 3;
const CTA_COUNTERS_ORIG: u16 = 9;
const CTA_COUNTERS_REPLY: u16 = 10;
const CTA_COUNTERS_PACKETS: u16 = 1;
const CTA_COUNTERS_BYTES: u16 = 2;
const CTA_TUPLE_IP: u16 = 1;
const CTA_IP_V4_SRC: u16 = 1;
const CTA_IP_V4_DST: u16 = 2;
const CTA_IP_V6_SRC: u16 = 3;
const CTA_IP_V6_DST: u16 = 4;
const AF_INET: u8 = 2;
const AF_INET6: u8 = 10;
const ENOENT: i32 = 2;

/// Deletes every conntrack entry with one of `addresses` at either end, in either direction.
/// Returns how many entries went; nothing to delete is fine. The socket is synchronous: the
/// work runs on a blocking thread, off the async reactor.
pub async fn flush_conntrack(netns: &Netns, addresses: &[IpAddr]) -> Result<usize, ConntrackError> {
    if addresses.is_empty() {
        return Ok(0);
    }
    let (netns, addresses) = (netns.clone(), addresses.to_vec());
    tokio::task::spawn_blocking(move || flush_blocking(&netns, &addresses))
        .await
        .map_err(|e| ConntrackError::Request {
            operation: "flush",
            reason: format!("the thread running it failed: {e}"),
        })?
}

fn flush_blocking(netns: &Netns, addresses: &[IpAddr]) -> Result<usize, ConntrackError> {
    let mut session = Session::open(netns)?;
    let gone: BTreeSet<IpAddr> = addresses.iter().copied().collect();
    let mut deleted = 0;
    for family in [AF_INET, AF_INET6] {
        if !gone.iter().any(|a| family_of(a) == family) {
            continue;
        }
        let doomed: Vec<Entry> = session
            .dump(family)?
            .into_iter()
            .filter(|entry| entry.addresses.iter().any(|a| gone.contains(a)))
            .collect();
        for entry in doomed {
            if session.delete(family, &entry)? {
                deleted += 1;
            }
        }
    }
    Ok(deleted)
}

fn family_of(address: &IpAddr) -> u8 {
    if address.is_ipv4() { AF_INET } else { AF_INET6 }
}

/// One conntrack entry, as much of it as deleting it by address needs.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    /// The `CTA_TUPLE_ORIG` attribute, header included, as the kernel sent it.
    original: Vec<u8>,
    /// The `CTA_ZONE` attribute, if the entry is in a zone (attributes are kept unpadded).
    zone: Option<Vec<u8>>,
    /// Source and destination of the original and the reply tuple.
    addresses: Vec<IpAddr>,
    /// The original and reply tuples, decoded.
    tuples: [Option<Tuple>; 2],
    /// Packets and bytes in the original and the reply direction (zero unless the kernel
    /// counts them: `net.netfilter.nf_conntrack_acct = 1`).
    counters: [(u64, u64); 2],
}

/// One direction of a connection: who sends to whom, over which protocol and ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Tuple {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub protocol: u8,
    /// For protocols with ports (TCP, UDP, SCTP, UDP-Lite); ICMP's id and type otherwise
    /// read as none.
    pub src_port: Option<u16>,
    pub dst_port: Option<u16>,
}

/// A tracked connection and what went each way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Connection {
    /// As the first packet had it.
    pub original: Tuple,
    /// As the answers have it (differs from the original reversed under NAT).
    pub reply: Tuple,
    pub packets_out: u64,
    pub bytes_out: u64,
    pub packets_back: u64,
    pub bytes_back: u64,
}

/// Every tracked connection of `netns` (IPv4 and IPv6), with its counters. The counters are
/// zero unless `net.netfilter.nf_conntrack_acct` is 1.
pub async fn connections(netns: &Netns) -> Result<Vec<Connection>, ConntrackError> {
    let netns = netns.clone();
    tokio::task::spawn_blocking(move || {
        let mut session = Session::open(&netns)?;
        let mut found = Vec::new();
        for family in [AF_INET, AF_INET6] {
            for entry in session.dump(family)? {
                if let [Some(original), Some(reply)] = entry.tuples {
                    let [(packets_out, bytes_out), (packets_back, bytes_back)] = entry.counters;
                    found.push(Connection {
                        original,
                        reply,
                        packets_out,
                        bytes_out,
                        packets_back,
                        bytes_back,
                    });
                }
            }
        }
        Ok(found)
    })
    .await
    .map_err(|e| ConntrackError::Request {
        operation: "dump",
        reason: format!("the thread running it failed: {e}"),
    })?
}

struct Session {
    socket: Socket,
    sequence: u32,
    buffer: Vec<u8>,
}

impl Session {
    fn open(netns: &Netns) -> Result<Session, ConntrackError> {
        let socket = in_netns(netns, || {
            let mut socket = Socket::new(NETLINK_NETFILTER)?;
            socket.bind_auto()?;
            socket.connect(&SocketAddr::new(0, 0))?;
            Ok(socket)
        })
        .map_err(|e| ConntrackError::Open {
            netns: netns.to_string(),
            reason: e.to_string(),
        })?;
        Ok(Session {
            socket,
            sequence: 0,
            buffer: Vec::with_capacity(64 * 1024),
        })
    }

    fn send(
        &mut self,
        kind: u16,
        flags: u16,
        family: u8,
        attributes: &[u8],
    ) -> Result<u32, ConntrackError> {
        self.sequence += 1;
        let message = request(kind, flags, self.sequence, family, attributes);
        self.socket
            .send(&message, 0)
            .map_err(|e| ConntrackError::Request {
                operation: operation(kind),
                reason: e.to_string(),
            })?;
        Ok(self.sequence)
    }

    /// The next datagram's messages: (type without the subsystem, sequence, payload).
    fn receive(&mut self, kind: u16) -> Result<Vec<(u16, u32, Vec<u8>)>, ConntrackError> {
        self.buffer.clear();
        self.socket
            .recv(&mut self.buffer, 0)
            .map_err(|e| ConntrackError::Request {
                operation: operation(kind),
                reason: e.to_string(),
            })?;
        Ok(messages(&self.buffer)
            .into_iter()
            .map(|m| {
                let kind = if m.kind < 0x10 { m.kind } else { m.kind & 0xff };
                (kind, m.seq, m.payload.to_vec())
            })
            .collect())
    }

    fn dump(&mut self, family: u8) -> Result<Vec<Entry>, ConntrackError> {
        let kind = IPCTNL_MSG_CT_GET;
        let sequence = self.send(kind, NLM_F_REQUEST | NLM_F_DUMP, family, &[])?;
        let mut entries = Vec::new();
        loop {
            for (message, seq, payload) in self.receive(kind)? {
                if seq != sequence {
                    continue;
                }
                match message {
                    NLMSG_DONE => return Ok(entries),
                    NLMSG_ERROR => match error_code(&payload) {
                        0 => {}
                        code => return Err(kernel_error(kind, code)),
                    },
                    _ => entries.extend(entry(&payload)),
                }
            }
        }
    }

    /// Deletes one entry; `false` if it was already gone.
    fn delete(&mut self, family: u8, entry: &Entry) -> Result<bool, ConntrackError> {
        let kind = IPCTNL_MSG_CT_DELETE;
        let mut attributes = Vec::new();
        for attribute in std::iter::once(&entry.original).chain(&entry.zone) {
            attributes.extend_from_slice(attribute);
            attributes.resize(align(attributes.len()), 0);
        }
        let sequence = self.send(kind, NLM_F_REQUEST | NLM_F_ACK, family, &attributes)?;
        loop {
            for (message, seq, payload) in self.receive(kind)? {
                if seq == sequence && message == NLMSG_ERROR {
                    return match error_code(&payload) {
                        0 => Ok(true),
                        ENOENT => Ok(false),
                        code => Err(kernel_error(kind, code)),
                    };
                }
            }
        }
    }
}

fn operation(kind: u16) -> &'static str {
    if kind == IPCTNL_MSG_CT_GET {
        "dump"
    } else {
        "delete"
    }
}

fn kernel_error(kind: u16, code: i32) -> ConntrackError {
    ConntrackError::Request {
        operation: operation(kind),
        reason: std::io::Error::from_raw_os_error(code).to_string(),
    }
}

/// A ctnetlink request: netlink header, `nfgenmsg`, attributes.
fn request(kind: u16, flags: u16, sequence: u32, family: u8, attributes: &[u8]) -> Vec<u8> {
    let mut w = Writer::new();
    w.message(
        (NFNL_SUBSYS_CTNETLINK << 8) | kind,
        flags,
        sequence,
        family,
        0,
    );
    w.buf.extend_from_slice(attributes);
    w.end();
    w.buf
}

/// The errno of an `NLMSG_ERROR` payload (0 is an acknowledgement).
fn error_code(payload: &[u8]) -> i32 {
    payload
        .get(0..4)
        .map(|b| -i32::from_ne_bytes(b.try_into().expect("4 bytes")))
        .unwrap_or(0)
}

/// An entry from a dumped message's payload (after `nfgenmsg`).
fn entry(payload: &[u8]) -> Option<Entry> {
    let mut original = None;
    let mut zone = None;
    let mut addresses = Vec::new();
    let mut tuples = [None, None];
    let mut counters = [(0, 0); 2];
    for (kind, whole, inner) in whole_attributes(payload.get(4..)?) {
        match kind {
            CTA_TUPLE_ORIG | CTA_TUPLE_REPLY => {
                if kind == CTA_TUPLE_ORIG {
                    original = Some(whole.to_vec());
                }
                let mut ends = Vec::new();
                for (_, _, ip) in whole_attributes(inner).filter(|(k, _, _)| *k == CTA_TUPLE_IP) {
                    ends.extend(whole_attributes(ip).filter_map(|(k, _, value)| address(k, value)));
                }
                tuples[usize::from(kind == CTA_TUPLE_REPLY)] = tuple(&ends, inner);
                addresses.extend(ends);
            }
            CTA_COUNTERS_ORIG | CTA_COUNTERS_REPLY => {
                let number = |k| {
                    whole_attributes(inner)
                        .find(|(kind, _, _)| *kind == k)
                        .and_then(|(_, _, v)| {
                            Some(u64::from_be_bytes(v.get(..8)?.try_into().ok()?))
                        })
                        .unwrap_or(0)
                };
                counters[usize::from(kind == CTA_COUNTERS_REPLY)] =
                    (number(CTA_COUNTERS_PACKETS), number(CTA_COUNTERS_BYTES));
            }
            CTA_ZONE => zone = Some(whole.to_vec()),
            _ => {}
        }
    }
    Some(Entry {
        original: original?,
        zone,
        addresses,
        tuples,
        counters,
    })
}

/// A tuple from its two addresses (source first) and its `CTA_TUPLE` attributes.
fn tuple(ends: &[IpAddr], attributes: &[u8]) -> Option<Tuple> {
    let [src, dst] = ends else {
        return None;
    };
    let proto = whole_attributes(attributes)
        .find(|(k, _, _)| *k == CTA_TUPLE_PROTO)?
        .2;
    let field = |k| {
        whole_attributes(proto)
            .find(|(kind, _, _)| *kind == k)
            .map(|(_, _, v)| v)
    };
    let protocol = *field(CTA_PROTO_NUM)?.first()?;
    let port = |k| {
        matches!(protocol, 6 | 17 | 132 | 136)
            .then(|| field(k))
            .flatten()
            .and_then(|v| Some(u16::from_be_bytes(v.get(..2)?.try_into().ok()?)))
    };
    Some(Tuple {
        src: *src,
        dst: *dst,
        protocol,
        src_port: port(CTA_PROTO_SRC_PORT),
        dst_port: port(CTA_PROTO_DST_PORT),
    })
}

fn address(kind: u16, value: &[u8]) -> Option<IpAddr> {
    match kind {
        CTA_IP_V4_SRC | CTA_IP_V4_DST => {
            let octets: [u8; 4] = value.try_into().ok()?;
            Some(Ipv4Addr::from(octets).into())
        }
        CTA_IP_V6_SRC | CTA_IP_V6_DST => {
            let octets: [u8; 16] = value.try_into().ok()?;
            Some(Ipv6Addr::from(octets).into())
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attribute(kind: u16, value: &[u8]) -> Vec<u8> {
        let mut a = Vec::new();
        a.extend_from_slice(&((4 + value.len()) as u16).to_ne_bytes());
        a.extend_from_slice(&kind.to_ne_bytes());
        a.extend_from_slice(value);
        a.resize(align(a.len()), 0);
        a
    }

    fn nested(kind: u16, parts: &[Vec<u8>]) -> Vec<u8> {
        attribute(kind | 0x8000, &parts.concat())
    }

    fn tuple(kind: u16, src: [u8; 4], dst: [u8; 4]) -> Vec<u8> {
        nested(
            kind,
            &[
                nested(
                    CTA_TUPLE_IP,
                    &[
                        attribute(CTA_IP_V4_SRC, &src),
                        attribute(CTA_IP_V4_DST, &dst),
                    ],
                ),
                nested(2, &[attribute(1, &[6])]),
            ],
        )
    }

    #[test]
    fn an_entry_gives_all_four_ends_and_its_original_tuple_verbatim() {
        // A DNAT'd flow: 10.0.0.1 → 10.96.0.1 (a service), answered by 10.65.0.7.
        let original = tuple(CTA_TUPLE_ORIG, [10, 0, 0, 1], [10, 96, 0, 1]);
        let reply = tuple(CTA_TUPLE_REPLY, [10, 65, 0, 7], [10, 0, 0, 1]);
        let zone = attribute(CTA_ZONE, &7u16.to_be_bytes());
        let payload = [
            vec![AF_INET, 0, 0, 0],
            original.clone(),
            reply,
            zone.clone(),
        ]
        .concat();
        let message = request(1, 0x2, 9, AF_INET, &payload[4..]);

        let parsed = messages(&message);
        assert_eq!(parsed.len(), 1);
        assert_eq!(
            (parsed[0].kind, parsed[0].seq),
            ((NFNL_SUBSYS_CTNETLINK << 8) | 1, 9)
        );
        let entry = entry(parsed[0].payload).unwrap();
        assert_eq!(entry.original, original);
        assert_eq!(entry.zone.as_deref(), Some(&zone[..6]), "unpadded");
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(
            entry.addresses,
            [
                ip("10.0.0.1"),
                ip("10.96.0.1"),
                ip("10.65.0.7"),
                ip("10.0.0.1")
            ]
        );
    }

    #[test]
    fn truncated_input_ends_the_parse_instead_of_panicking() {
        let message = request(
            1,
            0,
            1,
            AF_INET,
            &tuple(CTA_TUPLE_ORIG, [1, 1, 1, 1], [2, 2, 2, 2]),
        );
        for cut in 0..message.len() {
            for m in messages(&message[..cut]) {
                let _ = entry(m.payload);
            }
        }
        assert!(
            entry(&[AF_INET, 0, 0, 0]).is_none(),
            "no original tuple, no entry"
        );
    }

    #[test]
    fn acknowledgements_and_errors_are_told_apart() {
        assert_eq!(error_code(&0i32.to_ne_bytes()), 0);
        assert_eq!(error_code(&(-2i32).to_ne_bytes()), ENOENT);
    }
}
