use std::net::{Ipv4Addr, Ipv6Addr};

use ipnet::{Ipv4Net, Ipv6Net};
use proptest::prelude::*;

use super::*;

fn prefix(text: &str) -> Prefix {
    Prefix::new(text.parse().unwrap()).unwrap()
}

#[test]
fn the_seed_picture_under_a_48() {
    let space = prefix("fd00:ca1::/48").space(0x23).unwrap();
    let v6 = space.to_v6(Ipv4Addr::new(10, 0, 0, 5));
    assert_eq!(v6, "fd00:ca1:0:23::10.0.0.5".parse::<Ipv6Addr>().unwrap());
    assert_eq!(space.net().to_string(), "fd00:ca1:0:23::/96");
    let block: Ipv4Net = "10.0.0.0/26".parse().unwrap();
    assert_eq!(space.block(block).to_string(), "fd00:ca1:0:23::a00:0/122");
}

#[test]
fn room_for_ids_by_prefix_length() {
    let room = |len: u8| prefix(&format!("fd00::/{len}")).max_id();
    assert_eq!(room(8), 65535);
    assert_eq!(room(80), 65535);
    assert_eq!(room(81), 32767);
    assert_eq!(room(88), 255);
    assert_eq!(room(95), 1);
}

#[test]
fn refusals_name_the_field() {
    let too_long = Prefix::new("fd00::/96".parse().unwrap()).unwrap_err();
    assert!(
        too_long.to_string().starts_with("prefix fd00::/96: "),
        "{too_long}"
    );
    let host_bits = Prefix::new("fd00::1/64".parse().unwrap()).unwrap_err();
    assert_eq!(
        host_bits.to_string(),
        "prefix fd00::1/64: bits beyond /64 are set; write it as fd00::/64"
    );
    let id = prefix("fd00::/88").space(256).unwrap_err();
    assert_eq!(
        id.to_string(),
        "id 256: the prefix fd00::/88 leaves room for address space ids 0..=255"
    );
    let p = prefix("fd00:ca1::/48");
    let outside = p.split("fd00:ca2::1".parse().unwrap()).unwrap_err();
    assert!(
        outside
            .to_string()
            .starts_with("address fd00:ca2::1: not under"),
        "{outside}"
    );
    let not = p
        .split("fd00:ca1:0:1:1::10.0.0.5".parse().unwrap())
        .unwrap_err();
    assert!(matches!(not, MappingError::NotTranslated { .. }), "{not}");
    let other = p
        .space(1)
        .unwrap()
        .to_v4(p.space(2).unwrap().to_v6(Ipv4Addr::LOCALHOST));
    assert!(matches!(
        other,
        Err(MappingError::OtherSpace {
            found: 2,
            expected: 1,
            ..
        })
    ));
}

/// A valid prefix: any length up to /95, host bits cleared.
fn any_prefix() -> impl Strategy<Value = Prefix> {
    (any::<u128>(), 0u8..=95).prop_map(|(bits, len)| {
        Prefix::new(Ipv6Net::new(Ipv6Addr::from(bits), len).unwrap().trunc()).unwrap()
    })
}

/// A prefix and an ID that fits it.
fn any_space() -> impl Strategy<Value = Space> {
    (any_prefix(), any::<u16>()).prop_map(|(p, id)| p.space(u32::from(id & p.max_id())).unwrap())
}

proptest! {
    #[test]
    fn round_trip(space in any_space(), v4 in any::<u32>().prop_map(Ipv4Addr::from)) {
        let v6 = space.to_v6(v4);
        prop_assert!(space.prefix().net().contains(&v6));
        prop_assert!(space.net().contains(&v6));
        prop_assert_eq!(space.prefix().split(v6), Ok((space, v4)));
        prop_assert_eq!(space.to_v4(v6), Ok(v4));
    }

    #[test]
    fn spaces_never_share_an_address(
        p in any_prefix(), a in any::<u16>(), b in any::<u16>(), v4 in any::<u32>()
    ) {
        let (a, b) = (u32::from(a & p.max_id()), u32::from(b & p.max_id()));
        prop_assume!(a != b);
        let v4 = Ipv4Addr::from(v4);
        let (sa, sb) = (p.space(a).unwrap(), p.space(b).unwrap());
        prop_assert_ne!(sa.to_v6(v4), sb.to_v6(v4));
        prop_assert!(sb.to_v4(sa.to_v6(v4)).is_err());
    }

    #[test]
    fn ids_beyond_the_room_are_refused(p in any_prefix(), id in any::<u32>()) {
        prop_assert_eq!(p.space(id).is_ok(), id <= u32::from(p.max_id()));
    }

    /// The checksum delta the translator relies on: the sum of the IPv6 addresses is the sum of
    /// the IPv4 ones plus a constant of the space.
    #[test]
    fn checksum_changes_by_a_space_constant(space in any_space(), s in any::<u32>(), d in any::<u32>()) {
        let (s, d) = (Ipv4Addr::from(s), Ipv4Addr::from(d));
        let v4 = [s.octets(), d.octets()].concat();
        let v6 = [space.to_v6(s).octets(), space.to_v6(d).octets()].concat();
        let expected = ones_add(ones_sum(&v4), space.checksum_delta());
        // 0x0000 and 0xffff are the same number in one's complement.
        let norm = |x: u16| if x == 0xffff { 0 } else { x };
        prop_assert_eq!(norm(ones_sum(&v6)), norm(expected));
    }

    #[test]
    fn blocks_cover_exactly_their_addresses(space in any_space(), net in any::<u32>(), len in 0u8..=32, probe in any::<u32>()) {
        let block = Ipv4Net::new(Ipv4Addr::from(net), len).unwrap().trunc();
        let probe = Ipv4Addr::from(probe);
        prop_assert_eq!(space.block(block).contains(&space.to_v6(probe)), block.contains(&probe));
    }
}
