//! The nfnetlink wire format shared by every netfilter subsystem this crate speaks
//! (nf_tables in `nft`, ctnetlink in `conntrack`, nfnetlink_log in `nflog`): a writer of
//! netlink messages with nested attributes, and readers of messages and attributes.
//!
//! ```text
//!   message:   nlmsghdr{len, type = subsystem << 8 | msg, flags, seq, 0}
//!              nfgenmsg{family, version 0, res_id (big-endian)}   attributes…
//!   attribute: u16 len │ u16 type (| NLA_F_NESTED) │ value │ padding to 4 bytes
//! ```
//!
//! The netlink headers are in host order; integers inside attributes are big-endian unless the
//! subsystem says otherwise.

/// The netlink header's length.
pub(crate) const HEADER: usize = 16;
pub(crate) const NLA_F_NESTED: u16 = 0x8000;
pub(crate) const NLA_TYPE_MASK: u16 = 0x3fff;

/// Netlink messages being written into one buffer (a batch, or one request).
#[derive(Debug, Default)]
pub(crate) struct Writer {
    pub buf: Vec<u8>,
    /// Where each open message and nested attribute starts.
    open: Vec<usize>,
}

impl Writer {
    pub fn new() -> Writer {
        Writer::default()
    }

    /// Starts a message: the netlink header (`kind` with its subsystem in the high byte) and
    /// `nfgenmsg`.
    pub fn message(&mut self, kind: u16, flags: u16, seq: u32, family: u8, res_id: u16) {
        self.open.push(self.buf.len());
        self.buf.extend_from_slice(&0u32.to_ne_bytes());
        self.buf.extend_from_slice(&kind.to_ne_bytes());
        self.buf.extend_from_slice(&flags.to_ne_bytes());
        self.buf.extend_from_slice(&seq.to_ne_bytes());
        self.buf.extend_from_slice(&0u32.to_ne_bytes());
        self.buf.extend_from_slice(&[family, 0]);
        self.buf.extend_from_slice(&res_id.to_be_bytes());
    }

    /// Ends the message begun last: writes its length.
    pub fn end(&mut self) {
        let start = self.open.pop().expect("a message is open");
        let length = (self.buf.len() - start) as u32;
        self.buf[start..start + 4].copy_from_slice(&length.to_ne_bytes());
    }

    pub fn put(&mut self, kind: u16, value: &[u8]) {
        let length = 4 + value.len();
        self.buf.extend_from_slice(&(length as u16).to_ne_bytes());
        self.buf.extend_from_slice(&kind.to_ne_bytes());
        self.buf.extend_from_slice(value);
        self.pad();
    }

    /// A NUL-terminated string.
    pub fn put_str(&mut self, kind: u16, value: &str) {
        let length = 4 + value.len() + 1;
        self.buf.extend_from_slice(&(length as u16).to_ne_bytes());
        self.buf.extend_from_slice(&kind.to_ne_bytes());
        self.buf.extend_from_slice(value.as_bytes());
        self.buf.push(0);
        self.pad();
    }

    pub fn put_u32(&mut self, kind: u16, value: u32) {
        self.put(kind, &value.to_be_bytes());
    }

    /// A nested attribute whose content `inner` writes. Its length must fit 16 bits: callers
    /// that write unbounded content (element lists) keep an eye on [`Writer::len`].
    pub fn nest(&mut self, kind: u16, inner: impl FnOnce(&mut Writer)) {
        let start = self.buf.len();
        self.buf.extend_from_slice(&[0; 4]);
        inner(self);
        let length = self.buf.len() - start;
        debug_assert!(length <= usize::from(u16::MAX), "attribute {kind} too long");
        self.buf[start..start + 2].copy_from_slice(&(length as u16).to_ne_bytes());
        self.buf[start + 2..start + 4].copy_from_slice(&(kind | NLA_F_NESTED).to_ne_bytes());
    }

    pub fn len(&self) -> usize {
        self.buf.len()
    }

    fn pad(&mut self) {
        self.buf.resize(align(self.buf.len()), 0);
    }
}

pub(crate) fn align(length: usize) -> usize {
    (length + 3) & !3
}

/// One netlink message of a datagram.
#[derive(Debug)]
pub(crate) struct Message<'a> {
    /// The type, with the subsystem still in the high byte.
    pub kind: u16,
    pub flags: u16,
    pub seq: u32,
    pub payload: &'a [u8],
}

/// The messages of one datagram; a truncated tail is left out.
pub(crate) fn messages(datagram: &[u8]) -> Vec<Message<'_>> {
    let mut found = Vec::new();
    let mut rest = datagram;
    while rest.len() >= HEADER {
        let length = u32::from_ne_bytes(rest[0..4].try_into().expect("4 bytes")) as usize;
        if length < HEADER || length > rest.len() {
            break;
        }
        found.push(Message {
            kind: u16::from_ne_bytes([rest[4], rest[5]]),
            flags: u16::from_ne_bytes([rest[6], rest[7]]),
            seq: u32::from_ne_bytes(rest[8..12].try_into().expect("4 bytes")),
            payload: &rest[HEADER..length],
        });
        rest = &rest[align(length).min(rest.len())..];
    }
    found
}

/// The attributes in `data`: type (flags stripped) and value.
pub(crate) fn attributes(data: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    whole_attributes(data).map(|(kind, _, value)| (kind, value))
}

/// The attributes in `data`: type (flags stripped), the whole attribute as sent (header
/// included, unpadded) and its value.
pub(crate) fn whole_attributes(data: &[u8]) -> impl Iterator<Item = (u16, &[u8], &[u8])> {
    let mut rest = data;
    std::iter::from_fn(move || {
        if rest.len() < 4 {
            return None;
        }
        let length = u16::from_ne_bytes([rest[0], rest[1]]) as usize;
        if length < 4 || length > rest.len() {
            return None;
        }
        let kind = u16::from_ne_bytes([rest[2], rest[3]]) & NLA_TYPE_MASK;
        let whole = &rest[..length];
        rest = &rest[align(length).min(rest.len())..];
        Some((kind, whole, &whole[4..]))
    })
}

/// The first attribute of type `kind` in `data`.
pub(crate) fn attribute(data: &[u8], kind: u16) -> Option<&[u8]> {
    attributes(data).find(|(k, _)| *k == kind).map(|(_, v)| v)
}

pub(crate) fn be32(value: &[u8]) -> Option<u32> {
    Some(u32::from_be_bytes(value.get(..4)?.try_into().ok()?))
}

pub(crate) fn be64(value: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(value.get(..8)?.try_into().ok()?))
}

/// A NUL-terminated (or unterminated) string attribute.
pub(crate) fn string(value: &[u8]) -> Option<String> {
    let end = value.iter().position(|b| *b == 0).unwrap_or(value.len());
    String::from_utf8(value[..end].to_vec()).ok()
}
