//! [`Nft`]: one table of one namespace's nf_tables, over netlink; and [`probe`], which tells
//! whether nf_tables works there at all.
//!
//! The handle keeps its socket open between calls (a new one after any socket error) and a
//! cache of the kinds of the table's sets: an element or a lookup is checked against the kind
//! of its set before it is sent, because the kernel cannot tell an address from a one-address
//! interval of the same length (it would take an IPv4 address into an IPv4 net set as an
//! interval open to the end of the address space). A set the cache does not know is looked up
//! with one set dump.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use super::decode::{self, Raw};
use super::encode;
use super::socket::{Conn, KernelError};
use super::wire::*;
use super::{
    Batch, ChainSnapshot, Element, Expr, IpFamily, NfTables, NftError, Op, SetKind, SetSnapshot,
    SetSpec, Table, TableFamily, TableSnapshot,
};
use crate::Netns;

/// How often a read starts over because the ruleset changed while it was read.
const READ_ATTEMPTS: usize = 5;

/// One nf_tables table of a network namespace, programmed over netlink.
#[derive(Debug)]
pub struct Nft {
    netns: Netns,
    table: Table,
    conn: Mutex<Option<Conn>>,
    /// Kinds of the table's sets as last seen (dumped or written by this handle).
    kinds: Mutex<BTreeMap<String, SetKind>>,
}

impl Nft {
    /// A handle on `table` in `netns`; the socket opens on first use.
    pub fn new(netns: Netns, table: Table) -> Nft {
        Nft {
            netns,
            table,
            conn: Mutex::new(None),
            kinds: Mutex::new(BTreeMap::new()),
        }
    }

    pub fn netns(&self) -> &Netns {
        &self.netns
    }

    /// Runs `f` on the open connection (opening it first); a socket error closes it.
    fn with_conn<T>(
        &self,
        f: impl FnOnce(&mut Conn) -> Result<T, NftError>,
    ) -> Result<T, NftError> {
        let mut slot = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            *slot = Some(Conn::open(&self.netns)?);
        }
        let result = f(slot.as_mut().expect("opened above"));
        if matches!(result, Err(NftError::Socket { .. })) {
            *slot = None;
        }
        result
    }

    fn kinds(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, SetKind>> {
        self.kinds.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Dumps the table's sets into the kind cache.
    fn refresh_kinds(&self, conn: &mut Conn) -> Result<(), NftError> {
        let specs = self.set_specs(conn)?.unwrap_or_default();
        *self.kinds() = specs.into_iter().map(|s| (s.name, s.kind)).collect();
        Ok(())
    }

    fn encode(&self, conn: &Conn, batch: &Batch) -> Result<encode::Encoded, NftError> {
        let kinds = self.kinds().clone();
        encode::batch(&self.table, batch, conn.seq(), &|set: &str| {
            kinds.get(set).copied()
        })
    }

    fn apply_on(&self, conn: &mut Conn, batch: &Batch) -> Result<(), NftError> {
        if let Err(e) = check_table(&self.table) {
            return Err(NftError::Invalid {
                index: 0,
                op: format!("table {}", self.table),
                reason: e,
            });
        }
        let unknown = {
            let kinds = self.kinds();
            referenced_sets(batch)
                .iter()
                .any(|s| !kinds.contains_key(*s))
        };
        if unknown {
            self.refresh_kinds(conn)?;
        }
        let encoded = match self.encode(conn, batch) {
            // The cache may be stale (another handle recreated a set): look again, once.
            Err(NftError::Invalid { .. }) if !unknown && !referenced_sets(batch).is_empty() => {
                self.refresh_kinds(conn)?;
                self.encode(conn, batch)?
            }
            other => other?,
        };
        super::elements::open_nets(batch, &mut |set| self.current_elements(conn, set))?;
        conn.transact(&encoded, &batch.ops)?;
        let mut kinds = self.kinds();
        for op in &batch.ops {
            match op {
                Op::AddSet(spec) => {
                    kinds.entry(spec.name.clone()).or_insert(spec.kind);
                }
                Op::DeleteSet(set) => {
                    kinds.remove(set);
                }
                Op::DeleteTable => kinds.clear(),
                _ => {}
            }
        }
        Ok(())
    }

    /// The specs of the table's named sets, or `None` without the table.
    fn set_specs(&self, conn: &mut Conn) -> Result<Option<Vec<SetSpec>>, NftError> {
        let name = self.table.name.clone();
        let payloads = match conn.dump(NFT_MSG_GETSET, |w| w.put_str(NFTA_SET_TABLE, &name))? {
            Ok(p) => p,
            Err(e) if e.errno == nix::libc::ENOENT => return Ok(None),
            Err(e) => return Err(self.dump_error("sets", &e)),
        };
        let mut specs = Vec::new();
        for p in payloads {
            match decode::set(&p).map_err(|r| self.unreadable("a set", r))? {
                Some((table, spec)) if table == self.table.name => specs.push(spec),
                _ => {}
            }
        }
        Ok(Some(specs))
    }

    fn dump_error(&self, what: &str, e: &KernelError) -> NftError {
        NftError::Socket {
            netns: self.netns.to_string(),
            reason: format!("dumping the {what} of table {}: {}", self.table, e.reason()),
        }
    }

    fn unreadable(&self, what: &str, reason: String) -> NftError {
        NftError::Unreadable {
            table: self.table.to_string(),
            what: what.into(),
            reason,
        }
    }

    /// One attempt at reading the table; `Ok(Err(()))` when the ruleset changed meanwhile.
    fn read_once(&self, conn: &mut Conn) -> Result<Result<Option<TableSnapshot>, ()>, NftError> {
        let generation = conn.generation()?;
        let name = self.table.name.clone();
        match conn.get(NFT_MSG_GETTABLE, |w| w.put_str(NFTA_TABLE_NAME, &name))? {
            Err(e) if e.errno == nix::libc::ENOENT => return Ok(Ok(None)),
            Err(e) => return Err(self.dump_error("table", &e)),
            Ok(_) => {}
        }
        let mut snapshot = TableSnapshot::default();
        let Some(chains) = self.dumped(conn, NFT_MSG_GETCHAIN, "chains", |w| {
            w.put_str(NFTA_CHAIN_TABLE, &name)
        })?
        else {
            return Ok(Err(()));
        };
        for p in chains {
            let (table, spec) = decode::chain(&p).map_err(|r| self.unreadable("a chain", r))?;
            if table == name {
                snapshot.chains.insert(
                    spec.name.clone(),
                    ChainSnapshot {
                        spec,
                        rules: Vec::new(),
                    },
                );
            }
        }
        let Some(rules) = self.dumped(conn, NFT_MSG_GETRULE, "rules", |w| {
            w.put_str(NFTA_RULE_TABLE, &name)
        })?
        else {
            return Ok(Err(()));
        };
        for p in rules {
            let (table, chain, rule) =
                decode::rule(&p).map_err(|r| self.unreadable("a rule", r))?;
            match snapshot.chains.get_mut(&chain) {
                Some(c) if table == name => c.rules.push(rule),
                _ => {}
            }
        }
        let Some(specs) = self.set_specs(conn)? else {
            return Ok(Err(()));
        };
        for spec in specs {
            let Some(elements) = self.elements(conn, &spec.name, spec.kind)? else {
                return Ok(Err(()));
            };
            snapshot
                .sets
                .insert(spec.name.clone(), SetSnapshot { spec, elements });
        }
        if conn.generation()? != generation {
            return Ok(Err(()));
        }
        *self.kinds() = snapshot
            .sets
            .iter()
            .map(|(n, s)| (n.clone(), s.spec.kind))
            .collect();
        Ok(Ok(Some(snapshot)))
    }

    /// The elements of one set, read as `kind`; `None` when the set is gone or changed while
    /// it was read.
    fn elements(
        &self,
        conn: &mut Conn,
        set: &str,
        kind: SetKind,
    ) -> Result<Option<BTreeSet<Element>>, NftError> {
        let name = self.table.name.clone();
        let Some(payloads) = self.dumped(conn, NFT_MSG_GETSETELEM, "elements", |w| {
            w.put_str(NFTA_SET_ELEM_LIST_TABLE, &name);
            w.put_str(NFTA_SET_ELEM_LIST_SET, set);
        })?
        else {
            return Ok(None);
        };
        let mut raw: Vec<Raw> = Vec::new();
        let what = || format!("an element of set {set}");
        for p in &payloads {
            decode::raw_elements(p, &mut raw).map_err(|r| self.unreadable(&what(), r))?;
        }
        decode::elements(kind, raw)
            .map(Some)
            .map_err(|r| self.unreadable(&what(), r))
    }

    /// The elements of a set as they are now, for `elements::open_nets`.
    fn current_elements(&self, conn: &mut Conn, set: &str) -> Result<BTreeSet<Element>, NftError> {
        let kind = self.kinds().get(set).copied();
        match kind {
            Some(kind) => Ok(self.elements(conn, set, kind)?.unwrap_or_default()),
            None => Ok(BTreeSet::new()),
        }
    }

    /// A dump's payloads; `None` when it must be read again (the ruleset changed, or what it
    /// names went away meanwhile).
    fn dumped(
        &self,
        conn: &mut Conn,
        kind: u16,
        what: &str,
        attrs: impl FnOnce(&mut Writer),
    ) -> Result<Option<Vec<Vec<u8>>>, NftError> {
        match conn.dump(kind, attrs)? {
            Ok(p) => Ok(Some(p)),
            Err(e) if e.errno == nix::libc::EINTR || e.errno == nix::libc::ENOENT => Ok(None),
            Err(e) => Err(self.dump_error(what, &e)),
        }
    }
}

fn check_table(table: &Table) -> Result<(), String> {
    super::check::name("table", &table.name)
}

/// The sets a batch looks up or changes the elements of.
fn referenced_sets(batch: &Batch) -> BTreeSet<&str> {
    let mut names = BTreeSet::new();
    for op in &batch.ops {
        match op {
            Op::AddElements { set, .. } | Op::DeleteElements { set, .. } => {
                names.insert(set.as_str());
            }
            Op::AddRule { rule, .. } => {
                for e in &rule.exprs {
                    match e {
                        Expr::AddrInSet { set, .. } => names.insert(set.as_str()),
                        Expr::Vmap { map, .. } => names.insert(map.as_str()),
                        _ => false,
                    };
                }
            }
            _ => {}
        }
    }
    let created: BTreeSet<&str> = batch
        .ops
        .iter()
        .filter_map(|op| match op {
            Op::AddSet(spec) => Some(spec.name.as_str()),
            _ => None,
        })
        .collect();
    names.retain(|n| !created.contains(n));
    names
}

impl NfTables for Nft {
    fn apply(&self, batch: &Batch) -> Result<(), NftError> {
        if batch.is_empty() {
            return Ok(());
        }
        self.with_conn(|conn| self.apply_on(conn, batch))
    }

    fn read(&self) -> Result<Option<TableSnapshot>, NftError> {
        self.with_conn(|conn| {
            for _ in 0..READ_ATTEMPTS {
                if let Ok(snapshot) = self.read_once(conn)? {
                    return Ok(snapshot);
                }
            }
            Err(NftError::Socket {
                netns: conn.netns().to_owned(),
                reason: format!(
                    "table {} changed during each of {READ_ATTEMPTS} reads: another program keeps writing nf_tables",
                    self.table
                ),
            })
        })
    }

    fn table(&self) -> &Table {
        &self.table
    }

    fn handle(&self) -> Box<dyn NfTables> {
        Box::new(Nft::new(self.netns.clone(), self.table.clone()))
    }
}

/// Whether nf_tables works in `netns`: a socket, the generation, and a transaction that
/// creates (and in the same transaction deletes) a scratch table with the features the
/// nftables backend needs (a base chain, an interval set, a concatenated interval verdict
/// map). `Err` says why not, for `NFTablesMode=Auto` to name.
pub fn probe(netns: &Netns) -> Result<(), NftError> {
    let mut conn = Conn::open(netns).map_err(|e| {
        explain(
            netns,
            e,
            "a netfilter netlink socket cannot be opened (no nfnetlink in this kernel?)",
        )
    })?;
    conn.generation().map_err(|e| {
        explain(
            netns,
            e,
            "the kernel does not answer nf_tables requests (no nf_tables in this kernel?)",
        )
    })?;
    let table = Table {
        family: TableFamily::Inet,
        name: format!("calico-probe-{}", std::process::id()),
    };
    let batch = Batch {
        ops: vec![
            Op::AddTable,
            Op::AddChain(super::ChainSpec {
                name: "probe".into(),
                base: Some(super::BaseChain {
                    kind: super::ChainType::Filter,
                    hook: super::Hook::Forward,
                    priority: 0,
                    policy: super::ChainPolicy::Accept,
                }),
            }),
            Op::AddSet(SetSpec {
                name: "nets".into(),
                kind: SetKind::Nets(IpFamily::V4),
                comment: None,
            }),
            Op::AddSet(SetSpec {
                name: "ports".into(),
                kind: SetKind::ProtoPortVmap,
                comment: None,
            }),
            Op::DeleteTable,
        ],
    };
    let encoded = encode::batch(&table, &batch, conn.seq(), &|_: &str| None)?;
    conn.transact(&encoded, &batch.ops)
        .map_err(|e| explain(netns, e, "nf_tables refuses a test transaction"))
}

fn explain(netns: &Netns, e: NftError, what: &str) -> NftError {
    NftError::Socket {
        netns: netns.to_string(),
        reason: format!("{what}: {e}"),
    }
}
