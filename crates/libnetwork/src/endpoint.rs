//! The network driver's decisions, pure: what a network and an endpoint must look like, the
//! endpoint's JSON (seed 003), the network's default profile, and what `Join` answers.

use std::net::{IpAddr, Ipv6Addr};

use calico_linux::Family;
use calico_model::MacAddr;
use calico_model::endpoint::WorkloadEndpoint;
use calico_model::pool::IpPool;
use calico_plumbing::{Gateway, gateway_routes};
use ipnet::IpNet;

use crate::api::{
    CreateEndpointRequest, CreateNetworkRequest, InterfaceName, JoinResponse, StaticRoute,
};
use crate::error::DriverError;

/// Network options dockerd always sends; anything else (`-o key=value`) is refused.
const ENABLE_IPV6: &str = "com.docker.network.enable_ipv6";
const GENERIC: &str = "com.docker.network.generic";

/// Checks a `CreateNetwork`: no driver options (none is defined yet), and every pool either
/// this driver's "any Calico pool" or inside an enabled Calico pool (a network of another IPAM
/// driver's addresses would have no routes in the cluster).
pub fn check_network(request: &CreateNetworkRequest, pools: &[IpPool]) -> Result<(), DriverError> {
    for (key, value) in request.options.iter().flatten() {
        match key.as_str() {
            ENABLE_IPV6 => {}
            GENERIC => {
                if let Some((option, _)) = value.as_object().and_then(|o| o.iter().next()) {
                    return Err(DriverError::invalid(
                        "Options",
                        option,
                        "unknown driver option",
                    ));
                }
            }
            other => return Err(DriverError::invalid("Options", other, "unknown option")),
        }
    }
    let data = [&request.ipv4_data, &request.ipv6_data];
    for pool in data.into_iter().flatten().flatten() {
        let net: IpNet = pool
            .pool
            .parse()
            .map_err(|_| DriverError::invalid("Pool", &pool.pool, "not a CIDR"))?;
        let any = net.prefix_len() == 0;
        if !any
            && !pools
                .iter()
                .any(|p| p.assigns_addresses() && p.cidr.contains(&net))
        {
            return Err(DriverError::invalid(
                "Pool",
                &pool.pool,
                "not inside an enabled Calico pool: create the network with this driver as \
                 --ipam-driver too",
            ));
        }
    }
    Ok(())
}

/// What `CreateEndpoint` hands the driver: the addresses IPAM gave, and a MAC if one was asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointSpec {
    pub addresses: Vec<IpAddr>,
    pub mac: Option<MacAddr>,
}

impl EndpointSpec {
    /// Reads `Interface` of a `CreateEndpoint`: an IPv4 address is required (the container's
    /// default route is IPv4); the prefix length dockerd adds is dropped (the endpoint owns a
    /// /32).
    pub fn parse(request: &CreateEndpointRequest) -> Result<EndpointSpec, DriverError> {
        let interface = request.interface.clone().unwrap_or_default();
        let mut addresses = vec![
            address("Interface.Address", &interface.address)?.ok_or_else(|| {
                DriverError::invalid(
                    "Interface.Address",
                    "",
                    "no IPv4 address: use this driver as --ipam-driver",
                )
            })?,
        ];
        addresses.extend(address("Interface.AddressIPv6", &interface.address_ipv6)?);
        let mac = match interface.mac_address.as_str() {
            "" => None,
            text => Some(parse_mac(text)?),
        };
        Ok(EndpointSpec { addresses, mac })
    }

    /// The families of its addresses (IPv4 always).
    pub fn families(&self) -> Vec<Family> {
        let mut families = vec![Family::V4];
        if self.addresses.iter().any(IpAddr::is_ipv6) {
            families.push(Family::V6);
        }
        families
    }
}

/// Docker's `Interface.MacAddress`, for the container's interface.
fn parse_mac(text: &str) -> Result<MacAddr, DriverError> {
    MacAddr::parse_unicast(text)
        .map_err(|reason| DriverError::invalid("Interface.MacAddress", text, reason))
}

fn address(field: &'static str, text: &str) -> Result<Option<IpAddr>, DriverError> {
    if text.is_empty() {
        return Ok(None);
    }
    let ip = match text.parse::<IpNet>() {
        Ok(net) => net.addr(),
        Err(_) => text
            .parse::<IpAddr>()
            .map_err(|_| DriverError::invalid(field, text, "not an address"))?,
    };
    Ok(Some(ip))
}

/// The endpoint's value (seed 003): active, the host side's name, the container's MAC, its
/// addresses as /32 and /128, and the network's profile.
pub fn endpoint(veth: &str, mac: MacAddr, profile: &str, addresses: &[IpAddr]) -> WorkloadEndpoint {
    WorkloadEndpoint {
        mac: Some(mac),
        ..WorkloadEndpoint::active(veth, &[profile], addresses)
    }
}

/// The routes a joining endpoint brings into its sandbox: a family's routes come with the
/// sandbox's first endpoint of that family (a second network's identical routes would fail with
/// "file exists" and leave the container unable to start). Derived from the sandbox's endpoints
/// in etcd, so a restarted driver answers the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SandboxRoutes {
    /// `169.254.1.1/32` on-link and `0.0.0.0/0` through it.
    pub v4: bool,
    /// `::/0` through the host side's link-local address (as CNI workloads have it).
    pub v6: bool,
}

impl SandboxRoutes {
    /// The families whose routes come with the endpoint.
    pub fn families(&self) -> Vec<Family> {
        [(Family::V4, self.v4), (Family::V6, self.v6)]
            .into_iter()
            .filter_map(|(family, with)| with.then_some(family))
            .collect()
    }

    /// The families of `spec` whose routes the sandbox already has from another endpoint: this
    /// one is a standby there, and gets source routing once dockerd has moved it in.
    pub fn standby_families(&self, spec: &EndpointSpec) -> Vec<Family> {
        spec.families()
            .into_iter()
            .filter(|family| !self.families().contains(family))
            .collect()
    }

    /// What `spec` brings to a sandbox whose other endpoints are `others`.
    pub fn needed(spec: &EndpointSpec, others: &[WorkloadEndpoint]) -> SandboxRoutes {
        let has = |v4: bool| spec.addresses.iter().any(|ip| ip.is_ipv4() == v4);
        SandboxRoutes {
            v4: has(true) && others.iter().all(|e| e.ipv4_nets.is_empty()),
            v6: has(false) && others.iter().all(|e| e.ipv6_nets.is_empty()),
        }
    }
}

/// `Join`'s answer: the veth end to move in, the gateway routes (the CNI plugin's:
/// `calico_plumbing::gateway_routes`) of the families `routes` says the sandbox lacks (the
/// IPv6 ones through `v6_gateway`, the host side's link-local address), and no gateway service.
pub fn join_response(
    temp: &str,
    routes: SandboxRoutes,
    v6_gateway: Option<Ipv6Addr>,
) -> JoinResponse {
    let mut static_routes = Vec::new();
    for family in routes.families() {
        for (destination, gateway) in gateway_routes(family) {
            // libnetwork's route types: 1 on the link, 0 through a next hop.
            let (route_type, next_hop) = match gateway {
                Gateway::OnLink => (1, None),
                Gateway::Via(ip) => (0, Some(ip.to_string())),
                Gateway::HostLinkLocal => match v6_gateway {
                    Some(gateway) => (0, Some(gateway.to_string())),
                    None => continue,
                },
            };
            static_routes.push(StaticRoute {
                destination: destination.to_string(),
                route_type,
                next_hop,
            });
        }
    }
    JoinResponse {
        interface_name: InterfaceName {
            src_name: temp.to_owned(),
            dst_prefix: "eth".to_owned(),
        },
        static_routes,
        disable_gateway_service: true,
    }
}

#[cfg(test)]
mod tests;
