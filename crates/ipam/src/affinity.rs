//! Claiming and releasing a host's affinity to blocks (Calico 1.4's `claim_affinity`,
//! `release_affinity`, `release_host_affinities`): the block's `affinity` field and the
//! host's key `/calico/ipam/v2/host/<host>/ipvX/block/<cidr>` change in one transaction.
//!
//! | change | the block | the affinity key |
//! | --- | --- | --- |
//! | claim, block absent | created empty, affine to the host (strict as the config says) | written |
//! | claim, block affine to no host | becomes affine to the host (ours; 1.4 refused) | written |
//! | release, block empty | deleted | deleted |
//! | release, block holds addresses | `affinity` cleared (`""` in 1.4's dialect); deleted with its last address | deleted |

use calico_datastore::{Compare, Expect, TxnOp};
use calico_model::{IpVersion, Key};
use ipnet::IpNet;

use crate::allocator::{Ipam, backoff};
use crate::block;
use crate::error::IpamError;
use crate::store::{BlockWrite, Txn};
use crate::stored::StoredBlock;

/// What a claim or release did, or why it did nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AffinityOutcome {
    /// The block is now affine to the host (created when it did not exist).
    Claimed,
    /// The block already was the host's (its affinity key is written again).
    AlreadyClaimed,
    /// The host gave the block up; it keeps its addresses and is affine to no host.
    Released,
    /// The host gave the block up; it was empty, so it was deleted.
    Deleted,
    /// The host's affinity key named a block that does not exist or is another host's; the
    /// key was removed, the block left alone.
    StaleKeyRemoved,
    /// Nothing changed, and why (naming the block).
    Refused(String),
}

impl Ipam {
    /// Makes the block `cidr` affine to `host`. The CIDR must be a block of an enabled pool;
    /// a block affine to another host is refused.
    pub async fn claim_affinity(
        &self,
        cidr: IpNet,
        host: &str,
    ) -> Result<AffinityOutcome, IpamError> {
        if let Some(why) = self.not_a_block(cidr).await? {
            return Ok(AffinityOutcome::Refused(why));
        }
        let strict = self.settings().await?.strict_affinity;
        for attempt in 1..=self.attempts() {
            let mut txn = Txn::default();
            let outcome = match self.keys.read_block(&cidr).await? {
                None => {
                    let block = block::empty_block(cidr, Some(host), strict);
                    BlockWrite::create(&block).add_to(&mut txn);
                    AffinityOutcome::Claimed
                }
                Some(stored) => match stored.value.host() {
                    Some(owner) if owner == host => AffinityOutcome::AlreadyClaimed,
                    Some(other) => {
                        return Ok(AffinityOutcome::Refused(format!(
                            "block {cidr} is affine to host {other}; release it there first \
                             (calicoctl ipam block release {cidr} --host {other})"
                        )));
                    }
                    None => {
                        let mut block = stored.value.clone();
                        block.affinity = Some(format!("host:{host}"));
                        BlockWrite::update(&block, &stored).add_to(&mut txn);
                        AffinityOutcome::Claimed
                    }
                },
            };
            txn.ops.push(TxnOp::Put {
                key: affinity_key(host, cidr),
                value: String::new(),
            });
            if txn.commit(self.store()).await? {
                return Ok(outcome);
            }
            backoff(attempt).await;
        }
        Err(self.contention("claim affinity", cidr))
    }

    /// Gives up `host`'s affinity to the block `cidr`: an empty block is deleted, one that
    /// holds addresses keeps them and becomes affine to no host.
    pub async fn release_affinity(
        &self,
        cidr: IpNet,
        host: &str,
    ) -> Result<AffinityOutcome, IpamError> {
        self.release_one(cidr, host, true).await
    }

    /// Gives up every affinity of `host`: with `host_gone`, blocks that hold addresses too
    /// (they keep their addresses, affine to no host); else only its empty blocks.
    pub async fn release_host_affinities(
        &self,
        host: &str,
        host_gone: bool,
    ) -> Result<Vec<(IpNet, AffinityOutcome)>, IpamError> {
        let mut outcomes = Vec::new();
        for version in [IpVersion::V4, IpVersion::V6] {
            for cidr in self.affine_blocks(host, version).await? {
                outcomes.push((cidr, self.release_one(cidr, host, host_gone).await?));
            }
        }
        Ok(outcomes)
    }

    /// Gives up the host's empty blocks (block and affinity deleted together); returns the
    /// blocks released. Blocks that still hold addresses keep their affinity.
    pub async fn release_empty_affinities(&self, host: &str) -> Result<Vec<IpNet>, IpamError> {
        let outcomes = self.release_host_affinities(host, false).await?;
        Ok(outcomes
            .into_iter()
            .filter(|(_, outcome)| *outcome == AffinityOutcome::Deleted)
            .map(|(cidr, _)| cidr)
            .collect())
    }

    /// Gives up the blocks an assignment claimed and then could not use: those still empty
    /// and affine to `host` (another assignment of the host may have filled one since).
    pub(crate) async fn release_claimed(
        &self,
        host: &str,
        claimed: &[IpNet],
    ) -> Result<(), IpamError> {
        for cidr in claimed {
            self.release_one(*cidr, host, false).await?;
        }
        Ok(())
    }

    /// Releases one affinity; blocks holding addresses only when `even_used`.
    async fn release_one(
        &self,
        cidr: IpNet,
        host: &str,
        even_used: bool,
    ) -> Result<AffinityOutcome, IpamError> {
        let key = affinity_key(host, cidr);
        for attempt in 1..=self.attempts() {
            let stored = match self.keys.read_block(&cidr).await? {
                Some(stored) if stored.value.host() == Some(host) => stored,
                read => match self.not_the_hosts(cidr, host, &key, read.as_ref()).await? {
                    Some(outcome) => return Ok(outcome),
                    None => {
                        backoff(attempt).await;
                        continue;
                    }
                },
            };
            let used = stored.value.allocations.len() - block::free_count(&stored.value);
            if used > 0 && !even_used {
                return Ok(AffinityOutcome::Refused(format!(
                    "block {cidr} holds {used} address(es); release them first, or give the \
                     block up with its addresses (calicoctl ipam release --host-gone {host})"
                )));
            }
            let mut block = stored.value.clone();
            block.affinity = None;
            let mut txn = Txn::default();
            // An empty block affine to no host is deleted by the write.
            BlockWrite::update(&block, &stored).add_to(&mut txn);
            txn.ops.push(TxnOp::Delete { key: key.clone() });
            if txn.commit(self.store()).await? {
                let done = if used == 0 {
                    AffinityOutcome::Deleted
                } else {
                    AffinityOutcome::Released
                };
                return Ok(done);
            }
            backoff(attempt).await;
        }
        Err(self.contention("release affinity", cidr))
    }

    /// A block that is absent or not `host`'s: what releasing it did (`None`: the block
    /// changed meanwhile, read it again).
    async fn not_the_hosts(
        &self,
        cidr: IpNet,
        host: &str,
        key: &str,
        read: Option<&StoredBlock>,
    ) -> Result<Option<AffinityOutcome>, IpamError> {
        let (expect, why) = match read {
            None => (Expect::Absent, format!("block {cidr} does not exist")),
            Some(other) => {
                let owner = other
                    .value
                    .host()
                    .map_or("no host".to_owned(), |o| format!("host {o}"));
                let why = format!("block {cidr} is affine to {owner}, not {host}");
                (Expect::ModRevision(other.revision), why)
            }
        };
        Ok(match self.remove_stale_key(cidr, key, expect).await? {
            Some(true) => Some(AffinityOutcome::StaleKeyRemoved),
            Some(false) => Some(AffinityOutcome::Refused(why)),
            None => None,
        })
    }

    /// Removes the host's affinity key for a block that is not its, provided the block is
    /// still as read (`block`), so that a claim racing with this keeps its fresh key. Some(true):
    /// removed; Some(false): there was no key; None: the block changed, read it again.
    async fn remove_stale_key(
        &self,
        cidr: IpNet,
        key: &str,
        block: Expect,
    ) -> Result<Option<bool>, IpamError> {
        if self.store().get(key).await?.is_none() {
            return Ok(Some(false));
        }
        let compare = Compare {
            key: Key::Block { cidr }.to_string(),
            expect: block,
        };
        let delete = TxnOp::Delete {
            key: key.to_owned(),
        };
        let removed = self.store().transaction(&[compare], &[delete]).await?;
        Ok(removed.then_some(true))
    }

    /// Why `cidr` is not a block of an enabled pool, if it is not.
    async fn not_a_block(&self, cidr: IpNet) -> Result<Option<String>, IpamError> {
        let pools = self.pools(IpVersion::of_addr(&cidr.addr())).await?;
        let Some(pool) = pools.iter().find(|p| p.cidr.contains(&cidr)) else {
            return Ok(Some(format!("{cidr} is in no configured IP pool")));
        };
        let block = block::block_of(&pool.cidr, cidr.addr());
        if block != cidr {
            return Ok(Some(format!(
                "{cidr} is not a block of pool {}: its blocks are /{} (this address's is {block})",
                pool.cidr,
                block.prefix_len()
            )));
        }
        if !pool.assigns_addresses() {
            return Ok(Some(format!("pool {} is disabled", pool.cidr)));
        }
        Ok(None)
    }
}

fn affinity_key(host: &str, cidr: IpNet) -> String {
    Key::BlockAffinity {
        hostname: host.to_owned(),
        cidr,
    }
    .to_string()
}
