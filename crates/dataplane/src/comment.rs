//! Rule comments that fit the kernel's limit and still say which rule a packet met.
//!
//! Both backends comment a policy's or profile's rules `policy <tier>/<name> inbound rule 3`;
//! names may be 253 characters each, longer than either kernel keeps, and a kernel that cuts
//! the text loses the end: the rule's direction and position. So a comment too long is
//! shortened here, before the kernel sees it: the owner's name is cut and followed by a hash of
//! the whole (as long chain names are), and the direction and position stay.
//!
//! | backend | limit | why |
//! | --- | --- | --- |
//! | iptables | [`IPTABLES_COMMENT_MAX`] (255 bytes) | `xt_comment` holds 256 bytes with the NUL; `iptables` cuts longer text silently |
//! | nftables | [`NFT_COMMENT_MAX`] (128 bytes) | what `nft` accepts and prints back (`NFTNL_UDATA_COMMENT_MAXLEN`) |

use std::hash::Hasher;

use fnv::FnvHasher;

/// The longest comment `-m comment` keeps, in bytes.
pub const IPTABLES_COMMENT_MAX: usize = 255;

/// The longest rule comment nf_tables keeps for `nft` to print back, in bytes.
pub const NFT_COMMENT_MAX: usize = 128;

/// A `-` and 16 hex digits.
const HASH_LEN: usize = 17;

/// The comment of a policy's or profile's rule: `<what> <direction> rule <number>` (`what` is
/// `policy <tier>/<name>`, `profile <id>`, …), at most `max` bytes: when it is longer, `what`
/// is cut and followed by a hash of the whole `what`, and the direction and number stay.
pub fn rule_comment(what: &str, direction: &str, number: usize, max: usize) -> String {
    let tail = format!(" {direction} rule {number}");
    format!("{}{tail}", bounded(what, max.saturating_sub(tail.len())))
}

/// `text` itself when it has at most `max` bytes, else its first bytes and `-<hash of text>`,
/// `max` bytes at most (cut on a character boundary).
pub fn bounded(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut cut = max.saturating_sub(HASH_LEN);
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let mut hasher = FnvHasher::default();
    hasher.write(text.as_bytes());
    format!("{}-{:016x}", &text[..cut], hasher.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_comments_are_kept_as_they_are() {
        let comment = rule_comment("policy default/web", "inbound", 3, NFT_COMMENT_MAX);
        assert_eq!(comment, "policy default/web inbound rule 3");
    }

    #[test]
    fn long_comments_keep_direction_and_position_within_the_limit() {
        let what = format!("policy {}/{}", "t".repeat(253), "p".repeat(253));
        for max in [NFT_COMMENT_MAX, IPTABLES_COMMENT_MAX] {
            let comment = rule_comment(&what, "outbound", 12, max);
            assert_eq!(comment.len(), max, "{comment}");
            assert!(comment.starts_with("policy ttt"), "{comment}");
            assert!(comment.ends_with(" outbound rule 12"), "{comment}");
        }
        let other = format!("policy {}/{}", "t".repeat(253), "q".repeat(253));
        assert_ne!(
            rule_comment(&what, "outbound", 12, NFT_COMMENT_MAX),
            rule_comment(&other, "outbound", 12, NFT_COMMENT_MAX),
            "names that share their first bytes stay apart by the hash"
        );
    }

    #[test]
    fn cuts_fall_on_character_boundaries() {
        let text = "é".repeat(100);
        let cut = bounded(&text, 60);
        assert!(cut.len() <= 60 && cut.ends_with(&cut[cut.len() - 16..]));
        assert!(cut.starts_with("ééé"));
    }
}
