use std::collections::BTreeSet;

use proptest::prelude::*;

use super::*;

fn pool(cidr: &str) -> IpPool {
    IpPool::new(cidr.parse().unwrap())
}

#[test]
fn a_free_block_is_found_whatever_the_host_hashes_to() {
    let pool = pool("10.0.0.0/24");
    let mut existing = BTreeSet::new();
    for _ in 0..4 {
        let cidr = free_block(&pool, &existing, "host-a").unwrap();
        assert!(pool.cidr.contains(&cidr) && cidr.prefix_len() == 26);
        assert!(existing.insert(cidr), "{cidr} found twice");
    }
    assert_eq!(free_block(&pool, &existing, "host-b"), None);
}

#[test]
fn a_block_of_another_size_blocks_every_candidate_it_overlaps() {
    // A Calico 1.4 /26 over a /28 pool: nothing is free.
    let small = pool("10.0.0.0/28");
    let calico_1_4: BTreeSet<IpNet> = ["10.0.0.0/26".parse().unwrap()].into();
    assert_eq!(free_block(&small, &calico_1_4, "h"), None);
    // A /25 over half of a /24 pool: only the other half is offered.
    let pool = pool("10.0.0.0/24");
    let half: BTreeSet<IpNet> = ["10.0.0.0/25".parse().unwrap()].into();
    for host in ["a", "b", "c", "d", "e"] {
        let cidr = free_block(&pool, &half, host).unwrap();
        assert!(!overlap(&cidr, &"10.0.0.0/25".parse().unwrap()), "{cidr}");
    }
}

#[test]
fn huge_ipv6_pools_are_searched_without_enumerating_them() {
    let pool = pool("fd00::/48");
    let cidr = free_block(&pool, &BTreeSet::new(), "h").unwrap();
    assert_eq!(cidr.prefix_len(), 122);
    assert!(pool.cidr.contains(&cidr));
}

const HOST: &str = "me";

/// A random world: pools of 10.<n>.0.0/24 (four /26 blocks each), some disabled; blocks in and
/// out of them, of this host, another or none, strict or not, partly allocated.
#[derive(Debug, Clone)]
struct World {
    pools: Vec<IpPool>,
    blocks: Vec<AllocationBlock>,
    affine: Vec<IpNet>,
    unreadable: Vec<IpNet>,
    settings: IpamSettings,
    all_read: bool,
}

fn block_cidr(pool: u8, index: u8) -> IpNet {
    format!("10.{pool}.0.{}/26", u16::from(index) * 64)
        .parse()
        .unwrap()
}

fn world() -> impl Strategy<Value = World> {
    let pools = prop::collection::vec((0u8..4, any::<bool>()), 1..4);
    // (pool, index, owner: 0 me / 1 other / 2 none, strict, allocated ordinals, readable)
    let blocks = prop::collection::vec(
        (
            0u8..5,
            0u8..4,
            0u8..3,
            any::<bool>(),
            prop::collection::vec(0usize..64, 0..70),
            prop::bool::weighted(0.9),
        ),
        0..10,
    );
    let affine = prop::collection::vec((0u8..5, 0u8..4), 0..8);
    (
        pools,
        blocks,
        affine,
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(pools, blocks, affine, strict, auto, all_read)| {
            let mut seen_pools = BTreeSet::new();
            let pools = (pools.into_iter())
                .filter(|(n, _)| seen_pools.insert(*n))
                .map(|(n, disabled)| {
                    let mut pool = pool(&format!("10.{n}.0.0/24"));
                    pool.disabled = disabled;
                    pool
                })
                .collect();
            let mut cidrs = BTreeSet::new();
            let mut read = Vec::new();
            let mut unreadable = Vec::new();
            for (p, i, owner, strict_block, taken, readable) in blocks {
                let cidr = block_cidr(p, i);
                if !cidrs.insert(cidr) {
                    continue;
                }
                if !readable {
                    unreadable.push(cidr);
                    continue;
                }
                let host = match owner {
                    0 => Some(HOST),
                    1 => Some("other"),
                    _ => None,
                };
                let mut block = block::empty_block(cidr, host, strict_block);
                let someone = block::attribute("someone", &Default::default());
                for ordinal in taken {
                    let ip = block::address_at(&cidr, ordinal);
                    let _ = block::assign_address(&mut block, ip, &someone);
                }
                read.push(block);
            }
            World {
                pools,
                blocks: read,
                affine: affine.into_iter().map(|(p, i)| block_cidr(p, i)).collect(),
                unreadable,
                settings: IpamSettings {
                    strict_affinity: strict,
                    auto_allocate_blocks: auto,
                },
                all_read,
            }
        })
}

proptest! {
    #[test]
    fn plans_hand_out_free_addresses_of_usable_blocks_once(world in world(), wanted in 0usize..300) {
        let blocks: Vec<&AllocationBlock> = world.blocks.iter().collect();
        let seen = Seen {
            host: HOST,
            pools: &world.pools,
            affine: &world.affine,
            blocks: &blocks,
            rest: world.all_read.then_some(Rest {
                settings: world.settings,
                unreadable: &world.unreadable,
            }),
        };
        let attribute = block::attribute("mine", &Default::default());
        let planned = plan(&seen, wanted, &attribute);

        let enabled = |cidr: &IpNet| {
            world.pools.iter().any(|p| p.assigns_addresses() && p.cidr.contains(cidr))
        };
        let read = |cidr: &IpNet| world.blocks.iter().find(|b| b.cidr == *cidr);
        let mut handed = BTreeSet::new();
        let mut last_affine = None;
        let mut past_affine = false;
        let mut stepped = BTreeSet::new();
        for step in &planned.steps {
            let cidr = step.block.cidr;
            prop_assert!(enabled(&cidr), "{cidr} is outside the usable pools");
            prop_assert!(!step.ips.is_empty(), "an empty step in {cidr}");
            for ip in &step.ips {
                prop_assert!(cidr.contains(ip), "{ip} outside {cidr}");
                prop_assert!(handed.insert(*ip), "{ip} handed out twice");
            }
            match step.source {
                Source::Affine => {
                    prop_assert!(!past_affine, "an affine step after a claim or a borrow");
                    let at = world.affine.iter().position(|a| *a == cidr).unwrap();
                    prop_assert!(last_affine < Some(at), "affine blocks out of order");
                    last_affine = Some(at);
                }
                Source::Claim => {
                    past_affine = true;
                    prop_assert!(seen.rest.is_some() && world.settings.auto_allocate_blocks);
                    prop_assert!(read(&cidr).is_none() && !world.unreadable.contains(&cidr));
                    prop_assert_eq!(step.block.host(), Some(HOST));
                }
                Source::Borrow => {
                    past_affine = true;
                    prop_assert!(seen.rest.is_some());
                    let strict = world.settings.strict_affinity;
                    prop_assert!(block::strict_refusal(&step.block, HOST, strict).is_none());
                }
            }
            if step.source != Source::Claim {
                let before = read(&cidr).unwrap();
                if step.source == Source::Affine {
                    prop_assert_eq!(before.host(), Some(HOST));
                }
                // Every address planned was free in the block as read, and the block planned
                // is the block read with exactly those addresses assigned.
                for ip in &step.ips {
                    let ordinal = block::ordinal_of(&cidr, *ip).unwrap();
                    prop_assert!(before.allocations[ordinal].is_none(), "{ip} was taken");
                }
                prop_assert!(stepped.insert(cidr), "{cidr} planned twice");
                let mut expect = before.clone();
                for ip in &step.ips {
                    block::assign_address(&mut expect, *ip, &attribute).unwrap();
                }
                prop_assert_eq!(&expect, &step.block);
            }
        }
        let got = handed.len();
        prop_assert!(got <= wanted);
        prop_assert_eq!(got == wanted, planned.short.is_none(), "short: {:?}", planned.short);
        let beyond = planned.steps.iter().any(|s| s.source != Source::Affine);
        if got < wanted || beyond {
            // The host's blocks come first: claiming, borrowing or giving up only once every
            // affine block of the host in the pools is full.
            for cidr in &world.affine {
                if let Some(block) = read(cidr).filter(|b| enabled(cidr) && b.host() == Some(HOST)) {
                    let now = planned.steps.iter().find(|s| s.block.cidr == *cidr);
                    let free = block::free_count(now.map_or(block, |s| &s.block));
                    prop_assert_eq!(free, 0, "{} left with room", cidr);
                }
            }
        }
        if got < wanted {
            prop_assert_eq!(seen.rest.is_none(), planned.short == Some(Short::Unread));
        }
    }
}
