//! The value stored at a key, parsed and validated for that key: `parse_value(&key, text)`.
//!
//! Besides each object's own rules, the value must agree with its key: a pool's `cidr`, a block's
//! `cidr`, a handle's `id` and a peer's `ip` are the ones the key names.

use std::net::{IpAddr, Ipv4Addr};

use crate::bgp::{AsNumber, BGP_LOG_LEVELS, BgpPeer, NodeMesh};
use crate::endpoint::{HostEndpoint, WorkloadEndpoint};
use crate::error::{ValidationError, from_json};
use crate::ipam::{AllocationBlock, AllocationHandle, IpamConfig};
use crate::key::Key;
use crate::policy::{Policy, TierMetadata};
use crate::pool::IpPool;
use crate::profile::{ProfileLabels, ProfileRules, ProfileTags};
use crate::rule::IpVersion;
use crate::space::{AddressSpace, SpaceConfig, SpaceMapping, check_space_pool};
use crate::status::{EndpointStatus, FelixStatus};
use crate::tunnel::VxlanTunnel;

/// A validated value, typed by its key.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Ready(bool),
    /// A Felix parameter, as text; Felix gives it a type.
    Config(String),
    BirdIp(Ipv4Addr),
    VxlanTunnel(VxlanTunnel),
    WorkloadEndpoint(Box<WorkloadEndpoint>),
    HostEndpoint(Box<HostEndpoint>),
    ProfileRules(Box<ProfileRules>),
    ProfileTags(ProfileTags),
    ProfileLabels(ProfileLabels),
    TierMetadata(TierMetadata),
    Policy(Box<Policy>),
    /// A staged policy: a policy's fields; never untracked.
    StagedPolicy(Box<Policy>),
    /// A pool of the shared space or (at a `SpacePool` key) of a private one.
    Pool(IpPool),
    SpaceConfig(SpaceConfig),
    AddressSpace(AddressSpace),
    SpaceMapping(SpaceMapping),
    Block(Box<AllocationBlock>),
    Handle(AllocationHandle),
    /// Block affinities hold no value (an empty string).
    BlockAffinity,
    IpamConfig(IpamConfig),
    AsNumber(AsNumber),
    NodeMesh(NodeMesh),
    BgpPeer(BgpPeer),
    /// The address BIRD uses on this host; `None` when stored empty (no address of that version).
    HostIp(Option<IpAddr>),
    /// The route reflector cluster ID; `None` when stored empty (not a route reflector).
    RrClusterId(Option<Ipv4Addr>),
    BgpLogLevel(String),
    FelixStatus(FelixStatus),
    EndpointStatus(EndpointStatus),
    /// Security group rules calico-neutron left out of a profile.
    LeftOut(crate::leftout::LeftOut),
}

/// Parses and validates `raw` as the value of `key`.
pub fn parse_value(key: &Key, raw: &str) -> Result<Value, ValidationError> {
    Ok(match key {
        Key::Ready => Value::Ready(parse_bool(raw)?),
        Key::GlobalConfig { .. } | Key::HostConfig { .. } => Value::Config(raw.to_owned()),
        Key::BirdIp { .. } => Value::BirdIp(parse_text(raw, "an IPv4 address")?),
        Key::VxlanTunnel { .. } => Value::VxlanTunnel(from_json(raw)?),
        Key::WorkloadEndpoint(_) => Value::WorkloadEndpoint(Box::new(from_json(raw)?)),
        Key::HostEndpoint(_) => Value::HostEndpoint(Box::new(from_json(raw)?)),
        Key::ProfileRules { .. } => Value::ProfileRules(Box::new(from_json(raw)?)),
        Key::ProfileTags { .. } => Value::ProfileTags(from_json(raw)?),
        Key::ProfileLabels { .. } => Value::ProfileLabels(from_json(raw)?),
        Key::TierMetadata { .. } => Value::TierMetadata(from_json(raw)?),
        Key::Policy { .. } => Value::Policy(Box::new(from_json(raw)?)),
        Key::StagedPolicy { .. } => Value::StagedPolicy(Box::new(parse_staged(raw)?)),
        Key::Pool { cidr } => {
            let pool: IpPool = from_json(raw)?;
            same("cidr", &pool.cidr, cidr)?;
            Value::Pool(pool)
        }
        Key::SpacePool { cidr, .. } => {
            let pool: IpPool = from_json(raw)?;
            same("cidr", &pool.cidr, cidr)?;
            check_space_pool(&pool)?;
            Value::Pool(pool)
        }
        Key::SpaceConfig => Value::SpaceConfig(from_json(raw)?),
        Key::AddressSpace { .. } => Value::AddressSpace(from_json(raw)?),
        Key::SpaceMapping { .. } => Value::SpaceMapping(from_json(raw)?),
        Key::Block { cidr } => {
            let block: AllocationBlock = from_json(raw)?;
            same("cidr", &block.cidr, cidr)?;
            Value::Block(Box::new(block))
        }
        Key::Handle { handle } => {
            let value: AllocationHandle = from_json(raw)?;
            same("id", &value.id, handle)?;
            Value::Handle(value)
        }
        Key::BlockAffinity { .. } => parse_affinity(raw)?,
        Key::IpamConfig => Value::IpamConfig(from_json(raw)?),
        Key::GlobalAsNum | Key::HostAsNum { .. } => {
            Value::AsNumber(raw.parse().map_err(ValidationError::object)?)
        }
        Key::NodeMesh { .. } => Value::NodeMesh(from_json(raw)?),
        Key::BgpPeer { ip, .. } => {
            let peer: BgpPeer = from_json(raw)?;
            same("ip", &peer.ip, ip)?;
            Value::BgpPeer(peer)
        }
        Key::HostIp { version, .. } => Value::HostIp(parse_host_ip(raw, *version)?),
        Key::RrClusterId { .. } => Value::RrClusterId(parse_optional(raw, "an IPv4 address")?),
        Key::GlobalBgpLogLevel | Key::HostBgpLogLevel { .. } => parse_log_level(raw)?,
        Key::FelixStatus { .. } | Key::FelixLastReportedStatus { .. } => {
            Value::FelixStatus(from_json(raw)?)
        }
        Key::WorkloadEndpointStatus(_) | Key::HostEndpointStatus(_) => {
            Value::EndpointStatus(from_json(raw)?)
        }
        Key::LeftOut { .. } => Value::LeftOut(from_json(raw)?),
    })
}

/// A staged policy: a policy, evaluated only where tracked policies are (the filter table), so
/// `untracked` is refused rather than ignored.
fn parse_staged(raw: &str) -> Result<Policy, ValidationError> {
    let policy: Policy = from_json(raw)?;
    if policy.untracked {
        return Err(ValidationError::new(
            "untracked",
            "a staged policy cannot be untracked (staged policies are evaluated with the \
             tracked policies only); remove untracked or stage it as a tracked policy",
        ));
    }
    Ok(policy)
}

/// The value names the same thing as the key.
fn same<T: PartialEq + std::fmt::Display>(
    field: &str,
    in_value: &T,
    in_key: &T,
) -> Result<(), ValidationError> {
    if in_value == in_key {
        return Ok(());
    }
    let reason = format!("{in_value} does not match the key, which names {in_key}");
    Err(ValidationError::new(field, reason))
}

fn parse_bool(raw: &str) -> Result<bool, ValidationError> {
    match raw.trim() {
        "true" => Ok(true),
        "false" => Ok(false),
        other => Err(ValidationError::object(format!(
            "expected true or false, got {other:?}"
        ))),
    }
}

fn parse_text<T: std::str::FromStr>(raw: &str, what: &str) -> Result<T, ValidationError> {
    raw.trim()
        .parse()
        .map_err(|_| ValidationError::object(format!("expected {what}, got {raw:?}")))
}

/// Empty means "none".
fn parse_optional<T: std::str::FromStr>(
    raw: &str,
    what: &str,
) -> Result<Option<T>, ValidationError> {
    if raw.trim().is_empty() {
        return Ok(None);
    }
    parse_text(raw, what).map(Some)
}

fn parse_host_ip(raw: &str, version: IpVersion) -> Result<Option<IpAddr>, ValidationError> {
    let what = format!("an {version} address (or nothing)");
    let ip: Option<IpAddr> = parse_optional(raw, &what)?;
    match ip {
        Some(ip) if IpVersion::of_addr(&ip) != version => Err(ValidationError::object(format!(
            "expected {what}, got {ip}"
        ))),
        _ => Ok(ip),
    }
}

fn parse_affinity(raw: &str) -> Result<Value, ValidationError> {
    if raw.trim().is_empty() {
        return Ok(Value::BlockAffinity);
    }
    Err(ValidationError::object(
        "a block affinity holds no value: store an empty string",
    ))
}

fn parse_log_level(raw: &str) -> Result<Value, ValidationError> {
    let level = raw.trim();
    if BGP_LOG_LEVELS.contains(&level) {
        return Ok(Value::BgpLogLevel(level.to_owned()));
    }
    Err(ValidationError::object(format!(
        "unknown BGP log level {level:?} (expected one of {})",
        BGP_LOG_LEVELS.join(", ")
    )))
}
