//! Which resource a document or a key is about: its identity, read from `metadata` or from a
//! key of the data model, and the keys and prefixes that hold it.
//!
//! The names must fit the key grammar: a name is checked by formatting the key it lands in and
//! parsing that key back with `Key::parse`, so the rules are the model's, stated once.

use std::net::IpAddr;

use calico_model::ValidationError;
use calico_model::key::{HostEndpointId, Key, PeerScope, Prefix, WorkloadEndpointId};
use calico_model::names;
use calico_model::names::SHARED;
use calico_model::rule::IpVersion;
use calico_model::space::MappingScope;
use ipnet::IpNet;
use serde_json::{Map, Value};

use super::kind::Kind;

/// The global Felix configuration's name; a host's is `node.<hostname>`.
pub const GLOBAL: &str = "default";
const NODE_PREFIX: &str = "node.";

/// One resource's identity.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Id {
    Tier(String),
    Policy {
        tier: String,
        name: String,
    },
    StagedPolicy {
        tier: String,
        name: String,
    },
    Profile(String),
    WorkloadEndpoint(WorkloadEndpointId),
    HostEndpoint(HostEndpointId),
    IpPool(IpNet),
    BgpPeer {
        node: Option<String>,
        ip: IpAddr,
    },
    Node(String),
    /// `None`: the global configuration.
    FelixConfig(Option<String>),
    IpamConfig,
    /// A pool of a private address space (kind ipPool, `metadata.space`).
    SpacePool {
        space: String,
        cidr: IpNet,
    },
    AddressSpace(String),
    SpaceConfig,
    /// Named `network.<id>` or `project.<id>`.
    SpaceMapping {
        scope: MappingScope,
        id: String,
    },
}

impl Id {
    pub fn kind(&self) -> Kind {
        match self {
            Id::Tier(_) => Kind::Tier,
            Id::Policy { .. } => Kind::Policy,
            Id::StagedPolicy { .. } => Kind::StagedPolicy,
            Id::Profile(_) => Kind::Profile,
            Id::WorkloadEndpoint(_) => Kind::WorkloadEndpoint,
            Id::HostEndpoint(_) => Kind::HostEndpoint,
            Id::IpPool(_) => Kind::IpPool,
            Id::BgpPeer { .. } => Kind::BgpPeer,
            Id::Node(_) => Kind::Node,
            Id::FelixConfig(_) => Kind::FelixConfig,
            Id::IpamConfig => Kind::IpamConfig,
            Id::SpacePool { .. } => Kind::IpPool,
            Id::AddressSpace(_) => Kind::AddressSpace,
            Id::SpaceConfig => Kind::AddressSpaceConfig,
            Id::SpaceMapping { .. } => Kind::AddressSpaceMapping,
        }
    }

    /// `metadata.name`.
    pub fn name(&self) -> String {
        match self {
            Id::Tier(name) | Id::Profile(name) | Id::Node(name) => name.clone(),
            Id::Policy { name, .. } | Id::StagedPolicy { name, .. } => name.clone(),
            Id::WorkloadEndpoint(id) => id.endpoint.clone(),
            Id::HostEndpoint(id) => id.endpoint.clone(),
            Id::IpPool(cidr) | Id::SpacePool { cidr, .. } => cidr.to_string(),
            Id::AddressSpace(name) => name.clone(),
            Id::SpaceConfig => GLOBAL.to_owned(),
            Id::SpaceMapping { scope, id } => format!("{}.{id}", scope.as_str()),
            Id::BgpPeer { ip, .. } => ip.to_string(),
            Id::FelixConfig(None) | Id::IpamConfig => GLOBAL.to_owned(),
            Id::FelixConfig(Some(host)) => format!("{NODE_PREFIX}{host}"),
        }
    }

    /// The host the resource belongs to, if it belongs to one.
    pub fn node(&self) -> Option<&str> {
        match self {
            Id::WorkloadEndpoint(id) => Some(&id.hostname),
            Id::HostEndpoint(id) => Some(&id.hostname),
            Id::BgpPeer { node, .. } | Id::FelixConfig(node) => node.as_deref(),
            Id::Node(name) => Some(name),
            _ => None,
        }
    }

    /// The tier of a policy.
    pub fn tier(&self) -> Option<&str> {
        match self {
            Id::Policy { tier, .. } | Id::StagedPolicy { tier, .. } => Some(tier),
            Id::Tier(tier) => Some(tier),
            _ => None,
        }
    }

    /// `metadata`, in the order documents write it.
    pub fn metadata(&self) -> Map<String, Value> {
        let mut map = Map::new();
        map.insert("name".into(), self.name().into());
        match self {
            Id::Policy { tier, .. } | Id::StagedPolicy { tier, .. } => {
                map.insert("tier".into(), tier.clone().into());
            }
            Id::WorkloadEndpoint(id) => {
                map.insert("node".into(), id.hostname.clone().into());
                map.insert("orchestrator".into(), id.orchestrator.clone().into());
                map.insert("workload".into(), id.workload.clone().into());
            }
            Id::HostEndpoint(id) => {
                map.insert("node".into(), id.hostname.clone().into());
            }
            Id::SpacePool { space, .. } => {
                map.insert("space".into(), space.clone().into());
            }
            Id::BgpPeer {
                node: Some(node), ..
            } => {
                map.insert("node".into(), node.clone().into());
            }
            _ => {}
        }
        map
    }

    /// Reads the identity from a document's `metadata` (whose fields the caller has checked).
    pub fn from_metadata(kind: Kind, metadata: &Map<String, Value>) -> Result<Id, ValidationError> {
        let field = |name: &str| -> Result<Option<String>, ValidationError> {
            match metadata.get(name) {
                None | Some(Value::Null) => Ok(None),
                // A pool is named by its CIDR, which has a '/'; it becomes the key's `-` form.
                Some(Value::String(text)) if !text.contains('/') || kind == Kind::IpPool => {
                    Ok(Some(text.clone()))
                }
                Some(Value::String(text)) => Err(ValidationError::new(
                    format!("metadata.{name}"),
                    format!("{text:?} must not contain '/' (it is one segment of a key)"),
                )),
                Some(other) => Err(ValidationError::new(
                    format!("metadata.{name}"),
                    format!("expected a string, got {other}"),
                )),
            }
        };
        let required = |name: &str| {
            field(name)?.ok_or_else(|| ValidationError::new(format!("metadata.{name}"), "missing"))
        };
        let name = required("name")?;
        let id = match kind {
            Kind::Tier => Id::Tier(name),
            Kind::Policy => Id::Policy {
                tier: field("tier")?.unwrap_or_else(|| GLOBAL.to_owned()),
                name,
            },
            Kind::StagedPolicy => Id::StagedPolicy {
                tier: field("tier")?.unwrap_or_else(|| GLOBAL.to_owned()),
                name,
            },
            Kind::Profile => Id::Profile(name),
            Kind::WorkloadEndpoint => Id::WorkloadEndpoint(WorkloadEndpointId {
                hostname: required("node")?,
                orchestrator: required("orchestrator")?,
                workload: required("workload")?,
                endpoint: name,
            }),
            Kind::HostEndpoint => Id::HostEndpoint(HostEndpointId {
                hostname: required("node")?,
                endpoint: name,
            }),
            Kind::IpPool => match field("space")? {
                Some(space) if space != SHARED => Id::SpacePool {
                    space,
                    cidr: parse_cidr(&name)?,
                },
                _ => Id::IpPool(parse_cidr(&name)?),
            },
            Kind::AddressSpace => Id::AddressSpace(name),
            Kind::AddressSpaceConfig if name == GLOBAL => Id::SpaceConfig,
            Kind::AddressSpaceConfig => {
                let reason = format!("{name:?}: the address space config is named {GLOBAL:?}");
                return Err(ValidationError::new("metadata.name", reason));
            }
            Kind::AddressSpaceMapping => mapping_of(&name)?,
            Kind::BgpPeer => Id::BgpPeer {
                node: field("node")?,
                ip: parse_ip(&name)?,
            },
            Kind::Node => Id::Node(name),
            Kind::FelixConfig => Id::FelixConfig(felix_scope(&name)?),
            Kind::IpamConfig if name == GLOBAL => Id::IpamConfig,
            Kind::IpamConfig => {
                let reason = format!("{name:?}: the IPAM configuration is named {GLOBAL:?}");
                return Err(ValidationError::new("metadata.name", reason));
            }
        };
        id.check_names()?;
        Ok(id)
    }

    /// Checks the names against the key grammar by parsing the keys they make.
    fn check_names(&self) -> Result<(), ValidationError> {
        if let Id::FelixConfig(Some(host)) = self {
            return names::validate_hostname(host).map_err(|e| e.within("metadata.name"));
        }
        for key in self.keys() {
            let text = key.to_string();
            if let Err(err) = Key::parse(&text) {
                return Err(ValidationError::new("metadata", err.reason));
            }
        }
        Ok(())
    }

    /// The resource a key belongs to, if it belongs to one.
    pub fn of_key(key: &Key) -> Option<Id> {
        Some(match key {
            Key::TierMetadata { tier } => Id::Tier(tier.clone()),
            Key::Policy { tier, policy } => Id::Policy {
                tier: tier.clone(),
                name: policy.clone(),
            },
            Key::StagedPolicy { tier, policy } => Id::StagedPolicy {
                tier: tier.clone(),
                name: policy.clone(),
            },
            Key::ProfileRules { profile }
            | Key::ProfileTags { profile }
            | Key::ProfileLabels { profile } => Id::Profile(profile.clone()),
            Key::WorkloadEndpoint(id) => Id::WorkloadEndpoint(id.clone()),
            Key::HostEndpoint(id) => Id::HostEndpoint(id.clone()),
            Key::Pool { cidr } => Id::IpPool(*cidr),
            Key::BgpPeer {
                scope: PeerScope::Global,
                ip,
            } => Id::BgpPeer {
                node: None,
                ip: *ip,
            },
            Key::BgpPeer {
                scope: PeerScope::Host(host),
                ip,
            } => Id::BgpPeer {
                node: Some(host.clone()),
                ip: *ip,
            },
            Key::HostIp { hostname, .. }
            | Key::HostAsNum { hostname }
            | Key::RrClusterId { hostname }
            | Key::HostBgpLogLevel { hostname } => Id::Node(hostname.clone()),
            Key::GlobalConfig { .. } => Id::FelixConfig(None),
            Key::HostConfig { hostname, .. } => Id::FelixConfig(Some(hostname.clone())),
            Key::IpamConfig => Id::IpamConfig,
            Key::SpacePool { space, cidr } => Id::SpacePool {
                space: space.clone(),
                cidr: *cidr,
            },
            Key::AddressSpace { space } => Id::AddressSpace(space.clone()),
            Key::SpaceConfig => Id::SpaceConfig,
            Key::SpaceMapping { scope, id } => Id::SpaceMapping {
                scope: *scope,
                id: id.clone(),
            },
            _ => return None,
        })
    }

    /// The fixed keys of the resource (none for a Felix configuration: see `prefix`).
    pub fn keys(&self) -> Vec<Key> {
        match self.clone() {
            Id::Tier(tier) => vec![Key::TierMetadata { tier }],
            Id::Policy { tier, name } => vec![Key::Policy { tier, policy: name }],
            Id::StagedPolicy { tier, name } => vec![Key::StagedPolicy { tier, policy: name }],
            Id::Profile(profile) => vec![
                Key::ProfileRules {
                    profile: profile.clone(),
                },
                Key::ProfileTags {
                    profile: profile.clone(),
                },
                Key::ProfileLabels { profile },
            ],
            Id::WorkloadEndpoint(id) => vec![Key::WorkloadEndpoint(id)],
            Id::HostEndpoint(id) => vec![Key::HostEndpoint(id)],
            Id::IpPool(cidr) => vec![Key::Pool { cidr }],
            Id::BgpPeer { node, ip } => {
                let scope = node.map_or(PeerScope::Global, PeerScope::Host);
                vec![Key::BgpPeer { scope, ip }]
            }
            Id::Node(hostname) => node_keys(&hostname),
            Id::FelixConfig(_) => Vec::new(),
            Id::IpamConfig => vec![Key::IpamConfig],
            Id::SpacePool { space, cidr } => vec![Key::SpacePool { space, cidr }],
            Id::AddressSpace(space) => vec![Key::AddressSpace { space }],
            Id::SpaceConfig => vec![Key::SpaceConfig],
            Id::SpaceMapping { scope, id } => vec![Key::SpaceMapping { scope, id }],
        }
    }

    /// The prefix below which a Felix configuration's parameters are.
    pub fn prefix(&self) -> Option<String> {
        let prefix = match self {
            Id::FelixConfig(None) => Prefix::GlobalConfig,
            Id::FelixConfig(Some(host)) => Prefix::HostConfig {
                hostname: host.clone(),
            },
            _ => return None,
        };
        Some(prefix.to_string())
    }
}

/// A node's keys, in the order of its `spec` fields.
pub fn node_keys(hostname: &str) -> Vec<Key> {
    let hostname = hostname.to_owned();
    vec![
        Key::HostIp {
            hostname: hostname.clone(),
            version: IpVersion::V4,
        },
        Key::HostIp {
            hostname: hostname.clone(),
            version: IpVersion::V6,
        },
        Key::HostAsNum {
            hostname: hostname.clone(),
        },
        Key::RrClusterId {
            hostname: hostname.clone(),
        },
        Key::HostBgpLogLevel { hostname },
    ]
}

/// The prefixes to list for every resource of a kind.
pub fn prefixes(kind: Kind) -> Vec<String> {
    let prefixes = match kind {
        Kind::Tier | Kind::Policy | Kind::StagedPolicy => vec![Prefix::Tiers],
        Kind::Profile => vec![Prefix::Profiles],
        Kind::WorkloadEndpoint | Kind::HostEndpoint => vec![Prefix::Hosts],
        Kind::IpPool => vec![Prefix::Pools],
        Kind::BgpPeer => vec![Prefix::Bgp],
        Kind::Node => vec![Prefix::BgpHosts],
        Kind::AddressSpace | Kind::AddressSpaceConfig | Kind::AddressSpaceMapping => {
            vec![Prefix::AddressSpaces]
        }
        Kind::FelixConfig => vec![Prefix::GlobalConfig, Prefix::Hosts],
        // One key: listed as its own prefix.
        Kind::IpamConfig => return vec![Key::IpamConfig.to_string()],
    };
    prefixes.iter().map(Prefix::to_string).collect()
}

fn parse_cidr(name: &str) -> Result<IpNet, ValidationError> {
    let bad = |reason: String| ValidationError::new("metadata.name", reason);
    let cidr: IpNet = name
        .parse()
        .map_err(|_| bad(format!("{name:?} is not a CIDR (e.g. 10.65.0.0/16)")))?;
    if cidr.trunc() != cidr {
        let reason = format!("{cidr} has host bits set; the network is {}", cidr.trunc());
        return Err(bad(reason));
    }
    Ok(cidr)
}

fn parse_ip(name: &str) -> Result<IpAddr, ValidationError> {
    let bad = |reason: String| ValidationError::new("metadata.name", reason);
    let ip: IpAddr = name
        .parse()
        .map_err(|_| bad(format!("{name:?} is not an IP address")))?;
    if ip.to_string() != name {
        return Err(bad(format!(
            "{name:?} is not written canonically; write {ip}"
        )));
    }
    Ok(ip)
}

/// `network.<id>` or `project.<id>`.
fn mapping_of(name: &str) -> Result<Id, ValidationError> {
    let parsed = name.split_once('.').and_then(|(scope, id)| {
        let scope = MappingScope::from_segment(scope)?;
        Some(Id::SpaceMapping {
            scope,
            id: id.to_owned(),
        })
    });
    parsed.ok_or_else(|| {
        ValidationError::new(
            "metadata.name",
            format!("{name:?}: a mapping is named network.<network id> or project.<project id>"),
        )
    })
}

fn felix_scope(name: &str) -> Result<Option<String>, ValidationError> {
    if name == GLOBAL {
        return Ok(None);
    }
    match name.strip_prefix(NODE_PREFIX) {
        Some(host) if !host.is_empty() => Ok(Some(host.to_owned())),
        _ => Err(ValidationError::new(
            "metadata.name",
            format!("{name:?}: a Felix configuration is named {GLOBAL:?} or node.<hostname>"),
        )),
    }
}
