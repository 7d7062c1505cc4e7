//! CNI results as the spec writes them: one serde type per shape, and [`CniResult`], the
//! version-independent result the plugins build and read.
//!
//! | versions | type | `ips[]` |
//! | --- | --- | --- |
//! | 0.3.0, 0.3.1, 0.4.0 | [`Result040`] | [`IpConfig040`]: `address`, `version` (`"4"`/`"6"`), `gateway`, `interface` |
//! | 1.0.0 | [`Result100`] | [`IpConfig`]: `address`, `gateway`, `interface` |
//!
//! Both have `cniVersion`, `interfaces` ([`Interface`]), `ips`, `routes` ([`RouteConfig`]) and
//! `dns`. Fields are declared in the order the plugin has always written them, and absent
//! optional fields (and empty `interfaces`/`routes`) are left out, so the output is unchanged
//! byte for byte.
//!
//! Reading (a delegated IPAM plugin's output, `prevResult`) is lenient where the spec's readers
//! are: unknown fields are ignored, `null` counts as absent, `cniVersion` is not checked and
//! `version` is not read (the address says it). Every bad field is an error naming it, e.g.
//! `ips[0].address "x" is not an address/prefix` or `routes[0].dst is missing`, the same words
//! the hand-written reader these types replace used. With several bad fields, the one named
//! follows the document's order, an item's missing field coming after its other fields (the
//! old reader went interfaces, ips, routes and checked an item's required field first).
//!
//! The error object ([`ErrorObject`]) and the answer to VERSION ([`VersionInfo`]) are here too.

use std::net::IpAddr;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

pub use crate::error::ErrorObject;
use crate::error::{CniError, code};

mod lenient;
use lenient::decode;

/// An interface of a result (the same in every version).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Interface {
    #[serde(deserialize_with = "lenient::required_text")]
    pub name: String,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::text"
    )]
    pub mac: Option<String>,
    /// The namespace path, for interfaces inside the container.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::text"
    )]
    pub sandbox: Option<String>,
}

/// An address of a result: the 1.0.0 shape (and the version-independent one).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IpConfig {
    #[serde(deserialize_with = "lenient::address")]
    pub address: IpNet,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::gateway"
    )]
    pub gateway: Option<IpAddr>,
    /// Index into the result's interfaces.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::index"
    )]
    pub interface: Option<usize>,
}

/// An address of a 0.3.0, 0.3.1 or 0.4.0 result: the 1.0.0 fields plus the IP version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IpConfig040 {
    #[serde(deserialize_with = "lenient::address")]
    pub address: IpNet,
    /// Always written (from the address); never read, as the address says it: `None` after
    /// deserializing.
    #[serde(skip_deserializing, skip_serializing_if = "Option::is_none")]
    pub version: Option<IpVersion>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::gateway"
    )]
    pub gateway: Option<IpAddr>,
    /// Index into the result's interfaces.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::index"
    )]
    pub interface: Option<usize>,
}

/// The `version` of a 0.3.x/0.4.0 address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum IpVersion {
    #[serde(rename = "4")]
    V4,
    #[serde(rename = "6")]
    V6,
}

impl IpVersion {
    pub fn of(address: &IpNet) -> IpVersion {
        match address {
            IpNet::V4(_) => IpVersion::V4,
            IpNet::V6(_) => IpVersion::V6,
        }
    }
}

/// A route of a result (the same in every version).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteConfig {
    #[serde(deserialize_with = "lenient::network")]
    pub dst: IpNet,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::gateway"
    )]
    pub gw: Option<IpAddr>,
}

/// A result document as written: `Ip` is the shape of one `ips[]` entry, which is all that
/// differs between the versions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", bound(deserialize = "Ip: Deserialize<'de>"))]
pub struct ResultDocument<Ip> {
    #[serde(default, deserialize_with = "lenient::any_version")]
    pub cni_version: String,
    #[serde(default, deserialize_with = "lenient::list")]
    pub ips: Vec<Ip>,
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "lenient::list"
    )]
    pub interfaces: Vec<Interface>,
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "lenient::list"
    )]
    pub routes: Vec<RouteConfig>,
    /// The spec's DNS object (`nameservers`, `domain`, `search`, `options`), passed through as
    /// the configuration gives it.
    #[serde(default = "lenient::empty_object")]
    pub dns: Value,
}

/// A 0.3.0, 0.3.1 or 0.4.0 result.
pub type Result040 = ResultDocument<IpConfig040>;

/// A 1.0.0 result.
pub type Result100 = ResultDocument<IpConfig>;

/// The answer to VERSION.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VersionInfo {
    pub cni_version: String,
    pub supported_versions: Vec<String>,
}

/// Whether `version` writes results in the 0.3.x/0.4.0 shape (anything before 1.0.0).
pub fn is_legacy(version: &str) -> bool {
    let tuple: Vec<u32> = version.split('.').map(|p| p.parse().unwrap_or(0)).collect();
    tuple < vec![1, 0, 0]
}

/// A plugin's result, independent of the version it is written in.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CniResult {
    pub interfaces: Vec<Interface>,
    pub ips: Vec<IpConfig>,
    pub routes: Vec<RouteConfig>,
    /// The DNS object; anything but a JSON object is written as `{}`.
    pub dns: Value,
}

impl CniResult {
    /// The result in `version`'s shape (0.3.x and 0.4.0 carry each address's IP version).
    pub fn to_json(&self, version: &str) -> Value {
        let written = if is_legacy(version) {
            serde_json::to_value(self.to_040(version))
        } else {
            serde_json::to_value(self.to_100(version))
        };
        written.expect("a result always serializes")
    }

    /// The 0.3.0/0.3.1/0.4.0 shape, labelled `version`.
    pub fn to_040(&self, version: &str) -> Result040 {
        Result040 {
            cni_version: version.to_owned(),
            ips: self
                .ips
                .iter()
                .map(|ip| IpConfig040 {
                    address: ip.address,
                    version: Some(IpVersion::of(&ip.address)),
                    gateway: ip.gateway,
                    interface: ip.interface,
                })
                .collect(),
            interfaces: self.interfaces.clone(),
            routes: self.routes.clone(),
            dns: self.dns_object(),
        }
    }

    /// The 1.0.0 shape, labelled `version`.
    pub fn to_100(&self, version: &str) -> Result100 {
        Result100 {
            cni_version: version.to_owned(),
            ips: self.ips.clone(),
            interfaces: self.interfaces.clone(),
            routes: self.routes.clone(),
            dns: self.dns_object(),
        }
    }

    fn dns_object(&self) -> Value {
        if self.dns.is_object() {
            self.dns.clone()
        } else {
            json!({})
        }
    }

    /// Reads a result of any supported version (a delegated plugin's output, `prevResult`),
    /// in the shape its `cniVersion` names (0.3.x/0.4.0 when it names none). `what` names it in
    /// errors (code 6), which name the field: `prevResult: ips[0].gateway is not a string`.
    pub fn from_json(value: &Value, what: &str) -> Result<CniResult, CniError> {
        let bad =
            |reason: String| CniError::new(code::DECODING_FAILURE, format!("{what}: {reason}"));
        if !value.is_object() {
            return Err(bad("not a JSON object".to_owned()));
        }
        let version = value.get("cniVersion").and_then(Value::as_str);
        if is_legacy(version.unwrap_or("")) {
            decode::<Result040>(value).map(CniResult::from).map_err(bad)
        } else {
            decode::<Result100>(value).map(CniResult::from).map_err(bad)
        }
    }
}

impl From<Result040> for CniResult {
    fn from(result: Result040) -> CniResult {
        CniResult {
            interfaces: result.interfaces,
            ips: result
                .ips
                .into_iter()
                .map(|ip| IpConfig {
                    address: ip.address,
                    gateway: ip.gateway,
                    interface: ip.interface,
                })
                .collect(),
            routes: result.routes,
            dns: result.dns,
        }
    }
}

impl From<Result100> for CniResult {
    fn from(result: Result100) -> CniResult {
        CniResult {
            interfaces: result.interfaces,
            ips: result.ips,
            routes: result.routes,
            dns: result.dns,
        }
    }
}

#[cfg(test)]
mod tests;
