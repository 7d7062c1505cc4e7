//! Packets the firewall logged to an NFLOG group (`log group N prefix "…"` in nf_tables,
//! `-j NFLOG --nflog-group N --nflog-prefix …` in iptables), read over nfnetlink_log: each with
//! its prefix (which rule logged it) and the addresses, protocol and ports of its headers. Felix
//! attributes flows to policy rules this way, as upstream Felix does.
//!
//! ```text
//!   bind:    NFULNL_MSG_CONFIG{res_id = group}: CMD BIND; MODE copy-packet, 128 bytes;
//!            flush timeout; queue threshold
//!   packet:  NFULNL_MSG_PACKET{family}: PACKET_HDR{hw_protocol, hook} PREFIX IFINDEX_* PAYLOAD
//! ```
//!
//! Only the first 128 bytes of each packet are copied (the IP and transport headers), and the
//! kernel batches messages (1 s or 64 packets, whichever first), so logging costs little even
//! when every new connection is logged.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::AsFd;
use std::time::Duration;

use netlink_sys::{Socket, SocketAddr, protocols::NETLINK_NETFILTER};

use crate::nfnl::{Writer, attribute, attributes, be32, messages, string};
use crate::{Netns, in_netns};

const NFNL_SUBSYS_ULOG: u16 = 4;
const NFULNL_MSG_PACKET: u16 = 0;
const NFULNL_MSG_CONFIG: u16 = 1;
const NFULA_CFG_CMD: u16 = 1;
const NFULA_CFG_MODE: u16 = 2;
const NFULA_CFG_NLBUFSIZ: u16 = 3;
const NFULA_CFG_TIMEOUT: u16 = 4;
const NFULA_CFG_QTHRESH: u16 = 5;
const NFULNL_CFG_CMD_BIND: u8 = 1;
const NFULNL_COPY_PACKET: u8 = 2;
const NFULA_PACKET_HDR: u16 = 1;
const NFULA_MARK: u16 = 2;
const NFULA_IFINDEX_INDEV: u16 = 4;
const NFULA_IFINDEX_OUTDEV: u16 = 5;
const NFULA_PAYLOAD: u16 = 9;
const NFULA_PREFIX: u16 = 10;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_ACK: u16 = 0x4;
const NLMSG_ERROR: u16 = 2;
const AF_UNSPEC: u8 = 0;
/// Bytes of each packet copied to us: enough for an IPv6 header and a TCP header.
const COPY_RANGE: u32 = 128;

/// Why the log could not be read.
#[derive(Debug, thiserror::Error)]
pub enum NflogError {
    #[error("cannot open an nfnetlink_log socket in {netns}: {reason}")]
    Open { netns: String, reason: String },
    #[error("cannot bind NFLOG group {group} in {netns}: {reason}")]
    Bind {
        group: u16,
        netns: String,
        reason: String,
    },
    #[error("reading NFLOG group {group}: {reason}")]
    Read { group: u16, reason: String },
}

/// The addresses, protocol and ports of a logged packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PacketHeader {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub protocol: u8,
    /// For TCP, UDP, SCTP and UDP-Lite.
    pub src_port: Option<u16>,
    pub dst_port: Option<u16>,
    /// The IP packet's length (header included).
    pub length: u16,
}

/// One logged packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggedPacket {
    /// The rule's log prefix.
    pub prefix: String,
    /// The netfilter hook it was logged at (0 prerouting … 4 postrouting).
    pub hook: u8,
    pub mark: Option<u32>,
    pub in_ifindex: Option<u32>,
    pub out_ifindex: Option<u32>,
    /// `None` when the packet was too short or not IP.
    pub header: Option<PacketHeader>,
}

/// A subscription to one NFLOG group of a namespace. Reading blocks (up to the read timeout):
/// run it on a thread of its own.
pub struct Nflog {
    socket: Socket,
    group: u16,
    buffer: Vec<u8>,
}

impl std::fmt::Debug for Nflog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nflog").field("group", &self.group).finish()
    }
}

impl Nflog {
    /// Binds `group` in `netns`: from now on, packets the firewall logs to it come here.
    /// Another process bound to the group makes this fail (`EBUSY`).
    pub fn bind(netns: &Netns, group: u16) -> Result<Nflog, NflogError> {
        let socket = in_netns(netns, || {
            let mut socket = Socket::new(NETLINK_NETFILTER)?;
            socket.bind_auto()?;
            socket.connect(&SocketAddr::new(0, 0))?;
            // Bursts of logged packets: room for many batches before the kernel drops some.
            socket.set_rx_buf_sz(4 * 1024 * 1024)?;
            Ok(socket)
        })
        .map_err(|e: std::io::Error| NflogError::Open {
            netns: netns.to_string(),
            reason: e.to_string(),
        })?;
        let mut nflog = Nflog {
            socket,
            group,
            buffer: Vec::with_capacity(256 * 1024),
        };
        let bind_error = |reason: String| NflogError::Bind {
            group,
            netns: netns.to_string(),
            reason,
        };
        nflog
            .configure(|w| w.put(NFULA_CFG_CMD, &[NFULNL_CFG_CMD_BIND]))
            .map_err(bind_error)?;
        nflog
            .configure(|w| {
                let mut mode = COPY_RANGE.to_be_bytes().to_vec();
                mode.extend_from_slice(&[NFULNL_COPY_PACKET, 0]);
                w.put(NFULA_CFG_MODE, &mode);
                w.put_u32(NFULA_CFG_NLBUFSIZ, 64 * 1024);
                // Hundredths of a second: batches are flushed at least this often.
                w.put_u32(NFULA_CFG_TIMEOUT, 100);
                w.put_u32(NFULA_CFG_QTHRESH, 64);
            })
            .map_err(bind_error)?;
        Ok(nflog)
    }

    /// Sends one configuration message for the group and waits for its acknowledgement.
    fn configure(&mut self, attrs: impl FnOnce(&mut Writer)) -> Result<(), String> {
        let mut w = Writer::new();
        let kind = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_CONFIG;
        w.message(kind, NLM_F_REQUEST | NLM_F_ACK, 1, AF_UNSPEC, self.group);
        attrs(&mut w);
        w.end();
        self.socket.send(&w.buf, 0).map_err(|e| e.to_string())?;
        loop {
            self.buffer.clear();
            self.socket
                .recv(&mut self.buffer, 0)
                .map_err(|e| e.to_string())?;
            for message in messages(&self.buffer) {
                if message.kind == NLMSG_ERROR {
                    let code = message
                        .payload
                        .get(0..4)
                        .map(|b| -i32::from_ne_bytes(b.try_into().expect("4 bytes")))
                        .unwrap_or(0);
                    return match code {
                        0 => Ok(()),
                        code => Err(std::io::Error::from_raw_os_error(code).to_string()),
                    };
                }
            }
        }
    }

    /// How long [`Nflog::receive`] waits for a packet before returning none.
    pub fn set_read_timeout(&self, timeout: Duration) -> Result<(), NflogError> {
        let read = |e: std::io::Error| NflogError::Read {
            group: self.group,
            reason: e.to_string(),
        };
        nix::sys::socket::setsockopt(
            &self.socket.as_fd(),
            nix::sys::socket::sockopt::ReceiveTimeout,
            &nix::sys::time::TimeVal::new(
                timeout.as_secs() as i64,
                i64::from(timeout.subsec_micros()),
            ),
        )
        .map_err(|e| read(e.into()))
    }

    /// The packets of the next datagram (none when the read timed out).
    pub fn receive(&mut self) -> Result<Vec<LoggedPacket>, NflogError> {
        self.buffer.clear();
        match self.socket.recv(&mut self.buffer, 0) {
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Ok(Vec::new());
            }
            Err(e) => {
                return Err(NflogError::Read {
                    group: self.group,
                    reason: e.to_string(),
                });
            }
        }
        Ok(packets(&self.buffer))
    }
}

/// The logged packets in a datagram; anything else (and anything malformed) is skipped.
pub(crate) fn packets(datagram: &[u8]) -> Vec<LoggedPacket> {
    messages(datagram)
        .into_iter()
        .filter(|m| m.kind == (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_PACKET)
        .filter_map(|m| packet(m.payload))
        .collect()
}

fn packet(payload: &[u8]) -> Option<LoggedPacket> {
    let attrs = payload.get(4..)?;
    let hook = attribute(attrs, NFULA_PACKET_HDR)
        .and_then(|h| h.get(2))
        .copied()
        .unwrap_or(0);
    let mut logged = LoggedPacket {
        prefix: String::new(),
        hook,
        mark: None,
        in_ifindex: None,
        out_ifindex: None,
        header: None,
    };
    for (kind, value) in attributes(attrs) {
        match kind {
            NFULA_PREFIX => logged.prefix = string(value).unwrap_or_default(),
            NFULA_MARK => logged.mark = be32(value),
            NFULA_IFINDEX_INDEV => logged.in_ifindex = be32(value),
            NFULA_IFINDEX_OUTDEV => logged.out_ifindex = be32(value),
            NFULA_PAYLOAD => logged.header = header(value),
            _ => {}
        }
    }
    Some(logged)
}

/// The IP and transport header fields of a packet that starts at its IP header.
pub fn header(packet: &[u8]) -> Option<PacketHeader> {
    let version = packet.first()? >> 4;
    let (src, dst, protocol, length, transport) = match version {
        4 => {
            let ihl = usize::from(packet[0] & 0x0f) * 4;
            let octets = |at: usize| -> Option<[u8; 4]> { packet.get(at..at + 4)?.try_into().ok() };
            let fragment = u16::from_be_bytes([*packet.get(6)?, *packet.get(7)?]) & 0x1fff;
            let transport = if fragment == 0 {
                packet.get(ihl..)
            } else {
                None
            };
            (
                IpAddr::from(Ipv4Addr::from(octets(12)?)),
                IpAddr::from(Ipv4Addr::from(octets(16)?)),
                *packet.get(9)?,
                u16::from_be_bytes([*packet.get(2)?, *packet.get(3)?]),
                transport,
            )
        }
        6 => {
            let octets =
                |at: usize| -> Option<[u8; 16]> { packet.get(at..at + 16)?.try_into().ok() };
            let payload = u16::from_be_bytes([*packet.get(4)?, *packet.get(5)?]);
            (
                IpAddr::from(Ipv6Addr::from(octets(8)?)),
                IpAddr::from(Ipv6Addr::from(octets(24)?)),
                *packet.get(6)?,
                payload.saturating_add(40),
                packet.get(40..),
            )
        }
        _ => return None,
    };
    let ports = matches!(protocol, 6 | 17 | 132 | 136)
        .then_some(transport)
        .flatten()
        .and_then(|t| {
            Some((
                u16::from_be_bytes([*t.first()?, *t.get(1)?]),
                u16::from_be_bytes([*t.get(2)?, *t.get(3)?]),
            ))
        });
    Some(PacketHeader {
        src,
        dst,
        protocol,
        src_port: ports.map(|p| p.0),
        dst_port: ports.map(|p| p.1),
        length,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tcp_v4(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16) -> Vec<u8> {
        let mut p = vec![0x45, 0, 0, 40, 0, 0, 0x40, 0, 64, 6, 0, 0];
        p.extend_from_slice(&src);
        p.extend_from_slice(&dst);
        p.extend_from_slice(&sport.to_be_bytes());
        p.extend_from_slice(&dport.to_be_bytes());
        p.extend_from_slice(&[0; 16]);
        p
    }

    #[test]
    fn a_logged_packet_gives_its_prefix_addresses_and_ports() {
        let mut w = Writer::new();
        w.message((NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_PACKET, 0, 0, 2, 5);
        w.put(NFULA_PACKET_HDR, &[0x08, 0x00, 2, 0]);
        w.put_str(NFULA_PREFIX, "DI|p1|2");
        w.put_u32(NFULA_IFINDEX_OUTDEV, 7);
        w.put(
            NFULA_PAYLOAD,
            &tcp_v4([10, 65, 0, 2], [10, 65, 0, 3], 40000, 80),
        );
        w.end();
        let logged = packets(&w.buf);
        assert_eq!(logged.len(), 1);
        let p = &logged[0];
        assert_eq!(
            (p.prefix.as_str(), p.hook, p.out_ifindex),
            ("DI|p1|2", 2, Some(7))
        );
        let h = p.header.unwrap();
        assert_eq!(h.src, "10.65.0.2".parse::<IpAddr>().unwrap());
        assert_eq!(h.dst, "10.65.0.3".parse::<IpAddr>().unwrap());
        assert_eq!(
            (h.protocol, h.src_port, h.dst_port, h.length),
            (6, Some(40000), Some(80), 40)
        );
    }

    #[test]
    fn fragments_and_truncated_packets_give_what_they_hold() {
        let mut fragment = tcp_v4([1, 1, 1, 1], [2, 2, 2, 2], 1, 2);
        fragment[7] = 8; // offset 64 bytes: no transport header here
        let h = header(&fragment).unwrap();
        assert_eq!((h.src_port, h.dst_port), (None, None));
        let whole = tcp_v4([1, 1, 1, 1], [2, 2, 2, 2], 1, 2);
        for cut in 0..whole.len() {
            let _ = header(&whole[..cut]);
        }
        assert!(header(&[0x15, 0, 0]).is_none(), "not IP");
    }
}
