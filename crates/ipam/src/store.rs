//! The IPAM keys in the datastore: reading pools, the IPAM config, blocks, handles and
//! affinities (with the revision each was read at), and building the transactions that change
//! a block and its handle records together.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use calico_datastore::{Compare, Datastore, Expect, KvPair, TxnOp};
use calico_model::ipam::{AllocationBlock, AllocationHandle, IpamConfig};
use calico_model::key::{IPAM_V2, Key, Prefix};
use calico_model::pool::IpPool;
use calico_model::{IpVersion, from_json};
use ipnet::IpNet;

use crate::block;
use crate::config::IpamSettings;
use crate::dialect::{self, Dialect};
use crate::error::IpamError;
use crate::hint::Hints;
pub use crate::stored::InvalidBlock;
use crate::stored::{Blocks, Stored, StoredBlock, StoredPool};

/// The IPAM keys of one datastore, and what this process last saw of them (the hints, shared
/// by the clones of one `Ipam`: what to read, never the answer).
#[derive(Clone)]
pub(crate) struct Store {
    datastore: Arc<dyn Datastore>,
    hints: Arc<Mutex<Hints>>,
}

impl Store {
    pub(crate) fn new(datastore: Arc<dyn Datastore>) -> Store {
        Store {
            datastore,
            hints: Arc::default(),
        }
    }

    pub(crate) fn datastore(&self) -> &dyn Datastore {
        self.datastore.as_ref()
    }

    pub(crate) fn hints(&self) -> MutexGuard<'_, Hints> {
        self.hints.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The pools of one version, as stored (invalid ones are skipped with a warning).
    pub(crate) async fn pools(&self, version: IpVersion) -> Result<Vec<IpPool>, IpamError> {
        let pools = self.stored_pools(version).await?;
        Ok(pools.into_iter().map(|p| p.value).collect())
    }

    /// The pools of one version with their keys and revisions (remembered as a hint).
    pub(crate) async fn stored_pools(
        &self,
        version: IpVersion,
    ) -> Result<Vec<StoredPool>, IpamError> {
        let prefix = Prefix::PoolsOf(version).to_string();
        let mut pools = Vec::new();
        for pair in self.datastore().list(&prefix).await? {
            match from_json::<IpPool>(&pair.value) {
                Ok(value) => pools.push(StoredPool {
                    value,
                    key: pair.key,
                    revision: pair.mod_revision,
                }),
                Err(e) => tracing::warn!(key = %pair.key, "ignoring an invalid pool: {e}"),
            }
        }
        self.hints().pools(version, &pools);
        Ok(pools)
    }

    /// The pools an assignment may use: the requested ones (each must exist and be enabled),
    /// or every enabled pool.
    pub(crate) async fn usable_pools(
        &self,
        version: IpVersion,
        requested: &[IpNet],
    ) -> Result<Vec<IpPool>, IpamError> {
        let pools = self.pools(version).await?;
        let field = match version {
            IpVersion::V4 => "ipv4_pools",
            IpVersion::V6 => "ipv6_pools",
        };
        if requested.is_empty() {
            let usable: Vec<IpPool> = pools
                .into_iter()
                .filter(IpPool::assigns_addresses)
                .collect();
            if usable.is_empty() {
                return Err(IpamError::NoPool { version });
            }
            return Ok(usable);
        }
        requested
            .iter()
            .map(|cidr| {
                let pool = pools
                    .iter()
                    .find(|p| p.cidr == *cidr)
                    .ok_or(IpamError::UnknownPool { field, cidr: *cidr })?;
                if !pool.assigns_addresses() {
                    return Err(IpamError::DisabledPool { field, cidr: *cidr });
                }
                Ok(pool.clone())
            })
            .collect()
    }

    /// The cluster's IPAM settings as the model's type; see [`Ipam::settings`].
    pub(crate) async fn config(&self) -> Result<IpamConfig, IpamError> {
        let settings = self.settings().await?;
        Ok(IpamConfig {
            strict_affinity: settings.strict_affinity,
            auto_allocate_blocks: settings.auto_allocate_blocks,
        })
    }

    /// The blocks `host` has affinity to.
    pub(crate) async fn affine_blocks(
        &self,
        host: &str,
        version: IpVersion,
    ) -> Result<Vec<IpNet>, IpamError> {
        let prefix = format!("{IPAM_V2}/host/{host}/{}/block/", ip_family(version));
        let pairs = self.datastore().list(&prefix).await?;
        let cidrs: Vec<IpNet> = pairs
            .iter()
            .filter_map(|pair| match Key::parse(&pair.key) {
                Ok(Key::BlockAffinity { hostname, cidr }) if hostname == host => Some(cidr),
                _ => None,
            })
            .collect();
        self.hints().affine(host, version, &cidrs);
        Ok(cidrs)
    }

    /// Every block of one version; blocks whose value does not read are set apart.
    pub(crate) async fn blocks(&self, version: IpVersion) -> Result<Blocks, IpamError> {
        let prefix = format!("{IPAM_V2}/assignment/{}/block/", ip_family(version));
        let mut blocks = Blocks::default();
        for pair in self.datastore().list(&prefix).await? {
            let Ok(Key::Block { cidr }) = Key::parse(&pair.key) else {
                continue; // not a block key: `check` has nothing to say about it either
            };
            match parse_block(&pair) {
                Ok(stored) => blocks.valid.push(stored),
                Err(e) => {
                    tracing::warn!(key = %pair.key, "ignoring an unreadable block: {e}");
                    blocks.invalid.push(InvalidBlock {
                        key: pair.key.clone(),
                        cidr,
                        reason: invalid_reason(&e),
                    });
                }
            }
        }
        Ok(blocks)
    }

    /// Every readable block of both versions (unreadable ones are skipped with a warning and
    /// reported by [`Ipam::check`]).
    pub(crate) async fn all_blocks(&self) -> Result<Vec<AllocationBlock>, IpamError> {
        let mut all = Vec::new();
        for version in [IpVersion::V4, IpVersion::V6] {
            all.extend(
                self.blocks(version)
                    .await?
                    .valid
                    .into_iter()
                    .map(|s| s.value),
            );
        }
        Ok(all)
    }

    /// Every block key whose value does not read, with the field and reason.
    pub(crate) async fn invalid_blocks(&self) -> Result<Vec<InvalidBlock>, IpamError> {
        let mut all = Vec::new();
        for version in [IpVersion::V4, IpVersion::V6] {
            all.extend(self.blocks(version).await?.invalid);
        }
        Ok(all)
    }

    pub(crate) async fn read_block(&self, cidr: &IpNet) -> Result<Option<StoredBlock>, IpamError> {
        let key = Key::Block { cidr: *cidr }.to_string();
        let Some(pair) = self.datastore().get(&key).await? else {
            return Ok(None);
        };
        let stored = parse_block(&pair).map_err(|e| IpamError::Corrupt {
            key,
            reason: invalid_reason(&e),
        })?;
        self.hints().block_read(&stored.value, stored.revision);
        Ok(Some(stored))
    }

    pub(crate) async fn read_handle(
        &self,
        handle: &str,
    ) -> Result<Option<Stored<AllocationHandle>>, IpamError> {
        let key = Key::Handle {
            handle: handle.to_owned(),
        };
        let read = self.read(&key).await?;
        self.hints().record(handle, read.clone());
        Ok(read)
    }

    async fn read<T>(&self, key: &Key) -> Result<Option<Stored<T>>, IpamError>
    where
        T: serde::de::DeserializeOwned + calico_model::Validate,
    {
        let Some(pair) = self.datastore().get(&key.to_string()).await? else {
            return Ok(None);
        };
        Ok(Some(Stored {
            value: parse(&pair)?,
            revision: pair.mod_revision,
        }))
    }

    /// The block holding `ip`: the one its pool (of `pools`, the pools of its version) says,
    /// else any that contains it (the pool may have been deleted or recreated with another
    /// block size).
    pub(crate) async fn block_holding(
        &self,
        ip: IpAddr,
        pools: &[IpPool],
    ) -> Result<Option<StoredBlock>, IpamError> {
        if let Some(pool) = pools.iter().find(|p| p.cidr.contains(&ip))
            && let Some(stored) = self.read_block(&block::block_of(&pool.cidr, ip)).await?
        {
            return Ok(Some(stored));
        }
        let blocks = self.blocks(IpVersion::of_addr(&ip)).await?;
        if let Some(invalid) = blocks.invalid.iter().find(|b| b.cidr.contains(&ip)) {
            return Err(IpamError::Corrupt {
                key: invalid.key.clone(),
                reason: invalid.reason.clone(),
            });
        }
        Ok(blocks
            .valid
            .into_iter()
            .find(|b| b.value.cidr.contains(&ip)))
    }

    /// Writes a block change and the matching change of the handle record (as read) in one
    /// transaction; returns false when something read has changed since.
    pub(crate) async fn write_block(
        &self,
        write: BlockWrite,
        handle: (&str, Option<Stored<AllocationHandle>>),
        cidr: &IpNet,
        delta: i64,
        affinity: Option<Key>,
    ) -> Result<bool, IpamError> {
        let mut txn = Txn::default();
        write.add_to(&mut txn);
        if let Some(affinity) = affinity {
            txn.ops.push(TxnOp::Put {
                key: affinity.to_string(),
                value: String::new(),
            });
        }
        if delta != 0 {
            handle_change(&mut txn, handle, cidr, delta);
        }
        Ok(txn.commit(self.datastore()).await?)
    }

    /// The cluster's IPAM settings (defaults when unset); an invalid config is an error naming
    /// the key and field.
    pub(crate) async fn settings(&self) -> Result<IpamSettings, IpamError> {
        Ok(self.stored_settings().await?.0)
    }

    /// The settings and what their key was when read (absent, or its revision), remembered
    /// as a hint; an invalid config is forgotten.
    pub(crate) async fn stored_settings(&self) -> Result<(IpamSettings, Expect), IpamError> {
        let key = Key::IpamConfig.to_string();
        let read = self.datastore().get(&key).await?;
        let parsed = match &read {
            None => Ok((IpamSettings::default(), Expect::Absent)),
            Some(pair) => IpamSettings::parse(&pair.value)
                .map(|settings| (settings, Expect::ModRevision(pair.mod_revision)))
                .map_err(|e| IpamError::Corrupt {
                    key,
                    reason: format!("{e}"),
                }),
        };
        self.hints()
            .config(parsed.as_ref().ok().map(|(_, expect)| *expect));
        parsed
    }

    /// Writes the settings in Calico 1.4's JSON, refusing settings that fail
    /// [`IpamSettings::check`] (naming the key and field).
    pub(crate) async fn set_settings(&self, settings: &IpamSettings) -> Result<(), IpamError> {
        let key = Key::IpamConfig.to_string();
        settings.check().map_err(|e| IpamError::Corrupt {
            key: key.clone(),
            reason: e.to_string(),
        })?;
        self.datastore().put(&key, &settings.to_json()).await?;
        Ok(())
    }
}

/// A transaction being put together.
#[derive(Default)]
pub(crate) struct Txn {
    pub(crate) compares: Vec<Compare>,
    pub(crate) ops: Vec<TxnOp>,
}

impl Txn {
    pub(crate) async fn commit(
        self,
        store: &dyn Datastore,
    ) -> Result<bool, calico_datastore::DatastoreError> {
        store.transaction(&self.compares, &self.ops).await
    }
}

/// A block to write (or delete: `value` none), created or updated from a read revision.
pub(crate) struct BlockWrite {
    key: String,
    value: Option<String>,
    expect: Expect,
}

impl BlockWrite {
    /// A new block, in our dialect.
    pub(crate) fn create(block: &AllocationBlock) -> BlockWrite {
        BlockWrite::new(block, &Dialect::default(), Expect::Absent)
    }

    /// A changed block, in the dialect it was read in. A block that is empty and affine to no
    /// host is deleted instead (Calico 1.4: nobody would fill it again).
    pub(crate) fn update(block: &AllocationBlock, read: &StoredBlock) -> BlockWrite {
        let expect = Expect::ModRevision(read.revision);
        if block.affinity.is_none() && block::is_empty(block) {
            return BlockWrite {
                key: Key::Block { cidr: block.cidr }.to_string(),
                value: None,
                expect,
            };
        }
        BlockWrite::new(block, &read.dialect, expect)
    }

    fn new(block: &AllocationBlock, dialect: &Dialect, expect: Expect) -> BlockWrite {
        BlockWrite {
            key: Key::Block { cidr: block.cidr }.to_string(),
            value: Some(dialect::render_block(block, dialect)),
            expect,
        }
    }

    pub(crate) fn add_to(self, txn: &mut Txn) {
        txn.compares.push(Compare {
            key: self.key.clone(),
            expect: self.expect,
        });
        txn.ops.push(match self.value {
            Some(value) => TxnOp::Put {
                key: self.key,
                value,
            },
            None => TxnOp::Delete { key: self.key },
        });
    }
}

/// Adds the change of a handle record (as read) to `txn`: its count in `cidr` moved by `delta`.
pub(crate) fn handle_change(
    txn: &mut Txn,
    handle: (&str, Option<Stored<AllocationHandle>>),
    cidr: &IpNet,
    delta: i64,
) {
    handle_changes(txn, handle, &BTreeMap::from([(*cidr, delta)]));
}

/// Adds the change of a handle record (as read) to `txn`: its count in each block moved by the
/// block's delta. Returns the record written (none: deleted).
pub(crate) fn handle_changes(
    txn: &mut Txn,
    (handle, stored): (&str, Option<Stored<AllocationHandle>>),
    deltas: &BTreeMap<IpNet, i64>,
) -> Option<AllocationHandle> {
    let revision = stored.as_ref().map(|s| s.revision);
    let mut record = stored.map_or_else(
        || AllocationHandle {
            id: handle.to_owned(),
            block: BTreeMap::new(),
        },
        |s| s.value,
    );
    for (cidr, delta) in deltas {
        let count = record.block.entry(*cidr).or_default();
        *count = count.saturating_add_signed(*delta);
        if *count == 0 {
            record.block.remove(cidr);
        }
    }
    handle_write(txn, handle, revision, &record);
    (!record.block.is_empty()).then_some(record)
}

/// Writes (or, when it counts nothing, deletes) a handle record read at `revision`.
pub(crate) fn handle_write(
    txn: &mut Txn,
    handle: &str,
    revision: Option<i64>,
    record: &AllocationHandle,
) {
    let key = Key::Handle {
        handle: handle.to_owned(),
    }
    .to_string();
    txn.compares.push(Compare {
        key: key.clone(),
        expect: revision.map_or(Expect::Absent, Expect::ModRevision),
    });
    if record.block.is_empty() {
        if revision.is_some() {
            txn.ops.push(TxnOp::Delete { key });
        }
    } else {
        let value = serde_json::to_string(record).expect("a handle serialises");
        txn.ops.push(TxnOp::Put { key, value });
    }
}

fn parse<T>(pair: &KvPair) -> Result<T, IpamError>
where
    T: serde::de::DeserializeOwned + calico_model::Validate,
{
    from_json(&pair.value).map_err(|e| IpamError::Corrupt {
        key: pair.key.clone(),
        reason: e.to_string(),
    })
}

fn parse_block(pair: &KvPair) -> Result<StoredBlock, calico_model::error::ValidationError> {
    let (value, dialect) = dialect::parse_block(&pair.value)?;
    if let Ok(Key::Block { cidr }) = Key::parse(&pair.key)
        && cidr != value.cidr
    {
        let reason = format!("is {}, but the key names {cidr}", value.cidr);
        return Err(calico_model::error::ValidationError::new("cidr", reason));
    }
    Ok(StoredBlock {
        value,
        revision: pair.mod_revision,
        dialect,
    })
}

/// The field and reason of an unreadable value, as one line.
fn invalid_reason(error: &calico_model::error::ValidationError) -> String {
    error.to_string()
}

fn ip_family(version: IpVersion) -> &'static str {
    match version {
        IpVersion::V4 => "ipv4",
        IpVersion::V6 => "ipv6",
    }
}
