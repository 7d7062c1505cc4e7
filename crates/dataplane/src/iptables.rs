//! The iptables backend: the firewall model ([`crate::firewall`]) encoded as
//! `iptables-restore` and `ipset restore` input, and the driver that writes it.
//!
//! - `encode.rs`: the model's frame, dispatch, endpoints and rule sets as chains.
//! - `rules.rs`: one model rule as iptables rules (multiport chunks, marks, NFLOG).
//! - `filter.rs`, `raw.rs`, `nat.rs`: the tables as restore input; the filter table by owner.
//! - `chain.rs`: a chain, and restore input that declares, fills and deletes chains.
//! - `ipsets.rs`: the IP sets as `ipset restore` input.
//! - `driver.rs`: [`Dataplane`](driver::Dataplane): sync, apply and drift repair.
//! - `drift.rs`: what the kernel holds, read back, and the ledger of what was written.
//! - `stamp.rs`: the stamp every chain written carries.
//!
//! Names are stable across restarts and hosts (derived from the objects' names, hashed where
//! they could be long): chains at most 28 characters, sets at most 31.
//!
//! | name | what |
//! | --- | --- |
//! | `cali-INPUT`, `cali-FORWARD`, `cali-OUTPUT` | our entry chains; the kernel chains jump here |
//! | `cali-wl-in`, `cali-wl-out` | dispatch by interface to workload chains |
//! | `cali-hep-in`, `cali-hep-out` | dispatch by interface to host endpoint chains |
//! | `cali-wi-<iface>`, `cali-we-<iface>` | a workload's inbound / outbound policy |
//! | `cali-hi-<iface>`, `cali-he-<iface>` | a host endpoint's inbound / outbound policy |
//! | `cali-sp-<iface>` | a workload's anti-spoofing check (when it has several addresses) |
//! | `cali-pi-<hash>`, `cali-po-<hash>` | a policy's inbound / outbound rules |
//! | `cali-ri-<hash>`, `cali-ro-<hash>` | a profile's inbound / outbound rules |
//! | `cali-si-<hash>`, `cali-so-<hash>` | a staged policy's inbound / outbound rules (flow logs on only: they log and return) |
//! | `cali4-<id>`, `cali6-<id>` | the IP set of a selector or tag (`<id>` from `IpSetSource::id`) |
//! | `cali-PREROUTING`, `cali-OUTPUT` (raw) | untracked policies of host endpoints: `cali-raw-hep-in/out` dispatch to `cali-ui-<iface>` / `cali-ue-<iface>` |
//! | `cali-PREROUTING` (nat) | the metadata path: workloads' TCP to 169.254.169.254:80 DNATed to `MetadataAddr:MetadataPort`; then `cali-fip-dnat` |
//! | `cali-OUTPUT` (nat) | the host's own connections: `cali-fip-dnat` |
//! | `cali-POSTROUTING` (nat) | `cali-fip-snat`, then masquerade from masquerading pools to outside all pools |
//! | `cali-fip-dnat`, `cali-fip-snat` (nat) | workloads' 1:1 NAT mappings: `ext_ip` DNATed to `int_ip`; an endpoint's connection to its own `ext_ip` SNATed to come from it |
//! | `cali4-all-pools`, `cali4-masq-pools` | every pool's CIDR; the masquerading pools' CIDRs |

mod chain;
pub mod drift;
pub mod driver;
mod encode;
mod filter;
mod ipsets;
mod nat;
mod raw;
mod rules;
pub mod stamp;

use std::hash::Hasher;

use fnv::FnvHasher;

pub(crate) use chain::{Chain, restore_input};
pub use filter::{FilterTable, kernel_jumps, render_filter};
pub use ipsets::{ipset_members, render_ipset_delta, render_ipset_updates, render_ipsets};
pub(crate) use nat::nat_chains;
pub use nat::{all_pools_set, masquerade_pools_set, render_nat, render_pool_ipsets};
pub(crate) use raw::raw_chains;
pub use raw::render_raw;

/// IPv4 (`iptables`, `inet` sets, `cali4-…` names) or IPv6 (`ip6tables`, `inet6` sets,
/// `cali6-…`): the data model's version, so a rule's `ip_version` compares with it directly.
/// (`calico_linux::Family` says the same for the kernel tools; it stays separate because `linux`
/// depends on none of our crates — the driver pairs them.)
pub use calico_model::IpVersion;

/// Whether `address` is of `version`.
fn holds(version: IpVersion, address: &std::net::IpAddr) -> bool {
    IpVersion::of_addr(address) == version
}

/// The IP set name for a set id: `cali4-s0123456789abcdef` (23 characters).
pub fn ipset_name(version: IpVersion, id: &str) -> String {
    format!("cali{}-{id}", version.number())
}

/// 16 hex digits of FNV-1a over the text: stable everywhere.
fn hash(text: &str) -> String {
    let mut hasher = FnvHasher::default();
    hasher.write(text.as_bytes());
    format!("{:016x}", hasher.finish())
}

/// The chain of a policy's rules in one direction.
pub fn policy_chain(inbound: bool, tier: &str, policy: &str) -> String {
    let kind = if inbound { "pi" } else { "po" };
    format!("cali-{kind}-{}", hash(&format!("{tier}/{policy}")))
}

/// The chain of a staged policy's rules in one direction.
pub fn staged_policy_chain(inbound: bool, tier: &str, policy: &str) -> String {
    let kind = if inbound { "si" } else { "so" };
    format!("cali-{kind}-{}", hash(&format!("{tier}/{policy}")))
}

/// The chain of a profile's rules in one direction.
pub fn profile_chain(inbound: bool, profile: &str) -> String {
    let kind = if inbound { "ri" } else { "ro" };
    format!("cali-{kind}-{}", hash(profile))
}

/// Quotes an argument for iptables-restore when it needs it.
fn quote(text: &str) -> String {
    if !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-./:,".contains(c))
    {
        text.to_owned()
    } else {
        format!("\"{}\"", text.replace('"', "'"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_fit_the_kernel_limits() {
        assert!(policy_chain(true, &"t".repeat(253), &"p".repeat(253)).len() <= 28);
        assert!(profile_chain(false, &"p".repeat(253)).len() <= 28);
        assert!(ipset_name(IpVersion::V6, "s0123456789abcdef").len() <= 31);
        assert_eq!(
            policy_chain(true, "my-tier", "webserver"),
            policy_chain(true, "my-tier", "webserver")
        );
        assert_ne!(
            policy_chain(true, "a", "bc"),
            policy_chain(true, "ab", "c"),
            "tier and policy names cannot hold '/', so tier/policy is unambiguous"
        );
        assert_ne!(policy_chain(true, "t", "p"), policy_chain(false, "t", "p"));
    }
}
