//! Applying the desired state to a kernel: IP sets, the filter, nat and raw tables, and the
//! jumps from the kernel chains, for IPv4 and IPv6.
//!
//! - [`Dataplane::sync`] (start-up, and the periodic repair) makes everything Calico owns match
//!   the state exactly: it reloads every set and chain atomically per table, with no flush of
//!   the kernel chains and no moment without policy, deletes `cali-` chains and `cali4-`/`cali6-`
//!   sets nothing needs, and puts the kernel chains' jumps back if someone removed them.
//! - [`Dataplane::apply`] applies one batch of the calculator's changes: only the sets and chains
//!   they touch.
//!
//! Order matters for the kernel: sets are created before the rules that use them, and removed
//! only after those rules are gone.

use std::collections::BTreeSet;

use calico_calc::{Changes, DesiredState};
use calico_linux::{CommandError, Family, FirewallTables, IpSets, Ipset, Iptables, Netns};

use crate::render::config::RenderConfig;
use crate::render::{
    FilterTable, IpVersion, all_pools_set, ipset_name, kernel_jumps, masquerade_pools_set,
    render_ipset_updates, render_ipsets, render_nat, render_pool_ipsets, render_raw,
};

/// What a sync found to repair.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Repairs {
    /// Kernel-chain jumps that were missing and were put back.
    pub jumps: Vec<String>,
    /// `cali-` chains nothing needs, deleted.
    pub stale_chains: Vec<String>,
    /// Calico sets nothing needs, destroyed.
    pub stale_sets: Vec<String>,
}

impl Repairs {
    pub fn is_empty(&self) -> bool {
        self.jumps.is_empty() && self.stale_chains.is_empty() && self.stale_sets.is_empty()
    }
}

/// One IP version's tables.
#[derive(Debug)]
struct Plane {
    family: Family,
    version: IpVersion,
    filter: FilterTable,
}

/// The dataplane of one network namespace.
#[derive(Debug)]
pub struct Dataplane {
    iptables: Box<dyn FirewallTables>,
    ipset: Box<dyn IpSets>,
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
        };
        Dataplane {
            iptables,
            ipset,
            planes: [
                plane(Family::V4, IpVersion::V4),
                plane(Family::V6, IpVersion::V6),
            ],
            config,
        }
    }

    /// Makes the kernel match `state` in everything Calico owns; returns what it repaired
    /// beyond reloading.
    pub fn sync(&mut self, state: &DesiredState) -> Result<Repairs, CommandError> {
        let mut repairs = Repairs::default();
        for plane in &mut self.planes {
            let (family, version) = (plane.family, plane.version);
            self.ipset.restore(&render_ipsets(state, version))?;
            self.ipset.restore(&render_pool_ipsets(state, version))?;
            let filter = plane.filter.render_all(state);
            let tables = [
                ("filter", filter),
                ("nat", render_nat(state, &self.config, version)),
                ("raw", render_raw(state, &self.config, version)),
            ];
            for (table, text) in tables {
                self.iptables.restore(family, &text)?;
                repairs.stale_chains.extend(delete_undeclared(
                    self.iptables.as_ref(),
                    family,
                    table,
                    &text,
                )?);
            }
            for (table, chain, target) in kernel_jumps() {
                if self.iptables.ensure_jump(family, table, chain, target)? {
                    repairs
                        .jumps
                        .push(format!("{family:?} {table} {chain} -> {target}"));
                }
            }
        }
        repairs.stale_sets = self.destroy_unneeded_sets(state)?;
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
        for plane in &mut self.planes {
            let (family, version) = (plane.family, plane.version);
            self.ipset.restore(&render_ipset_updates(
                state,
                version,
                present.iter().copied(),
            ))?;
            if changes.pools {
                self.ipset.restore(&render_pool_ipsets(state, version))?;
            }
            self.iptables
                .restore(family, &plane.filter.render_changes(state, changes))?;
            if raw_touched {
                let raw = render_raw(state, &self.config, version);
                self.iptables.restore(family, &raw)?;
                delete_undeclared(self.iptables.as_ref(), family, "raw", &raw)?;
            }
            // The nat table holds the endpoints' NAT mappings: rendered whole, like raw.
            if !changes.endpoints.is_empty() {
                let nat = render_nat(state, &self.config, version);
                self.iptables.restore(family, &nat)?;
                delete_undeclared(self.iptables.as_ref(), family, "nat", &nat)?;
            }
            self.ipset.restore(&render_ipset_updates(
                state,
                version,
                removed.iter().copied(),
            ))?;
        }
        Ok(())
    }

    /// Destroys `cali4-`/`cali6-` sets the state does not have (rules using them are gone).
    fn destroy_unneeded_sets(&self, state: &DesiredState) -> Result<Vec<String>, CommandError> {
        let mut wanted = BTreeSet::new();
        for version in [IpVersion::V4, IpVersion::V6] {
            wanted.extend(state.ipsets.keys().map(|id| ipset_name(version, id)));
            wanted.insert(all_pools_set(version));
            wanted.insert(masquerade_pools_set(version));
        }
        let stale: Vec<String> = self
            .ipset
            .names()?
            .into_iter()
            .filter(|n| (n.starts_with("cali4") || n.starts_with("cali6")) && !wanted.contains(n))
            .collect();
        let script: String = stale.iter().map(|n| format!("destroy {n}\n")).collect();
        self.ipset.restore(&script)?;
        Ok(stale)
    }
}

/// Deletes the `cali-` chains of `table` that `text` (the table's whole restore input) does
/// not declare: they are left from an earlier state, and nothing refers to them any more.
fn delete_undeclared(
    iptables: &dyn FirewallTables,
    family: Family,
    table: &str,
    text: &str,
) -> Result<Vec<String>, CommandError> {
    let declared: BTreeSet<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix(':'))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    let stale: Vec<String> = iptables
        .chains(family, table, "cali-")?
        .into_iter()
        .filter(|c| !declared.contains(c.as_str()))
        .collect();
    if !stale.is_empty() {
        let mut script = format!("*{table}\n");
        for chain in &stale {
            script.push_str(&format!(":{chain} - [0:0]\n"));
        }
        for chain in &stale {
            script.push_str(&format!("-X {chain}\n"));
        }
        script.push_str("COMMIT\n");
        iptables.restore(family, &script)?;
    }
    Ok(stale)
}
