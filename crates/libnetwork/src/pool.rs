//! The IPAM driver's decisions, pure: which Calico pool a network's `RequestPool` maps to and
//! the pool id that carries that choice through later calls (the driver keeps no state for
//! pools, so a restarted driver reads the same ids), and what a `RequestAddress` asks for.

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;

use calico_model::IpVersion;
use calico_model::pool::IpPool;
use ipnet::IpNet;

use crate::api::{Options, RequestAddressRequest, RequestPoolRequest, RequestPoolResponse};
use crate::error::DriverError;

/// The address spaces this driver reports; any other is refused.
pub const LOCAL_SPACE: &str = "CalicoLocal";
pub const GLOBAL_SPACE: &str = "CalicoGlobal";

/// The option libnetwork reads from `RequestPool`'s data as the network's gateway: an
/// unspecified one means no gateway address is requested, and containers route through
/// 169.254.1.1 instead.
pub const GATEWAY_OPTION: &str = "com.docker.network.gateway";

/// `RequestAddress`'s option that marks the gateway request.
const ADDRESS_TYPE_OPTION: &str = "RequestAddressType";

/// Options `RequestAddress` may carry that change nothing here (a MAC given with
/// `--mac-address`).
const IGNORED_ADDRESS_OPTIONS: &[&str] = &["com.docker.network.endpoint.macaddress"];

/// What a network's addresses come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolId {
    /// Any enabled Calico pool of the family (no `--subnet`).
    Any(IpVersion),
    /// A `--subnet` inside one Calico pool.
    Subnet(IpNet),
}

impl PoolId {
    /// Reads a pool id this driver handed out.
    pub fn parse(id: &str) -> Result<PoolId, DriverError> {
        match id {
            "CalicoPoolIPv4" => Ok(PoolId::Any(IpVersion::V4)),
            "CalicoPoolIPv6" => Ok(PoolId::Any(IpVersion::V6)),
            other => other.parse().map(PoolId::Subnet).map_err(|_| {
                DriverError::invalid("PoolID", id, "not a pool id this driver handed out")
            }),
        }
    }

    pub fn version(&self) -> IpVersion {
        match self {
            PoolId::Any(version) => *version,
            PoolId::Subnet(net) => IpVersion::of_addr(&net.addr()),
        }
    }
}

impl fmt::Display for PoolId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PoolId::Any(IpVersion::V4) => f.write_str("CalicoPoolIPv4"),
            PoolId::Any(IpVersion::V6) => f.write_str("CalicoPoolIPv6"),
            PoolId::Subnet(net) => write!(f, "{net}"),
        }
    }
}

/// The whole address range of a family, as a network without `--subnet` reports its pool.
pub fn everything(version: IpVersion) -> &'static str {
    match version {
        IpVersion::V4 => "0.0.0.0/0",
        IpVersion::V6 => "::/0",
    }
}

/// Refuses any option (`--ipam-opt`): none is defined yet.
fn no_options(field: &'static str, options: &Options, allowed: &[&str]) -> Result<(), DriverError> {
    let unknown = options
        .iter()
        .flatten()
        .map(|(k, _)| k.as_str())
        .find(|k| !allowed.contains(k));
    match unknown {
        Some(key) => Err(DriverError::invalid(field, key, "unknown option")),
        None => Ok(()),
    }
}

/// Answers `RequestPool` from the Calico pools: a `Pool` (`--subnet`) must lie inside an
/// enabled pool of its family; without one, any enabled pool of the family serves.
pub fn request_pool(
    request: &RequestPoolRequest,
    pools: &[IpPool],
) -> Result<RequestPoolResponse, DriverError> {
    let space = request.address_space.as_str();
    if !["", LOCAL_SPACE, GLOBAL_SPACE].contains(&space) {
        return Err(DriverError::invalid(
            "AddressSpace",
            space,
            format!("not one of this driver's address spaces ({LOCAL_SPACE}, {GLOBAL_SPACE})"),
        ));
    }
    if !request.sub_pool.is_empty() {
        return Err(DriverError::invalid(
            "SubPool",
            &request.sub_pool,
            "--ip-range is not supported: addresses come from the host's affine Calico blocks",
        ));
    }
    no_options("Options", &request.options, &[])?;
    let version = if request.v6 {
        IpVersion::V6
    } else {
        IpVersion::V4
    };
    let enabled: Vec<&IpPool> = pools
        .iter()
        .filter(|p| p.assigns_addresses() && IpVersion::of_addr(&p.cidr.addr()) == version)
        .collect();
    let id = if request.pool.is_empty() {
        if enabled.is_empty() {
            return Err(DriverError::invalid(
                "Pool",
                "",
                format!("no enabled {version} Calico pool to take addresses from: add one"),
            ));
        }
        PoolId::Any(version)
    } else {
        PoolId::Subnet(subnet_in_pools(&request.pool, version, &enabled)?)
    };
    let pool = match id {
        PoolId::Any(version) => everything(version).to_owned(),
        PoolId::Subnet(net) => net.to_string(),
    };
    let data = BTreeMap::from([(GATEWAY_OPTION.to_owned(), everything(version).to_owned())]);
    Ok(RequestPoolResponse {
        pool_id: id.to_string(),
        pool,
        data,
    })
}

/// The `--subnet`, checked to lie inside one of `pools`.
fn subnet_in_pools(
    text: &str,
    version: IpVersion,
    pools: &[&IpPool],
) -> Result<IpNet, DriverError> {
    let net: IpNet = text
        .parse()
        .map_err(|_| DriverError::invalid("Pool", text, "not a CIDR"))?;
    if IpVersion::of_addr(&net.addr()) != version {
        return Err(DriverError::invalid(
            "Pool",
            text,
            format!("not an {version} subnet"),
        ));
    }
    let net = net.trunc();
    if pools.iter().any(|p| p.cidr.contains(&net)) {
        return Ok(net);
    }
    let names: Vec<String> = pools.iter().map(|p| p.cidr.to_string()).collect();
    Err(DriverError::invalid(
        "Pool",
        text,
        format!(
            "subnet {net} is not inside an enabled Calico pool (pools: {})",
            if names.is_empty() {
                "none".to_owned()
            } else {
                names.join(", ")
            }
        ),
    ))
}

/// What a `RequestAddress` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressWanted {
    /// The network's gateway, asked although `RequestPool` said there is none: answered with
    /// the unspecified address, nothing assigned.
    Gateway(PoolId),
    /// Any free address of the pool.
    Any(PoolId),
    /// Exactly this one (`--ip`).
    Exactly(PoolId, IpAddr),
}

/// Reads a `RequestAddress`.
pub fn address_wanted(request: &RequestAddressRequest) -> Result<AddressWanted, DriverError> {
    let pool = PoolId::parse(&request.pool_id)?;
    let mut allowed = vec![ADDRESS_TYPE_OPTION];
    allowed.extend_from_slice(IGNORED_ADDRESS_OPTIONS);
    no_options("Options", &request.options, &allowed)?;
    let kind = request
        .options
        .as_ref()
        .and_then(|o| o.get(ADDRESS_TYPE_OPTION))
        .and_then(|v| v.as_str());
    let address = request.address.as_str();
    match (kind, address) {
        (Some(GATEWAY_OPTION), "") => Ok(AddressWanted::Gateway(pool)),
        (Some(GATEWAY_OPTION), given) => Err(DriverError::invalid(
            "Address",
            given,
            "--gateway is not supported: Calico containers route through 169.254.1.1",
        )),
        (Some(other), _) => Err(DriverError::invalid(
            ADDRESS_TYPE_OPTION,
            other,
            "unknown address type",
        )),
        (None, "") => Ok(AddressWanted::Any(pool)),
        (None, given) => {
            let ip: IpAddr = given
                .parse()
                .map_err(|_| DriverError::invalid("Address", given, "not an IP address"))?;
            check_in_pool(pool, ip, "Address")?;
            Ok(AddressWanted::Exactly(pool, ip))
        }
    }
}

/// Refuses an address outside the network's pool (its family, its `--subnet`).
pub fn check_in_pool(pool: PoolId, ip: IpAddr, field: &'static str) -> Result<(), DriverError> {
    let inside = match pool {
        PoolId::Any(version) => IpVersion::of_addr(&ip) == version,
        PoolId::Subnet(net) => net.contains(&ip),
    };
    if inside {
        return Ok(());
    }
    Err(DriverError::invalid(
        field,
        ip.to_string(),
        format!("outside the network's pool {pool}"),
    ))
}

/// The answer's form of an assigned address: a /32 (/128), so the container has no on-link
/// subnet and reaches everything through 169.254.1.1.
pub fn host_prefix(ip: IpAddr) -> String {
    IpNet::from(ip).to_string()
}

#[cfg(test)]
mod tests;
