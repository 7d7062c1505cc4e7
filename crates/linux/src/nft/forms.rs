//! The one form a value takes wherever it is written: the encoder, the `nft` text, the checks
//! and the fake all use these, so they agree on what a rule says.

use std::net::IpAddr;

use ipnet::IpNet;

use super::wire::COMMENT_MAX;
use super::{IpFamily, Ports};

/// A comment as written: cut to the longest prefix `nft` accepts.
pub(super) fn cut_comment(comment: &str) -> &str {
    let mut end = comment.len().min(COMMENT_MAX);
    while !comment.is_char_boundary(end) {
        end -= 1;
    }
    &comment[..end]
}

pub(super) fn family_of(addr: &IpAddr) -> IpFamily {
    match addr {
        IpAddr::V4(_) => IpFamily::V4,
        IpAddr::V6(_) => IpFamily::V6,
    }
}

pub(super) fn family_of_net(net: &IpNet) -> IpFamily {
    match net {
        IpNet::V4(_) => IpFamily::V4,
        IpNet::V6(_) => IpFamily::V6,
    }
}

/// How a list of ports is matched, in the canonical form both the encoder and the `nft` text
/// use: sorted, overlapping (and, among ranges, adjacent) ranges merged, so that `nft -f`
/// builds exactly what the encoder builds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum PortMatch {
    /// `th dport 80`: a compare.
    One(u16),
    /// `th dport 1000-2000`: a range expression.
    Range(Ports),
    /// `th dport { 53, 67 }`: an anonymous hash set of single ports.
    Singles(Vec<u16>),
    /// `th dport { 53, 67-68 }`: an anonymous interval set.
    Intervals(Vec<Ports>),
}

pub(super) fn port_match(ports: &[Ports]) -> PortMatch {
    let mut sorted = ports.to_vec();
    sorted.sort();
    sorted.dedup();
    if sorted.iter().all(|p| p.first == p.last) {
        let singles: Vec<u16> = sorted.iter().map(|p| p.first).collect();
        return match singles.as_slice() {
            [one] => PortMatch::One(*one),
            _ => PortMatch::Singles(singles),
        };
    }
    let mut merged: Vec<Ports> = Vec::new();
    for p in sorted {
        match merged.last_mut() {
            Some(m) if u32::from(p.first) <= u32::from(m.last) + 1 => m.last = m.last.max(p.last),
            _ => merged.push(p),
        }
    }
    match merged.as_slice() {
        [one] if one.first == one.last => PortMatch::One(one.first),
        [one] => PortMatch::Range(*one),
        _ => PortMatch::Intervals(merged),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(first: u16, last: u16) -> Ports {
        Ports { first, last }
    }

    #[test]
    fn port_lists_take_the_form_nft_gives_them() {
        assert_eq!(port_match(&[p(80, 80)]), PortMatch::One(80));
        assert_eq!(
            port_match(&[p(54, 54), p(53, 53), p(53, 53)]),
            PortMatch::Singles(vec![53, 54])
        );
        assert_eq!(
            port_match(&[p(53, 60), p(54, 54)]),
            PortMatch::Range(p(53, 60))
        );
        assert_eq!(
            port_match(&[p(50, 52), p(53, 53), p(70, 71)]),
            PortMatch::Intervals(vec![p(50, 53), p(70, 71)])
        );
        assert_eq!(
            port_match(&[p(0, 10), p(65535, 65535)]),
            PortMatch::Intervals(vec![p(0, 10), p(65535, 65535)])
        );
    }

    #[test]
    fn comments_are_cut_on_a_character_boundary() {
        let long = "é".repeat(100);
        let cut = cut_comment(&long);
        assert!(cut.len() <= COMMENT_MAX && cut.len() == 128);
        let odd = format!("a{}", "é".repeat(100));
        assert_eq!(cut_comment(&odd).len(), 127);
    }
}
