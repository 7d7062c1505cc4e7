//! Applying the desired state to a kernel: IP sets, the filter, nat and raw tables, and the
//! jumps from the kernel chains, for IPv4 and IPv6.
//!
//! - [`Dataplane::sync`] (start-up, and after a failure) makes everything Calico owns match
//!   the state exactly: it reloads every set and chain atomically per table, with no flush of
//!   the kernel chains and no moment without policy, deletes `cali-` chains and `cali4-`/`cali6-`
//!   sets nothing needs, and puts the kernel chains' jumps back first if someone removed them
//!   or pushed them down (see [`misplaced_jumps`]). Like routing (`crate::routing`) it runs in
//!   three steps: read the kernel ([`KernelReader`]), plan (a [`SyncPlan`]: what differs from the
//!   state, no I/O), execute the plan in order.
//! - [`Dataplane::apply`] applies one batch of the calculator's changes: only the sets and chains
//!   they touch.
//! - [`Dataplane::reader`] and [`Dataplane::repair_drift`] (the periodic check): the kernel is
//!   read on another thread, then only the chains and sets that drifted are rewritten (see
//!   [`super::drift`]), so the check never holds up an update for the time a full reload takes.
//!
//! Order matters for the kernel: sets are created before the rules that use them, and removed
//! only after those rules are gone.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use calico_calc::{Changes, DesiredState};
use calico_linux::{CommandError, Family, FirewallTables, IpSets, Ipset, Iptables, Netns};

use super::drift::{KernelReader, KernelSnapshot, Ledger, TABLES, normal_member};
use super::stamp;
use super::{
    Chain, FilterTable, IpVersion, all_pools_set, ipset_members, ipset_name, kernel_jumps,
    masquerade_pools_set, nat_chains, raw_chains, render_ipset_delta, render_ipset_updates,
    render_pool_ipsets, restore_input,
};
use crate::firewall::config::RenderConfig;

/// What a sync found to repair.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Repairs {
    /// Kernel-chain jumps that were missing and were put back.
    pub jumps: Vec<String>,
    /// `cali-` chains nothing needs, deleted.
    pub stale_chains: Vec<String>,
    /// Calico sets nothing needs, destroyed.
    pub stale_sets: Vec<String>,
    /// Chains whose rules someone changed (or removed), rewritten: `V4 filter cali-…`.
    pub drifted_chains: Vec<String>,
    /// Sets whose members someone changed (or that went), rebuilt.
    pub drifted_sets: Vec<String>,
    /// How many chains and sets a full sync had to write (not already as it would write them;
    /// all of them on a fresh host, none on a restart with everything in place).
    pub written_chains: usize,
    pub written_sets: usize,
}

impl Repairs {
    /// Whether nothing was found out of place (what a full sync wrote does not count).
    pub fn is_empty(&self) -> bool {
        Repairs {
            written_chains: 0,
            written_sets: 0,
            ..self.clone()
        } == Repairs::default()
    }
}

/// Running totals of what dataplanes wrote to the kernel, shared with whoever reports them
/// (Felix's metrics); one instance may outlive several dataplanes.
#[derive(Debug, Default)]
pub struct Written {
    /// Bytes of `iptables-restore` input (as stamped), all IP versions.
    pub iptables_bytes: AtomicU64,
    /// Bytes of `ipset restore` input.
    pub ipset_bytes: AtomicU64,
    /// Chains declared in that input: written, flushed or deleted (nf_tables: chains added,
    /// flushed or deleted).
    pub chains: AtomicU64,
    /// Operations of nf_tables transactions (rules, elements, chains, sets).
    pub nft_ops: AtomicU64,
}

/// The kernel's firewall and what this dataplane wrote to it.
#[derive(Debug)]
struct Kernel {
    iptables: Box<dyn FirewallTables>,
    ipset: Box<dyn IpSets>,
    ledger: Ledger,
    written: Arc<Written>,
}

impl Kernel {
    /// Writes restore input, each chain it declares stamped (see [`super::stamp`]).
    fn restore_tables(&mut self, family: Family, text: &str) -> Result<(), CommandError> {
        if text.is_empty() {
            return Ok(());
        }
        let text = stamp::stamp_script(text);
        self.ledger.tables_written(family, &text);
        let chains = text.lines().filter(|l| l.starts_with(':')).count();
        let written = &self.written;
        written.chains.fetch_add(chains as u64, Ordering::Relaxed);
        let bytes = text.len() as u64;
        written.iptables_bytes.fetch_add(bytes, Ordering::Relaxed);
        self.iptables.restore(family, &text)
    }

    /// Puts back the kernel chains' jumps `missing` (a read did not find them); returns the
    /// ones it inserted.
    fn ensure_jumps(&self, family: Family, missing: &[Jump]) -> Result<Vec<String>, CommandError> {
        let mut inserted = Vec::new();
        for &(table, chain, target) in missing {
            if self.iptables.ensure_jump(family, table, chain, target)? {
                inserted.push(format!("{family:?} {table} {chain} -> {target}"));
            }
        }
        Ok(inserted)
    }

    fn restore_sets(&mut self, text: &str) -> Result<(), CommandError> {
        if text.is_empty() {
            return Ok(());
        }
        self.ledger.sets_written(text);
        let bytes = text.len() as u64;
        self.written.ipset_bytes.fetch_add(bytes, Ordering::Relaxed);
        self.ipset.restore(text)
    }
}

/// One IP version's tables.
#[derive(Debug)]
struct Plane {
    family: Family,
    version: IpVersion,
    filter: FilterTable,
    /// Each set's members as last written (set id → addresses of this version), so that a
    /// change writes only the members that differ.
    sets: HashMap<String, BTreeSet<IpAddr>>,
    /// The raw and nat tables' chains as last written: a change writes only the chains that
    /// differ, and deletes those no longer rendered, without reading the kernel.
    raw: BTreeMap<String, Vec<String>>,
    nat: BTreeMap<String, Vec<String>>,
}

impl Plane {
    /// Restore input for the sets `ids` of the state: members added and deleted for a set
    /// written before, the whole set (rebuilt and swapped in) for a new one; remembers what
    /// it wrote.
    fn render_sets<'a>(
        &mut self,
        state: &DesiredState,
        ids: impl IntoIterator<Item = &'a str>,
    ) -> String {
        let mut out = String::new();
        let mut new = Vec::new();
        for id in ids {
            let members = ipset_members(state, self.version, id);
            match self.sets.get(id) {
                Some(old) => out.push_str(&render_ipset_delta(self.version, id, old, &members)),
                None => new.push(id),
            }
            self.sets.insert(id.to_owned(), members);
        }
        out.push_str(&render_ipset_updates(state, self.version, new));
        out
    }

    /// Restore input that rebuilds the sets `ids` whole (or destroys those the state does not
    /// have); remembers what it wrote.
    fn rebuild_sets<'a>(
        &mut self,
        state: &DesiredState,
        ids: impl IntoIterator<Item = &'a str> + Clone,
    ) -> String {
        self.remember_sets(state, ids.clone());
        render_ipset_updates(state, self.version, ids)
    }

    /// The chains of `table` as last rendered: name → rules.
    fn chains(&self, table: &str) -> BTreeMap<&str, &[String]> {
        match table {
            "filter" => self.filter.chains(),
            "nat" => as_slices(&self.nat),
            _ => as_slices(&self.raw),
        }
    }

    /// Notes the sets `ids` as holding the state's members (or gone, for those the state does
    /// not have).
    fn remember_sets<'a>(&mut self, state: &DesiredState, ids: impl IntoIterator<Item = &'a str>) {
        for id in ids {
            if state.ipsets.contains_key(id) {
                self.sets
                    .insert(id.to_owned(), ipset_members(state, self.version, id));
            } else {
                self.sets.remove(id);
            }
        }
    }
}

/// The dataplane of one network namespace.
#[derive(Debug)]
pub struct Dataplane {
    kernel: Kernel,
    config: RenderConfig,
    planes: [Plane; 2],
}

impl Dataplane {
    /// The dataplane of `netns`, through iptables and ipset.
    pub fn new(netns: Netns, config: RenderConfig) -> Dataplane {
        Dataplane::with_kernel(
            Box::new(Iptables::new(netns.clone())),
            Box::new(Ipset::new(netns)),
            config,
        )
    }

    /// The dataplane behind any implementation of the firewall seams (tests use
    /// [`calico_linux::fake::FakeKernel`]).
    pub fn with_kernel(
        iptables: Box<dyn FirewallTables>,
        ipset: Box<dyn IpSets>,
        config: RenderConfig,
    ) -> Dataplane {
        let plane = |family, version| Plane {
            family,
            version,
            filter: FilterTable::new(config.clone(), version),
            sets: HashMap::new(),
            raw: BTreeMap::new(),
            nat: BTreeMap::new(),
        };
        Dataplane {
            kernel: Kernel {
                iptables,
                ipset,
                ledger: Ledger::default(),
                written: Arc::default(),
            },
            planes: [
                plane(Family::V4, IpVersion::V4),
                plane(Family::V6, IpVersion::V6),
            ],
            config,
        }
    }

    /// Counts what this dataplane writes into `written` (shared with the reporter, and with the
    /// dataplane this one replaces) instead of a total of its own.
    pub fn counting_into(mut self, written: Arc<Written>) -> Dataplane {
        self.kernel.written = written;
        self
    }

    /// Makes the kernel match `state` in everything Calico owns (start-up, and after a
    /// failure). It reads the kernel first and writes only what is not already as it would
    /// write it: a chain whose stamp and rule count match (see [`super::stamp`]), a set with
    /// exactly the right members, are left alone, so a restart with everything in place
    /// rewrites nothing. Each table changes atomically; `cali-` chains and `cali4`/`cali6` sets
    /// nothing needs go, and the kernel chains' jumps are put back.
    pub fn sync(&mut self, state: &DesiredState) -> Result<Repairs, CommandError> {
        let snapshot = self.reader().read()?;
        let plan = self.plan_sync(state, &snapshot);
        self.execute_sync(plan)
    }

    /// What a full sync writes to take the kernel of `snapshot` to `state`: sets and chains not
    /// already as they would be written, `cali-` chains and sets nothing needs, jumps missing.
    /// No kernel I/O; the planes are left remembering `state` as written.
    pub fn plan_sync(&mut self, state: &DesiredState, snapshot: &KernelSnapshot) -> SyncPlan {
        let desired = desired_sets(state);
        let mut plan = SyncPlan::default();
        for plane in &mut self.planes {
            let version = plane.version;
            let prefix = ipset_name(version, "");
            let rebuild: Vec<&str> = state
                .ipsets
                .keys()
                .filter(|id| {
                    !snapshot
                        .set_holds(&format!("{prefix}{id}"), &desired[&format!("{prefix}{id}")])
                })
                .map(String::as_str)
                .collect();
            // After this sync every set holds the state's members: those already right, and
            // those rebuilt.
            plane.sets.clear();
            plane.remember_sets(state, state.ipsets.keys().map(String::as_str));
            let mut sets = render_ipset_updates(state, version, rebuild.iter().copied());
            let mut sets_written = rebuild.len();
            let pools = [all_pools_set(version), masquerade_pools_set(version)];
            if pools
                .iter()
                .any(|p| !snapshot.set_holds(p, &desired[p.as_str()]))
            {
                sets.push_str(&render_pool_ipsets(state, version));
                sets_written += 2;
            }
            plane.filter.rerender(state);
            plane.nat = chain_map(nat_chains(state, &self.config, version));
            plane.raw = chain_map(raw_chains(state, &self.config, version));
            let tables = TABLES
                .into_iter()
                .map(|table| plan_table(snapshot, plane.family, table, plane.chains(table)))
                .collect();
            plan.planes.push(PlaneSync {
                family: plane.family,
                sets,
                sets_written,
                tables,
                jumps: misplaced_jumps(snapshot, plane.family),
            });
        }
        plan.stale_sets = snapshot
            .set_names()
            .filter(|n| {
                (n.starts_with("cali4") || n.starts_with("cali6")) && !desired.contains_key(*n)
            })
            .map(str::to_owned)
            .collect();
        plan
    }

    /// Writes a [`SyncPlan`]: every plane's sets first (rules may use them), then each table's
    /// chains and the jumps, and last the sets nothing needs.
    fn execute_sync(&mut self, plan: SyncPlan) -> Result<Repairs, CommandError> {
        let mut repairs = Repairs::default();
        for plane in &plan.planes {
            self.kernel.restore_sets(&plane.sets)?;
            repairs.written_sets += plane.sets_written;
        }
        for plane in plan.planes {
            let family = plane.family;
            for table in plane.tables {
                let write: Vec<(&str, &[String])> = table
                    .write
                    .iter()
                    .map(|(name, rules)| (name.as_str(), rules.as_slice()))
                    .collect();
                let stale: Vec<&str> = table.stale.iter().map(String::as_str).collect();
                let script = restore_input(table.table, &write, &stale);
                self.kernel.restore_tables(family, &script)?;
                let held = table
                    .held
                    .iter()
                    .map(|(name, saved)| (name.as_str(), saved.as_slice()));
                self.kernel.ledger.adopt(family, table.table, held);
                repairs.written_chains += table.write.len();
                repairs.stale_chains.extend(table.stale);
            }
            repairs
                .jumps
                .extend(self.kernel.ensure_jumps(family, &plane.jumps)?);
        }
        let script: String = plan
            .stale_sets
            .iter()
            .map(|n| format!("destroy {n}\n"))
            .collect();
        self.kernel.restore_sets(&script)?;
        repairs.stale_sets = plan.stale_sets;
        Ok(repairs)
    }

    /// Applies one batch of changes.
    pub fn apply(&mut self, state: &DesiredState, changes: &Changes) -> Result<(), CommandError> {
        let (present, removed): (Vec<&str>, Vec<&str>) = changes
            .ipsets
            .iter()
            .map(String::as_str)
            .partition(|id| state.ipsets.contains_key(*id));
        let raw_touched = !changes.endpoints.is_empty() || !changes.policies.is_empty();
        let kernel = &mut self.kernel;
        for plane in &mut self.planes {
            let (family, version) = (plane.family, plane.version);
            kernel.restore_sets(&plane.render_sets(state, present.iter().copied()))?;
            if changes.pools {
                kernel.restore_sets(&render_pool_ipsets(state, version))?;
            }
            // One iptables-restore for the three tables: each run of the tool costs in
            // proportion to the size of the tables it loads, whatever it changes.
            let mut script = plane.filter.render_changes(state, changes);
            if raw_touched {
                let raw = chain_map(raw_chains(state, &self.config, version));
                script.push_str(&table_delta("raw", &mut plane.raw, raw));
            }
            // The nat table holds the endpoints' NAT mappings.
            if !changes.endpoints.is_empty() {
                let nat = chain_map(nat_chains(state, &self.config, version));
                script.push_str(&table_delta("nat", &mut plane.nat, nat));
            }
            kernel.restore_tables(family, &script)?;
            kernel.restore_sets(&plane.rebuild_sets(state, removed.iter().copied()))?;
        }
        Ok(())
    }

    /// A reader of the kernel's current firewall, to run on another thread; its snapshot goes
    /// to [`Dataplane::repair_drift`].
    pub fn reader(&self) -> KernelReader {
        KernelReader {
            tables: self.kernel.iptables.handle(),
            sets: self.kernel.ipset.handle(),
            generation: self.kernel.ledger.generation(),
        }
    }

    /// Rewrites what drifted since the snapshot's chains and sets were last known good: sets
    /// first (rules may use them), then chains (and `cali-` chains nothing needs go), the
    /// kernel chains' jumps, and last the sets nothing needs. What was written after the read
    /// began is left to the next check. Must follow at least one [`Dataplane::sync`].
    pub fn repair_drift(
        &mut self,
        snapshot: &KernelSnapshot,
        state: &DesiredState,
    ) -> Result<Repairs, CommandError> {
        let mut repairs = Repairs::default();
        let sets = self.kernel.ledger.set_drift(snapshot, &desired_sets(state));
        for plane in &mut self.planes {
            let version = plane.version;
            let prefix = ipset_name(version, "");
            let ids = state
                .ipsets
                .keys()
                .filter(|id| sets.drifted.contains(&format!("{prefix}{id}")))
                .map(String::as_str);
            self.kernel.restore_sets(&plane.rebuild_sets(state, ids))?;
            let pools = [all_pools_set(version), masquerade_pools_set(version)];
            if pools.iter().any(|p| sets.drifted.contains(p)) {
                self.kernel
                    .restore_sets(&render_pool_ipsets(state, version))?;
            }
        }
        repairs.drifted_sets = sets.drifted;
        for plane in &self.planes {
            let (family, version) = (plane.family, plane.version);
            // What the tables should hold now: the filter table as last rendered, nat and raw
            // from the state (they are small and rendered whole).
            let nat = chain_map(nat_chains(state, &self.config, version));
            let raw = chain_map(raw_chains(state, &self.config, version));
            for table in TABLES {
                let chains = match table {
                    "filter" => plane.filter.chains(),
                    "nat" => as_slices(&nat),
                    _ => as_slices(&raw),
                };
                let names: BTreeSet<&str> = chains.keys().copied().collect();
                let drift = self
                    .kernel
                    .ledger
                    .table_drift(snapshot, family, table, &names);
                let rewrite: Vec<(&str, &[String])> = drift
                    .drifted
                    .iter()
                    .map(|name| (name.as_str(), chains[name.as_str()]))
                    .collect();
                let stale: Vec<&str> = drift.stale.iter().map(String::as_str).collect();
                let script = restore_input(table, &rewrite, &stale);
                self.kernel.restore_tables(family, &script)?;
                let named = |name: &String| format!("{family:?} {table} {name}");
                repairs
                    .drifted_chains
                    .extend(drift.drifted.iter().map(named));
                repairs.stale_chains.extend(drift.stale);
            }
            repairs.jumps.extend(
                self.kernel
                    .ensure_jumps(family, &misplaced_jumps(snapshot, family))?,
            );
        }
        let script: String = sets
            .stale
            .iter()
            .map(|n| format!("destroy {n}\n"))
            .collect();
        self.kernel.restore_sets(&script)?;
        repairs.stale_sets = sets.stale;
        Ok(repairs)
    }
}

/// Every set the state needs, for both IP versions, with its members in one spelling.
fn desired_sets(state: &DesiredState) -> BTreeMap<String, BTreeSet<String>> {
    let mut sets = BTreeMap::new();
    for version in [IpVersion::V4, IpVersion::V6] {
        for (id, set) in &state.ipsets {
            let members = set
                .members
                .iter()
                .filter(|a| IpVersion::of_addr(a) == version)
                .map(|a| normal_member(&a.to_string()))
                .collect();
            sets.insert(ipset_name(version, id), members);
        }
        let pools = [
            (all_pools_set(version), &state.pools),
            (masquerade_pools_set(version), &state.masquerade_pools),
        ];
        for (name, cidrs) in pools {
            let members = cidrs
                .iter()
                .filter(|c| IpVersion::of_addr(&c.addr()) == version)
                .map(|c| normal_member(&c.to_string()))
                .collect();
            sets.insert(name, members);
        }
    }
    sets
}

/// Restore input for `table` that takes it from the chains `written` (as last written) to
/// `rendered`: only the chains that differ are rewritten, those gone are deleted. `written`
/// becomes `rendered`.
fn table_delta(
    table: &str,
    written: &mut BTreeMap<String, Vec<String>>,
    rendered: BTreeMap<String, Vec<String>>,
) -> String {
    let changed: Vec<(&str, &[String])> = rendered
        .iter()
        .filter(|(name, rules)| written.get(*name) != Some(*rules))
        .map(|(name, rules)| (name.as_str(), rules.as_slice()))
        .collect();
    let removed: Vec<&str> = written
        .keys()
        .map(String::as_str)
        .filter(|name| !rendered.contains_key(*name))
        .collect();
    let script = restore_input(table, &changed, &removed);
    *written = rendered;
    script
}

/// Chains by name.
fn chain_map(chains: Vec<Chain>) -> BTreeMap<String, Vec<String>> {
    chains.into_iter().map(|c| (c.name, c.rules)).collect()
}

/// A kernel chain's jump to one of ours: (table, kernel chain, our chain).
pub type Jump = (&'static str, &'static str, &'static str);

/// The jumps `snapshot` does not show in place for `family`: missing, not the first rule of
/// their kernel chain (other software inserted rules above them, as Docker does with
/// `iptables -I FORWARD`), or there more than once. Each is put back first, alone.
pub fn misplaced_jumps(snapshot: &KernelSnapshot, family: Family) -> Vec<Jump> {
    kernel_jumps()
        .into_iter()
        .filter(|(table, chain, target)| {
            let rules = snapshot.rules(family, table, chain).unwrap_or_default();
            let jump = format!("-j {target}");
            let copies = rules.iter().filter(|rule| **rule == jump).count();
            copies != 1 || rules.first() != Some(&jump)
        })
        .collect()
}

/// One table's part of a [`SyncPlan`].
fn plan_table(
    snapshot: &KernelSnapshot,
    family: Family,
    table: &'static str,
    chains: BTreeMap<&str, &[String]>,
) -> TableSync {
    let mut plan = TableSync {
        table,
        write: Vec::new(),
        stale: Vec::new(),
        held: Vec::new(),
    };
    for (name, rules) in &chains {
        let saved = snapshot.rules(family, table, name).unwrap_or_default();
        if stamp::holds(saved, rules) {
            plan.held.push(((*name).to_owned(), saved.to_vec()));
        } else {
            plan.write.push(((*name).to_owned(), rules.to_vec()));
        }
    }
    plan.stale = snapshot
        .chain_names(family, table)
        .into_iter()
        .filter(|name| name.starts_with("cali-") && !chains.contains_key(name))
        .map(str::to_owned)
        .collect();
    plan
}

/// What [`Dataplane::sync`] writes, from a read of the kernel ([`Dataplane::plan_sync`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SyncPlan {
    /// Per IP version, in the order written.
    pub planes: Vec<PlaneSync>,
    /// `cali4`/`cali6` sets nothing needs: destroyed last.
    pub stale_sets: Vec<String>,
}

impl SyncPlan {
    /// Whether executing it writes nothing (a restart with everything in place).
    pub fn is_empty(&self) -> bool {
        self.stale_sets.is_empty()
            && self.planes.iter().all(|p| {
                p.sets.is_empty()
                    && p.jumps.is_empty()
                    && p.tables
                        .iter()
                        .all(|t| t.write.is_empty() && t.stale.is_empty())
            })
    }
}

/// One IP version's part of a [`SyncPlan`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlaneSync {
    pub family: Family,
    /// `ipset restore` input: the sets that do not hold the state's members, rebuilt.
    pub sets: String,
    pub sets_written: usize,
    /// filter, nat, raw.
    pub tables: Vec<TableSync>,
    /// The kernel chains' jumps a read did not find.
    pub jumps: Vec<Jump>,
}

/// One table's part of a [`SyncPlan`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableSync {
    pub table: &'static str,
    /// Chains not already as they would be written (stamp and rule count): rewritten.
    pub write: Vec<(String, Vec<String>)>,
    /// `cali-` chains nothing needs: deleted.
    pub stale: Vec<String>,
    /// Chains already in place, with their saved rules (the ledger adopts them).
    pub held: Vec<(String, Vec<String>)>,
}

fn as_slices(chains: &BTreeMap<String, Vec<String>>) -> BTreeMap<&str, &[String]> {
    chains
        .iter()
        .map(|(name, rules)| (name.as_str(), rules.as_slice()))
        .collect()
}
