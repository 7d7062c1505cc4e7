//! Which firewall backend programs the kernel (`NFTablesMode`), said in one line with the
//! reason, never chosen silently.
//!
//! | NFTablesMode | nf_tables works here | backend |
//! | --- | --- | --- |
//! | `Disabled` (default) | either | iptables |
//! | `Enabled` | yes | nftables |
//! | `Enabled` | no | none: Felix refuses to start, naming the reason |
//! | `Auto` | yes | nftables |
//! | `Auto` | no | iptables, with a warning naming the reason |

use std::sync::Arc;

use calico_dataplane::{Backend, BackendKind, Dataplane, NftDataplane, Written, calico_table};
use calico_linux::nft::Nft;
use calico_linux::{Ipset, Iptables, Netns};

use crate::config::{Config, NftablesMode};

/// A backend and why it was chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    pub kind: BackendKind,
    pub reason: String,
    /// Whether the reason is worth a warning (`Auto` fell back to iptables).
    pub fell_back: bool,
}

/// The backend for `mode`, given whether nf_tables works (`probe`); an error when the mode
/// asks for nf_tables and the kernel cannot give it.
pub fn choose(
    mode: NftablesMode,
    probe: impl FnOnce() -> Result<(), String>,
) -> Result<Choice, String> {
    let choice = |kind, reason: &str, fell_back| Choice {
        kind,
        reason: reason.to_owned(),
        fell_back,
    };
    match mode {
        NftablesMode::Disabled => Ok(choice(
            BackendKind::Iptables,
            "NFTablesMode=Disabled",
            false,
        )),
        NftablesMode::Enabled => match probe() {
            Ok(()) => Ok(choice(BackendKind::Nftables, "NFTablesMode=Enabled", false)),
            Err(reason) => Err(format!(
                "NFTablesMode=Enabled but nf_tables does not work here ({reason}); set \
                 NFTablesMode=Disabled (iptables) or Auto, or load the nf_tables module"
            )),
        },
        NftablesMode::Auto => match probe() {
            Ok(()) => Ok(choice(
                BackendKind::Nftables,
                "NFTablesMode=Auto and nf_tables works here",
                false,
            )),
            Err(reason) => Ok(Choice {
                kind: BackendKind::Iptables,
                reason: format!("NFTablesMode=Auto but nf_tables does not work here ({reason})"),
                fell_back: true,
            }),
        },
    }
}

/// The backend `config` asks for, in `netns`, counting what it writes into `written`.
pub fn build(netns: &Netns, config: &Config, written: &Arc<Written>) -> Result<Backend, String> {
    let choice = choose(config.nftables_mode, || {
        calico_linux::nft::probe(netns).map_err(|e| e.to_string())
    })?;
    if choice.fell_back {
        tracing::warn!(backend = %choice.kind, "firewall backend: {}", choice.reason);
    } else {
        tracing::info!(backend = %choice.kind, "firewall backend: {}", choice.reason);
    }
    let nft = Box::new(Nft::new(netns.clone(), calico_table()));
    Ok(match choice.kind {
        BackendKind::Iptables => Backend::Iptables {
            dataplane: Box::new(
                Dataplane::new(netns.clone(), config.render()).counting_into(written.clone()),
            ),
            other: nft,
        },
        BackendKind::Nftables => Backend::Nftables {
            dataplane: Box::new(
                NftDataplane::with_kernel(nft, config.render()).counting_into(written.clone()),
            ),
            iptables: Box::new(Iptables::new(netns.clone())),
            ipsets: Box::new(Ipset::new(netns.clone())),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_mode_chooses_or_refuses_with_its_reason() {
        let works = || Ok(());
        let missing = || Err("no nf_tables in this kernel".to_owned());
        assert_eq!(
            choose(NftablesMode::Disabled, missing).unwrap().kind,
            BackendKind::Iptables
        );
        assert_eq!(
            choose(NftablesMode::Enabled, works).unwrap().kind,
            BackendKind::Nftables
        );
        let refused = choose(NftablesMode::Enabled, missing).unwrap_err();
        assert!(
            refused.contains("NFTablesMode=Enabled") && refused.contains("no nf_tables"),
            "{refused}"
        );
        let auto = choose(NftablesMode::Auto, works).unwrap();
        assert_eq!((auto.kind, auto.fell_back), (BackendKind::Nftables, false));
        let fallback = choose(NftablesMode::Auto, missing).unwrap();
        assert_eq!(fallback.kind, BackendKind::Iptables);
        assert!(fallback.fell_back && fallback.reason.contains("no nf_tables"));
    }
}
