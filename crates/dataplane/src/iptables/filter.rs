//! The filter table: entry chains, dispatch by interface, per-endpoint chains that run the tiers
//! and profiles, and shared chains per active policy and profile.
//!
//! The chains are the model's ([`crate::firewall`]) as `encode.rs` writes them; this file keeps
//! them by owner, so that a change re-renders and writes only what it touched.
//!
//! Staged policies (with flow logs on; otherwise nothing of them is rendered) are jumped to at
//! the start of their tier: their chains log the step the first matching rule would take
//! and return, setting no mark, so the tier goes on as if they were not there. A tier where
//! only staged policies apply has no end-of-tier drop.
//!
//! With flow logs on, every drop that is a step of the evaluation (end of tier, missing
//! profile, no profile matched) is preceded by an NFLOG rule naming it (see
//! [`crate::flowlog`]).
//!
//! Only our interfaces are touched: workload interfaces (`InterfacePrefix`) and the interfaces
//! of host endpoints. Other traffic returns to the kernel chains untouched.

use std::collections::{BTreeMap, BTreeSet};

use calico_calc::{Changes, DesiredState, EndpointKey, PolicyId};

use super::chain::{Chain, restore_text};
use super::encode::Encoder;
use super::{IpVersion, policy_chain, profile_chain, staged_policy_chain};
use crate::firewall::build;
use crate::firewall::config::RenderConfig;

/// What a group of chains is rendered from; the unit of incremental re-rendering.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Owner {
    Entry,
    Dispatch,
    Endpoint(EndpointKey),
    Policy(PolicyId),
    StagedPolicy(PolicyId),
    Profile(String),
}

/// The whole filter table for one IP version, as `iptables-restore --noflush` input: every
/// chain is declared (and so flushed) and refilled. The kernel chains are not touched; they
/// need one jump each to our entry chains (see [`kernel_jumps`]).
pub fn render_filter(state: &DesiredState, config: &RenderConfig, version: IpVersion) -> String {
    FilterTable::new(config.clone(), version).render_all(state)
}

/// The filter table as last rendered, so that a change re-renders only what it touched and
/// emits only the chains whose rules differ.
#[derive(Debug)]
pub struct FilterTable {
    config: RenderConfig,
    version: IpVersion,
    owned: BTreeMap<Owner, Vec<Chain>>,
}

impl FilterTable {
    pub fn new(config: RenderConfig, version: IpVersion) -> FilterTable {
        FilterTable {
            config,
            version,
            owned: BTreeMap::new(),
        }
    }

    /// Renders every chain (start-up and repair): restore input that declares and refills all.
    pub fn render_all(&mut self, state: &DesiredState) -> String {
        self.rerender(state);
        let all: Vec<&Chain> = self.owned.values().flatten().collect();
        restore_text("filter", &all, &[])
    }

    /// Renders every chain, for [`FilterTable::chains`], without the restore input.
    pub fn rerender(&mut self, state: &DesiredState) {
        let mut owners = vec![Owner::Entry, Owner::Dispatch];
        owners.extend(state.endpoints.keys().cloned().map(Owner::Endpoint));
        owners.extend(state.policies.keys().cloned().map(Owner::Policy));
        owners.extend(
            state
                .staged_policies
                .keys()
                .cloned()
                .map(Owner::StagedPolicy),
        );
        owners.extend(state.profiles.keys().cloned().map(Owner::Profile));
        self.owned.clear();
        for owner in owners {
            let chains = self.render_owner(state, &owner);
            self.owned.insert(owner, chains);
        }
    }

    /// Re-renders what `changes` touched and returns restore input holding only the chains
    /// that are new or whose rules changed, and the deletion of chains no longer needed.
    pub fn render_changes(&mut self, state: &DesiredState, changes: &Changes) -> String {
        let mut owners: BTreeSet<Owner> = BTreeSet::new();
        owners.extend(changes.endpoints.iter().cloned().map(Owner::Endpoint));
        owners.extend(changes.policies.iter().cloned().map(Owner::Policy));
        owners.extend((changes.staged_policies.iter().cloned()).map(Owner::StagedPolicy));
        owners.extend(changes.profiles.iter().cloned().map(Owner::Profile));
        if !changes.endpoints.is_empty() {
            owners.insert(Owner::Dispatch);
        }
        let mut old: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut new: Vec<Chain> = Vec::new();
        for owner in owners {
            for chain in self.owned.remove(&owner).unwrap_or_default() {
                old.insert(chain.name, chain.rules);
            }
            let chains = self.render_owner(state, &owner);
            new.extend(chains.iter().cloned());
            if !chains.is_empty() {
                self.owned.insert(owner, chains);
            }
        }
        let changed: Vec<&Chain> = new
            .iter()
            .filter(|c| old.get(&c.name) != Some(&c.rules))
            .collect();
        let kept: BTreeSet<&str> = new.iter().map(|c| c.name.as_str()).collect();
        let removed: Vec<&str> = old
            .keys()
            .map(String::as_str)
            .filter(|name| !kept.contains(name))
            .collect();
        restore_text("filter", &changed, &removed)
    }

    /// Every chain as last rendered: name → rules.
    pub fn chains(&self) -> BTreeMap<&str, &[String]> {
        self.owned
            .values()
            .flatten()
            .map(|c| (c.name.as_str(), c.rules.as_slice()))
            .collect()
    }

    fn render_owner(&self, state: &DesiredState, owner: &Owner) -> Vec<Chain> {
        let encoder = Encoder {
            config: &self.config,
            version: self.version,
        };
        let config = &self.config;
        match owner {
            Owner::Entry => encoder.entry_chains(&build::frame(config)),
            Owner::Dispatch => encoder.dispatch_chains(&build::dispatch(state)),
            Owner::Endpoint(key) => build::endpoint(state, config, key)
                .map(|endpoint| encoder.endpoint_chains(&endpoint))
                .unwrap_or_default(),
            Owner::Policy(id) => build::policy(state, config, id)
                .map(|rules| {
                    encoder.rule_chains(&rules, |inbound| policy_chain(inbound, &id.tier, &id.name))
                })
                .unwrap_or_default(),
            Owner::StagedPolicy(id) => build::staged_policy(state, config, id)
                .map(|rules| {
                    encoder.rule_chains(&rules, |inbound| {
                        staged_policy_chain(inbound, &id.tier, &id.name)
                    })
                })
                .unwrap_or_default(),
            Owner::Profile(id) => build::profile(state, config, id)
                .map(|rules| encoder.rule_chains(&rules, |inbound| profile_chain(inbound, id)))
                .unwrap_or_default(),
        }
    }
}

/// The jumps the kernel chains need (table, kernel chain, our chain), inserted first.
pub fn kernel_jumps() -> [(&'static str, &'static str, &'static str); 8] {
    [
        ("filter", "INPUT", "cali-INPUT"),
        ("filter", "FORWARD", "cali-FORWARD"),
        ("filter", "OUTPUT", "cali-OUTPUT"),
        ("nat", "PREROUTING", "cali-PREROUTING"),
        ("nat", "OUTPUT", "cali-OUTPUT"),
        ("nat", "POSTROUTING", "cali-POSTROUTING"),
        ("raw", "PREROUTING", "cali-PREROUTING"),
        ("raw", "OUTPUT", "cali-OUTPUT"),
    ]
}
