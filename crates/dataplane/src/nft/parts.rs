//! What each owner of the table puts in it ([`Part`]), rendered from the desired state by
//! [`Renderer`], pure: the fixed frame (base chains, dispatch maps, host services), the pool
//! sets, one IP set, the NAT chains, an endpoint's chains (anti-spoofing, tiers, profiles; a
//! host endpoint's preamble and untracked chains), and a policy's or profile's rule chains.
//! `ruleset.rs` decides which owners a change touches and keeps their parts.

use std::collections::BTreeSet;
use std::net::IpAddr;

use calico_calc::{DesiredState, EndpointKey, EndpointProgram, Rules};
use calico_linux::nft::{
    CtStates, Dir, Element, Expr, IfName, IpFamily, Ports, Rule, SetKind, SetSpec, Verdict,
};
use ipnet::IpNet;

use super::names::{self, DispatchMap, staged_chain};
use super::rules::{
    RuleContext, RuleOwner, clear, comment_text, ct, drop_rule, jump, logged_drop_rule, marked,
    plain, render_rule, rule, unmarked,
};
use super::table::{NftChain, NftSet};
use super::tiers::TierList;
use crate::comment::{NFT_COMMENT_MAX, rule_comment};
use crate::firewall::build;
use crate::firewall::config::RenderConfig;
use crate::firewall::model::{Body, Dropped, Guard, Profiles};

/// What one owner put in the table.
#[derive(Debug, Default)]
pub(super) struct Part {
    pub(super) chains: Vec<NftChain>,
    pub(super) sets: Vec<NftSet>,
    /// Elements of maps owned by someone else (the frame's dispatch maps).
    pub(super) elements: Vec<(String, Element)>,
}

/// Renders the pieces; pure.
pub(super) struct Renderer<'a> {
    pub(super) config: &'a RenderConfig,
}

impl Renderer<'_> {
    pub(super) fn prefixes(&self) -> Vec<IfName> {
        self.config
            .interface_prefixes
            .iter()
            .map(|p| IfName::Prefix(p.to_owned()))
            .collect()
    }

    pub(super) fn iif(name: &IfName) -> Expr {
        Expr::Iifname {
            name: name.clone(),
            negate: false,
        }
    }

    pub(super) fn oif(name: &IfName) -> Expr {
        Expr::Oifname {
            name: name.clone(),
            negate: false,
        }
    }

    pub(super) fn clear_both(&self) -> Rule {
        plain(vec![clear(self.config.marks.both())])
    }

    pub(super) fn accept_if_accepted(&self) -> Rule {
        plain(vec![
            marked(self.config.marks.accept),
            Expr::Verdict(Verdict::Accept),
        ])
    }

    pub(super) fn pools(&self, state: &DesiredState) -> Part {
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

    pub(super) fn ipset(&self, state: &DesiredState, id: &str) -> Part {
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
    pub(super) fn nat(&self, state: &DesiredState) -> Part {
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
    pub(super) fn endpoint(
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
        let model = build::endpoint_of(key, iface, program, missing.unwrap_or(""), self.config);
        for (chain, program) in [
            (&mut chain_in, &model.inbound),
            (&mut chain_out, &model.outbound),
        ] {
            match &program.guard {
                Guard::None => {}
                Guard::HostPreamble { failsafe_ports } => self.host_preamble(chain, failsafe_ports),
                Guard::AntiSpoofing { addresses } => {
                    part.chains
                        .extend(self.anti_spoofing(iface, addresses, chain));
                }
            }
        }
        self.policy_body(&mut chain_in, &model.inbound.body, true);
        self.policy_body(&mut chain_out, &model.outbound.body, false);
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

    /// A drop that is a step of the evaluation: logged first with a flow-log step.
    fn dropped(&self, matches: Vec<Expr>, dropped: &Dropped) -> calico_linux::nft::Rule {
        match &dropped.flow_log {
            Some(log) => logged_drop_rule(
                self.config,
                matches,
                &dropped.why,
                log.step.clone(),
                log.inbound,
            ),
            None => drop_rule(self.config, matches, &dropped.why),
        }
    }

    /// The model's policy body: tiers (a tier of several policies through its shared
    /// dispatch chain, [`TierList`]), then profiles, then drop.
    fn policy_body(&self, chain: &mut NftChain, body: &Body, inbound: bool) {
        let (tiers, profiles) = match body {
            Body::Inactive(dropped) => {
                chain.rules.push(self.dropped(vec![], dropped));
                return;
            }
            Body::Active { tiers, profiles } => (tiers, profiles),
        };
        let marks = self.config.marks;
        chain.rules.push(self.clear_both());
        let return_if_accepted = plain(vec![marked(marks.accept), Expr::Verdict(Verdict::Return)]);
        for (index, tier) in tiers.iter().enumerate() {
            if index > 0 {
                chain.rules.push(plain(vec![clear(marks.pass)]));
            }
            for id in &tier.staged {
                let target = staged_chain(inbound, &id.tier, &id.name);
                chain.rules.push(plain(vec![jump(target)]));
            }
            let Some(end_of_tier) = &tier.end_of_tier else {
                continue; // staged policies only: nothing to enforce, no end of tier
            };
            let list = TierList {
                inbound,
                policies: tier.policies.clone(),
            };
            if let Some(entry) = list.entry() {
                chain.rules.push(plain(vec![jump(entry)]));
            }
            chain.rules.push(return_if_accepted.clone());
            chain
                .rules
                .push(self.dropped(vec![unmarked(marks.pass)], end_of_tier));
        }
        match profiles {
            Profiles::Missing(dropped) => chain.rules.push(self.dropped(vec![], dropped)),
            Profiles::Listed {
                profiles,
                none_matched,
            } => {
                for profile in profiles {
                    chain
                        .rules
                        .push(plain(vec![jump(names::profile_chain(inbound, profile))]));
                    chain.rules.push(return_if_accepted.clone());
                }
                chain.rules.push(self.dropped(vec![], none_matched));
            }
        }
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
    pub(super) fn rule_chains(
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
                    comment: rule_comment(what, direction, index + 1, NFT_COMMENT_MAX),
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

pub(super) fn port(dir: Dir, port: u16) -> Expr {
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
