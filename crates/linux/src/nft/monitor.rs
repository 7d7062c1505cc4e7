//! Changes to a namespace's nf_tables as they happen, as `nft monitor` shows them: a
//! `NETLINK_NETFILTER` socket subscribed to `NFNLGRP_NFTABLES`, read on a thread of its own.
//! iptables-nft writes through nf_tables too, so its changes (`iptables -F FORWARD`) arrive
//! here as well, as changes of the `ip`/`ip6` tables `filter`, `nat`, `raw`, `mangle`.
//!
//! ```text
//!   kernel ── NFT_MSG_NEW*/DEL* (nlmsg_pid = the writer's port) ──► thread: parse, drop own
//!          ── ENOBUFS (the group overran the buffer) ─────────────►   writes ─► FirewallEvents
//! ```
//!
//! Each notification's `nlmsg_pid` is the port id of the socket whose batch made the change;
//! every nf_tables socket this crate opens ([`super::socket`]) registers its port while it is
//! open, so the changes this process makes are left out.

use std::collections::BTreeSet;
use std::os::fd::AsFd;
use std::sync::Mutex;
use std::time::Duration;

use netlink_sys::{Socket, protocols::NETLINK_NETFILTER};
use nix::sys::socket::{setsockopt, sockopt};
use nix::sys::time::TimeVal;
use tokio::sync::mpsc;

use super::NftError;
use super::wire::*;
use crate::{Netns, in_netns};

/// `NFNLGRP_NFTABLES` of `linux/netfilter/nfnetlink.h`.
const NFNLGRP_NFTABLES: u32 = 7;
/// How often the reading thread looks whether anyone still listens.
const POLL: Duration = Duration::from_millis(500);
/// Events waiting for the reader; past this one more means nothing new ("something changed"
/// is already waiting).
const QUEUE: usize = 256;
/// The socket's receive buffer: a flush of a large ruleset is thousands of notifications.
const RCVBUF: usize = 4 << 20;

/// The port ids of this process's open nf_tables sockets: their changes are not reported.
static OWN_PORTS: Mutex<BTreeSet<u32>> = Mutex::new(BTreeSet::new());

/// Notes that the socket with `port` is this process's (`true`) or closed (`false`).
pub(super) fn own_port(port: u32, open: bool) {
    let mut ports = OWN_PORTS.lock().unwrap_or_else(|p| p.into_inner());
    if open {
        ports.insert(port);
    } else {
        ports.remove(&port);
    }
}

fn is_own(port: u32) -> bool {
    port != 0
        && OWN_PORTS
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&port)
}

/// What a change did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    Table,
    Chain,
    Rule,
    Set,
    Element,
}

/// One change another process made, or notifications lost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FirewallEvent {
    /// A table, chain, rule, set or element of `table` (family `family`: `inet`, `ip`, `ip6`,
    /// …) was added (`added`) or deleted.
    Changed {
        family: &'static str,
        table: String,
        kind: ChangeKind,
        added: bool,
        /// The port id of the socket that made it.
        port: u32,
    },
    /// The socket overran (`ENOBUFS`): changes were lost, anything may have changed.
    Overrun,
}

impl FirewallEvent {
    /// Whether the event may concern `family`'s `table` (an overrun concerns every table).
    pub fn concerns(&self, tables: &[(&str, &str)]) -> bool {
        match self {
            FirewallEvent::Overrun => true,
            FirewallEvent::Changed { family, table, .. } => {
                tables.iter().any(|(f, t)| f == family && t == table)
            }
        }
    }
}

/// The changes of one namespace's nf_tables, until dropped.
#[derive(Debug)]
pub struct FirewallEvents {
    events: mpsc::Receiver<FirewallEvent>,
}

impl FirewallEvents {
    /// Subscribes in `netns`; the reading thread ends soon after this is dropped.
    pub fn subscribe(netns: &Netns) -> Result<FirewallEvents, NftError> {
        let socket = in_netns(netns, || {
            let mut socket = Socket::new(NETLINK_NETFILTER)?;
            socket.bind_auto()?;
            socket.add_membership(NFNLGRP_NFTABLES)?;
            Ok(socket)
        })
        .map_err(|e| NftError::Socket {
            netns: netns.to_string(),
            reason: format!("cannot subscribe to nf_tables notifications: {e}"),
        })?;
        if setsockopt(&socket.as_fd(), sockopt::RcvBufForce, &RCVBUF).is_err() {
            let _ = setsockopt(&socket.as_fd(), sockopt::RcvBuf, &RCVBUF);
        }
        let timeout = TimeVal::new(0, POLL.as_micros() as i64);
        setsockopt(&socket.as_fd(), sockopt::ReceiveTimeout, &timeout).map_err(|e| {
            NftError::Socket {
                netns: netns.to_string(),
                reason: format!("set SO_RCVTIMEO: {e}"),
            }
        })?;
        let (sender, events) = mpsc::channel(QUEUE);
        std::thread::Builder::new()
            .name("nft-monitor".into())
            .spawn(move || read(socket, sender))
            .map_err(|e| NftError::Socket {
                netns: netns.to_string(),
                reason: format!("cannot start the nf_tables monitor's thread: {e}"),
            })?;
        Ok(FirewallEvents { events })
    }

    /// The next event; `None` once the socket failed.
    pub async fn next(&mut self) -> Option<FirewallEvent> {
        self.events.recv().await
    }

    /// The next event, waiting on this thread (for tests and tools without a runtime).
    pub fn blocking_next(&mut self) -> Option<FirewallEvent> {
        self.events.blocking_recv()
    }
}

/// Reads notifications until nobody listens or the socket fails.
fn read(socket: Socket, sender: mpsc::Sender<FirewallEvent>) {
    let mut buf = Vec::with_capacity(256 << 10);
    while !sender.is_closed() {
        buf.clear();
        match socket.recv(&mut buf, 0) {
            Ok(_) => {
                for event in parse(&buf) {
                    // A full queue already holds a change to look at: this one adds nothing.
                    let _ = sender.try_send(event);
                }
            }
            Err(e) if e.raw_os_error() == Some(nix::libc::ENOBUFS) => {
                let _ = sender.try_send(FirewallEvent::Overrun);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => {
                // The reader sees the channel close (`next` answers `None`) and says so.
                let _ = sender.try_send(FirewallEvent::Overrun);
                return;
            }
        }
    }
}

/// The changes other processes made, in one datagram.
fn parse(mut data: &[u8]) -> Vec<FirewallEvent> {
    let mut events = Vec::new();
    while data.len() >= 16 {
        let len = u32::from_ne_bytes(data[0..4].try_into().expect("4 bytes")) as usize;
        if len < 16 || len > data.len() {
            break;
        }
        let kind = u16::from_ne_bytes([data[4], data[5]]);
        let port = u32::from_ne_bytes(data[12..16].try_into().expect("4 bytes"));
        if let Some(event) = change(kind, port, &data[16..len]) {
            events.push(event);
        }
        data = &data[(len + 3) & !3..];
    }
    events
}

/// One notification as a change: `None` for generations, other subsystems and own writes.
fn change(kind: u16, port: u32, payload: &[u8]) -> Option<FirewallEvent> {
    if kind >> 8 != NFNL_SUBSYS_NFTABLES || payload.len() < 4 || is_own(port) {
        return None;
    }
    let (kind, added) = match kind & 0xff {
        NFT_MSG_NEWTABLE => (ChangeKind::Table, true),
        NFT_MSG_DELTABLE => (ChangeKind::Table, false),
        NFT_MSG_NEWCHAIN => (ChangeKind::Chain, true),
        NFT_MSG_DELCHAIN => (ChangeKind::Chain, false),
        NFT_MSG_NEWRULE => (ChangeKind::Rule, true),
        NFT_MSG_DELRULE => (ChangeKind::Rule, false),
        NFT_MSG_NEWSET => (ChangeKind::Set, true),
        NFT_MSG_DELSET => (ChangeKind::Set, false),
        NFT_MSG_NEWSETELEM => (ChangeKind::Element, true),
        NFT_MSG_DELSETELEM => (ChangeKind::Element, false),
        _ => return None,
    };
    let family = match payload[0] {
        NFPROTO_INET => "inet",
        NFPROTO_IPV4 => "ip",
        NFPROTO_IPV6 => "ip6",
        _ => "other",
    };
    Some(FirewallEvent::Changed {
        family,
        table: table_name(&payload[4..])?,
        kind,
        added,
        port,
    })
}

/// Attribute 1 (`NFTA_TABLE_NAME`, `NFTA_CHAIN_TABLE`, `NFTA_RULE_TABLE`, `NFTA_SET_TABLE`,
/// `NFTA_SET_ELEM_LIST_TABLE`): the table every one of these messages is about.
fn table_name(mut attrs: &[u8]) -> Option<String> {
    while attrs.len() >= 4 {
        let len = u16::from_ne_bytes([attrs[0], attrs[1]]) as usize;
        let kind = u16::from_ne_bytes([attrs[2], attrs[3]]) & 0x3fff;
        if len < 4 || len > attrs.len() {
            return None;
        }
        if kind == 1 {
            let value = &attrs[4..len];
            let end = value.iter().position(|&b| b == 0).unwrap_or(value.len());
            return String::from_utf8(value[..end].to_vec()).ok();
        }
        attrs = &attrs[((len + 3) & !3).min(attrs.len())..];
    }
    None
}
