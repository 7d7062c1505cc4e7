//! Applying the desired state to a kernel: IP sets, the filter, nat and raw tables, and the
//! jumps from the kernel chains, for IPv4 and IPv6.
//!
//! - [`Dataplane::sync`] (start-up, and after a failure) makes everything Calico owns match
//!   the state exactly: it reloads every set and chain atomically per table, with no flush of
//!   the kernel chains and no moment without policy, deletes `cali-` chains and `cali4-`/`cali6-`
//!   sets nothing needs, and puts the kernel chains' jumps back if someone removed them.
//! - [`Dataplane::apply`] applies one batch of the calculator's changes: only the sets and chains
//!   they touch.
//! - [`Dataplane::reader`] and [`Dataplane::repair_drift`] (the periodic check): the kernel is
//!   read on another thread, then only the chains and sets that drifted are rewritten (see
//!   [`crate::drift`]), so the check never holds up an update for the time a full reload takes.
//!
//! Order matters for the kernel: sets are created before the rules that use them, and removed
//! only after those rules are gone.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use calico_calc::{Changes, DesiredState};
use calico_linux::{CommandError, Family, FirewallTables, IpSets, Ipset, Iptables, Netns};

use crate::drift::{
    KernelReader, KernelSnapshot, Ledger, TABLES, normal_member, parse_saved_chains,
};
use crate::render::config::RenderConfig;
use crate::render::{
    FilterTable, IpVersion, all_pools_set, ipset_members, ipset_name, kernel_jumps,
    masquerade_pools_set, render_ipset_delta, render_ipset_updates, render_nat, render_pool_ipsets,
    render_raw,
};
use crate::stamp;

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
    /// Writes restore input, each chain it declares stamped (see [`crate::stamp`]).
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

    /// Puts back the kernel chains' jumps to our chains (those `in_place` says a read found are
    /// not asked about again); returns the ones it inserted.
    fn ensure_jumps(
        &self,
        family: Family,
        in_place: impl Fn(&str, &str, &str) -> bool,
    ) -> Result<Vec<String>, CommandError> {
        let mut inserted = Vec::new();
        for (table, chain, target) in kernel_jumps() {
            if !in_place(table, chain, target)
                && self.iptables.ensure_jump(family, table, chain, target)?
            {
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
    /// write it: a chain whose stamp and rule count match (see [`crate::stamp`]), a set with
    /// exactly the right members, are left alone, so a restart with everything in place
    /// rewrites nothing. Each table changes atomically; `cali-` chains and `cali4`/`cali6` sets
    /// nothing needs go, and the kernel chains' jumps are put back.
    pub fn sync(&mut self, state: &DesiredState) -> Result<Repairs, CommandError> {
        let snapshot = self.reader().read()?;
        let mut repairs = Repairs::default();
        let desired = desired_sets(state);
        for plane in &mut self.planes {
            let version = plane.version;
            let prefix = ipset_name(version, "");
            let rebuild: Vec<&str> = state
                .ipsets
                .keys()
                .filter(|id| {
                    let name = format!("{prefix}{id}");
                    !snapshot.set_holds(&name, &desired[&name])
                })
                .map(String::as_str)
                .collect();
            // After this sync every set holds the state's members: those already right, and
            // those rebuilt below.
            plane.sets.clear();
            plane.remember_sets(state, state.ipsets.keys().map(String::as_str));
            self.kernel.restore_sets(&render_ipset_updates(
                state,
                version,
                rebuild.iter().copied(),
            ))?;
            repairs.written_sets += rebuild.len();
            let pools = [all_pools_set(version), masquerade_pools_set(version)];
            if pools
                .iter()
                .any(|p| !snapshot.set_holds(p, &desired[p.as_str()]))
            {
                self.kernel
                    .restore_sets(&render_pool_ipsets(state, version))?;
                repairs.written_sets += 2;
            }
        }
        for plane in &mut self.planes {
            let family = plane.family;
            plane.filter.render_all(state);
            plane.nat = parse_saved_chains(&render_nat(state, &self.config, plane.version));
            plane.raw = parse_saved_chains(&render_raw(state, &self.config, plane.version));
            for table in TABLES {
                let chains: BTreeMap<&str, &[String]> = match table {
                    "filter" => plane.filter.chains(),
                    "nat" => as_slices(&plane.nat),
                    _ => as_slices(&plane.raw),
                };
                let (held, write): (Vec<_>, Vec<_>) = chains
                    .iter()
                    .map(|(n, r)| (*n, *r))
                    .partition(|(name, rules)| {
                        let saved = snapshot.rules(family, table, name).unwrap_or_default();
                        stamp::holds(saved, rules)
                    });
                let stale: Vec<String> = snapshot
                    .chain_names(family, table)
                    .into_iter()
                    .filter(|name| name.starts_with("cali-") && !chains.contains_key(name))
                    .map(str::to_owned)
                    .collect();
                let script = restore_script(table, &write, &stale);
                self.kernel.restore_tables(family, &script)?;
                let held = held.into_iter().map(|(name, _)| {
                    let saved = snapshot.rules(family, table, name).unwrap_or_default();
                    (name, saved)
                });
                self.kernel.ledger.adopt(family, table, held);
                repairs.written_chains += write.len();
                repairs.stale_chains.extend(stale);
            }
            let in_place = |table: &str, chain: &str, target: &str| {
                let rules = snapshot.rules(family, table, chain).unwrap_or_default();
                rules.iter().any(|rule| *rule == format!("-j {target}"))
            };
            repairs
                .jumps
                .extend(self.kernel.ensure_jumps(family, in_place)?);
        }
        let stale: Vec<String> = snapshot
            .set_names()
            .filter(|n| {
                (n.starts_with("cali4") || n.starts_with("cali6")) && !desired.contains_key(*n)
            })
            .map(str::to_owned)
            .collect();
        let script: String = stale.iter().map(|n| format!("destroy {n}\n")).collect();
        self.kernel.restore_sets(&script)?;
        repairs.stale_sets = stale;
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
                let raw = render_raw(state, &self.config, version);
                script.push_str(&table_delta("raw", &mut plane.raw, &raw));
            }
            // The nat table holds the endpoints' NAT mappings.
            if !changes.endpoints.is_empty() {
                let nat = render_nat(state, &self.config, version);
                script.push_str(&table_delta("nat", &mut plane.nat, &nat));
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
            for table in TABLES {
                let rendered = match table {
                    "filter" => None,
                    "nat" => Some(render_nat(state, &self.config, version)),
                    _ => Some(render_raw(state, &self.config, version)),
                };
                let parsed = rendered.as_deref().map(parse_saved_chains);
                let chains: BTreeMap<&str, &[String]> = match &parsed {
                    None => plane.filter.chains(),
                    Some(parsed) => parsed
                        .iter()
                        .map(|(name, rules)| (name.as_str(), rules.as_slice()))
                        .collect(),
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
                let script = restore_script(table, &rewrite, &drift.stale);
                self.kernel.restore_tables(family, &script)?;
                let named = |name: &String| format!("{family:?} {table} {name}");
                repairs
                    .drifted_chains
                    .extend(drift.drifted.iter().map(named));
                repairs.stale_chains.extend(drift.stale);
            }
            let in_place = |table: &str, chain: &str, target: &str| {
                let rules = snapshot.rules(family, table, chain).unwrap_or_default();
                rules.iter().any(|rule| *rule == format!("-j {target}"))
            };
            repairs
                .jumps
                .extend(self.kernel.ensure_jumps(family, in_place)?);
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

/// Restore input for `table` that takes it from the chains `written` (as last written) to those
/// `rendered` declares: only the chains that differ are rewritten, those gone are deleted.
/// `written` becomes the rendered chains.
fn table_delta(table: &str, written: &mut BTreeMap<String, Vec<String>>, rendered: &str) -> String {
    let new = parse_saved_chains(rendered);
    let changed: Vec<(&str, &[String])> = new
        .iter()
        .filter(|(name, rules)| written.get(*name) != Some(*rules))
        .map(|(name, rules)| (name.as_str(), rules.as_slice()))
        .collect();
    let removed: Vec<String> = written
        .keys()
        .filter(|name| !new.contains_key(*name))
        .cloned()
        .collect();
    let script = restore_script(table, &changed, &removed);
    *written = new;
    script
}

/// Restore input that declares (flushes) and refills `chains`, then deletes `removed`
/// (declared first, so they are empty, and deleted last, once nothing refers to them).
fn restore_script(table: &str, chains: &[(&str, &[String])], removed: &[String]) -> String {
    if chains.is_empty() && removed.is_empty() {
        return String::new();
    }
    let mut script = format!("*{table}\n");
    for name in chains
        .iter()
        .map(|(name, _)| *name)
        .chain(removed.iter().map(String::as_str))
    {
        script.push_str(&format!(":{name} - [0:0]\n"));
    }
    for (name, rules) in chains {
        for rule in *rules {
            script.push_str(&format!("-A {name} {rule}\n"));
        }
    }
    for name in removed {
        script.push_str(&format!("-X {name}\n"));
    }
    script.push_str("COMMIT\n");
    script
}

fn as_slices(chains: &BTreeMap<String, Vec<String>>) -> BTreeMap<&str, &[String]> {
    chains
        .iter()
        .map(|(name, rules)| (name.as_str(), rules.as_slice()))
        .collect()
}
