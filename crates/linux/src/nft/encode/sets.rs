//! How sets and their elements are declared to the kernel (and to `nft list`, through key
//! types and user data).

use std::net::IpAddr;

use ipnet::IpNet;

use crate::nft::expr::{addr_bytes, padded_name, verdict_data};
use crate::nft::wire::*;
use crate::nft::{Element, IpFamily, SetKind};

/// How a kind of set is declared to the kernel (and to `nft list`, through the key type and
/// the user data).
pub(in crate::nft) struct SetLayout {
    pub flags: u32,
    pub key_type: u32,
    pub key_len: u32,
    pub udata: Vec<u8>,
}

impl SetLayout {
    pub fn of(kind: SetKind) -> SetLayout {
        let addr = |family: IpFamily, flags: u32| {
            let (key_type, key_len) = match family {
                IpFamily::V4 => (TYPE_IPADDR, 4),
                IpFamily::V6 => (TYPE_IP6ADDR, 16),
            };
            let mut udata = Vec::new();
            put_udata(
                &mut udata,
                UDATA_SET_KEYBYTEORDER,
                &BYTEORDER_BIG.to_ne_bytes(),
            );
            SetLayout {
                flags,
                key_type,
                key_len,
                udata,
            }
        };
        let map = |key_order: u32| {
            let mut udata = Vec::new();
            put_udata(&mut udata, UDATA_SET_KEYBYTEORDER, &key_order.to_ne_bytes());
            put_udata(&mut udata, UDATA_SET_DATABYTEORDER, &0u32.to_ne_bytes());
            put_udata(&mut udata, UDATA_SET_DATA_INTERVAL, &0u32.to_ne_bytes());
            udata
        };
        match kind {
            SetKind::Addrs(family) => addr(family, 0),
            SetKind::Nets(family) => addr(family, NFT_SET_INTERVAL),
            SetKind::IfnameVmap => SetLayout {
                flags: NFT_SET_MAP,
                key_type: TYPE_IFNAME,
                key_len: IFNAMSIZ as u32,
                udata: map(BYTEORDER_HOST),
            },
            SetKind::ProtoPortVmap => SetLayout {
                flags: NFT_SET_INTERVAL | NFT_SET_MAP | NFT_SET_CONCAT,
                key_type: TYPE_INET_PROTOCOL << TYPE_BITS | TYPE_INET_SERVICE,
                key_len: 8,
                udata: map(0),
            },
        }
    }
}

/// One `NFTA_LIST_ELEM` with a key, flags, and the open-interval mark nft puts in user data.
pub(super) fn key_element(w: &mut Writer, key: &[u8], flags: u32, open: bool) {
    w.nest(NFTA_LIST_ELEM, |w| {
        if flags != 0 {
            w.put_u32(NFTA_SET_ELEM_FLAGS, flags);
        }
        w.put_value(NFTA_SET_ELEM_KEY, key);
        if open {
            let mut udata = Vec::new();
            put_udata(
                &mut udata,
                UDATA_SET_ELEM_FLAGS,
                &SET_ELEM_F_INTERVAL_OPEN.to_ne_bytes(),
            );
            w.put(NFTA_SET_ELEM_USERDATA, &udata);
        }
    });
}

/// The first address after a net, or `None` when the net reaches the end of the address space.
pub(in crate::nft) fn after(net: &IpNet) -> Option<IpAddr> {
    match net {
        IpNet::V4(n) => u32::from(n.broadcast())
            .checked_add(1)
            .map(|a| IpAddr::V4(a.into())),
        IpNet::V6(n) => u128::from(n.broadcast())
            .checked_add(1)
            .map(|a| IpAddr::V6(a.into())),
    }
}

/// The key of a `protocol . port` concatenation: each field padded to 4 bytes.
fn proto_port_key(proto: u8, port: u16) -> [u8; 8] {
    let p = port.to_be_bytes();
    [proto, 0, 0, 0, p[0], p[1], 0, 0]
}

/// The kernel elements of one element of ours; `data` adds map verdicts (not on delete).
pub(super) fn element(w: &mut Writer, e: &Element, data: bool) {
    match e {
        Element::Addr(addr) => key_element(w, &addr_bytes(addr), 0, false),
        Element::Net(net) => {
            let end = after(net);
            key_element(w, &addr_bytes(&net.network()), 0, end.is_none());
            if let Some(end) = end {
                key_element(w, &addr_bytes(&end), NFT_SET_ELEM_INTERVAL_END, false);
            }
        }
        Element::Ifname { name, verdict } => w.nest(NFTA_LIST_ELEM, |w| {
            w.put_value(NFTA_SET_ELEM_KEY, &padded_name(name));
            if data {
                w.nest(NFTA_SET_ELEM_DATA, |w| verdict_data(w, verdict));
            }
        }),
        Element::ProtoPorts {
            proto,
            ports,
            verdict,
        } => w.nest(NFTA_LIST_ELEM, |w| {
            w.put_value(NFTA_SET_ELEM_KEY, &proto_port_key(*proto, ports.first));
            w.put_value(NFTA_SET_ELEM_KEY_END, &proto_port_key(*proto, ports.last));
            if data {
                w.nest(NFTA_SET_ELEM_DATA, |w| verdict_data(w, verdict));
            }
        }),
    }
}
