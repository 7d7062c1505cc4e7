//! The wire types of libnetwork's remote plugin protocol (`Plugin.Activate`, the
//! `NetworkDriver.*` and `IpamDriver.*` calls): one request and one response type per call, as
//! dockerd 20.10 sends and expects them (JSON bodies, `application/vnd.docker.plugins.v1.2+json`).
//!
//! Requests tolerate fields dockerd may add later and `null` where dockerd sends it (the
//! `Options` of `RequestAddress`); responses carry exactly the fields libnetwork reads.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The content type of every body, both ways.
pub const CONTENT_TYPE: &str = "application/vnd.docker.plugins.v1.2+json";

/// Options as dockerd sends them: a JSON object, or `null`.
pub type Options = Option<BTreeMap<String, Value>>;

/// Every error answer: `{"Err": "..."}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct ErrorResponse {
    pub err: String,
}

/// `Plugin.Activate`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct ActivateResponse {
    pub implements: Vec<&'static str>,
}

/// `NetworkDriver.GetCapabilities`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct NetworkCapabilities {
    pub scope: &'static str,
    pub connectivity_scope: &'static str,
}

/// One address family's pool of a network, as `CreateNetwork` describes it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct IpamData {
    #[serde(default)]
    pub address_space: String,
    pub pool: String,
    #[serde(default)]
    pub gateway: Option<String>,
    #[serde(default)]
    pub aux_addresses: Option<BTreeMap<String, String>>,
}

/// `NetworkDriver.CreateNetwork`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct CreateNetworkRequest {
    #[serde(rename = "NetworkID")]
    pub network_id: String,
    #[serde(default)]
    pub options: Options,
    #[serde(default, rename = "IPv4Data")]
    pub ipv4_data: Option<Vec<IpamData>>,
    #[serde(default, rename = "IPv6Data")]
    pub ipv6_data: Option<Vec<IpamData>>,
}

/// `NetworkDriver.DeleteNetwork`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct DeleteNetworkRequest {
    #[serde(rename = "NetworkID")]
    pub network_id: String,
}

/// The addresses IPAM gave an endpoint, as `CreateEndpoint` passes them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct EndpointInterface {
    #[serde(default)]
    pub address: String,
    #[serde(default, rename = "AddressIPv6")]
    pub address_ipv6: String,
    #[serde(default)]
    pub mac_address: String,
}

/// `NetworkDriver.CreateEndpoint`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct CreateEndpointRequest {
    #[serde(rename = "NetworkID")]
    pub network_id: String,
    #[serde(rename = "EndpointID")]
    pub endpoint_id: String,
    #[serde(default)]
    pub interface: Option<EndpointInterface>,
    #[serde(default)]
    pub options: Options,
}

/// `DeleteEndpoint`, `EndpointOperInfo` and `Leave`: a network and an endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct EndpointRequest {
    #[serde(rename = "NetworkID")]
    pub network_id: String,
    #[serde(rename = "EndpointID")]
    pub endpoint_id: String,
}

/// `NetworkDriver.EndpointOperInfo`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct EndpointInfoResponse {
    pub value: BTreeMap<String, String>,
}

/// `NetworkDriver.Join`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct JoinRequest {
    #[serde(rename = "NetworkID")]
    pub network_id: String,
    #[serde(rename = "EndpointID")]
    pub endpoint_id: String,
    pub sandbox_key: String,
    #[serde(default)]
    pub options: Options,
}

/// The interface libnetwork moves into the container and renames to `DstPrefix` + a number.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct InterfaceName {
    pub src_name: String,
    pub dst_prefix: String,
}

/// A route libnetwork adds in the container: `RouteType` 1 is on-link (connected), 0 through
/// `NextHop`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct StaticRoute {
    pub destination: String,
    pub route_type: u8,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_hop: Option<String>,
}

/// `NetworkDriver.Join`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct JoinResponse {
    pub interface_name: InterfaceName,
    pub static_routes: Vec<StaticRoute>,
    pub disable_gateway_service: bool,
}

/// `IpamDriver.GetCapabilities`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct IpamCapabilities {
    pub requires_mac_address: bool,
}

/// `IpamDriver.GetDefaultAddressSpaces`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct AddressSpaces {
    pub local_default_address_space: &'static str,
    pub global_default_address_space: &'static str,
}

/// `IpamDriver.RequestPool`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct RequestPoolRequest {
    #[serde(default)]
    pub address_space: String,
    #[serde(default)]
    pub pool: String,
    #[serde(default)]
    pub sub_pool: String,
    #[serde(default)]
    pub options: Options,
    #[serde(default, rename = "V6")]
    pub v6: bool,
}

/// `IpamDriver.RequestPool`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct RequestPoolResponse {
    #[serde(rename = "PoolID")]
    pub pool_id: String,
    pub pool: String,
    pub data: BTreeMap<String, String>,
}

/// `IpamDriver.ReleasePool`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ReleasePoolRequest {
    #[serde(rename = "PoolID")]
    pub pool_id: String,
}

/// `IpamDriver.RequestAddress`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct RequestAddressRequest {
    #[serde(rename = "PoolID")]
    pub pool_id: String,
    #[serde(default)]
    pub address: String,
    #[serde(default)]
    pub options: Options,
}

/// `IpamDriver.RequestAddress`'s answer: the address with its prefix length.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct RequestAddressResponse {
    pub address: String,
    pub data: BTreeMap<String, String>,
}

/// `IpamDriver.ReleaseAddress`: the address without a prefix length.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ReleaseAddressRequest {
    #[serde(rename = "PoolID")]
    pub pool_id: String,
    pub address: String,
}

/// An answer with nothing to say: `{}`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Empty {}
