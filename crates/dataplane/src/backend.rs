//! The two firewall backends behind one face: iptables (`iptables-restore` and `ipset`,
//! [`Dataplane`]) or nf_tables (one `inet calico` table over netlink, [`NftDataplane`]).
//!
//! Whichever runs, its full sync also removes what the other left in the kernel (Felix moved
//! from one to the other): its own state goes in first, so established flows, which both
//! accept, never see a moment without a firewall, then the other's chains, jumps and sets or
//! its table go.

use calico_calc::{Changes, DesiredState};
use calico_linux::nft::{Batch, NfTables, NftError, Op};
use calico_linux::{CommandError, Family, FirewallTables, IpSets};

use crate::iptables::drift::{KernelReader, KernelSnapshot, TABLES};
use crate::iptables::driver::{Dataplane, Repairs};
use crate::nft::{NftDataplane, NftReader, NftSnapshot};

/// Which backend programs the firewall.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    Iptables,
    Nftables,
}

impl BackendKind {
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Iptables => "iptables",
            BackendKind::Nftables => "nftables",
        }
    }
}

impl std::fmt::Display for BackendKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Why the kernel refused a change, whichever backend asked.
#[derive(Debug, thiserror::Error)]
pub enum DataplaneError {
    #[error(transparent)]
    Iptables(#[from] CommandError),
    #[error(transparent)]
    Nftables(#[from] NftError),
}

/// The firewall of one network namespace, on one backend, with a handle on the other backend's
/// leftovers.
#[derive(Debug)]
pub enum Backend {
    Iptables {
        dataplane: Box<Dataplane>,
        /// Felix's nf_tables table, removed at each full sync if there.
        other: Box<dyn NfTables>,
    },
    Nftables {
        dataplane: Box<NftDataplane>,
        /// iptables and IP sets, whose `cali-` chains, jumps and sets each full sync removes.
        iptables: Box<dyn FirewallTables>,
        ipsets: Box<dyn IpSets>,
    },
}

/// A drift check's read, for whichever backend runs.
#[derive(Debug)]
pub enum BackendReader {
    Iptables(KernelReader),
    Nftables(NftReader),
}

impl BackendReader {
    pub fn read(self) -> Result<BackendSnapshot, DataplaneError> {
        Ok(match self {
            BackendReader::Iptables(reader) => BackendSnapshot::Iptables(reader.read()?),
            BackendReader::Nftables(reader) => BackendSnapshot::Nftables(reader.read()?),
        })
    }
}

#[derive(Debug)]
pub enum BackendSnapshot {
    Iptables(KernelSnapshot),
    Nftables(NftSnapshot),
}

impl Backend {
    pub fn kind(&self) -> BackendKind {
        match self {
            Backend::Iptables { .. } => BackendKind::Iptables,
            Backend::Nftables { .. } => BackendKind::Nftables,
        }
    }

    /// Full sync; then the other backend's leftovers go.
    pub fn sync(&mut self, state: &DesiredState) -> Result<Repairs, DataplaneError> {
        match self {
            Backend::Iptables { dataplane, other } => {
                let mut repairs = dataplane.sync(state)?;
                if other.read()?.is_some() {
                    other.apply(&Batch {
                        ops: vec![Op::DeleteTable],
                    })?;
                    repairs.stale_chains.push(format!(
                        "nftables table inet {} (Felix now runs on iptables)",
                        other.table().name
                    ));
                }
                Ok(repairs)
            }
            Backend::Nftables {
                dataplane,
                iptables,
                ipsets,
            } => {
                let mut repairs = dataplane.sync(state)?;
                let (chains, sets) = remove_iptables(iptables.as_ref(), ipsets.as_ref())?;
                repairs.stale_chains.extend(chains);
                repairs.stale_sets.extend(sets);
                Ok(repairs)
            }
        }
    }

    pub fn apply(&mut self, state: &DesiredState, changes: &Changes) -> Result<(), DataplaneError> {
        match self {
            Backend::Iptables { dataplane, .. } => Ok(dataplane.apply(state, changes)?),
            Backend::Nftables { dataplane, .. } => Ok(dataplane.apply(state, changes)?),
        }
    }

    pub fn reader(&self) -> BackendReader {
        match self {
            Backend::Iptables { dataplane, .. } => BackendReader::Iptables(dataplane.reader()),
            Backend::Nftables { dataplane, .. } => BackendReader::Nftables(dataplane.reader()),
        }
    }

    /// Rewrites what drifted; a snapshot of the other backend (read before a switch) is a
    /// drift check that raced with it, and does nothing.
    pub fn repair_drift(
        &mut self,
        snapshot: &BackendSnapshot,
        state: &DesiredState,
    ) -> Result<Repairs, DataplaneError> {
        match (self, snapshot) {
            (Backend::Iptables { dataplane, .. }, BackendSnapshot::Iptables(snapshot)) => {
                Ok(dataplane.repair_drift(snapshot, state)?)
            }
            (Backend::Nftables { dataplane, .. }, BackendSnapshot::Nftables(snapshot)) => {
                Ok(dataplane.repair_drift(snapshot, state)?)
            }
            _ => Ok(Repairs::default()),
        }
    }
}

/// Removes everything the iptables backend writes: the kernel chains' jumps to `cali-` chains,
/// the `cali-` chains of every table and family, and the `cali4`/`cali6` IP sets. Returns the
/// chains (`V4 filter cali-…`) and sets it removed; nothing when there is nothing.
pub fn remove_iptables(
    iptables: &dyn FirewallTables,
    ipsets: &dyn IpSets,
) -> Result<(Vec<String>, Vec<String>), CommandError> {
    let mut removed = Vec::new();
    for family in [Family::V4, Family::V6] {
        for table in TABLES {
            let saved = iptables.save(family, table)?;
            let ours: Vec<&str> = saved
                .lines()
                .filter_map(|l| l.strip_prefix(':'))
                .filter_map(|l| l.split_whitespace().next())
                .filter(|name| name.starts_with("cali-"))
                .collect();
            if ours.is_empty() {
                continue;
            }
            let mut script = format!("*{table}\n");
            // The kernel chains' rules that jump to ours.
            for line in saved.lines() {
                let Some(rule) = line.strip_prefix("-A ") else {
                    continue;
                };
                let chain = rule.split_whitespace().next().unwrap_or_default();
                let jumps_to_ours = rule
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .windows(2)
                    .any(|w| matches!(w[0], "-j" | "-g") && w[1].starts_with("cali-"));
                if !chain.starts_with("cali-") && jumps_to_ours {
                    script.push_str(&format!("-D {rule}\n"));
                }
            }
            for name in &ours {
                script.push_str(&format!(":{name} - [0:0]\n"));
            }
            for name in &ours {
                script.push_str(&format!("-X {name}\n"));
            }
            script.push_str("COMMIT\n");
            iptables.restore(family, &script)?;
            removed.extend(ours.iter().map(|name| format!("{family:?} {table} {name}")));
        }
    }
    let sets: Vec<String> = ipsets
        .names()?
        .into_iter()
        .filter(|n| n.starts_with("cali4") || n.starts_with("cali6"))
        .collect();
    let script: String = sets.iter().map(|n| format!("destroy {n}\n")).collect();
    if !script.is_empty() {
        ipsets.restore(&script)?;
    }
    Ok((removed, sets))
}
