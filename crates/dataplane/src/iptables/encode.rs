//! The firewall model's pieces ([`crate::firewall::model`]) as iptables chains, for one IP
//! version. Marks carry the outcome between chains: a policy or profile chain that allows
//! sets the accept bit and returns; `next-tier` sets the pass bit. An endpoint chain clears
//! both, runs each tier (a tier of several policies in a chain of its own that returns as soon
//! as either bit is set; returning at once on accept, dropping at the end of a tier that
//! neither passed nor accepted), then the profiles, then drops. The entry chains accept what
//! an endpoint chain accepted.

use std::net::IpAddr;

use super::chain::Chain;
use super::rules::{encode_rule, flow_log_rule};
use super::{IpVersion, holds, policy_chain, profile_chain, quote, staged_policy_chain};
use crate::comment::{IPTABLES_COMMENT_MAX, bounded};
use crate::firewall::config::RenderConfig;
use crate::firewall::model::{
    Body, Dispatch, Dropped, Endpoint, Frame, Guard, HostService, Kind, Profiles, Route, RuleSet,
};

/// Encodes the model's pieces as chains of iptables rules, for one IP version.
pub(crate) struct Encoder<'a> {
    pub(super) config: &'a RenderConfig,
    pub(super) version: IpVersion,
}

impl Encoder<'_> {
    fn clear_marks(&self) -> String {
        let both = self.config.marks.both();
        format!("-j MARK --set-xmark 0x0/{both:#x}")
    }

    fn if_accepted(&self) -> String {
        let accept = self.config.marks.accept;
        format!("-m mark --mark {accept:#x}/{accept:#x}")
    }

    /// The rules of a drop that is a step of the evaluation after `matched` (which may be
    /// empty): with a flow-log step, an NFLOG rule with the same matches names it first.
    fn dropped(&self, matched: &str, dropped: &Dropped) -> Vec<String> {
        let log = dropped.flow_log.as_ref().map(|flow_log| {
            let comment = format!(
                "-m comment --comment {}",
                quote(&bounded(&dropped.why, IPTABLES_COMMENT_MAX))
            );
            flow_log_rule(&join(&[&comment, matched]), flow_log)
        });
        log.into_iter()
            .chain(self.drop(matched, &dropped.why))
            .collect()
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

    pub(super) fn entry_chains(&self, frame: &Frame) -> Vec<Chain> {
        let wls: Vec<String> = (frame.workload_prefixes.iter())
            .map(|prefix| format!("{prefix}+"))
            .collect();
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
        let services = (frame.host_services.iter())
            .filter(|s| s.version().is_none_or(|v| v == self.version))
            .map(host_service);
        for rule in services {
            each(&mut input, &|wl| format!("-i {wl} {rule} -j ACCEPT"));
        }
        input.push(self.clear_marks());
        each(&mut input, &|wl| format!("-i {wl} -j cali-wl-out"));
        each(&mut input, &|wl| {
            format!(
                "-i {wl} -m comment --comment DefaultEndpointToHostAction -j {}",
                frame.endpoint_to_host.target()
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

    /// Interface → endpoint chain. An unknown workload interface is dropped (fail closed); an
    /// interface without a host endpoint returns untouched.
    pub(super) fn dispatch_chains(&self, dispatch: &Dispatch) -> Vec<Chain> {
        let mut wl_in = Chain::new("cali-wl-in");
        let mut wl_out = Chain::new("cali-wl-out");
        let mut hep_in = Chain::new("cali-hep-in");
        let mut hep_out = Chain::new("cali-hep-out");
        for Route { iface, .. } in &dispatch.workloads {
            wl_in.push(format!("-o {iface} -g cali-wi-{iface}"));
            wl_out.push(format!("-i {iface} -g cali-we-{iface}"));
        }
        for Route { iface, .. } in &dispatch.hosts {
            hep_in.push(format!("-i {iface} -g cali-hi-{iface}"));
            hep_out.push(format!("-o {iface} -g cali-he-{iface}"));
        }
        for rule in self.drop("", "unknown workload interface") {
            wl_in.push(rule.clone());
            wl_out.push(rule);
        }
        vec![wl_in, wl_out, hep_in, hep_out]
    }

    pub(super) fn endpoint_chains(&self, endpoint: &Endpoint) -> Vec<Chain> {
        let iface = &endpoint.iface;
        let host = endpoint.kind == Kind::Host;
        let (inbound, outbound) = if host {
            (format!("cali-hi-{iface}"), format!("cali-he-{iface}"))
        } else {
            (format!("cali-wi-{iface}"), format!("cali-we-{iface}"))
        };
        let mut chains = Vec::new();
        let mut chain_in = Chain::new(inbound);
        let mut chain_out = Chain::new(outbound);
        let tier_prefix = |inbound: bool| match (host, inbound) {
            (false, true) => "cali-ti",
            (false, false) => "cali-te",
            (true, true) => "cali-thi",
            (true, false) => "cali-the",
        };
        let mut directions = [
            (&mut chain_in, &endpoint.inbound, true),
            (&mut chain_out, &endpoint.outbound, false),
        ];
        // The guards' chains first, then the tiers' (the order chains are declared in).
        for (chain, program, _) in &mut directions {
            chains.extend(self.guard(iface, &program.guard, chain));
        }
        for (chain, program, inbound) in directions {
            let tier_chain = |index: usize| format!("{}{index}-{iface}", tier_prefix(inbound));
            chains.extend(self.policy_body(chain, &program.body, inbound, tier_chain));
        }
        chains.push(chain_in);
        chains.push(chain_out);
        chains
    }

    /// The guard's rules in `chain`, and the anti-spoofing chain if it needs one.
    fn guard(&self, iface: &str, guard: &Guard, chain: &mut Chain) -> Option<Chain> {
        match guard {
            Guard::None => None,
            Guard::HostPreamble { failsafe_ports } => {
                host_preamble(chain, failsafe_ports);
                None
            }
            Guard::AntiSpoofing { addresses } => self.anti_spoofing(iface, addresses, chain),
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
    /// Marks carry the outcome: a tier with one policy is a jump in the endpoint chain. A
    /// tier with several has a chain of its own (named by `tier_chain(index)`) that leaves as
    /// soon as a policy accepted or passed: once a policy says `next-tier`, a packet walks
    /// none of the tier's other policies.
    fn policy_body(
        &self,
        chain: &mut Chain,
        body: &Body,
        inbound: bool,
        tier_chain: impl Fn(usize) -> String,
    ) -> Vec<Chain> {
        let (tiers, profiles) = match body {
            Body::Inactive(dropped) => {
                chain.rules.extend(self.drop("", &dropped.why));
                return Vec::new();
            }
            Body::Active { tiers, profiles } => (tiers, profiles),
        };
        let marks = self.config.marks;
        let not_passed = format!("-m mark --mark 0x0/{:#x}", marks.pass);
        let decided = format!("-m mark ! --mark 0x0/{:#x} -j RETURN", marks.both());
        let mut own_chains = Vec::new();
        chain.push(self.clear_marks());
        for (index, tier) in tiers.iter().enumerate() {
            if index > 0 {
                chain.push(format!("-j MARK --set-xmark 0x0/{:#x}", marks.pass));
            }
            for id in &tier.staged {
                let target = staged_policy_chain(inbound, &id.tier, &id.name);
                chain.push(format!("-j {target}"));
            }
            let Some(end_of_tier) = &tier.end_of_tier else {
                continue; // staged policies only: nothing to enforce, no end of tier
            };
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
                    own_chains.push(own);
                }
            }
            chain.push(format!("{} -j RETURN", self.if_accepted()));
            chain.rules.extend(self.dropped(&not_passed, end_of_tier));
        }
        match profiles {
            Profiles::Missing(dropped) => chain.rules.extend(self.dropped("", dropped)),
            Profiles::Listed {
                profiles,
                none_matched,
            } => {
                for profile in profiles {
                    chain.push(format!("-j {}", profile_chain(inbound, profile)));
                    chain.push(format!("{} -j RETURN", self.if_accepted()));
                }
                chain.rules.extend(self.dropped("", none_matched));
            }
        }
        own_chains
    }

    /// The inbound and outbound chains of a policy or profile.
    pub(super) fn rule_chains(&self, rules: &RuleSet, name: impl Fn(bool) -> String) -> Vec<Chain> {
        [(true, &rules.inbound), (false, &rules.outbound)]
            .into_iter()
            .map(|(inbound, list)| {
                let mut chain = Chain::new(name(inbound));
                for rule in list {
                    chain
                        .rules
                        .extend(encode_rule(rule, self.config, self.version));
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

/// Host endpoints: conntrack first, then the failsafe ports.
fn host_preamble(chain: &mut Chain, ports: &[u16]) {
    chain.push("-m conntrack --ctstate INVALID -j DROP");
    chain.push("-m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT");
    if !ports.is_empty() {
        let list: Vec<String> = ports.iter().map(u16::to_string).collect();
        chain.push(format!(
            "-p tcp -m multiport --dports {} -m comment --comment failsafe -j ACCEPT",
            list.join(",")
        ));
    }
}

/// A host service's matches.
fn host_service(service: &HostService) -> String {
    match service {
        HostService::Port {
            protocol,
            src_port,
            dst_port,
            dst,
            ..
        } => {
            let dst = dst.map(|a| format!("-d {a}/32"));
            let sport = src_port.map(|p| format!("--sport {p}"));
            let proto = format!("-p {protocol} -m {protocol}");
            let dport = format!("--dport {dst_port}");
            let parts = [
                dst.as_deref().unwrap_or(""),
                &proto,
                sport.as_deref().unwrap_or(""),
                &dport,
            ];
            join(&parts)
        }
        HostService::Icmpv6 { icmp_type } => {
            format!("-p ipv6-icmp -m icmp6 --icmpv6-type {icmp_type}")
        }
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
