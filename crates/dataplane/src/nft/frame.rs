//! The fixed frame of the table, owned by no endpoint or policy: the base chains on the
//! kernel's hooks, the dispatch chains and their (empty) verdict maps, the NAT base chains
//! (with the metadata DNAT), and the bootstrap whitelist a workload gets from its host
//! whatever its policy says (DHCP, DNS, the metadata server). The layout is drawn in
//! `ruleset.rs`; what endpoints and policies add is `parts.rs`'s.

use std::collections::BTreeSet;
use std::net::IpAddr;

use calico_linux::nft::{
    ChainType, CtStates, Dir, Expr, Hook, IpFamily, MapKey, SetKind, SetSpec, Verdict,
};
use ipnet::IpNet;

use super::names::{self, DispatchMap};
use super::parts::{Part, Renderer, port};
use super::rules::{clear, ct, drop_rule, jump, marked, plain, rule};
use super::table::{NftChain, NftSet};
use crate::firewall::config::METADATA_SERVICE;

impl Renderer<'_> {
    /// The base chains, the dispatch chains and the (empty) dispatch maps.
    pub(super) fn frame(&self) -> Part {
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
    /// policy says, as the firewall model has it (`firewall::build::frame`).
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
}
