//! The filter table: entry chains, dispatch by interface, per-endpoint chains that run the tiers
//! and profiles, and shared chains per active policy and profile.
//!
//! Marks carry the outcome between chains: a policy or profile chain that allows sets the
//! accept bit and returns; `next-tier` sets the pass bit. An endpoint chain clears both, runs each
//! tier (a tier of several policies in a chain of its own that returns as soon as either bit is
//! set; returning at once on accept, dropping at the end of a tier that neither passed nor
//! accepted), then the profiles, then drops. The entry chains accept what an endpoint chain
//! accepted.
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
use std::fmt::Write;
use std::net::IpAddr;

use calico_calc::{Changes, DesiredState, EndpointKey, EndpointProgram, PolicyId, Rules};

use super::config::RenderConfig;
use super::rules::{RuleContext, RuleOwner, flow_log, render_rule};
use super::{IpVersion, holds, policy_chain, profile_chain, quote, staged_policy_chain};
use crate::comment::{IPTABLES_COMMENT_MAX, bounded, rule_comment};
use crate::flowlog::{Step, StepAction};

/// A chain and its rule bodies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Chain {
    pub(crate) name: String,
    pub(crate) rules: Vec<String>,
}

impl Chain {
    pub(super) fn new(name: impl Into<String>) -> Chain {
        Chain {
            name: name.into(),
            rules: Vec::new(),
        }
    }

    pub(super) fn push(&mut self, rule: impl Into<String>) {
        self.rules.push(rule.into());
    }
}

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
        let renderer = Renderer {
            config: &self.config,
            version: self.version,
        };
        match owner {
            Owner::Entry => renderer.entry_chains(),
            Owner::Dispatch => renderer.dispatch_chains(state),
            Owner::Endpoint(key) => match state.endpoints.get(key) {
                Some(program) => {
                    // The profile a missing-profile drop names in the flow logs.
                    let missing = program
                        .profiles
                        .iter()
                        .find(|p| !state.profiles.contains_key(*p))
                        .map(String::as_str);
                    renderer.endpoint_chains(key, program, missing)
                }
                None => Vec::new(),
            },
            Owner::Policy(id) => match state.policies.get(id) {
                // Untracked policies live in the raw table.
                Some(rules) if !rules.untracked => {
                    let what = format!("policy {}/{}", id.tier, id.name);
                    let owner = RuleOwner::Policy {
                        tier: &id.tier,
                        name: &id.name,
                    };
                    renderer.rule_chains(&what, rules, owner, |inbound| {
                        policy_chain(inbound, &id.tier, &id.name)
                    })
                }
                _ => Vec::new(),
            },
            // Staged policies only log: nothing of them without flow logs.
            Owner::StagedPolicy(id) => match state.staged_policies.get(id) {
                Some(rules) if self.config.flow_logs => {
                    let what = format!("staged policy {}/{}", id.tier, id.name);
                    let owner = RuleOwner::StagedPolicy {
                        tier: &id.tier,
                        name: &id.name,
                    };
                    renderer.rule_chains(&what, rules, owner, |inbound| {
                        staged_policy_chain(inbound, &id.tier, &id.name)
                    })
                }
                _ => Vec::new(),
            },
            Owner::Profile(id) => match state.profiles.get(id) {
                Some(rules) => {
                    let what = format!("profile {id}");
                    let owner = RuleOwner::Profile(id);
                    renderer.rule_chains(&what, rules, owner, |inbound| profile_chain(inbound, id))
                }
                None => Vec::new(),
            },
        }
    }
}

/// Restore input: declare (flush) and fill `chains`, then delete `removed` (declared first, so
/// they are empty, and deleted last, once nothing refers to them).
pub(crate) fn restore_text(table: &str, chains: &[&Chain], removed: &[&str]) -> String {
    let pairs: Vec<(&str, &[String])> = chains
        .iter()
        .map(|c| (c.name.as_str(), c.rules.as_slice()))
        .collect();
    restore_input(table, &pairs, removed)
}

/// [`restore_text`] for chains given as (name, rules).
pub(crate) fn restore_input(table: &str, chains: &[(&str, &[String])], removed: &[&str]) -> String {
    if chains.is_empty() && removed.is_empty() {
        return String::new();
    }
    let mut out = format!("*{table}\n");
    for name in chains
        .iter()
        .map(|(name, _)| *name)
        .chain(removed.iter().copied())
    {
        writeln!(out, ":{name} - [0:0]").unwrap();
    }
    for (name, rules) in chains {
        for rule in *rules {
            writeln!(out, "-A {name} {rule}").unwrap();
        }
    }
    for name in removed {
        writeln!(out, "-X {name}").unwrap();
    }
    out.push_str("COMMIT\n");
    out
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

pub(super) struct Renderer<'a> {
    pub(super) config: &'a RenderConfig,
    pub(super) version: IpVersion,
}

impl Renderer<'_> {
    /// The workload interface wildcards (`cali+`, one per `InterfacePrefix`).
    fn workload_ifaces(&self) -> Vec<String> {
        self.config.interface_prefixes.wildcards().collect()
    }

    fn clear_marks(&self) -> String {
        let both = self.config.marks.both();
        format!("-j MARK --set-xmark 0x0/{both:#x}")
    }

    fn if_accepted(&self) -> String {
        let accept = self.config.marks.accept;
        format!("-m mark --mark {accept:#x}/{accept:#x}")
    }

    /// [`Renderer::drop`] for a drop that is a step of the evaluation: with flow logs on, an
    /// NFLOG rule with the same matches names the step first.
    fn logged_drop(&self, matched: &str, why: &str, step: &Step, inbound: bool) -> Vec<String> {
        let comment = format!(
            "-m comment --comment {}",
            quote(&bounded(why, IPTABLES_COMMENT_MAX))
        );
        let matched_all = join(&[&comment, matched]);
        let log = flow_log(self.config, &matched_all, step, StepAction::Deny, inbound);
        log.into_iter().chain(self.drop(matched, why)).collect()
    }

    /// The drop rules (`DropActionOverride`) after `matched` (which may be empty).
    pub(super) fn drop(&self, matched: &str, why: &str) -> Vec<String> {
        let comment = format!(
            "-m comment --comment {}",
            quote(&bounded(why, IPTABLES_COMMENT_MAX))
        );
        self.config
            .drop_action
            .targets()
            .iter()
            .map(|target| join(&[&comment, matched, &format!("-j {target}")]))
            .collect()
    }

    fn entry_chains(&self) -> Vec<Chain> {
        let wls = self.workload_ifaces();
        // Each rule about workload interfaces, once per prefix.
        let each = |chain: &mut Chain, rule: &dyn Fn(&str) -> String| {
            for wl in &wls {
                chain.push(rule(wl));
            }
        };
        let mut forward = Chain::new("cali-FORWARD");
        for dir in ["-i", "-o"] {
            each(&mut forward, &|wl| {
                format!("{dir} {wl} -m conntrack --ctstate INVALID -j DROP")
            });
            each(&mut forward, &|wl| {
                format!("{dir} {wl} -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT")
            });
        }
        forward.push(self.clear_marks());
        each(&mut forward, &|wl| format!("-i {wl} -j cali-wl-out"));
        each(&mut forward, &|wl| format!("-o {wl} -j cali-wl-in"));
        forward.push(format!("{} -j ACCEPT", self.if_accepted()));

        let untracked = self.config.marks.untracked;
        let untracked_allowed = format!(
            "-m mark --mark {untracked:#x}/{untracked:#x} -m comment --comment \"untracked policy allowed\" -j ACCEPT"
        );
        let mut input = Chain::new("cali-INPUT");
        input.push(untracked_allowed.clone());
        each(&mut input, &|wl| {
            format!("-i {wl} -m conntrack --ctstate INVALID -j DROP")
        });
        each(&mut input, &|wl| {
            format!("-i {wl} -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT")
        });
        // What a workload needs from its host before any policy: DHCP, DNS, metadata, ND.
        for rule in self.host_services() {
            each(&mut input, &|wl| format!("-i {wl} {rule} -j ACCEPT"));
        }
        input.push(self.clear_marks());
        each(&mut input, &|wl| format!("-i {wl} -j cali-wl-out"));
        each(&mut input, &|wl| {
            format!(
                "-i {wl} -m comment --comment DefaultEndpointToHostAction -j {}",
                self.config.endpoint_to_host.target()
            )
        });
        input.push("-j cali-hep-in");
        input.push(format!("{} -j ACCEPT", self.if_accepted()));

        // The host may always talk to its own workloads (health checks, neighbour discovery):
        // OUTPUT carries host endpoints' outbound policy only, as in Calico 1.x.
        let mut output = Chain::new("cali-OUTPUT");
        output.push(untracked_allowed);
        each(&mut output, &|wl| format!("-o {wl} -j RETURN"));
        output.push(self.clear_marks());
        output.push("-j cali-hep-out");
        output.push(format!("{} -j ACCEPT", self.if_accepted()));
        vec![input, forward, output]
    }

    /// The bootstrap whitelist (000 §2.5.2, "How Calico uses iptables"): what a workload needs
    /// from its host whatever its policy says. DHCP (IPv4 68 → 67, IPv6 546 → 547), DNS to the
    /// host (UDP and TCP 53: TCP is DNS's fallback for large answers), the metadata path (IPv4
    /// only: TCP to `MetadataAddr:MetadataPort`, where nat `cali-PREROUTING` sent
    /// 169.254.169.254:80; absent with `MetadataAddr=None`), and for IPv6 router and neighbour
    /// discovery and MLD (ICMPv6 130-133, 135, 136).
    fn host_services(&self) -> Vec<String> {
        let mut rules = vec![match self.version {
            IpVersion::V4 => "-p udp -m udp --sport 68 --dport 67".to_owned(),
            IpVersion::V6 => "-p udp -m udp --sport 546 --dport 547".to_owned(),
        }];
        rules.push("-p udp -m udp --dport 53".to_owned());
        rules.push("-p tcp -m tcp --dport 53".to_owned());
        match (self.version, self.config.metadata) {
            (IpVersion::V4, Some(metadata)) => rules.push(format!(
                "-d {}/32 -p tcp -m tcp --dport {}",
                metadata.ip(),
                metadata.port()
            )),
            (IpVersion::V4, None) => {}
            (IpVersion::V6, _) => {
                for icmp_type in [130, 131, 132, 133, 135, 136] {
                    rules.push(format!("-p ipv6-icmp -m icmp6 --icmpv6-type {icmp_type}"));
                }
            }
        }
        rules
    }

    /// Interface → endpoint chain. An unknown workload interface is dropped (fail closed); an
    /// interface without a host endpoint returns untouched.
    fn dispatch_chains(&self, state: &DesiredState) -> Vec<Chain> {
        let mut wl_in = Chain::new("cali-wl-in");
        let mut wl_out = Chain::new("cali-wl-out");
        let mut hep_in = Chain::new("cali-hep-in");
        let mut hep_out = Chain::new("cali-hep-out");
        let mut seen = BTreeSet::new();
        for (key, program) in &state.endpoints {
            let Some(iface) = &program.interface else {
                continue;
            };
            if !seen.insert(iface.as_str()) {
                continue; // one chain per interface: the first endpoint (by key) owns it
            }
            match key {
                EndpointKey::Workload(_) => {
                    wl_in.push(format!("-o {iface} -g cali-wi-{iface}"));
                    wl_out.push(format!("-i {iface} -g cali-we-{iface}"));
                }
                EndpointKey::Host(_) => {
                    hep_in.push(format!("-i {iface} -g cali-hi-{iface}"));
                    hep_out.push(format!("-o {iface} -g cali-he-{iface}"));
                }
            }
        }
        for rule in self.drop("", "unknown workload interface") {
            wl_in.push(rule.clone());
            wl_out.push(rule);
        }
        vec![wl_in, wl_out, hep_in, hep_out]
    }

    fn endpoint_chains(
        &self,
        key: &EndpointKey,
        program: &EndpointProgram,
        missing: Option<&str>,
    ) -> Vec<Chain> {
        let Some(iface) = &program.interface else {
            return Vec::new();
        };
        let host = matches!(key, EndpointKey::Host(_));
        let (inbound, outbound) = if host {
            (format!("cali-hi-{iface}"), format!("cali-he-{iface}"))
        } else {
            (format!("cali-wi-{iface}"), format!("cali-we-{iface}"))
        };
        let mut chains = Vec::new();
        let mut chain_in = Chain::new(inbound);
        let mut chain_out = Chain::new(outbound);
        if host {
            self.host_preamble(&mut chain_in, &self.config.failsafe_inbound, "--dports");
            self.host_preamble(&mut chain_out, &self.config.failsafe_outbound, "--dports");
        } else if let Some(spoof) = self.anti_spoofing(iface, &program.addresses, &mut chain_out) {
            chains.push(spoof);
        }
        let tier_prefix = |inbound: bool| match (host, inbound) {
            (false, true) => "cali-ti",
            (false, false) => "cali-te",
            (true, true) => "cali-thi",
            (true, false) => "cali-the",
        };
        for (chain, inbound) in [(&mut chain_in, true), (&mut chain_out, false)] {
            let tier_chain = |index: usize| format!("{}{index}-{iface}", tier_prefix(inbound));
            chains.extend(self.policy_body(chain, program, inbound, missing, tier_chain));
        }
        chains.push(chain_in);
        chains.push(chain_out);
        chains
    }

    /// Host endpoints: conntrack first, then the failsafe ports.
    fn host_preamble(&self, chain: &mut Chain, ports: &[u16], flag: &str) {
        chain.push("-m conntrack --ctstate INVALID -j DROP");
        chain.push("-m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT");
        if !ports.is_empty() {
            let list: Vec<String> = ports.iter().map(u16::to_string).collect();
            chain.push(format!(
                "-p tcp -m multiport {flag} {} -m comment --comment failsafe -j ACCEPT",
                list.join(",")
            ));
        }
    }

    /// A workload may only send from its own addresses. One address: a single negated match;
    /// several: a chain that returns for each and drops the rest.
    fn anti_spoofing(&self, iface: &str, addresses: &[IpAddr], chain: &mut Chain) -> Option<Chain> {
        let own: Vec<&IpAddr> = addresses
            .iter()
            .filter(|a| holds(self.version, a))
            .collect();
        match own.as_slice() {
            [] => {
                chain
                    .rules
                    .extend(self.drop("", "no address of this IP version"));
                None
            }
            [one] => {
                let matched = format!("! -s {one}");
                chain.rules.extend(self.drop(&matched, "anti-spoofing"));
                None
            }
            several => {
                let mut spoof = Chain::new(format!("cali-sp-{iface}"));
                for address in several {
                    spoof.push(format!("-s {address} -j RETURN"));
                }
                spoof.rules.extend(self.drop("", "anti-spoofing"));
                chain.push(format!("-j cali-sp-{iface}"));
                Some(spoof)
            }
        }
    }

    /// Tiers, then profiles, then drop; returns the chains of tiers with several policies.
    ///
    /// A tier with one policy is a jump in the endpoint chain. A tier with several has a chain
    /// of its own (named by `tier_chain(index)`) that leaves as soon as a policy accepted or
    /// passed: once a policy says `next-tier`, a packet walks none of the tier's other
    /// policies (it used to test two marks for each of them).
    fn policy_body(
        &self,
        chain: &mut Chain,
        program: &EndpointProgram,
        inbound: bool,
        missing: Option<&str>,
        tier_chain: impl Fn(usize) -> String,
    ) -> Vec<Chain> {
        if !program.active {
            chain.rules.extend(self.drop("", "endpoint inactive"));
            return Vec::new();
        }
        let marks = self.config.marks;
        let not_passed = format!("-m mark --mark 0x0/{:#x}", marks.pass);
        let decided = format!("-m mark ! --mark 0x0/{:#x} -j RETURN", marks.both());
        let mut tiers = Vec::new();
        chain.push(self.clear_marks());
        let flow_logs = self.config.flow_logs;
        let evaluated = program.tiers.iter().filter(|t| t.enforces() || flow_logs);
        for (index, tier) in evaluated.enumerate() {
            if index > 0 {
                chain.push(format!("-j MARK --set-xmark 0x0/{:#x}", marks.pass));
            }
            if flow_logs {
                for id in &tier.staged {
                    let target = staged_policy_chain(inbound, &id.tier, &id.name);
                    chain.push(format!("-j {target}"));
                }
            }
            if !tier.enforces() {
                continue; // staged policies only: nothing to enforce, no end of tier
            }
            let jumps: Vec<String> = tier
                .policies
                .iter()
                .map(|id| format!("-j {}", policy_chain(inbound, &id.tier, &id.name)))
                .collect();
            match jumps.as_slice() {
                [] => {}
                [one] => chain.push(one.clone()),
                several => {
                    let mut own = Chain::new(tier_chain(index));
                    for (n, jump) in several.iter().enumerate() {
                        own.push(jump.clone());
                        if n + 1 < several.len() {
                            own.push(decided.clone());
                        }
                    }
                    chain.push(format!("-j {}", own.name));
                    tiers.push(own);
                }
            }
            chain.push(format!("{} -j RETURN", self.if_accepted()));
            let why = format!("end of tier {}", tier.name);
            let step = Step::EndOfTier {
                tier: tier.name.clone(),
            };
            let drop = self.logged_drop(&not_passed, &why, &step, inbound);
            chain.rules.extend(drop);
        }
        if program.missing_profile {
            let step = Step::MissingProfile {
                name: missing.unwrap_or_default().to_owned(),
            };
            let drop = self.logged_drop("", "missing profile", &step, inbound);
            chain.rules.extend(drop);
            return tiers;
        }
        for profile in &program.profiles {
            chain.push(format!("-j {}", profile_chain(inbound, profile)));
            chain.push(format!("{} -j RETURN", self.if_accepted()));
        }
        let step = Step::NoProfileMatched;
        let drop = self.logged_drop("", "no profile matched", &step, inbound);
        chain.rules.extend(drop);
        tiers
    }

    /// The inbound and outbound chains of a policy or profile.
    pub(super) fn rule_chains(
        &self,
        what: &str,
        rules: &Rules,
        owner: RuleOwner<'_>,
        name: impl Fn(bool) -> String,
    ) -> Vec<Chain> {
        [
            (true, &rules.inbound, "inbound"),
            (false, &rules.outbound, "outbound"),
        ]
        .into_iter()
        .map(|(inbound, list, direction)| {
            let mut chain = Chain::new(name(inbound));
            for (index, rule) in list.iter().enumerate() {
                let cx = RuleContext {
                    version: self.version,
                    config: self.config,
                    owner,
                    inbound,
                    index: index as u32,
                    comment: rule_comment(what, direction, index + 1, IPTABLES_COMMENT_MAX),
                };
                chain.rules.extend(render_rule(rule, &cx));
            }
            // Falling off the end of a chain returns: a last `… -j RETURN` only costs a test.
            if chain
                .rules
                .last()
                .is_some_and(|r| r.ends_with(" -j RETURN"))
            {
                chain.rules.pop();
            }
            chain
        })
        .collect()
    }
}

/// Joins non-empty fragments with single spaces.
fn join(parts: &[&str]) -> String {
    parts
        .iter()
        .filter(|p| !p.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join(" ")
}
