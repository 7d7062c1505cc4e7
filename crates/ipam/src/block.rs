//! Pure operations on one allocation block: which ordinal is which address, assigning free
//! ordinals to a handle, releasing by address or handle, and the per-handle counts that the
//! handle records must equal.

use std::collections::BTreeMap;
use std::net::IpAddr;

use calico_model::ipam::{AllocationAttribute, AllocationBlock};
use ipnet::IpNet;

/// The block prefix for IPv4 pools (64 addresses).
pub const IPV4_BLOCK_PREFIX: u8 = 26;
/// The block prefix for IPv6 pools (64 addresses).
pub const IPV6_BLOCK_PREFIX: u8 = 122;

/// The prefix length of the blocks carved from `pool`: /26 or /122, or the pool itself when it
/// is smaller than a block.
pub fn block_prefix(pool: &IpNet) -> u8 {
    let standard = match pool {
        IpNet::V4(_) => IPV4_BLOCK_PREFIX,
        IpNet::V6(_) => IPV6_BLOCK_PREFIX,
    };
    standard.max(pool.prefix_len())
}

/// The block of `pool` that holds `ip`.
pub fn block_of(pool: &IpNet, ip: IpAddr) -> IpNet {
    IpNet::new(ip, block_prefix(pool))
        .expect("a block prefix is a valid prefix length")
        .trunc()
}

/// A block with every address free, handed out lowest first; a released address goes to the
/// end of `unallocated` (Calico's order: a just-released address is reused last).
pub fn empty_block(cidr: IpNet, host: Option<&str>, strict_affinity: bool) -> AllocationBlock {
    let size = address_count(&cidr);
    AllocationBlock {
        cidr,
        affinity: host.map(|h| format!("host:{h}")),
        strict_affinity,
        allocations: vec![None; size],
        unallocated: Some((0..size).collect()),
        attributes: Vec::new(),
    }
}

/// Why `host` may not assign from `block` (naming the block), or none when it may: a block
/// with strict affinity, or any block under the config's `strict_affinity`, is only for the
/// host it is affine to.
pub fn strict_refusal(block: &AllocationBlock, host: &str, config_strict: bool) -> Option<String> {
    if block.host() == Some(host) {
        return None;
    }
    let owner = match block.host() {
        Some(other) => format!("affine to host {other}"),
        None => "affine to no host".to_owned(),
    };
    let cidr = block.cidr;
    if block.strict_affinity {
        return Some(format!(
            "block {cidr} is {owner} and has strict affinity (its strict_affinity flag), so host \
             {host} may not assign from it"
        ));
    }
    config_strict.then(|| {
        format!(
            "block {cidr} is {owner} and strict_affinity is true in /calico/ipam/v2/config, so \
             host {host} may not assign from it"
        )
    })
}

fn address_count(cidr: &IpNet) -> usize {
    1usize << (cidr.max_prefix_len() - cidr.prefix_len())
}

/// The ordinal of `ip` in the block, if the block holds it.
pub fn ordinal_of(cidr: &IpNet, ip: IpAddr) -> Option<usize> {
    if !cidr.contains(&ip) {
        return None;
    }
    let offset = match (cidr.network(), ip) {
        (IpAddr::V4(base), IpAddr::V4(ip)) => u128::from(u32::from(ip) - u32::from(base)),
        (IpAddr::V6(base), IpAddr::V6(ip)) => u128::from(ip) - u128::from(base),
        _ => return None,
    };
    usize::try_from(offset).ok()
}

/// The address at `ordinal` in the block.
pub fn address_at(cidr: &IpNet, ordinal: usize) -> IpAddr {
    match cidr.network() {
        IpAddr::V4(base) => IpAddr::V4((u32::from(base) + ordinal as u32).into()),
        IpAddr::V6(base) => IpAddr::V6((u128::from(base) + ordinal as u128).into()),
    }
}

/// How many addresses of the block are free.
pub fn free_count(block: &AllocationBlock) -> usize {
    block.allocations.iter().filter(|a| a.is_none()).count()
}

/// Whether no address of the block is allocated.
pub fn is_empty(block: &AllocationBlock) -> bool {
    block.allocations.iter().all(Option::is_none)
}

/// The handle of the allocation at `ordinal`, if allocated (`Some(None)` = allocated without a
/// handle).
pub fn handle_at(block: &AllocationBlock, ordinal: usize) -> Option<Option<&str>> {
    let index = (*block.allocations.get(ordinal)?)?;
    Some(block.attributes.get(index)?.primary.as_deref())
}

/// Assigns up to `count` free addresses to `attribute`, lowest first (or in the order of
/// `unallocated` when the block keeps one); returns the addresses.
pub fn assign(
    block: &mut AllocationBlock,
    count: usize,
    attribute: &AllocationAttribute,
) -> Vec<IpAddr> {
    let ordinals: Vec<usize> = match &block.unallocated {
        Some(order) => order.iter().copied().take(count).collect(),
        None => (0..block.allocations.len())
            .filter(|&o| block.allocations[o].is_none())
            .take(count)
            .collect(),
    };
    if ordinals.is_empty() {
        return Vec::new();
    }
    let index = attribute_index(block, attribute);
    for &ordinal in &ordinals {
        block.allocations[ordinal] = Some(index);
    }
    if let Some(order) = &mut block.unallocated {
        order.retain(|o| !ordinals.contains(o));
    }
    ordinals
        .into_iter()
        .map(|o| address_at(&block.cidr, o))
        .collect()
}

/// Why one address could not be assigned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Taken {
    /// The block does not hold the address.
    Outside,
    /// The address is allocated, to this handle (if it has one).
    By(Option<String>),
}

/// Assigns the address `ip` to `attribute`.
pub fn assign_address(
    block: &mut AllocationBlock,
    ip: IpAddr,
    attribute: &AllocationAttribute,
) -> Result<(), Taken> {
    let ordinal = ordinal_of(&block.cidr, ip).ok_or(Taken::Outside)?;
    if let Some(handle) = handle_at(block, ordinal) {
        return Err(Taken::By(handle.map(str::to_owned)));
    }
    let index = attribute_index(block, attribute);
    block.allocations[ordinal] = Some(index);
    if let Some(order) = &mut block.unallocated {
        order.retain(|&o| o != ordinal);
    }
    Ok(())
}

/// Frees the given addresses where allocated; returns each freed address with its handle.
pub fn release(block: &mut AllocationBlock, ips: &[IpAddr]) -> Vec<(IpAddr, Option<String>)> {
    let mut freed = Vec::new();
    for &ip in ips {
        let Some(ordinal) = ordinal_of(&block.cidr, ip) else {
            continue;
        };
        if let Some(handle) = handle_at(block, ordinal) {
            freed.push((ip, handle.map(str::to_owned)));
            free(block, ordinal);
        }
    }
    prune_attributes(block);
    freed
}

/// Frees every address of `handle`; returns them.
pub fn release_handle(block: &mut AllocationBlock, handle: &str) -> Vec<IpAddr> {
    let ordinals: Vec<usize> = (0..block.allocations.len())
        .filter(|&o| handle_at(block, o) == Some(Some(handle)))
        .collect();
    for &ordinal in &ordinals {
        free(block, ordinal);
    }
    prune_attributes(block);
    ordinals
        .into_iter()
        .map(|o| address_at(&block.cidr, o))
        .collect()
}

fn free(block: &mut AllocationBlock, ordinal: usize) {
    block.allocations[ordinal] = None;
    if let Some(order) = &mut block.unallocated {
        order.push(ordinal);
    }
}

/// How many addresses each handle holds in the block.
pub fn handle_counts(block: &AllocationBlock) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for ordinal in 0..block.allocations.len() {
        if let Some(Some(handle)) = handle_at(block, ordinal) {
            *counts.entry(handle.to_owned()).or_default() += 1;
        }
    }
    counts
}

/// Every allocated address with its attribute.
pub fn allocated(block: &AllocationBlock) -> Vec<(IpAddr, &AllocationAttribute)> {
    block
        .allocations
        .iter()
        .enumerate()
        .filter_map(|(ordinal, entry)| {
            let attribute = block.attributes.get((*entry)?)?;
            Some((address_at(&block.cidr, ordinal), attribute))
        })
        .collect()
}

/// The index of `attribute` in the block's attributes, appending it when new.
fn attribute_index(block: &mut AllocationBlock, attribute: &AllocationAttribute) -> usize {
    if let Some(index) = block.attributes.iter().position(|a| a == attribute) {
        return index;
    }
    block.attributes.push(attribute.clone());
    block.attributes.len() - 1
}

/// Drops attributes no allocation refers to, renumbering the references.
fn prune_attributes(block: &mut AllocationBlock) {
    let mut used = vec![false; block.attributes.len()];
    for index in block.allocations.iter().flatten() {
        used[*index] = true;
    }
    let mut renumbered = vec![0; used.len()];
    let mut next = 0;
    for (old, &keep) in used.iter().enumerate() {
        renumbered[old] = next;
        next += usize::from(keep);
    }
    for entry in block.allocations.iter_mut().flatten() {
        *entry = renumbered[*entry];
    }
    let mut index = 0;
    block.attributes.retain(|_| {
        index += 1;
        used[index - 1]
    });
}

/// The attribute an allocation for `handle` is stored with.
pub fn attribute(handle: &str, attributes: &BTreeMap<String, String>) -> AllocationAttribute {
    AllocationAttribute {
        primary: Some(handle.to_owned()),
        secondary: (!attributes.is_empty()).then(|| attributes.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn attribute(handle: &str) -> AllocationAttribute {
        crate::block::attribute(handle, &BTreeMap::new())
    }

    fn net(text: &str) -> IpNet {
        text.parse().unwrap()
    }

    #[test]
    fn blocks_are_26_and_122_or_the_whole_small_pool() {
        assert_eq!(block_prefix(&net("10.0.0.0/16")), 26);
        assert_eq!(block_prefix(&net("10.0.0.0/28")), 28);
        assert_eq!(block_prefix(&net("fd00::/48")), 122);
        assert_eq!(
            block_of(&net("10.0.0.0/16"), "10.0.3.77".parse().unwrap()),
            net("10.0.3.64/26")
        );
    }

    #[test]
    fn ordinals_and_addresses_agree_in_both_families() {
        let v6 = net("fd00::1:0/122");
        let ip: IpAddr = "fd00::1:3f".parse().unwrap();
        assert_eq!(ordinal_of(&v6, ip), Some(63));
        assert_eq!(address_at(&v6, 63), ip);
        assert_eq!(ordinal_of(&v6, "fd00::1:40".parse().unwrap()), None);
        assert_eq!(
            ordinal_of(&net("10.0.0.64/26"), "fd00::1".parse().unwrap()),
            None
        );
    }

    #[test]
    fn assigning_a_taken_address_names_its_handle() {
        let mut block = empty_block(net("10.0.0.0/30"), Some("h1"), false);
        let ip = "10.0.0.2".parse().unwrap();
        assign_address(&mut block, ip, &attribute("a")).unwrap();
        assert_eq!(
            assign_address(&mut block, ip, &attribute("b")),
            Err(Taken::By(Some("a".to_owned())))
        );
        let outside = "10.0.0.9".parse().unwrap();
        assert_eq!(
            assign_address(&mut block, outside, &attribute("b")),
            Err(Taken::Outside)
        );
    }

    #[test]
    fn the_unallocated_order_is_kept_when_present() {
        let mut block = empty_block(net("10.0.0.0/30"), None, false);
        block.unallocated = Some(vec![3, 1, 0, 2]);
        let got = assign(&mut block, 2, &attribute("a"));
        assert_eq!(
            got,
            [
                "10.0.0.3".parse::<IpAddr>().unwrap(),
                "10.0.0.1".parse().unwrap()
            ]
        );
        assert_eq!(block.unallocated, Some(vec![0, 2]));
        release(&mut block, &["10.0.0.3".parse().unwrap()]);
        assert_eq!(block.unallocated, Some(vec![0, 2, 3]));
    }

    proptest! {
        /// Whatever is assigned and released, the block stays valid, its counts match what was
        /// handed out, no address is held twice, and releasing a handle frees exactly its own.
        #[test]
        fn assign_and_release_keep_the_block_consistent(
            steps in prop::collection::vec((0usize..4, 0usize..6, any::<bool>()), 1..40)
        ) {
            let mut block = empty_block(net("10.1.0.0/28"), Some("h"), false);
            let mut held: BTreeMap<String, Vec<IpAddr>> = BTreeMap::new();
            for (handle, count, release_it) in steps {
                let handle = format!("handle{handle}");
                if release_it {
                    let mut freed = release_handle(&mut block, &handle);
                    let mut expected = held.remove(&handle).unwrap_or_default();
                    freed.sort();
                    expected.sort();
                    prop_assert_eq!(freed, expected);
                } else {
                    let free_before = free_count(&block);
                    let got = assign(&mut block, count, &attribute(&handle));
                    prop_assert_eq!(got.len(), count.min(free_before));
                    for ip in &got {
                        prop_assert!(held.values().all(|ips| !ips.contains(ip)), "{ip} handed out twice");
                    }
                    held.entry(handle).or_default().extend(got);
                }
                let counts = handle_counts(&block);
                let expected: BTreeMap<String, u64> = held
                    .iter()
                    .filter(|(_, ips)| !ips.is_empty())
                    .map(|(h, ips)| (h.clone(), ips.len() as u64))
                    .collect();
                prop_assert_eq!(counts, expected);
                let mut check = block.clone();
                prop_assert!(calico_model::Validate::validate(&mut check).is_ok());
                prop_assert!(block.attributes.len() <= held.values().filter(|v| !v.is_empty()).count());
            }
        }
    }
}
