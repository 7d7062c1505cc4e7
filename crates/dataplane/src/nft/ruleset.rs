//! The desired state as Calico's nf_tables table (`inet calico`), rendered incrementally: each
//! piece of the table has an owner (an endpoint, a policy, a profile, a set, a tier's policy
//! list, the fixed frame), a change re-renders only the owners it touched, and the renderer
//! notes what that changed ([`Delta`]) for the plan (`plan.rs`).
//!
//! The frame, for workloads (`<p>` for each `InterfacePrefix`):
//!
//! ```text
//! filter-forward:  iifname/oifname "<p>*": ct invalid drop, ct established,related accept
//!                  clear marks; iifname "<p>*" jump from-wl-dispatch; oifname "<p>*" jump to-wl-dispatch
//!                  accept-marked accept
//! from-wl-dispatch: iifname vmap @from-wl (→ goto from-wl-<iface>); else drop
//! from-wl-<iface>:  anti-spoofing; clear marks; per tier: (flow logs on) jump each staged
//!                   policy's chain, which logs and returns; jump its policy or tier chain,
//!                   return if accepted, drop unless passed (not in a tier of staged policies
//!                   only); per profile: jump, return if accepted; drop
//! ```
//!
//! Host endpoints hang off `filter-input` / `filter-output` (`iifname vmap @to-hep`, `oifname
//! vmap @from-hep`) and `raw-prerouting` / `raw-output` for untracked policy; NAT lives in the
//! `nat-*` base chains. Marks, verdicts and comments are those of the iptables rendering
//! (`crate::render`), so both backends judge a packet alike.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;

use calico_calc::{Changes, DesiredState, EndpointKey, EndpointProgram, PolicyId, Rules};
use calico_linux::nft::{
    ChainType, CtStates, Dir, Element, Expr, Hook, IfName, IpFamily, MapKey, Ports, Rule, SetKind,
    SetSpec, Verdict,
};
use ipnet::IpNet;

use super::names::{self, DispatchMap, staged_chain};
use super::rules::{
    RuleContext, RuleOwner, clear, comment_text, ct, drop_rule, jump, logged_drop_rule, marked,
    plain, render_rule, rule, unmarked,
};
use super::table::{NftChain, NftSet};
use super::tiers::{self, TierList};
use crate::flowlog::Step;
use crate::render::config::{METADATA_SERVICE, RenderConfig};

/// The whole table as rendered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ruleset {
    pub chains: BTreeMap<String, NftChain>,
    pub sets: BTreeMap<String, NftSet>,
}

/// What re-rendering changed, for the plan: chains and sets as they were before the first
/// change touched them (`None`: they did not exist), and the elements added to and removed
/// from sets that exist on both sides.
#[derive(Debug, Default)]
pub struct Delta {
    pub chains_before: BTreeMap<String, Option<NftChain>>,
    pub sets_before: BTreeMap<String, Option<SetSpec>>,
    pub added: BTreeMap<String, BTreeSet<Element>>,
    pub removed: BTreeMap<String, BTreeSet<Element>>,
}

/// What a piece of the table is rendered from; the unit of re-rendering.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Owner {
    Frame,
    Pools,
    IpSet(String),
    Endpoint(EndpointKey),
    Nat,
    Policy(PolicyId),
    StagedPolicy(PolicyId),
    Profile(String),
    Tier(TierList),
}

/// What one owner put in the table.
#[derive(Debug, Default)]
struct Part {
    chains: Vec<NftChain>,
    sets: Vec<NftSet>,
    /// Elements of maps owned by someone else (the frame's dispatch maps).
    elements: Vec<(String, Element)>,
}

/// The table as last rendered, and the indexes that say which owners a change touches.
#[derive(Debug)]
pub struct NftRenderer {
    config: RenderConfig,
    owned: HashMap<Owner, Part>,
    current: Ruleset,
    delta: Delta,
    /// The tier lists each endpoint uses, and who uses each list.
    endpoint_tiers: BTreeMap<EndpointKey, Vec<TierList>>,
    tier_users: BTreeMap<TierList, BTreeSet<EndpointKey>>,
    policy_tiers: BTreeMap<PolicyId, BTreeSet<TierList>>,
    /// The endpoints on each interface: the first (by key) owns its chains and map elements.
    claims: BTreeMap<String, BTreeSet<EndpointKey>>,
    endpoint_iface: BTreeMap<EndpointKey, String>,
    /// Endpoints with 1:1 NAT mappings.
    nat_users: BTreeSet<EndpointKey>,
}

impl NftRenderer {
    pub fn new(config: RenderConfig) -> NftRenderer {
        NftRenderer {
            config,
            owned: HashMap::new(),
            current: Ruleset::default(),
            delta: Delta::default(),
            endpoint_tiers: BTreeMap::new(),
            tier_users: BTreeMap::new(),
            policy_tiers: BTreeMap::new(),
            claims: BTreeMap::new(),
            endpoint_iface: BTreeMap::new(),
            nat_users: BTreeSet::new(),
        }
    }

    pub fn config(&self) -> &RenderConfig {
        &self.config
    }

    /// The table as last rendered.
    pub fn ruleset(&self) -> &Ruleset {
        &self.current
    }

    /// Renders everything afresh (start-up and full syncs).
    pub fn render_all(&mut self, state: &DesiredState) -> &Ruleset {
        *self = NftRenderer::new(self.config.clone());
        let mut owners = vec![Owner::Frame, Owner::Pools, Owner::Nat];
        owners.extend(state.ipsets.keys().cloned().map(Owner::IpSet));
        owners.extend(state.policies.keys().cloned().map(Owner::Policy));
        owners.extend(
            state
                .staged_policies
                .keys()
                .cloned()
                .map(Owner::StagedPolicy),
        );
        owners.extend(state.profiles.keys().cloned().map(Owner::Profile));
        for key in state.endpoints.keys() {
            self.track_endpoint(state, key);
        }
        owners.extend(state.endpoints.keys().cloned().map(Owner::Endpoint));
        owners.extend(self.tier_users.keys().cloned().map(Owner::Tier));
        for owner in owners {
            self.rerender(state, &owner);
        }
        self.delta = Delta::default();
        &self.current
    }

    /// Re-renders what `changes` touched; returns what that changed.
    pub fn render_changes(&mut self, state: &DesiredState, changes: &Changes) -> Delta {
        let mut owners: BTreeSet<Owner> = BTreeSet::new();
        for key in &changes.endpoints {
            let old_iface = self.endpoint_iface.get(key).cloned();
            let old_tiers = self.endpoint_tiers.get(key).cloned().unwrap_or_default();
            let had_nat = self.nat_users.contains(key);
            self.track_endpoint(state, key);
            let new_iface = self.endpoint_iface.get(key).cloned();
            // Every endpoint on the old and new interface: the owner of an interface may
            // change hands.
            for iface in [old_iface, new_iface].into_iter().flatten() {
                for other in self.claims.get(&iface).into_iter().flatten() {
                    owners.insert(Owner::Endpoint(other.clone()));
                }
            }
            owners.insert(Owner::Endpoint(key.clone()));
            let new_tiers = self.endpoint_tiers.get(key).cloned().unwrap_or_default();
            for list in old_tiers.into_iter().chain(new_tiers) {
                if list.has_chain() {
                    owners.insert(Owner::Tier(list));
                }
            }
            if had_nat || self.nat_users.contains(key) {
                owners.insert(Owner::Nat);
            }
        }
        for id in &changes.policies {
            owners.insert(Owner::Policy(id.clone()));
            for list in self.policy_tiers.get(id).into_iter().flatten() {
                owners.insert(Owner::Tier(list.clone()));
            }
        }
        owners.extend(changes.profiles.iter().cloned().map(Owner::Profile));
        owners.extend((changes.staged_policies.iter().cloned()).map(Owner::StagedPolicy));
        owners.extend(changes.ipsets.iter().cloned().map(Owner::IpSet));
        if changes.pools {
            owners.insert(Owner::Pools);
        }
        for owner in &owners {
            self.rerender(state, owner);
        }
        std::mem::take(&mut self.delta)
    }

    /// Updates the interface, tier and NAT indexes for one endpoint.
    fn track_endpoint(&mut self, state: &DesiredState, key: &EndpointKey) {
        if let Some(iface) = self.endpoint_iface.remove(key)
            && let Some(claims) = self.claims.get_mut(&iface)
        {
            claims.remove(key);
            if claims.is_empty() {
                self.claims.remove(&iface);
            }
        }
        for list in self.endpoint_tiers.remove(key).unwrap_or_default() {
            self.release_tier(key, list);
        }
        self.nat_users.remove(key);
        let Some(program) = state.endpoints.get(key) else {
            return;
        };
        if let Some(iface) = &program.interface {
            self.endpoint_iface.insert(key.clone(), iface.clone());
            self.claims
                .entry(iface.clone())
                .or_default()
                .insert(key.clone());
        }
        if !program.nat.is_empty() && matches!(key, EndpointKey::Workload(_)) {
            self.nat_users.insert(key.clone());
        }
        if program.interface.is_none() || !program.active {
            return;
        }
        let mut lists = Vec::new();
        for tier in program.tiers.iter().filter(|t| t.enforces()) {
            for inbound in [true, false] {
                let list = TierList {
                    inbound,
                    policies: tier.policies.clone(),
                };
                self.tier_users
                    .entry(list.clone())
                    .or_default()
                    .insert(key.clone());
                for id in &list.policies {
                    self.policy_tiers
                        .entry(id.clone())
                        .or_default()
                        .insert(list.clone());
                }
                lists.push(list);
            }
        }
        self.endpoint_tiers.insert(key.clone(), lists);
    }

    fn release_tier(&mut self, key: &EndpointKey, list: TierList) {
        let Some(users) = self.tier_users.get_mut(&list) else {
            return;
        };
        users.remove(key);
        if !users.is_empty() {
            return;
        }
        self.tier_users.remove(&list);
        for id in &list.policies {
            if let Some(lists) = self.policy_tiers.get_mut(id) {
                lists.remove(&list);
                if lists.is_empty() {
                    self.policy_tiers.remove(id);
                }
            }
        }
    }

    /// Replaces what `owner` contributed with what it renders now.
    fn rerender(&mut self, state: &DesiredState, owner: &Owner) {
        let old = self.owned.remove(owner).unwrap_or_default();
        let new = self.render_owner(state, owner);
        self.withdraw(old);
        self.contribute(&new);
        if !(new.chains.is_empty() && new.sets.is_empty() && new.elements.is_empty()) {
            self.owned.insert(owner.clone(), new);
        }
    }

    fn withdraw(&mut self, part: Part) {
        for chain in part.chains {
            let old = self.current.chains.remove(&chain.name);
            self.delta.chains_before.entry(chain.name).or_insert(old);
        }
        for set in part.sets {
            if let Some(old) = self.current.sets.remove(&set.spec.name) {
                for element in &old.elements {
                    self.element_removed(&old.spec.name, element);
                }
                self.delta
                    .sets_before
                    .entry(set.spec.name)
                    .or_insert(Some(old.spec));
            }
        }
        for (map, element) in part.elements {
            if let Some(set) = self.current.sets.get_mut(&map)
                && set.elements.remove(&element)
            {
                self.element_removed(&map, &element);
            }
        }
    }

    fn contribute(&mut self, part: &Part) {
        for chain in &part.chains {
            let before = self
                .current
                .chains
                .insert(chain.name.clone(), chain.clone());
            self.delta
                .chains_before
                .entry(chain.name.clone())
                .or_insert(before);
        }
        for set in &part.sets {
            let name = set.spec.name.clone();
            self.delta.sets_before.entry(name.clone()).or_insert(None);
            for element in &set.elements {
                self.element_added(&name, element);
            }
            self.current.sets.insert(name, set.clone());
        }
        for (map, element) in &part.elements {
            if let Some(set) = self.current.sets.get_mut(map)
                && set.elements.insert(element.clone())
            {
                self.element_added(map, element);
            }
        }
    }

    fn element_added(&mut self, set: &str, element: &Element) {
        let removed = self.delta.removed.entry(set.to_owned()).or_default();
        if !removed.remove(element) {
            self.delta
                .added
                .entry(set.to_owned())
                .or_default()
                .insert(element.clone());
        }
    }

    fn element_removed(&mut self, set: &str, element: &Element) {
        let added = self.delta.added.entry(set.to_owned()).or_default();
        if !added.remove(element) {
            self.delta
                .removed
                .entry(set.to_owned())
                .or_default()
                .insert(element.clone());
        }
    }

    fn render_owner(&self, state: &DesiredState, owner: &Owner) -> Part {
        let r = Renderer {
            config: &self.config,
        };
        match owner {
            Owner::Frame => r.frame(),
            Owner::Pools => r.pools(state),
            Owner::IpSet(id) => r.ipset(state, id),
            Owner::Nat => r.nat(state),
            Owner::Endpoint(key) => {
                match (state.endpoints.get(key), self.endpoint_iface.get(key)) {
                    (Some(program), Some(iface)) if self.owns(key, iface) => {
                        let missing = program
                            .profiles
                            .iter()
                            .find(|p| !state.profiles.contains_key(*p))
                            .map(String::as_str);
                        r.endpoint(key, iface, program, missing)
                    }
                    _ => Part::default(),
                }
            }
            Owner::Policy(id) => match state.policies.get(id) {
                Some(rules) => {
                    let what = format!("policy {}/{}", id.tier, id.name);
                    let owner = RuleOwner::Policy {
                        tier: &id.tier,
                        name: &id.name,
                    };
                    r.rule_chains(&what, rules, owner, |inbound| {
                        names::policy_chain(inbound, &id.tier, &id.name)
                    })
                }
                None => Part::default(),
            },
            // Staged policies only log: nothing of them without flow logs.
            Owner::StagedPolicy(id) => match state.staged_policies.get(id) {
                Some(rules) if self.config.flow_logs => {
                    let what = format!("staged policy {}/{}", id.tier, id.name);
                    let owner = RuleOwner::StagedPolicy {
                        tier: &id.tier,
                        name: &id.name,
                    };
                    r.rule_chains(&what, rules, owner, |inbound| {
                        staged_chain(inbound, &id.tier, &id.name)
                    })
                }
                _ => Part::default(),
            },
            Owner::Profile(id) => match state.profiles.get(id) {
                Some(rules) => {
                    let what = format!("profile {id}");
                    r.rule_chains(&what, rules, RuleOwner::Profile(id), |inbound| {
                        names::profile_chain(inbound, id)
                    })
                }
                None => Part::default(),
            },
            Owner::Tier(list) if self.tier_users.contains_key(list) && list.has_chain() => {
                let (chains, sets) = tiers::render(list, &state.policies, &self.config);
                Part {
                    chains,
                    sets,
                    elements: Vec::new(),
                }
            }
            Owner::Tier(_) => Part::default(),
        }
    }

    /// Whether `key` is the first endpoint (by key) on `iface`.
    fn owns(&self, key: &EndpointKey, iface: &str) -> bool {
        self.claims
            .get(iface)
            .and_then(|claims| claims.first())
            .is_some_and(|first| first == key)
    }
}

/// Renders the pieces; pure.
struct Renderer<'a> {
    config: &'a RenderConfig,
}

impl Renderer<'_> {
    fn prefixes(&self) -> Vec<IfName> {
        self.config
            .interface_prefixes
            .iter()
            .map(|p| IfName::Prefix(p.to_owned()))
            .collect()
    }

    fn iif(name: &IfName) -> Expr {
        Expr::Iifname {
            name: name.clone(),
            negate: false,
        }
    }

    fn oif(name: &IfName) -> Expr {
        Expr::Oifname {
            name: name.clone(),
            negate: false,
        }
    }

    fn clear_both(&self) -> Rule {
        plain(vec![clear(self.config.marks.both())])
    }

    fn accept_if_accepted(&self) -> Rule {
        plain(vec![
            marked(self.config.marks.accept),
            Expr::Verdict(Verdict::Accept),
        ])
    }

    /// The base chains, the dispatch chains and the (empty) dispatch maps.
    fn frame(&self) -> Part {
        let prefixes = self.prefixes();
        let marks = self.config.marks;
        let established = ct(CtStates::ESTABLISHED.union(CtStates::RELATED));
        let invalid = ct(CtStates::INVALID);
        let accept = Expr::Verdict(Verdict::Accept);
        let drop = Expr::Verdict(Verdict::Drop);

        let mut forward = NftChain::base(names::FORWARD, ChainType::Filter, Hook::Forward, 0);
        for by_input in [true, false] {
            for p in &prefixes {
                let iface = if by_input { Self::iif(p) } else { Self::oif(p) };
                forward
                    .rules
                    .push(plain(vec![iface.clone(), invalid.clone(), drop.clone()]));
                forward
                    .rules
                    .push(plain(vec![iface, established.clone(), accept.clone()]));
            }
        }
        forward.rules.push(self.clear_both());
        for p in &prefixes {
            forward
                .rules
                .push(plain(vec![Self::iif(p), jump(names::FROM_WL_DISPATCH)]));
        }
        for p in &prefixes {
            forward
                .rules
                .push(plain(vec![Self::oif(p), jump(names::TO_WL_DISPATCH)]));
        }
        forward.rules.push(self.accept_if_accepted());

        let untracked_allowed = rule(
            vec![marked(marks.untracked), accept.clone()],
            "untracked policy allowed",
        );
        let mut input = NftChain::base(names::INPUT, ChainType::Filter, Hook::Input, 0);
        input.rules.push(untracked_allowed.clone());
        for p in &prefixes {
            input
                .rules
                .push(plain(vec![Self::iif(p), invalid.clone(), drop.clone()]));
        }
        for p in &prefixes {
            input.rules.push(plain(vec![
                Self::iif(p),
                established.clone(),
                accept.clone(),
            ]));
        }
        for service in self.host_services() {
            for p in &prefixes {
                let mut exprs = vec![Self::iif(p)];
                exprs.extend(service.clone());
                exprs.push(accept.clone());
                input.rules.push(plain(exprs));
            }
        }
        input.rules.push(self.clear_both());
        for p in &prefixes {
            input
                .rules
                .push(plain(vec![Self::iif(p), jump(names::FROM_WL_DISPATCH)]));
        }
        let to_host = match self.config.endpoint_to_host {
            crate::EndpointToHostAction::Drop => Verdict::Drop,
            crate::EndpointToHostAction::Return => Verdict::Return,
            crate::EndpointToHostAction::Accept => Verdict::Accept,
        };
        for p in &prefixes {
            input.rules.push(rule(
                vec![Self::iif(p), Expr::Verdict(to_host.clone())],
                "DefaultEndpointToHostAction",
            ));
        }
        input.rules.push(plain(vec![Expr::Vmap {
            key: MapKey::Iifname,
            map: DispatchMap::ToHost.name().to_owned(),
        }]));
        input.rules.push(self.accept_if_accepted());

        // The host may always talk to its own workloads (health checks, neighbour discovery):
        // output carries host endpoints' outbound policy only, as in Calico 1.x.
        let mut output = NftChain::base(names::OUTPUT, ChainType::Filter, Hook::Output, 0);
        output.rules.push(untracked_allowed);
        for p in &prefixes {
            output
                .rules
                .push(plain(vec![Self::oif(p), Expr::Verdict(Verdict::Return)]));
        }
        output.rules.push(self.clear_both());
        output.rules.push(plain(vec![Expr::Vmap {
            key: MapKey::Oifname,
            map: DispatchMap::FromHost.name().to_owned(),
        }]));
        output.rules.push(self.accept_if_accepted());

        let mut dispatch = Vec::new();
        for (name, map, key) in [
            (
                names::FROM_WL_DISPATCH,
                DispatchMap::FromWorkload,
                MapKey::Iifname,
            ),
            (
                names::TO_WL_DISPATCH,
                DispatchMap::ToWorkload,
                MapKey::Oifname,
            ),
        ] {
            let mut chain = NftChain::new(name);
            chain.rules.push(plain(vec![Expr::Vmap {
                key,
                map: map.name().to_owned(),
            }]));
            chain
                .rules
                .push(drop_rule(self.config, vec![], "unknown workload interface"));
            dispatch.push(chain);
        }

        let clear_all = plain(vec![clear(marks.both() | marks.untracked)]);
        let mut raw_pre = NftChain::base(
            names::RAW_PREROUTING,
            ChainType::Filter,
            Hook::Prerouting,
            -300,
        );
        raw_pre.rules.push(clear_all.clone());
        raw_pre.rules.push(plain(vec![
            Expr::DaddrIsLocal,
            Expr::Vmap {
                key: MapKey::Iifname,
                map: DispatchMap::UntrackedToHost.name().to_owned(),
            },
        ]));
        let mut raw_out = NftChain::base(names::RAW_OUTPUT, ChainType::Filter, Hook::Output, -300);
        raw_out.rules.push(clear_all);
        raw_out.rules.push(plain(vec![Expr::Vmap {
            key: MapKey::Oifname,
            map: DispatchMap::UntrackedFromHost.name().to_owned(),
        }]));

        let mut nat_pre = NftChain::base(
            names::NAT_PREROUTING,
            ChainType::Nat,
            Hook::Prerouting,
            -100,
        );
        if let Some(to) = self.config.metadata {
            for p in &prefixes {
                nat_pre.rules.push(rule(
                    vec![
                        Self::iif(p),
                        Expr::NfProto(IpFamily::V4),
                        Expr::Addr {
                            dir: Dir::Dst,
                            net: IpNet::from(IpAddr::V4(*METADATA_SERVICE.ip())),
                            negate: false,
                        },
                        Expr::L4Proto {
                            proto: 6,
                            negate: false,
                        },
                        port(Dir::Dst, METADATA_SERVICE.port()),
                        Expr::Dnat {
                            addr: IpAddr::V4(*to.ip()),
                            port: Some(to.port()),
                        },
                    ],
                    "metadata",
                ));
            }
        }
        nat_pre.rules.push(plain(vec![jump(names::FIP_DNAT)]));
        let mut nat_out = NftChain::base(names::NAT_OUTPUT, ChainType::Nat, Hook::Output, -100);
        nat_out.rules.push(plain(vec![jump(names::FIP_DNAT)]));
        let mut nat_post = NftChain::base(
            names::NAT_POSTROUTING,
            ChainType::Nat,
            Hook::Postrouting,
            100,
        );
        nat_post.rules.push(plain(vec![jump(names::FIP_SNAT)]));
        for family in [IpFamily::V4, IpFamily::V6] {
            nat_post.rules.push(rule(
                vec![
                    Expr::NfProto(family),
                    Expr::AddrInSet {
                        dir: Dir::Src,
                        family,
                        set: names::masquerade_pools(family),
                        negate: false,
                    },
                    Expr::AddrInSet {
                        dir: Dir::Dst,
                        family,
                        set: names::all_pools(family),
                        negate: true,
                    },
                    Expr::Masquerade,
                ],
                "masquerade pools",
            ));
        }

        let mut chains = vec![
            input, forward, output, raw_pre, raw_out, nat_pre, nat_out, nat_post,
        ];
        chains.extend(dispatch);
        let sets = DispatchMap::ALL
            .into_iter()
            .map(|map| NftSet {
                spec: SetSpec {
                    name: map.name().to_owned(),
                    kind: SetKind::IfnameVmap,
                    comment: Some(format!("interface -> {}-<iface>", map.name())),
                },
                elements: BTreeSet::new(),
            })
            .collect();
        Part {
            chains,
            sets,
            elements: Vec::new(),
        }
    }

    /// The bootstrap whitelist (000 §2.5.2): what a workload needs from its host whatever its
    /// policy says, as the iptables rendering has it (`render::filter::host_services`).
    fn host_services(&self) -> Vec<Vec<Expr>> {
        let udp = Expr::L4Proto {
            proto: 17,
            negate: false,
        };
        let tcp = Expr::L4Proto {
            proto: 6,
            negate: false,
        };
        let mut services = vec![
            vec![
                Expr::NfProto(IpFamily::V4),
                udp.clone(),
                port(Dir::Src, 68),
                port(Dir::Dst, 67),
            ],
            vec![
                Expr::NfProto(IpFamily::V6),
                udp.clone(),
                port(Dir::Src, 546),
                port(Dir::Dst, 547),
            ],
            vec![udp, port(Dir::Dst, 53)],
            vec![tcp.clone(), port(Dir::Dst, 53)],
        ];
        if let Some(metadata) = self.config.metadata {
            services.push(vec![
                Expr::NfProto(IpFamily::V4),
                Expr::Addr {
                    dir: Dir::Dst,
                    net: IpNet::from(IpAddr::V4(*metadata.ip())),
                    negate: false,
                },
                tcp,
                port(Dir::Dst, metadata.port()),
            ]);
        }
        for icmp_type in [130, 131, 132, 133, 135, 136] {
            services.push(vec![
                Expr::NfProto(IpFamily::V6),
                Expr::L4Proto {
                    proto: 58,
                    negate: false,
                },
                Expr::Icmp {
                    family: IpFamily::V6,
                    icmp_type,
                    code: None,
                    negate: false,
                },
            ]);
        }
        services
    }

    fn pools(&self, state: &DesiredState) -> Part {
        let mut sets = Vec::new();
        for family in [IpFamily::V4, IpFamily::V6] {
            for (name, cidrs, what) in [
                (names::all_pools(family), &state.pools, "every IP pool"),
                (
                    names::masquerade_pools(family),
                    &state.masquerade_pools,
                    "the IP pools with masquerade",
                ),
            ] {
                sets.push(NftSet {
                    spec: SetSpec {
                        name,
                        kind: SetKind::Nets(family),
                        comment: Some(what.to_owned()),
                    },
                    elements: disjoint(cidrs.iter().filter(|c| net_family(c) == family))
                        .map(Element::Net)
                        .collect(),
                });
            }
        }
        Part {
            sets,
            ..Part::default()
        }
    }

    fn ipset(&self, state: &DesiredState, id: &str) -> Part {
        let Some(set) = state.ipsets.get(id) else {
            return Part::default();
        };
        let what = match &set.source {
            calico_calc::IpSetSource::Selector(s) => format!("selector {}", s.canonical()),
            calico_calc::IpSetSource::Tag(t) => format!("tag {t}"),
        };
        let sets = [IpFamily::V4, IpFamily::V6]
            .into_iter()
            .map(|family| NftSet {
                spec: SetSpec {
                    name: names::ipset(family, id),
                    kind: SetKind::Addrs(family),
                    comment: Some(comment_text(&what)),
                },
                elements: set
                    .members
                    .iter()
                    .filter(|a| addr_family(a) == family)
                    .map(|a| Element::Addr(*a))
                    .collect(),
            })
            .collect();
        Part {
            sets,
            ..Part::default()
        }
    }

    /// The 1:1 NAT chains: `ext_ip` DNATed to `int_ip`; a workload's connection to its own
    /// `ext_ip` (hairpin) SNATed to come from it. An `ext_ip` mapped twice goes to the first.
    fn nat(&self, state: &DesiredState) -> Part {
        let mut dnat = NftChain::new(names::FIP_DNAT);
        let mut snat = NftChain::new(names::FIP_SNAT);
        let mut mapped = BTreeSet::new();
        let mappings = state
            .endpoints
            .iter()
            .filter(|(key, program)| matches!(key, EndpointKey::Workload(_)) && program.active)
            .flat_map(|(_, program)| program.nat.iter().copied());
        for (int, ext) in mappings {
            let family = addr_family(&int);
            if addr_family(&ext) != family || !mapped.insert(ext) {
                continue;
            }
            let host = |a: IpAddr, dir| Expr::Addr {
                dir,
                net: IpNet::from(a),
                negate: false,
            };
            dnat.rules.push(plain(vec![
                Expr::NfProto(family),
                host(ext, Dir::Dst),
                Expr::Dnat {
                    addr: int,
                    port: None,
                },
            ]));
            snat.rules.push(plain(vec![
                Expr::NfProto(family),
                host(int, Dir::Src),
                host(int, Dir::Dst),
                Expr::Snat { addr: ext },
            ]));
        }
        Part {
            chains: vec![dnat, snat],
            ..Part::default()
        }
    }

    /// An endpoint's chains and its elements in the dispatch maps.
    fn endpoint(
        &self,
        key: &EndpointKey,
        iface: &str,
        program: &EndpointProgram,
        missing: Option<&str>,
    ) -> Part {
        let mut part = Part::default();
        let host = matches!(key, EndpointKey::Host(_));
        let (to, from) = if host {
            (DispatchMap::ToHost, DispatchMap::FromHost)
        } else {
            (DispatchMap::ToWorkload, DispatchMap::FromWorkload)
        };
        let mut chain_in = NftChain::new(&to.chain(iface));
        let mut chain_out = NftChain::new(&from.chain(iface));
        if host {
            self.host_preamble(&mut chain_in, &self.config.failsafe_inbound);
            self.host_preamble(&mut chain_out, &self.config.failsafe_outbound);
        } else if let Some(spoof) = self.anti_spoofing(iface, &program.addresses, &mut chain_out) {
            part.chains.push(spoof);
        }
        self.policy_body(&mut chain_in, program, true, missing);
        self.policy_body(&mut chain_out, program, false, missing);
        // Workload dispatch chains drop unknown interfaces, so their elements go to the
        // endpoint's chain for good (goto); host endpoints come back to the base chain.
        let verdict = |chain: &NftChain| {
            if host {
                Verdict::Jump(chain.name.clone())
            } else {
                Verdict::Goto(chain.name.clone())
            }
        };
        part.elements.push((
            to.name().to_owned(),
            Element::Ifname {
                name: iface.to_owned(),
                verdict: verdict(&chain_in),
            },
        ));
        part.elements.push((
            from.name().to_owned(),
            Element::Ifname {
                name: iface.to_owned(),
                verdict: verdict(&chain_out),
            },
        ));
        part.chains.push(chain_in);
        part.chains.push(chain_out);
        if host && program.active && !program.untracked_tiers.is_empty() {
            for (map, inbound) in [
                (DispatchMap::UntrackedToHost, true),
                (DispatchMap::UntrackedFromHost, false),
            ] {
                let chain = self.untracked_chain(&map.chain(iface), program, inbound);
                part.elements.push((
                    map.name().to_owned(),
                    Element::Ifname {
                        name: iface.to_owned(),
                        verdict: Verdict::Jump(chain.name.clone()),
                    },
                ));
                part.chains.push(chain);
            }
        }
        part
    }

    /// Host endpoints: conntrack first, then the failsafe ports.
    fn host_preamble(&self, chain: &mut NftChain, ports: &[u16]) {
        chain.rules.push(plain(vec![
            ct(CtStates::INVALID),
            Expr::Verdict(Verdict::Drop),
        ]));
        chain.rules.push(plain(vec![
            ct(CtStates::ESTABLISHED.union(CtStates::RELATED)),
            Expr::Verdict(Verdict::Accept),
        ]));
        if !ports.is_empty() {
            chain.rules.push(rule(
                vec![
                    Expr::L4Proto {
                        proto: 6,
                        negate: false,
                    },
                    Expr::Ports {
                        dir: Dir::Dst,
                        ports: ports
                            .iter()
                            .map(|p| Ports {
                                first: *p,
                                last: *p,
                            })
                            .collect(),
                        negate: false,
                    },
                    Expr::Verdict(Verdict::Accept),
                ],
                "failsafe",
            ));
        }
    }

    /// A workload may only send from its own addresses, per family: none of a family drops
    /// that family; one is a single negated match; several return from a chain of their own,
    /// whose last rule drops.
    fn anti_spoofing(
        &self,
        iface: &str,
        addresses: &[IpAddr],
        chain: &mut NftChain,
    ) -> Option<NftChain> {
        let mut spoof = NftChain::new(&names::anti_spoof_chain(iface));
        for family in [IpFamily::V4, IpFamily::V6] {
            let own: Vec<&IpAddr> = addresses
                .iter()
                .filter(|a| addr_family(a) == family)
                .collect();
            match own.as_slice() {
                [] => chain.rules.push(drop_rule(
                    self.config,
                    vec![Expr::NfProto(family)],
                    "no address of this IP version",
                )),
                [one] => chain.rules.push(drop_rule(
                    self.config,
                    vec![
                        Expr::NfProto(family),
                        Expr::Addr {
                            dir: Dir::Src,
                            net: IpNet::from(**one),
                            negate: true,
                        },
                    ],
                    "anti-spoofing",
                )),
                several => {
                    for address in several {
                        spoof.rules.push(plain(vec![
                            Expr::NfProto(family),
                            Expr::Addr {
                                dir: Dir::Src,
                                net: IpNet::from(**address),
                                negate: false,
                            },
                            Expr::Verdict(Verdict::Return),
                        ]));
                    }
                    chain
                        .rules
                        .push(plain(vec![Expr::NfProto(family), jump(spoof.name.clone())]));
                }
            }
        }
        if spoof.rules.is_empty() {
            return None;
        }
        spoof
            .rules
            .push(drop_rule(self.config, vec![], "anti-spoofing"));
        Some(spoof)
    }

    /// Tiers, then profiles, then drop.
    fn policy_body(
        &self,
        chain: &mut NftChain,
        program: &EndpointProgram,
        inbound: bool,
        missing: Option<&str>,
    ) {
        if !program.active {
            chain
                .rules
                .push(drop_rule(self.config, vec![], "endpoint inactive"));
            return;
        }
        let marks = self.config.marks;
        chain.rules.push(self.clear_both());
        let return_if_accepted = plain(vec![marked(marks.accept), Expr::Verdict(Verdict::Return)]);
        let flow_logs = self.config.flow_logs;
        let evaluated = program.tiers.iter().filter(|t| t.enforces() || flow_logs);
        for (index, tier) in evaluated.enumerate() {
            if index > 0 {
                chain.rules.push(plain(vec![clear(marks.pass)]));
            }
            if flow_logs {
                for id in &tier.staged {
                    let target = staged_chain(inbound, &id.tier, &id.name);
                    chain.rules.push(plain(vec![jump(target)]));
                }
            }
            if !tier.enforces() {
                continue; // staged policies only: nothing to enforce, no end of tier
            }
            let list = TierList {
                inbound,
                policies: tier.policies.clone(),
            };
            if let Some(entry) = list.entry() {
                chain.rules.push(plain(vec![jump(entry)]));
            }
            chain.rules.push(return_if_accepted.clone());
            let why = format!("end of tier {}", tier.name);
            let step = Step::EndOfTier {
                tier: tier.name.clone(),
            };
            chain.rules.push(logged_drop_rule(
                self.config,
                vec![unmarked(marks.pass)],
                &why,
                step,
                inbound,
            ));
        }
        if program.missing_profile {
            let step = Step::MissingProfile {
                name: missing.unwrap_or_default().to_owned(),
            };
            chain.rules.push(logged_drop_rule(
                self.config,
                vec![],
                "missing profile",
                step,
                inbound,
            ));
            return;
        }
        for profile in &program.profiles {
            chain
                .rules
                .push(plain(vec![jump(names::profile_chain(inbound, profile))]));
            chain.rules.push(return_if_accepted.clone());
        }
        chain.rules.push(logged_drop_rule(
            self.config,
            vec![],
            "no profile matched",
            Step::NoProfileMatched,
            inbound,
        ));
    }

    /// A host endpoint's untracked policies (raw priority): a policy that allows marks the
    /// packet untracked, takes it out of connection tracking and accepts it.
    fn untracked_chain(&self, name: &str, program: &EndpointProgram, inbound: bool) -> NftChain {
        let marks = self.config.marks;
        let mut chain = NftChain::new(name);
        for tier in &program.untracked_tiers {
            chain.rules.push(plain(vec![clear(marks.pass)]));
            for id in &tier.policies {
                let target = names::policy_chain(inbound, &id.tier, &id.name);
                chain
                    .rules
                    .push(plain(vec![unmarked(marks.pass), jump(target)]));
                chain.rules.push(plain(vec![
                    marked(marks.accept),
                    Expr::SetMark {
                        mask: marks.untracked,
                        value: marks.untracked,
                    },
                    Expr::Notrack,
                    Expr::Verdict(Verdict::Accept),
                ]));
            }
        }
        chain
    }

    /// The inbound and outbound chains of a policy or profile.
    fn rule_chains(
        &self,
        what: &str,
        rules: &Rules,
        owner: RuleOwner<'_>,
        name: impl Fn(bool) -> String,
    ) -> Part {
        let chains = [
            (true, &rules.inbound, "inbound"),
            (false, &rules.outbound, "outbound"),
        ]
        .into_iter()
        .map(|(inbound, list, direction)| {
            let mut chain = NftChain::new(&name(inbound));
            for (index, calico_rule) in list.iter().enumerate() {
                let cx = RuleContext {
                    config: self.config,
                    owner,
                    inbound,
                    index: index as u32,
                    comment: format!("{what} {direction} rule {}", index + 1),
                };
                chain.rules.extend(render_rule(calico_rule, &cx));
            }
            chain
        })
        .collect();
        Part {
            chains,
            ..Part::default()
        }
    }
}

fn port(dir: Dir, port: u16) -> Expr {
    Expr::Ports {
        dir,
        ports: vec![Ports {
            first: port,
            last: port,
        }],
        negate: false,
    }
}

fn addr_family(address: &IpAddr) -> IpFamily {
    match address {
        IpAddr::V4(_) => IpFamily::V4,
        IpAddr::V6(_) => IpFamily::V6,
    }
}

fn net_family(net: &IpNet) -> IpFamily {
    addr_family(&net.addr())
}

/// The nets without those inside another (an interval set refuses overlaps).
fn disjoint<'a>(nets: impl Iterator<Item = &'a IpNet>) -> impl Iterator<Item = IpNet> {
    let nets: Vec<IpNet> = nets.map(IpNet::trunc).collect();
    let kept: Vec<IpNet> = nets
        .iter()
        .filter(|n| !nets.iter().any(|o| o != *n && o.contains(*n)))
        .copied()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    kept.into_iter()
}
