//! The nf_tables wire format: the constants of `linux/netfilter/nf_tables.h` and nfnetlink that
//! this crate uses, a writer of netlink messages with nested attributes, and a reader of
//! attributes.
//!
//! ```text
//!   message:   nlmsghdr{len, type = NFNL_SUBSYS_NFTABLES << 8 | msg, flags, seq, 0}
//!              nfgenmsg{family, version 0, res_id 0}   attributes…
//!   attribute: u16 len │ u16 type (| NLA_F_NESTED) │ value │ padding to 4 bytes
//! ```
//!
//! Integers inside attributes are big-endian (network order) unless the kernel says otherwise;
//! the netlink headers themselves are in host order.

// ---- netlink and nfnetlink ----
pub(super) const NLM_F_REQUEST: u16 = 0x1;
pub(super) const NLM_F_DUMP_INTR: u16 = 0x10;
pub(super) const NLM_F_DUMP: u16 = 0x300;
pub(super) const NLM_F_CREATE: u16 = 0x400;
pub(super) const NLM_F_APPEND: u16 = 0x800;
pub(super) const NLM_F_ACK_TLVS: u16 = 0x200;
pub(super) const NLMSG_ERROR: u16 = 2;
pub(super) const NLMSG_DONE: u16 = 3;
pub(super) const NLMSGERR_ATTR_MSG: u16 = 1;
pub(super) use crate::nfnl::HEADER;

pub(super) const NFNL_SUBSYS_NFTABLES: u16 = 10;
pub(super) const NFNL_MSG_BATCH_BEGIN: u16 = 0x10;
pub(super) const NFNL_MSG_BATCH_END: u16 = 0x11;
pub(super) const NFPROTO_UNSPEC: u8 = 0;
pub(super) const NFPROTO_INET: u8 = 1;
pub(super) const NFPROTO_IPV4: u8 = 2;
pub(super) const NFPROTO_IPV6: u8 = 10;

// ---- message types (enum nf_tables_msg_types) ----
pub(super) const NFT_MSG_NEWTABLE: u16 = 0;
pub(super) const NFT_MSG_GETTABLE: u16 = 1;
pub(super) const NFT_MSG_DELTABLE: u16 = 2;
pub(super) const NFT_MSG_NEWCHAIN: u16 = 3;
pub(super) const NFT_MSG_GETCHAIN: u16 = 4;
pub(super) const NFT_MSG_DELCHAIN: u16 = 5;
pub(super) const NFT_MSG_NEWRULE: u16 = 6;
pub(super) const NFT_MSG_GETRULE: u16 = 7;
pub(super) const NFT_MSG_DELRULE: u16 = 8;
pub(super) const NFT_MSG_NEWSET: u16 = 9;
pub(super) const NFT_MSG_GETSET: u16 = 10;
pub(super) const NFT_MSG_DELSET: u16 = 11;
pub(super) const NFT_MSG_NEWSETELEM: u16 = 12;
pub(super) const NFT_MSG_GETSETELEM: u16 = 13;
pub(super) const NFT_MSG_DELSETELEM: u16 = 14;
pub(super) const NFT_MSG_NEWGEN: u16 = 15;
pub(super) const NFT_MSG_GETGEN: u16 = 16;

// ---- tables, chains, hooks ----
pub(super) const NFTA_TABLE_NAME: u16 = 1;
pub(super) const NFTA_TABLE_FLAGS: u16 = 2;
pub(super) const NFTA_CHAIN_TABLE: u16 = 1;
pub(super) const NFTA_CHAIN_NAME: u16 = 3;
pub(super) const NFTA_CHAIN_HOOK: u16 = 4;
pub(super) const NFTA_CHAIN_POLICY: u16 = 5;
pub(super) const NFTA_CHAIN_TYPE: u16 = 7;
pub(super) const NFTA_HOOK_HOOKNUM: u16 = 1;
pub(super) const NFTA_HOOK_PRIORITY: u16 = 2;
pub(super) const NFTA_GEN_ID: u16 = 1;

// ---- rules and expressions ----
pub(super) const NFTA_RULE_TABLE: u16 = 1;
pub(super) const NFTA_RULE_CHAIN: u16 = 2;
pub(super) const NFTA_RULE_HANDLE: u16 = 3;
pub(super) const NFTA_RULE_EXPRESSIONS: u16 = 4;
pub(super) const NFTA_RULE_USERDATA: u16 = 7;
pub(super) const NFTA_LIST_ELEM: u16 = 1;
pub(super) const NFTA_EXPR_NAME: u16 = 1;
pub(super) const NFTA_EXPR_DATA: u16 = 2;
pub(super) const NFTA_DATA_VALUE: u16 = 1;
pub(super) const NFTA_DATA_VERDICT: u16 = 2;
pub(super) const NFTA_VERDICT_CODE: u16 = 1;
pub(super) const NFTA_VERDICT_CHAIN: u16 = 2;

// ---- sets and elements ----
pub(super) const NFTA_SET_TABLE: u16 = 1;
pub(super) const NFTA_SET_NAME: u16 = 2;
pub(super) const NFTA_SET_FLAGS: u16 = 3;
pub(super) const NFTA_SET_KEY_TYPE: u16 = 4;
pub(super) const NFTA_SET_KEY_LEN: u16 = 5;
pub(super) const NFTA_SET_DATA_TYPE: u16 = 6;
pub(super) const NFTA_SET_DATA_LEN: u16 = 7;
pub(super) const NFTA_SET_DESC: u16 = 9;
pub(super) const NFTA_SET_ID: u16 = 10;
pub(super) const NFTA_SET_USERDATA: u16 = 13;
pub(super) const NFTA_SET_DESC_SIZE: u16 = 1;
pub(super) const NFTA_SET_DESC_CONCAT: u16 = 2;
pub(super) const NFTA_SET_FIELD_LEN: u16 = 1;
pub(super) const NFT_SET_ANONYMOUS: u32 = 0x1;
pub(super) const NFT_SET_CONSTANT: u32 = 0x2;
pub(super) const NFT_SET_INTERVAL: u32 = 0x4;
pub(super) const NFT_SET_MAP: u32 = 0x8;
pub(super) const NFT_SET_CONCAT: u32 = 0x80;
pub(super) const NFT_DATA_VERDICT: u32 = 0xffff_ff00;
pub(super) const NFTA_SET_ELEM_LIST_TABLE: u16 = 1;
pub(super) const NFTA_SET_ELEM_LIST_SET: u16 = 2;
pub(super) const NFTA_SET_ELEM_LIST_ELEMENTS: u16 = 3;
pub(super) const NFTA_SET_ELEM_LIST_SET_ID: u16 = 4;
pub(super) const NFTA_SET_ELEM_KEY: u16 = 1;
pub(super) const NFTA_SET_ELEM_DATA: u16 = 2;
pub(super) const NFTA_SET_ELEM_FLAGS: u16 = 3;
pub(super) const NFTA_SET_ELEM_USERDATA: u16 = 6;
pub(super) const NFTA_SET_ELEM_KEY_END: u16 = 10;
pub(super) const NFT_SET_ELEM_INTERVAL_END: u32 = 0x1;

// ---- userspace datatypes (nft's `enum datatypes`, only informational to the kernel) ----
pub(super) const TYPE_IPADDR: u32 = 7;
pub(super) const TYPE_IP6ADDR: u32 = 8;
pub(super) const TYPE_INET_PROTOCOL: u32 = 12;
pub(super) const TYPE_INET_SERVICE: u32 = 13;
pub(super) const TYPE_ICMP_TYPE: u32 = 14;
pub(super) const TYPE_ICMP6_TYPE: u32 = 29;
pub(super) const TYPE_ICMP_CODE: u32 = 32;
pub(super) const TYPE_ICMPV6_CODE: u32 = 33;
pub(super) const TYPE_IFNAME: u32 = 41;
/// How nft numbers a concatenation of types: each type takes 6 bits.
pub(super) const TYPE_BITS: u32 = 6;

// ---- user data TLVs (libnftnl's udata types, read by `nft list`) ----
pub(super) const UDATA_RULE_COMMENT: u8 = 0;
/// Our own TLV in a rule's user data: the rule's digest (nft ignores types it does not know).
pub(super) const UDATA_RULE_DIGEST: u8 = 0xc0;
pub(super) const UDATA_SET_KEYBYTEORDER: u8 = 0;
pub(super) const UDATA_SET_DATABYTEORDER: u8 = 1;
pub(super) const UDATA_SET_DATA_INTERVAL: u8 = 6;
pub(super) const UDATA_SET_COMMENT: u8 = 7;
pub(super) const UDATA_SET_ELEM_FLAGS: u8 = 1;
pub(super) const SET_ELEM_F_INTERVAL_OPEN: u32 = 0x1;
/// nft's `enum byteorder`: the key's byte order, for printing.
pub(super) const BYTEORDER_HOST: u32 = 1;
pub(super) const BYTEORDER_BIG: u32 = 2;

/// The longest comment `nft` accepts (bytes, without the NUL).
pub const COMMENT_MAX: usize = 128;
/// The longest table, chain or set name (bytes, without the NUL).
pub const NAME_MAX: usize = 255;
/// The longest log prefix (bytes, without the NUL).
pub const LOG_PREFIX_MAX: usize = 127;
/// `IFNAMSIZ`: interface names are at most 15 bytes and a NUL.
pub(super) const IFNAMSIZ: usize = 16;

pub(super) use crate::nfnl::{
    Message, Writer, attribute, attributes, be32, be64, messages, string,
};

/// The nf_tables messages of a [`Writer`].
pub(super) trait NftWriter {
    /// Starts an nf_tables message: header and `nfgenmsg`.
    fn begin(&mut self, kind: u16, flags: u16, seq: u32, family: u8);
    /// Starts a batch begin or end message, which names the subsystem in `res_id`.
    fn begin_batch(&mut self, kind: u16, seq: u32);
    /// `NFTA_DATA_VALUE` inside a nest of type `kind`.
    fn put_value(&mut self, kind: u16, value: &[u8]);
}

impl NftWriter for Writer {
    fn begin(&mut self, kind: u16, flags: u16, seq: u32, family: u8) {
        self.message((NFNL_SUBSYS_NFTABLES << 8) | kind, flags, seq, family, 0);
    }

    fn begin_batch(&mut self, kind: u16, seq: u32) {
        self.message(
            kind,
            NLM_F_REQUEST,
            seq,
            NFPROTO_UNSPEC,
            NFNL_SUBSYS_NFTABLES,
        );
    }

    fn put_value(&mut self, kind: u16, value: &[u8]) {
        self.nest(kind, |w| w.put(NFTA_DATA_VALUE, value));
    }
}

/// User data: a list of `u8 type │ u8 length │ value` records.
pub(super) fn udata(data: &[u8]) -> impl Iterator<Item = (u8, &[u8])> {
    let mut rest = data;
    std::iter::from_fn(move || {
        let (&kind, tail) = rest.split_first()?;
        let (&length, tail) = tail.split_first()?;
        let value = tail.get(..usize::from(length))?;
        rest = &tail[usize::from(length)..];
        Some((kind, value))
    })
}

pub(super) fn put_udata(out: &mut Vec<u8>, kind: u8, value: &[u8]) {
    debug_assert!(value.len() <= 255);
    out.push(kind);
    out.push(value.len() as u8);
    out.extend_from_slice(value);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_and_nested_attributes_round_trip() {
        let mut w = Writer::new();
        w.begin(NFT_MSG_NEWTABLE, NLM_F_REQUEST, 7, NFPROTO_INET);
        w.put_str(NFTA_TABLE_NAME, "calico");
        w.nest(NFTA_CHAIN_HOOK, |w| {
            w.put_u32(NFTA_HOOK_HOOKNUM, 2);
            w.put_u32(NFTA_HOOK_PRIORITY, -100i32 as u32);
        });
        w.end();
        let parsed = messages(&w.buf);
        assert_eq!(parsed.len(), 1);
        let m = &parsed[0];
        assert_eq!((m.kind, m.seq), ((NFNL_SUBSYS_NFTABLES << 8), 7));
        assert_eq!(m.payload[0], NFPROTO_INET);
        let attrs = &m.payload[4..];
        assert_eq!(
            string(attribute(attrs, NFTA_TABLE_NAME).unwrap()).unwrap(),
            "calico"
        );
        let hook = attribute(attrs, NFTA_CHAIN_HOOK).unwrap();
        assert_eq!(be32(attribute(hook, NFTA_HOOK_HOOKNUM).unwrap()), Some(2));
        assert_eq!(
            be32(attribute(hook, NFTA_HOOK_PRIORITY).unwrap()).map(|p| p as i32),
            Some(-100)
        );
    }

    #[test]
    fn truncated_input_ends_the_parse_instead_of_panicking() {
        let mut w = Writer::new();
        w.begin(NFT_MSG_NEWSET, NLM_F_REQUEST, 1, NFPROTO_INET);
        w.put_str(NFTA_SET_NAME, "s");
        w.put(NFTA_SET_USERDATA, &[7, 3, b'a', b'b', 0]);
        w.end();
        for cut in 0..w.buf.len() {
            for m in messages(&w.buf[..cut]) {
                for (_, v) in attributes(m.payload.get(4..).unwrap_or_default()) {
                    let _ = udata(v).count();
                }
            }
        }
        assert_eq!(
            udata(&[7, 9, b'a']).count(),
            0,
            "a record longer than its data"
        );
    }
}
