//! What this process last saw of the IPAM keys: the pools, the config, which blocks each host
//! is affine to, what each block held, which handles exist. A hint only decides what a batch
//! reads: a block is used only as read, and the transaction compares everything a hint stood
//! in for (see `batch`). A stale hint loses one transaction, never an address.
//!
//! One more thing is learnt rather than read. Every key a transaction writes gets the same
//! revision, which the datastore does not return; but when a block this process wrote is read
//! back unchanged, its revision is that transaction's, and so the revision of the handle
//! records written with it. A release then needs no read of its handle.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;

use calico_datastore::Expect;
use calico_model::IpVersion;
use calico_model::ipam::{AllocationBlock, AllocationHandle};
use ipnet::IpNet;

use crate::block;
use crate::stored::{Stored, StoredPool};

/// Entries remembered at most of each kind; past this that memory starts again from nothing
/// (a cluster has a few blocks per host, so this only bounds a process that reads a lot).
const MOST: usize = 4_096;

/// The handle records one transaction wrote (none: deleted).
type Written = Arc<Vec<(String, Option<AllocationHandle>)>>;

#[derive(Debug, Default)]
pub(crate) struct Hints {
    blocks: HashMap<IpNet, AllocationBlock>,
    /// The prefix lengths of the remembered blocks (to find the block of an address).
    prefixes: BTreeSet<u8>,
    affine: HashMap<(String, IpVersion), Vec<IpNet>>,
    pools: HashMap<IpVersion, Vec<StoredPool>>,
    /// The config key as last read valid (absent, or its revision).
    config: Option<Expect>,
    /// Handles last seen to have a record.
    handles: HashSet<String>,
    /// Handle records whose revision is known.
    records: HashMap<String, Stored<AllocationHandle>>,
    /// Blocks this process wrote, with the handle records of the same transaction.
    written: HashMap<IpNet, (AllocationBlock, Written)>,
}

impl Hints {
    /// Remembers the blocks `host` was last seen affine to.
    pub(crate) fn affine(&mut self, host: &str, version: IpVersion, cidrs: &[IpNet]) {
        bound(&mut self.affine);
        self.affine
            .insert((host.to_owned(), version), cidrs.to_vec());
    }

    /// Remembers a block as read; when it is still as this process wrote it, learns the
    /// revision of the handle records written with it.
    pub(crate) fn block_read(&mut self, block: &AllocationBlock, revision: i64) {
        if let Some((wrote, handles)) = self.written.remove(&block.cidr)
            && wrote == *block
        {
            for (handle, record) in handles.iter() {
                if let Some(value) = record {
                    let value = value.clone();
                    self.record(handle, Some(Stored { value, revision }));
                }
            }
        }
        self.block(block);
    }

    /// Remembers the blocks and handle records one transaction wrote.
    pub(crate) fn wrote(&mut self, blocks: &[&AllocationBlock], handles: Written) {
        for (handle, record) in handles.iter() {
            self.records.remove(handle);
            self.handle(handle, record.is_some());
        }
        bound(&mut self.written);
        for block in blocks {
            self.written
                .insert(block.cidr, ((*block).clone(), handles.clone()));
            self.block(block);
        }
    }

    fn block(&mut self, block: &AllocationBlock) {
        if self.blocks.len() >= MOST {
            self.prefixes.clear();
        }
        bound(&mut self.blocks);
        self.prefixes.insert(block.cidr.prefix_len());
        self.blocks.insert(block.cidr, block.clone());
    }

    /// Remembers the pools of a version as listed.
    pub(crate) fn pools(&mut self, version: IpVersion, pools: &[StoredPool]) {
        self.pools.insert(version, pools.to_vec());
    }

    /// Remembers the config key as read valid; none when it was not.
    pub(crate) fn config(&mut self, read: Option<Expect>) {
        self.config = read;
    }

    /// Remembers a handle record as read (none: there is none).
    pub(crate) fn record(&mut self, handle: &str, read: Option<Stored<AllocationHandle>>) {
        self.handle(handle, read.is_some());
        match read {
            Some(read) => {
                bound(&mut self.records);
                self.records.insert(handle.to_owned(), read);
            }
            None => {
                self.records.remove(handle);
            }
        }
    }

    fn handle(&mut self, handle: &str, exists: bool) {
        if !exists {
            self.handles.remove(handle);
            return;
        }
        if self.handles.len() >= MOST * 64 {
            self.handles.clear();
        }
        self.handles.insert(handle.to_owned());
    }

    /// The blocks `host` was last seen affine to; none when never seen.
    pub(crate) fn affine_of(&self, host: &str, version: IpVersion) -> Option<Vec<IpNet>> {
        self.affine.get(&(host.to_owned(), version)).cloned()
    }

    /// The pools of a version as last listed; none when never listed.
    pub(crate) fn pools_of(&self, version: IpVersion) -> Option<Vec<StoredPool>> {
        self.pools.get(&version).cloned()
    }

    /// The config key as last read valid.
    pub(crate) fn config_read(&self) -> Option<Expect> {
        self.config
    }

    /// Whether `handle` had a record when last read or written.
    pub(crate) fn handle_exists(&self, handle: &str) -> bool {
        self.handles.contains(handle)
    }

    /// The record of `handle` and its revision, when known.
    pub(crate) fn record_of(&self, handle: &str) -> Option<Stored<AllocationHandle>> {
        self.records.get(handle).cloned()
    }

    /// The remembered block that holds `ip`.
    pub(crate) fn block_of(&self, ip: IpAddr) -> Option<&AllocationBlock> {
        self.prefixes.iter().find_map(|&prefix| {
            let cidr = IpNet::new(ip, prefix).ok()?.trunc();
            self.blocks.get(&cidr)
        })
    }

    /// The handle `ip` was assigned to when its block was last seen.
    pub(crate) fn handle_of(&self, ip: IpAddr) -> Option<String> {
        let block = self.block_of(ip)?;
        let ordinal = block::ordinal_of(&block.cidr, ip)?;
        block::handle_at(block, ordinal)?.map(str::to_owned)
    }
}

fn bound<K, V>(map: &mut HashMap<K, V>) {
    if map.len() >= MOST {
        map.clear();
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn block_of_h1(cidr: &str) -> AllocationBlock {
        let attribute = crate::block::attribute("h1", &Default::default());
        let mut b = block::empty_block(cidr.parse().unwrap(), Some("node1"), false);
        block::assign(&mut b, 1, &attribute);
        b
    }

    #[test]
    fn an_address_is_traced_to_its_block_and_handle_whatever_the_block_size() {
        let mut hints = Hints::default();
        hints.block_read(&block_of_h1("10.0.0.64/26"), 5);
        hints.block_read(&block_of_h1("10.1.0.0/28"), 6);
        let small = hints.block_of("10.1.0.3".parse().unwrap()).unwrap();
        assert_eq!(small.cidr.to_string(), "10.1.0.0/28");
        assert_eq!(
            hints.handle_of("10.0.0.64".parse().unwrap()),
            Some("h1".into())
        );
        assert_eq!(hints.handle_of("10.0.0.65".parse().unwrap()), None);
        assert!(hints.block_of("10.2.0.1".parse().unwrap()).is_none());
    }

    #[test]
    fn a_handle_revision_is_learnt_only_from_its_block_read_back_unchanged() {
        let block = block_of_h1("10.0.0.64/26");
        let record = AllocationHandle {
            id: "h1".into(),
            block: BTreeMap::from([(block.cidr, 1)]),
        };
        let written: Written = Arc::new(vec![("h1".into(), Some(record.clone()))]);
        let mut hints = Hints::default();
        hints.wrote(&[&block], written.clone());
        assert!(hints.handle_exists("h1"));
        assert!(
            hints.record_of("h1").is_none(),
            "the revision is not known yet"
        );
        // Someone else changed the block: nothing is learnt.
        let mut changed = block.clone();
        block::assign(
            &mut changed,
            1,
            &crate::block::attribute("h2", &Default::default()),
        );
        hints.block_read(&changed, 41);
        assert!(hints.record_of("h1").is_none());
        // Read back as written: the handle record has the block's revision.
        hints.wrote(&[&block], written);
        hints.block_read(&block, 42);
        let learnt = hints.record_of("h1").unwrap();
        assert_eq!((learnt.value, learnt.revision), (record, 42));
    }
}
