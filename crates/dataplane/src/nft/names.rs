//! The names of everything in Calico's nf_tables table (`inet calico`): they say what each
//! chain, set and map is for, so `nft list table inet calico` reads without a key.
//!
//! | name | what |
//! | --- | --- |
//! | `filter-input`, `filter-forward`, `filter-output` | base chains (priority filter): conntrack, dispatch to endpoints |
//! | `raw-prerouting`, `raw-output` | base chains (priority raw): untracked policy of host endpoints |
//! | `nat-prerouting`, `nat-output`, `nat-postrouting` | base chains (dstnat / srcnat): metadata, 1:1 NAT, masquerade |
//! | `from-wl-dispatch`, `to-wl-dispatch` | a workload interface's chain through the maps `from-wl` / `to-wl`; unknown interfaces drop |
//! | `to-hep`, `from-hep`, `untracked-to-hep`, `untracked-from-hep` | maps: host endpoint interface → its chain |
//! | `from-wl-<iface>`, `to-wl-<iface>` | a workload's outbound / inbound policy |
//! | `to-hep-<iface>`, `from-hep-<iface>` | a host endpoint's inbound / outbound policy |
//! | `untracked-to-hep-<iface>`, `untracked-from-hep-<iface>` | a host endpoint's untracked policy |
//! | `anti-spoof-<iface>` | the source addresses a workload with several may send from |
//! | `pol-in-<tier>.<policy>`, `pol-out-<tier>.<policy>` | a policy's rules (`pol-in-<hash>` when the tier's name has a dot) |
//! | `prof-in-<profile>`, `prof-out-<profile>` | a profile's rules |
//! | `tier-in-<hash>`, `tier-out-<hash>` | the policies of a tier, dispatched (shared by the endpoints with the same list) |
//! | `tier-in-<hash>-ports<n>` (map), `tier-in-<hash>-ports<n>-<k>` | protocol and port → the policies of the tier that name them |
//! | `fip-dnat`, `fip-snat` | workloads' 1:1 NAT mappings |
//! | `v4-<id>`, `v6-<id>` | the addresses of a selector or tag (`<id>` from `IpSetSource::id`; the set's comment names the selector) |
//! | `v4-all-pools`, `v4-masq-pools` (and `v6-`) | every pool's CIDR; the masquerading pools' CIDRs |
//!
//! Names longer than [`LONGEST`] bytes, or with characters nf_tables names cannot hold, end in
//! a hash instead of the rest of the name.

use std::hash::Hasher;

use calico_linux::nft::IpFamily;
use fnv::FnvHasher;

/// The longest name written (the kernel takes 255 bytes).
const LONGEST: usize = 200;

pub const INPUT: &str = "filter-input";
pub const FORWARD: &str = "filter-forward";
pub const OUTPUT: &str = "filter-output";
pub const RAW_PREROUTING: &str = "raw-prerouting";
pub const RAW_OUTPUT: &str = "raw-output";
pub const NAT_PREROUTING: &str = "nat-prerouting";
pub const NAT_OUTPUT: &str = "nat-output";
pub const NAT_POSTROUTING: &str = "nat-postrouting";
pub const FROM_WL_DISPATCH: &str = "from-wl-dispatch";
pub const TO_WL_DISPATCH: &str = "to-wl-dispatch";
pub const FIP_DNAT: &str = "fip-dnat";
pub const FIP_SNAT: &str = "fip-snat";

/// The maps from an interface to its endpoint's chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DispatchMap {
    FromWorkload,
    ToWorkload,
    ToHost,
    FromHost,
    UntrackedToHost,
    UntrackedFromHost,
}

impl DispatchMap {
    pub const ALL: [DispatchMap; 6] = [
        DispatchMap::FromWorkload,
        DispatchMap::ToWorkload,
        DispatchMap::ToHost,
        DispatchMap::FromHost,
        DispatchMap::UntrackedToHost,
        DispatchMap::UntrackedFromHost,
    ];

    /// The map's name, which is also the prefix of its endpoints' chains.
    pub fn name(self) -> &'static str {
        match self {
            DispatchMap::FromWorkload => "from-wl",
            DispatchMap::ToWorkload => "to-wl",
            DispatchMap::ToHost => "to-hep",
            DispatchMap::FromHost => "from-hep",
            DispatchMap::UntrackedToHost => "untracked-to-hep",
            DispatchMap::UntrackedFromHost => "untracked-from-hep",
        }
    }

    /// The chain of the endpoint behind `iface`.
    pub fn chain(self, iface: &str) -> String {
        bounded(format!("{}-{iface}", self.name()))
    }

    /// Whether the map is keyed by the input interface (else by the output interface).
    pub fn by_input(self) -> bool {
        matches!(
            self,
            DispatchMap::FromWorkload | DispatchMap::ToHost | DispatchMap::UntrackedToHost
        )
    }
}

pub fn anti_spoof_chain(iface: &str) -> String {
    bounded(format!("anti-spoof-{iface}"))
}

/// The chain of a policy's rules in one direction: `pol-in-<tier>.<policy>`. Names may hold
/// dots, so a tier whose name has one gets `pol-in-<hash>` instead (no dot: never the same as
/// a readable name).
pub fn policy_chain(inbound: bool, tier: &str, policy: &str) -> String {
    let dir = direction(inbound);
    if tier.contains('.') {
        return format!("pol-{dir}-{:016x}", hash(&format!("{tier}/{policy}")));
    }
    bounded(format!("pol-{dir}-{tier}.{policy}"))
}

/// The chain of a staged policy's rules in one direction (flow logs on only: they log and
/// return): `staged-in-<hash of tier/policy>`, the hash its flow-log prefix carries.
pub fn staged_chain(inbound: bool, tier: &str, policy: &str) -> String {
    let dir = direction(inbound);
    format!("staged-{dir}-{:016x}", hash(&format!("{tier}/{policy}")))
}

/// The chain of a profile's rules in one direction.
pub fn profile_chain(inbound: bool, profile: &str) -> String {
    bounded(format!("prof-{}-{profile}", direction(inbound)))
}

/// The dispatch chain of a tier's policy list in one direction (`hash` of the list).
pub fn tier_chain(inbound: bool, hash: u64) -> String {
    format!("tier-{}-{hash:016x}", direction(inbound))
}

/// The set of a selector's or tag's addresses of one family.
pub fn ipset(family: IpFamily, id: &str) -> String {
    bounded(format!("{}-{id}", family_prefix(family)))
}

pub fn all_pools(family: IpFamily) -> String {
    format!("{}-all-pools", family_prefix(family))
}

pub fn masquerade_pools(family: IpFamily) -> String {
    format!("{}-masq-pools", family_prefix(family))
}

fn family_prefix(family: IpFamily) -> &'static str {
    match family {
        IpFamily::V4 => "v4",
        IpFamily::V6 => "v6",
    }
}

fn direction(inbound: bool) -> &'static str {
    if inbound { "in" } else { "out" }
}

/// 64 bits of FNV-1a: stable on every host and across restarts.
pub fn hash(text: &str) -> u64 {
    let mut hasher = FnvHasher::default();
    hasher.write(text.as_bytes());
    hasher.finish()
}

/// `name` itself, or its first bytes and a hash of the whole when it is too long or has a
/// character nf_tables names cannot have (letters, digits, `_`, `-`, `.`).
fn bounded(name: String) -> String {
    let valid = |c: char| c.is_ascii_alphanumeric() || "_-.".contains(c);
    if !name.chars().all(valid) {
        let head: String = name
            .chars()
            .take_while(|c| valid(*c))
            .take(LONGEST - 17)
            .collect();
        return format!("{head}-{:016x}", hash(&name));
    }
    if name.len() <= LONGEST {
        return name;
    }
    let mut cut = LONGEST - 17;
    while !name.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}-{:016x}", &name[..cut], hash(&name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_names_are_cut_and_hashed_and_stay_distinct() {
        let a = policy_chain(true, &"t".repeat(253), &"p".repeat(253));
        let b = policy_chain(true, &"t".repeat(253), &"q".repeat(253));
        assert!(a.len() <= LONGEST && b.len() <= LONGEST);
        assert_ne!(a, b);
        assert_eq!(policy_chain(true, "default", "web"), "pol-in-default.web");
        assert_ne!(
            policy_chain(true, "a", "b.c"),
            policy_chain(true, "a.b", "c")
        );
        assert_ne!(policy_chain(true, "a", "bc"), policy_chain(true, "ab", "c"));
        let odd = DispatchMap::ToHost.chain("eth0@x:1");
        assert!(odd.starts_with("to-hep-eth0-") && odd.len() == "to-hep-eth0-".len() + 16);
    }
}
