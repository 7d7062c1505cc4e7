//! The `NETLINK_NETFILTER` socket of one namespace: a batch in one `sendmsg`, dumps, and the
//! kernel's errors mapped back to the operation that caused them.
//!
//! Only failing messages are answered inside a batch (no `NLM_F_ACK`). The kernel handles a
//! batch while `sendmsg` runs and queues its errors before returning, so a `GETGEN` request
//! sent right after is answered after the last of them: its reply marks the end of the batch.
//!
//! ```text
//!   sendmsg(BEGIN op… END)   sendmsg(GETGEN seq g)   recv… NLMSG_ERROR(seq of op k)… NEWGEN(seq g)
//! ```

use std::os::fd::AsFd;
use std::time::Duration;

use netlink_sys::{Socket, SocketAddr, protocols::NETLINK_NETFILTER};
use nix::sys::socket::{setsockopt, sockopt};
use nix::sys::time::TimeVal;

use super::encode::{Encoded, request};
use super::wire::*;
use super::{NftError, Op, summary};
use crate::{Netns, in_netns};

/// How long a reply may take before the socket is given up.
const REPLY_TIMEOUT: Duration = Duration::from_secs(20);
/// The receive buffer (forced past `rmem_max`): room for every error of a large batch.
const RCVBUF: usize = 8 << 20;
/// One datagram from the kernel (dumps fill at most a few pages).
const DATAGRAM: usize = 256 << 10;

/// An error the kernel answered a request with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct KernelError {
    pub errno: i32,
    /// The extended ack's message, when the kernel gave one.
    pub message: Option<String>,
}

impl KernelError {
    /// `ENOENT (No such file or directory): a chain or set it names does not exist`.
    pub fn reason(&self) -> String {
        let errno = nix::errno::Errno::from_raw(self.errno);
        let mut text = format!("{errno:?} ({}): {}", errno.desc(), meaning(self.errno));
        if let Some(m) = &self.message {
            text.push_str(&format!(" (kernel: {m})"));
        }
        text
    }
}

/// What an errno usually means for an nf_tables request.
fn meaning(errno: i32) -> &'static str {
    use nix::errno::Errno::*;
    match nix::errno::Errno::from_raw(errno) {
        ENOENT => "the table, or a chain, set or element it names, does not exist",
        EEXIST => {
            "it exists with other properties, or an element overlaps or clashes with one that exists"
        }
        EBUSY => {
            "still in use (a rule or map element refers to it), or a base chain cannot change that way"
        }
        EINVAL => "the kernel finds the request malformed (a value of the wrong length or kind)",
        EOPNOTSUPP => {
            "not allowed here (a statement in a chain or hook that cannot have it, a jump to a base chain, or a change of a base chain's hook or type)"
        }
        ELOOP => "the jumps would form a loop",
        EMLINK => "the jumps nest deeper than the kernel allows",
        ENFILE | ENOSPC => "the set is full",
        EPERM => "not permitted (nf_tables needs CAP_NET_ADMIN in the namespace)",
        EMSGSIZE | ENOBUFS => "the batch does not fit the socket buffer",
        ERANGE => "a value is out of range",
        EAFNOSUPPORT | EPROTONOSUPPORT => "the kernel has no nf_tables for this family",
        ENOMEM => "the kernel is out of memory",
        _ => "see the nf_tables documentation",
    }
}

/// One netlink connection to nf_tables.
#[derive(Debug)]
pub(super) struct Conn {
    socket: Socket,
    seq: u32,
    netns: String,
    buf: Vec<u8>,
    sndbuf: usize,
    /// The socket's port id: the `nlmsg_pid` of the notifications its batches cause.
    port: u32,
}

impl Drop for Conn {
    fn drop(&mut self) {
        super::monitor::own_port(self.port, false);
    }
}

impl Conn {
    pub fn open(netns: &Netns) -> Result<Conn, NftError> {
        let (socket, port) = in_netns(netns, || {
            let mut socket = Socket::new(NETLINK_NETFILTER)?;
            let port = socket.bind_auto()?.port_number();
            socket.connect(&SocketAddr::new(0, 0))?;
            Ok((socket, port))
        })
        .map_err(|e| NftError::Socket {
            netns: netns.to_string(),
            reason: format!("cannot open a netfilter netlink socket: {e}"),
        })?;
        // The monitor leaves out what this socket changes (`monitor.rs`).
        super::monitor::own_port(port, true);
        let conn = Conn {
            socket,
            port,
            seq: std::process::id().wrapping_mul(65_536),
            netns: netns.to_string(),
            buf: Vec::with_capacity(DATAGRAM),
            sndbuf: 0,
        };
        // Small errors (no copy of the request) with the kernel's message when it has one.
        conn.socket
            .set_cap_ack(true)
            .map_err(|e| conn.io("set NETLINK_CAP_ACK", e))?;
        conn.socket
            .set_ext_ack(true)
            .map_err(|e| conn.io("set NETLINK_EXT_ACK", e))?;
        if setsockopt(&conn.socket.as_fd(), sockopt::RcvBufForce, &RCVBUF).is_err() {
            // Without CAP_NET_ADMIN: as much as rmem_max allows.
            let _ = setsockopt(&conn.socket.as_fd(), sockopt::RcvBuf, &RCVBUF);
        }
        let timeout = TimeVal::new(REPLY_TIMEOUT.as_secs() as i64, 0);
        setsockopt(&conn.socket.as_fd(), sockopt::ReceiveTimeout, &timeout)
            .map_err(|e| conn.io("set SO_RCVTIMEO", e.into()))?;
        Ok(conn)
    }

    fn io(&self, what: &str, e: std::io::Error) -> NftError {
        NftError::Socket {
            netns: self.netns.clone(),
            reason: format!("{what}: {e}"),
        }
    }

    /// The next sequence number, for the encoder (which then hands back the one after).
    pub fn seq(&self) -> u32 {
        self.seq
    }

    fn take_seq(&mut self) -> u32 {
        self.seq = self.seq.wrapping_add(1);
        self.seq
    }

    fn send(&mut self, bytes: &[u8], what: &str) -> Result<(), NftError> {
        if bytes.len() + 4096 > self.sndbuf {
            // The kernel doubles the value; a batch must fit in one skb.
            let size = bytes.len() + 64 * 1024;
            if setsockopt(&self.socket.as_fd(), sockopt::SndBufForce, &size).is_err() {
                let _ = setsockopt(&self.socket.as_fd(), sockopt::SndBuf, &size);
            }
            self.sndbuf = size;
        }
        self.socket
            .send(bytes, 0)
            .map_err(|e| self.io(&format!("sending {what} ({} bytes)", bytes.len()), e))?;
        Ok(())
    }

    fn receive(&mut self, what: &str) -> Result<(), NftError> {
        self.buf.clear();
        let length = self
            .socket
            .recv(&mut self.buf, libc_msg_trunc())
            .map_err(|e| self.io(&format!("waiting for the answer to {what}"), e))?;
        if length > self.buf.capacity() {
            return Err(self.io(
                what,
                std::io::Error::other(format!("a {length}-byte reply was cut")),
            ));
        }
        Ok(())
    }

    /// Applies an encoded batch: `Ok` when every message was taken, else the error of the first
    /// operation the kernel refused (the kernel then applied none of them).
    pub fn transact(&mut self, encoded: &Encoded, ops: &[Op]) -> Result<(), NftError> {
        self.seq = encoded.next_seq;
        self.send(&encoded.bytes, "the batch")?;
        let gen_seq = self.take_seq();
        self.send(
            &request(NFT_MSG_GETGEN, 0, gen_seq, |_| {}),
            "a generation request",
        )?;
        let mut errors: Vec<(u32, KernelError)> = Vec::new();
        'receive: loop {
            self.receive("the batch")?;
            for m in messages(&self.buf) {
                if m.seq == gen_seq {
                    if let Some(e) = error(&m) {
                        return Err(self.io(
                            "the generation request after the batch",
                            std::io::Error::other(e.reason()),
                        ));
                    }
                    if m.kind & 0xff == NFT_MSG_NEWGEN {
                        break 'receive;
                    }
                } else if let Some(e) = error(&m) {
                    errors.push((m.seq, e));
                }
            }
        }
        let Some((seq, first)) = errors
            .iter()
            .min_by_key(|(seq, _)| (encoded.op_of(*seq), *seq))
        else {
            return Ok(());
        };
        let others = errors.len() - 1;
        let mut reason = first.reason();
        if others > 0 {
            reason.push_str(&format!(
                " ({others} later message(s) of the batch failed too)"
            ));
        }
        Err(match encoded.op_of(*seq) {
            Some(index) => NftError::Refused {
                index,
                op: summary(&ops[index]),
                reason,
            },
            // Refused at commit, after every operation was taken.
            None => NftError::Refused {
                index: ops.len().saturating_sub(1),
                op: "commit of the whole batch".into(),
                reason,
            },
        })
    }

    /// A single get: the reply's payload, or the kernel's error.
    pub fn get(
        &mut self,
        kind: u16,
        attrs: impl FnOnce(&mut Writer),
    ) -> Result<Result<Vec<u8>, KernelError>, NftError> {
        let seq = self.take_seq();
        self.send(&request(kind, 0, seq, attrs), "a get request")?;
        loop {
            self.receive("a get request")?;
            for m in messages(&self.buf) {
                if m.seq != seq {
                    continue;
                }
                return Ok(match error(&m) {
                    Some(e) => Err(e),
                    None => Ok(m.payload.to_vec()),
                });
            }
        }
    }

    /// A dump: the payload of every message, or the kernel's error (`EINTR` when the ruleset
    /// changed during the dump: read again).
    pub fn dump(
        &mut self,
        kind: u16,
        attrs: impl FnOnce(&mut Writer),
    ) -> Result<Result<Vec<Vec<u8>>, KernelError>, NftError> {
        let seq = self.take_seq();
        self.send(&request(kind, NLM_F_DUMP, seq, attrs), "a dump request")?;
        let mut payloads = Vec::new();
        let mut interrupted = false;
        loop {
            self.receive("a dump")?;
            for m in messages(&self.buf) {
                if m.seq != seq {
                    continue;
                }
                interrupted |= m.flags & NLM_F_DUMP_INTR != 0;
                if m.kind == NLMSG_DONE {
                    let errno = m
                        .payload
                        .get(..4)
                        .map_or(0, |b| -i32::from_ne_bytes(b.try_into().expect("4 bytes")));
                    return Ok(match (errno, interrupted) {
                        (0, false) => Ok(payloads),
                        (0, true) => Err(KernelError {
                            errno: nix::libc::EINTR,
                            message: None,
                        }),
                        (errno, _) => Err(KernelError {
                            errno,
                            message: None,
                        }),
                    });
                }
                if let Some(e) = error(&m) {
                    return Ok(Err(e));
                }
                if m.kind >> 8 == NFNL_SUBSYS_NFTABLES {
                    payloads.push(m.payload.to_vec());
                }
            }
        }
    }

    /// The ruleset's generation: it changes with every committed transaction.
    pub fn generation(&mut self) -> Result<u32, NftError> {
        match self.get(NFT_MSG_GETGEN, |_| {})? {
            Ok(payload) => payload
                .get(4..)
                .and_then(|a| attribute(a, NFTA_GEN_ID))
                .and_then(be32)
                .ok_or_else(|| {
                    self.io(
                        "reading the generation",
                        std::io::Error::other("no generation id"),
                    )
                }),
            Err(e) => Err(NftError::Socket {
                netns: self.netns.clone(),
                reason: format!("nf_tables answers no generation: {}", e.reason()),
            }),
        }
    }

    pub fn netns(&self) -> &str {
        &self.netns
    }
}

fn libc_msg_trunc() -> i32 {
    nix::libc::MSG_TRUNC
}

/// The error of an `NLMSG_ERROR` message (`None` for an acknowledgement or another message).
fn error(m: &Message<'_>) -> Option<KernelError> {
    if m.kind != NLMSG_ERROR {
        return None;
    }
    let errno = -i32::from_ne_bytes(m.payload.get(..4)?.try_into().ok()?);
    if errno == 0 {
        return None;
    }
    // With NETLINK_CAP_ACK the request's header (16 bytes) follows, then the ack's TLVs.
    let message = (m.flags & NLM_F_ACK_TLVS != 0)
        .then(|| m.payload.get(4 + HEADER..))
        .flatten()
        .and_then(|tlvs| attribute(tlvs, NLMSGERR_ATTR_MSG))
        .and_then(string);
    Some(KernelError { errno, message })
}
