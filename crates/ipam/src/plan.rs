//! The assignment planner: which addresses an automatic assignment takes, from what was read.
//!
//! One pure function, [`plan`], used by both ways of assigning: the lane's batch (`batch`) on
//! what it read or remembered of the host's blocks, and the direct path (`allocator`) on what
//! it read, step by step. The order is the same for both:
//!
//! 1. the host's own blocks, in the order of its affinities (blocks of the usable pools whose
//!    value says they are the host's);
//! 2. new blocks claimed for the host (unless `auto_allocate_blocks` is false);
//! 3. other blocks with room that the host may borrow from (never under strict affinity, never
//!    a block with strict affinity of another host).
//!
//! Steps 2 and 3 need every block of the version: when only the host's blocks were read, the
//! plan says so ([`Short::Unread`]) and the caller reads the rest (the direct path) or lets the
//! job run alone (the batch).

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use calico_model::ipam::{AllocationAttribute, AllocationBlock};
use calico_model::pool::IpPool;
use ipnet::IpNet;

use crate::block;
use crate::config::IpamSettings;

/// What the planner sees: what was read for one assignment of one version.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Seen<'a> {
    /// The host assigning (whose blocks are used first, and which claims new blocks).
    pub(crate) host: &'a str,
    /// The pools the request may use, in order (a disabled one is never used).
    pub(crate) pools: &'a [IpPool],
    /// The host's affinities, in order.
    pub(crate) affine: &'a [IpNet],
    /// The readable blocks read, in the order read.
    pub(crate) blocks: &'a [&'a AllocationBlock],
    /// Whether `blocks` holds every readable block of the version; none when only the host's
    /// blocks were read.
    pub(crate) rest: Option<Rest<'a>>,
}

/// What claiming and borrowing need besides the blocks: read with every block of the version.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rest<'a> {
    pub(crate) settings: IpamSettings,
    /// The block keys that could not be read (a new block avoids them too).
    pub(crate) unreadable: &'a [IpNet],
}

/// Where a step's addresses come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// A block of the host's, in the order of its affinities.
    Affine,
    /// A new block, claimed for the host.
    Claim,
    /// Another block with room.
    Borrow,
}

/// One block's part of a plan.
#[derive(Debug, Clone)]
pub(crate) struct Step {
    pub(crate) source: Source,
    /// The block with the step's addresses assigned (a new block for a claim).
    pub(crate) block: AllocationBlock,
    /// The addresses the step assigns, all free in the block as read.
    pub(crate) ips: Vec<IpAddr>,
}

/// Why a plan does not cover every address asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Short {
    /// The host's blocks have too little room, and the other blocks were not read.
    Unread,
    /// Nothing more is free; the reason says why (appended to the exhausted error).
    Exhausted(String),
}

/// The steps, in order, and what is missing when they do not cover the request.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub(crate) steps: Vec<Step>,
    pub(crate) short: Option<Short>,
}

/// Plans `wanted` addresses for `attribute` from what was `seen`.
pub(crate) fn plan(seen: &Seen<'_>, wanted: usize, attribute: &AllocationAttribute) -> Plan {
    let pools: Vec<&IpPool> = (seen.pools.iter())
        .filter(|p| p.assigns_addresses())
        .collect();
    let in_pools = |cidr: &IpNet| pools.iter().any(|p| p.cidr.contains(cidr));
    let find = |cidr: &IpNet| seen.blocks.iter().copied().find(|b| b.cidr == *cidr);
    let mut steps: Vec<Step> = Vec::new();
    let mut got = 0;
    let mut used = BTreeSet::new();
    for cidr in seen.affine {
        if got == wanted {
            break;
        }
        let Some(read) = find(cidr).filter(|b| in_pools(&b.cidr)) else {
            continue;
        };
        if read.host() != Some(seen.host) || !used.insert(*cidr) {
            continue;
        }
        let mut block = read.clone();
        let ips = block::assign(&mut block, wanted - got, attribute);
        if !ips.is_empty() {
            got += ips.len();
            steps.push(Step {
                source: Source::Affine,
                block,
                ips,
            });
        }
    }
    if got == wanted {
        return Plan { steps, short: None };
    }
    let Some(rest) = seen.rest else {
        return Plan {
            steps,
            short: Some(Short::Unread),
        };
    };
    let settings = rest.settings;
    if settings.auto_allocate_blocks {
        let mut existing: BTreeSet<IpNet> = (seen.blocks.iter().map(|b| b.cidr))
            .chain(rest.unreadable.iter().copied())
            .collect();
        while got < wanted {
            let Some(cidr) = pools
                .iter()
                .find_map(|pool| free_block(pool, &existing, seen.host))
            else {
                break;
            };
            existing.insert(cidr);
            let mut block = block::empty_block(cidr, Some(seen.host), settings.strict_affinity);
            let ips = block::assign(&mut block, wanted - got, attribute);
            if ips.is_empty() {
                break;
            }
            got += ips.len();
            steps.push(Step {
                source: Source::Claim,
                block,
                ips,
            });
        }
    }
    // The blocks as the steps so far left them.
    let changed: BTreeMap<IpNet, &AllocationBlock> =
        steps.iter().map(|s| (s.block.cidr, &s.block)).collect();
    let now = |b: &'_ AllocationBlock| -> AllocationBlock {
        changed
            .get(&b.cidr)
            .map_or_else(|| b.clone(), |c| (*c).clone())
    };
    let mut borrowed = Vec::new();
    let mut with_room = Vec::new();
    let mut visited = BTreeSet::new();
    for read in seen.blocks {
        if !in_pools(&read.cidr) || !visited.insert(read.cidr) {
            continue;
        }
        let mut block = now(read);
        if block::free_count(&block) == 0 {
            continue;
        }
        if got < wanted
            && block::strict_refusal(&block, seen.host, settings.strict_affinity).is_none()
        {
            let ips = block::assign(&mut block, wanted - got, attribute);
            got += ips.len();
            borrowed.push(Step {
                source: Source::Borrow,
                block: block.clone(),
                ips,
            });
        }
        if block::free_count(&block) > 0 {
            with_room.push(block);
        }
    }
    steps.extend(borrowed);
    let short = (got < wanted).then(|| {
        Short::Exhausted(exhausted_reason(
            settings,
            &with_room,
            rest.unreadable.len(),
        ))
    });
    Plan { steps, short }
}

/// Why an automatic assignment found no address: strict affinity, strict blocks, no room at
/// all, and unreadable blocks that might have had some.
fn exhausted_reason(
    settings: IpamSettings,
    with_room: &[AllocationBlock],
    invalid: usize,
) -> String {
    let mut why = if settings.strict_affinity && !settings.auto_allocate_blocks {
        ": the host's blocks are full, auto_allocate_blocks is false (no new block) and strict \
         affinity forbids borrowing; claim a block for the host (calicoctl ipam block claim)"
            .to_owned()
    } else if settings.strict_affinity {
        ": every block is claimed and strict affinity forbids borrowing".to_owned()
    } else if with_room.is_empty() {
        ": every address is assigned".to_owned()
    } else {
        let strict: Vec<String> = with_room
            .iter()
            .map(|b| match b.host() {
                Some(host) => format!("{} of host {host}", b.cidr),
                None => format!("{} of no host", b.cidr),
            })
            .collect();
        format!(
            ": the free addresses are in blocks with strict affinity ({}), which only their own \
             hosts may assign from",
            strict.join(", ")
        )
    };
    if invalid > 0 {
        why.push_str(&format!(
            "; {invalid} block(s) could not be read (calicoctl ipam check names them)"
        ));
    }
    why
}

/// An unclaimed block of `pool`, searched from a place that depends on the host, so that hosts
/// claiming at once mostly want different blocks and each host's blocks tend to be adjacent.
fn free_block(pool: &IpPool, existing: &BTreeSet<IpNet>, host: &str) -> Option<IpNet> {
    let prefix = block::block_prefix(&pool.cidr);
    let bits = u32::from(prefix - pool.cidr.prefix_len());
    let count: u128 = 1u128.checked_shl(bits).unwrap_or(u128::MAX);
    // Blocks of another size (a Calico 1.4 /26 in a pool smaller than that, say) block every
    // candidate they overlap: counting those keeps "one of the first `taken + 1` is free".
    let overlapping: Vec<IpNet> = existing
        .iter()
        .filter(|c| overlap(&pool.cidr, c))
        .copied()
        .collect();
    let taken = overlapping
        .iter()
        .map(|c| 1u128.checked_shl(u32::from(prefix.saturating_sub(c.prefix_len()))))
        .fold(0u128, |sum, n| sum.saturating_add(n.unwrap_or(u128::MAX)));
    let odd: Vec<IpNet> = overlapping
        .into_iter()
        .filter(|c| c.prefix_len() != prefix)
        .collect();
    if taken >= count {
        return None;
    }
    let step_bits = u32::from(pool.cidr.max_prefix_len() - prefix);
    let base = match pool.cidr.network() {
        IpAddr::V4(a) => u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    };
    let start = u128::from(fnv(host)) % count;
    // At most `taken` candidates are claimed, so one of the first `taken + 1` is free.
    (0..=taken).find_map(|i| {
        let index = (start + i) % count;
        let network = base + (index << step_bits);
        let addr = match pool.cidr {
            IpNet::V4(_) => IpAddr::V4((network as u32).into()),
            IpNet::V6(_) => IpAddr::V6(network.into()),
        };
        let cidr = IpNet::new(addr, prefix).expect("valid prefix");
        let free = !existing.contains(&cidr) && !odd.iter().any(|c| overlap(c, &cidr));
        free.then_some(cidr)
    })
}

fn overlap(a: &IpNet, b: &IpNet) -> bool {
    a.contains(b) || b.contains(a)
}

fn fnv(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests;
