//! The raw table: untracked policies of host endpoints, evaluated before connection tracking
//! for traffic to and from the host itself. A packet an untracked policy allows is marked
//! (the `untracked` bit), exempted from conntrack (`NOTRACK`) and accepted by the filter
//! table's entry chains; one it denies is dropped here; one no untracked policy decides goes on
//! to the filter table untouched. Rendered whole: it only holds host endpoints' chains.

use calico_calc::{DesiredState, PolicyId};

use super::chain::{Chain, restore_text};
use super::encode::Encoder;
use super::{IpVersion, policy_chain};
use crate::firewall::build;
use crate::firewall::config::RenderConfig;
use crate::firewall::model::Untracked;

/// The raw table for one IP version, as `iptables-restore --noflush` input. The kernel's raw
/// PREROUTING and OUTPUT chains need jumps to `cali-PREROUTING` and `cali-OUTPUT`.
pub fn render_raw(state: &DesiredState, config: &RenderConfig, version: IpVersion) -> String {
    let chains = raw_chains(state, config, version);
    restore_text("raw", &chains.iter().collect::<Vec<_>>(), &[])
}

/// The raw table's chains for one IP version, in the order [`render_raw`] declares them.
pub(crate) fn raw_chains(
    state: &DesiredState,
    config: &RenderConfig,
    version: IpVersion,
) -> Vec<Chain> {
    encode(&build::untracked(state, config), config, version)
}

/// The model's untracked part as the raw table's chains.
fn encode(untracked: &Untracked, config: &RenderConfig, version: IpVersion) -> Vec<Chain> {
    let encoder = Encoder { config, version };
    let marks = config.marks;
    let clear = format!(
        "-j MARK --set-xmark 0x0/{:#x}",
        marks.both() | marks.untracked
    );
    let mut prerouting = Chain::new("cali-PREROUTING");
    prerouting.push(clear.clone());
    prerouting.push("-m addrtype --dst-type LOCAL -j cali-raw-hep-in");
    let mut output = Chain::new("cali-OUTPUT");
    output.push(clear);
    output.push("-j cali-raw-hep-out");
    let mut hep_in = Chain::new("cali-raw-hep-in");
    let mut hep_out = Chain::new("cali-raw-hep-out");
    let mut endpoint_chains = Vec::new();
    for endpoint in &untracked.endpoints {
        let iface = &endpoint.iface;
        hep_in.push(format!("-i {iface} -g cali-ui-{iface}"));
        hep_out.push(format!("-o {iface} -g cali-ue-{iface}"));
        for inbound in [true, false] {
            let name = format!("cali-u{}-{iface}", if inbound { 'i' } else { 'e' });
            endpoint_chains.push(untracked_chain(config, name, &endpoint.tiers, inbound));
        }
    }
    let mut chains = vec![prerouting, output, hep_in, hep_out];
    chains.extend(endpoint_chains);
    for (id, rules) in &untracked.policies {
        chains.extend(
            encoder.rule_chains(rules, |inbound| policy_chain(inbound, &id.tier, &id.name)),
        );
    }
    chains
}

/// A host endpoint's untracked policies in one direction: tiers in order; an allow marks,
/// un-tracks and accepts; no decision falls through (no end-of-tier drop here).
fn untracked_chain(
    config: &RenderConfig,
    name: String,
    tiers: &[Vec<PolicyId>],
    inbound: bool,
) -> Chain {
    let marks = config.marks;
    let (accept, pass, untracked) = (marks.accept, marks.pass, marks.untracked);
    let if_accepted = format!("-m mark --mark {accept:#x}/{accept:#x}");
    let mut chain = Chain::new(name);
    for tier in tiers {
        chain.push(format!("-j MARK --set-xmark 0x0/{pass:#x}"));
        for id in tier {
            let target = policy_chain(inbound, &id.tier, &id.name);
            chain.push(format!("-m mark --mark 0x0/{pass:#x} -j {target}"));
            chain.push(format!(
                "{if_accepted} -j MARK --set-xmark {untracked:#x}/{untracked:#x}"
            ));
            chain.push(format!("{if_accepted} -j NOTRACK"));
            chain.push(format!("{if_accepted} -j ACCEPT"));
        }
    }
    chain
}
