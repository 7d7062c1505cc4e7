//! The kinds of resource documents, their spelling in documents and on the command line.

use std::fmt;

/// The `apiVersion` of every document this tool reads and writes.
pub const API_VERSION: &str = "projectcalico.org/v1";

/// A kind of resource: what a document's `kind` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Tier,
    Policy,
    /// A policy evaluated without enforcing (its verdicts reach only the flow logs).
    StagedPolicy,
    Profile,
    WorkloadEndpoint,
    HostEndpoint,
    IpPool,
    BgpPeer,
    Node,
    FelixConfig,
    IpamConfig,
    /// A private address space and its ID (issue 34).
    AddressSpace,
    /// The cluster's translation prefix.
    AddressSpaceConfig,
    /// The address space of a Neutron network's or project's ports.
    AddressSpaceMapping,
}

impl Kind {
    pub const ALL: [Kind; 14] = [
        Kind::Tier,
        Kind::Policy,
        Kind::StagedPolicy,
        Kind::Profile,
        Kind::WorkloadEndpoint,
        Kind::HostEndpoint,
        Kind::IpPool,
        Kind::BgpPeer,
        Kind::Node,
        Kind::FelixConfig,
        Kind::IpamConfig,
        Kind::AddressSpace,
        Kind::AddressSpaceConfig,
        Kind::AddressSpaceMapping,
    ];

    /// The spelling of `kind` in a document.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Tier => "tier",
            Kind::Policy => "policy",
            Kind::StagedPolicy => "stagedPolicy",
            Kind::Profile => "profile",
            Kind::WorkloadEndpoint => "workloadEndpoint",
            Kind::HostEndpoint => "hostEndpoint",
            Kind::IpPool => "ipPool",
            Kind::BgpPeer => "bgpPeer",
            Kind::Node => "node",
            Kind::FelixConfig => "felixConfig",
            Kind::IpamConfig => "ipamConfig",
            Kind::AddressSpace => "addressSpace",
            Kind::AddressSpaceConfig => "addressSpaceConfig",
            Kind::AddressSpaceMapping => "addressSpaceMapping",
        }
    }

    /// Names accepted on the command line besides the document spelling and its plural (`+s`):
    /// upstream calicoctl's plurals and short names for the same kind (Calico 2.x's `v1`
    /// resources; the `*configuration` forms are Calico 3's), and ours (`peer`).
    pub fn aliases(self) -> &'static [&'static str] {
        match self {
            Kind::Tier => &[],
            Kind::Policy => &["policies", "pol", "pols"],
            Kind::StagedPolicy => &["stagedpolicies", "spol", "spols"],
            Kind::Profile => &["pro", "pros"],
            Kind::WorkloadEndpoint => &["wep", "weps"],
            Kind::HostEndpoint => &["hep", "heps"],
            Kind::IpPool => &["ipp", "ipps", "pool", "pools"],
            Kind::BgpPeer => &["bgpp", "bgpps", "bp", "bps", "peer", "peers"],
            Kind::Node => &["no", "nos"],
            Kind::FelixConfig => &["felixconfiguration", "felixconfigurations"],
            Kind::IpamConfig => &["ipamconfiguration", "ipamconfigurations"],
            Kind::AddressSpace => &["space", "spaces"],
            Kind::AddressSpaceConfig => &["spaceconfig", "spaceconfigs"],
            Kind::AddressSpaceMapping => &["spacemapping", "spacemappings"],
        }
    }

    /// The kind a document names: exactly the document spelling.
    pub fn from_document(text: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|kind| kind.as_str() == text)
    }

    /// The kind a command line names: any case, singular or plural, or a short name.
    pub fn from_cli(text: &str) -> Option<Kind> {
        let text = text.to_ascii_lowercase();
        Kind::ALL.into_iter().find(|kind| {
            let name = kind.as_str().to_ascii_lowercase();
            text == name || text == format!("{name}s") || kind.aliases().contains(&text.as_str())
        })
    }

    /// Every document spelling, for error messages.
    pub fn list() -> String {
        let names: Vec<&str> = Kind::ALL.iter().map(|kind| kind.as_str()).collect();
        names.join(", ")
    }

    /// The `metadata` fields a document of this kind may have; the first ones are required.
    pub fn metadata_fields(self) -> (&'static [&'static str], &'static [&'static str]) {
        match self {
            Kind::Policy | Kind::StagedPolicy => (&["name"], &["tier"]),
            Kind::WorkloadEndpoint => (&["name", "node", "orchestrator", "workload"], &[]),
            Kind::HostEndpoint => (&["name", "node"], &[]),
            Kind::BgpPeer => (&["name"], &["node"]),
            Kind::IpPool => (&["name"], &["space"]),
            _ => (&["name"], &[]),
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_takes_plurals_and_short_names() {
        assert_eq!(Kind::from_cli("policies"), Some(Kind::Policy));
        assert_eq!(Kind::from_cli("IPPool"), Some(Kind::IpPool));
        assert_eq!(
            Kind::from_cli("workloadendpoints"),
            Some(Kind::WorkloadEndpoint)
        );
        assert_eq!(Kind::from_cli("hep"), Some(Kind::HostEndpoint));
        assert_eq!(Kind::from_cli("felixconfigs"), Some(Kind::FelixConfig));
        assert_eq!(Kind::from_cli("widget"), None);
        // Upstream calicoctl's short names and plurals, every one of them.
        let upstream = [
            (Kind::Policy, "policy policies pol pols"),
            (Kind::Profile, "profile profiles pro pros"),
            (
                Kind::WorkloadEndpoint,
                "workloadendpoint workloadendpoints wep weps",
            ),
            (Kind::HostEndpoint, "hostendpoint hostendpoints hep heps"),
            (Kind::IpPool, "ippool ippools ipp ipps pool pools"),
            (Kind::BgpPeer, "bgppeer bgppeers bgpp bgpps bp bps"),
            (Kind::Node, "node nodes no nos"),
            (Kind::Tier, "tier tiers"),
            (
                Kind::StagedPolicy,
                "stagedpolicy stagedpolicies stagedpolicys spol spols",
            ),
            (
                Kind::FelixConfig,
                "felixconfiguration felixconfigurations felixconfig felixconfigs",
            ),
            (
                Kind::IpamConfig,
                "ipamconfiguration ipamconfigurations ipamconfig ipamconfigs",
            ),
        ];
        for (kind, names) in upstream {
            for name in names.split(' ') {
                assert_eq!(Kind::from_cli(name), Some(kind), "{name}");
                assert_eq!(Kind::from_cli(&name.to_uppercase()), Some(kind), "{name}");
            }
        }
        assert_eq!(Kind::from_document("ippool"), None);
    }
}
