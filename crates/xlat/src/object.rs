//! The translator's eBPF object (bpf/xlat.bpf.c, compiled by build.rs) and its per-space copy.
//!
//! The C program reads the space's /96 from three marker immediates; a copy for one space has
//! the markers replaced by the space's three 32-bit words. No maps and no loader library: `tc`
//! loads the copy, and the program holds no state.

use crate::error::ObjectError;
use crate::mapping::Space;

/// The object as clang wrote it, markers in place.
const OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/xlat.bpf.o"));

/// `SPACE_W0..2` of xlat.bpf.c, as they appear in the object (little-endian immediates).
const MARKERS: [u32; 3] = [0x7a51_0c01, 0x7a51_0c02, 0x7a51_0c03];

/// The program for packets from the workload (tc ingress of its host-side interface).
pub const INGRESS_SECTION: &str = "tc/v4to6";
/// The program for packets to the workload (tc egress of its host-side interface).
pub const EGRESS_SECTION: &str = "tc/v6to4";

/// The object for `space`: every marker replaced by the space's word in network byte order (the
/// program stores the immediate as it is, so its bytes are the address's bytes).
pub fn for_space(space: &Space) -> Result<Vec<u8>, ObjectError> {
    let upper = space.upper96();
    let mut object = OBJECT.to_vec();
    for (marker, word) in MARKERS.iter().zip(upper.chunks(4)) {
        let needle = marker.to_le_bytes();
        let mut found = false;
        let mut at = 0;
        while let Some(offset) = find(&object[at..], &needle) {
            object[at + offset..at + offset + 4].copy_from_slice(word);
            at += offset + 4;
            found = true;
        }
        if !found {
            return Err(ObjectError::MarkerMissing { marker: *marker });
        }
    }
    Ok(object)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mapping::Prefix;

    #[test]
    fn a_space_copy_carries_its_96_bits_and_no_marker() {
        let space = Prefix::new("fd00:ca1::/48".parse().unwrap())
            .unwrap()
            .space(7)
            .unwrap();
        let object = for_space(&space).unwrap();
        assert_eq!(object.len(), OBJECT.len());
        for marker in MARKERS {
            assert!(
                find(OBJECT, &marker.to_le_bytes()).is_some(),
                "{marker:#x} in the build"
            );
            assert!(
                find(&object, &marker.to_le_bytes()).is_none(),
                "{marker:#x} left"
            );
        }
        for word in space.upper96().chunks(4) {
            assert!(find(&object, word).is_some(), "{word:?} written");
        }
    }
}
