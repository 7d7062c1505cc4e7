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

use crate::spec::{CniError, code};

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

/// A CNI error object: `{"cniVersion", "code", "msg", "details"}` (`details` only when set).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorObject {
    pub cni_version: String,
    pub code: u32,
    pub msg: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub details: String,
}

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
mod tests {
    use super::*;

    fn sample() -> CniResult {
        CniResult {
            interfaces: vec![
                Interface {
                    name: "cali0123456789a".into(),
                    mac: Some("ee:ee:ee:ee:ee:ee".into()),
                    sandbox: None,
                },
                Interface {
                    name: "eth0".into(),
                    mac: Some("aa:bb:cc:dd:ee:ff".into()),
                    sandbox: Some("/run/netns/x".into()),
                },
            ],
            ips: vec![
                IpConfig {
                    address: "10.0.0.5/32".parse().unwrap(),
                    gateway: None,
                    interface: Some(1),
                },
                IpConfig {
                    address: "fd00::5/128".parse().unwrap(),
                    gateway: Some("fe80::1".parse().unwrap()),
                    interface: Some(1),
                },
            ],
            routes: vec![
                RouteConfig {
                    dst: "0.0.0.0/0".parse().unwrap(),
                    gw: None,
                },
                RouteConfig {
                    dst: "::/0".parse().unwrap(),
                    gw: Some("fe80::1".parse().unwrap()),
                },
            ],
            dns: json!({"nameservers": ["10.96.0.10"], "search": ["svc.cluster.local"]}),
        }
    }

    /// The bytes the plugin printed before results were serde types.
    const OUTPUT_040: &str = r#"{"cniVersion":"0.4.0","ips":[{"address":"10.0.0.5/32","version":"4","interface":1},{"address":"fd00::5/128","version":"6","gateway":"fe80::1","interface":1}],"interfaces":[{"name":"cali0123456789a","mac":"ee:ee:ee:ee:ee:ee"},{"name":"eth0","mac":"aa:bb:cc:dd:ee:ff","sandbox":"/run/netns/x"}],"routes":[{"dst":"0.0.0.0/0"},{"dst":"::/0","gw":"fe80::1"}],"dns":{"nameservers":["10.96.0.10"],"search":["svc.cluster.local"]}}"#;
    const OUTPUT_100: &str = r#"{"cniVersion":"1.0.0","ips":[{"address":"10.0.0.5/32","interface":1},{"address":"fd00::5/128","gateway":"fe80::1","interface":1}],"interfaces":[{"name":"cali0123456789a","mac":"ee:ee:ee:ee:ee:ee"},{"name":"eth0","mac":"aa:bb:cc:dd:ee:ff","sandbox":"/run/netns/x"}],"routes":[{"dst":"0.0.0.0/0"},{"dst":"::/0","gw":"fe80::1"}],"dns":{"nameservers":["10.96.0.10"],"search":["svc.cluster.local"]}}"#;

    #[test]
    fn output_is_unchanged_byte_for_byte() {
        let result = sample();
        assert_eq!(result.to_json("0.4.0").to_string(), OUTPUT_040);
        assert_eq!(result.to_json("1.0.0").to_string(), OUTPUT_100);
        // Printed from the typed value directly, too.
        assert_eq!(
            serde_json::to_string(&result.to_040("0.4.0")).unwrap(),
            OUTPUT_040
        );
        assert_eq!(
            serde_json::to_string(&result.to_100("1.0.0")).unwrap(),
            OUTPUT_100
        );
        // What calico-ipam prints: no interfaces, routes or index; dns always an object.
        let ipam = CniResult {
            ips: vec![IpConfig {
                address: "10.0.0.5/32".parse().unwrap(),
                gateway: None,
                interface: None,
            }],
            ..CniResult::default()
        };
        assert_eq!(
            ipam.to_json("0.3.1").to_string(),
            r#"{"cniVersion":"0.3.1","ips":[{"address":"10.0.0.5/32","version":"4"}],"dns":{}}"#
        );
        assert_eq!(
            ipam.to_json("1.0.0").to_string(),
            r#"{"cniVersion":"1.0.0","ips":[{"address":"10.0.0.5/32"}],"dns":{}}"#
        );
    }

    #[test]
    fn a_result_of_each_version_round_trips() {
        let result = sample();
        for version in crate::spec::SUPPORTED_VERSIONS {
            let written = result.to_json(version);
            assert_eq!(written["cniVersion"], version);
            assert_eq!(
                written["ips"][0].get("version").is_some(),
                version != "1.0.0",
                "{version}: {written}"
            );
            let back = CniResult::from_json(&written, "result").unwrap();
            assert_eq!(back, result, "{version}");
        }
        // The per-version types themselves.
        let typed: Result040 = serde_json::from_str(OUTPUT_040).unwrap();
        assert_eq!(typed.cni_version, "0.4.0");
        assert_eq!(typed.ips[1].version, None, "version is written, never read");
        assert_eq!(CniResult::from(typed.clone()), result);
        assert_eq!(
            serde_json::to_string(&result.to_040(&typed.cni_version)).unwrap(),
            OUTPUT_040
        );
        let typed: Result100 = serde_json::from_str(OUTPUT_100).unwrap();
        assert_eq!(typed, result.to_100("1.0.0"));
        assert_eq!(serde_json::to_string(&typed).unwrap(), OUTPUT_100);
    }

    #[test]
    fn a_0_4_0_result_is_written_as_1_0_0() {
        let prev = json!({
            "cniVersion": "0.4.0",
            "interfaces": [{"name": "eth0", "sandbox": "/run/netns/x"}],
            "ips": [
                {"version": "4", "address": "10.0.0.5/32", "gateway": "10.0.0.1", "interface": 0},
                {"version": "6", "address": "fd00::5/128"}
            ],
            "routes": [{"dst": "0.0.0.0/0"}],
            "dns": {"nameservers": ["10.96.0.10"]}
        });
        let result = CniResult::from_json(&prev, "prevResult").unwrap();
        assert_eq!(
            result.to_json("1.0.0"),
            json!({
                "cniVersion": "1.0.0",
                "ips": [
                    {"address": "10.0.0.5/32", "gateway": "10.0.0.1", "interface": 0},
                    {"address": "fd00::5/128"}
                ],
                "interfaces": [{"name": "eth0", "sandbox": "/run/netns/x"}],
                "routes": [{"dst": "0.0.0.0/0"}],
                "dns": {"nameservers": ["10.96.0.10"]}
            })
        );
    }

    #[test]
    fn unknown_fields_and_any_version_are_tolerated() {
        let prev = json!({
            "cniVersion": "1.0.0",
            "interfaces": [{"name": "eth0", "mtu": 1500, "socketPath": "/x"}],
            // A 1.0.0 reader ignores a 0.4.0-style version, like any other unknown field.
            "ips": [{"version": 4, "address": "10.0.0.5/32", "interface": 0, "extra": [1]}],
            "routes": [{"dst": "0.0.0.0/0", "mtu": 1400, "advmss": 1360}],
            "extra": {"anything": true}
        });
        let result = CniResult::from_json(&prev, "prevResult").unwrap();
        assert_eq!(result.interfaces[0].name, "eth0");
        assert_eq!(result.ips[0].interface, Some(0));
        assert_eq!(result.routes.len(), 1);
        assert_eq!(result.dns, json!({}), "dns defaults to an empty object");
        // No version, or one that is not a string, or nulls for the lists: read as before.
        for prev in [
            json!({"ips": [{"address": "10.0.0.5/32"}]}),
            json!({"cniVersion": 5, "ips": [{"address": "10.0.0.5/32"}], "routes": null, "interfaces": null}),
            json!({"cniVersion": "9.9.9", "ips": [{"address": "10.0.0.5/32", "gateway": null}]}),
        ] {
            let result = CniResult::from_json(&prev, "prevResult").unwrap();
            assert_eq!(result.ips.len(), 1, "{prev}");
        }
    }

    #[test]
    fn bad_results_are_errors_naming_the_field() {
        let cases = [
            (json!(5), "not a JSON object"),
            (json!([]), "not a JSON object"),
            (json!({"interfaces": 5}), "interfaces is not a list"),
            (json!({"interfaces": [5]}), "interfaces[0].name is missing"),
            (json!({"interfaces": [[]]}), "interfaces[0].name is missing"),
            (
                json!({"interfaces": [{"name": null}]}),
                "interfaces[0].name is missing",
            ),
            (
                json!({"interfaces": [{"name": 5}]}),
                "interfaces[0].name is not a string",
            ),
            (
                json!({"interfaces": [{"name": "a", "mac": 5}]}),
                "interfaces[0].mac is not a string",
            ),
            (
                json!({"interfaces": [{"name": "a", "sandbox": []}]}),
                "interfaces[0].sandbox is not a string",
            ),
            (json!({"ips": {}}), "ips is not a list"),
            (json!({"ips": [{}]}), "ips[0].address is missing"),
            (
                json!({"ips": [{"address": "10.0.0.1/32"}, 7]}),
                "ips[1].address is missing",
            ),
            (
                json!({"ips": [{"address": 1}]}),
                "ips[0].address is not a string",
            ),
            (
                json!({"ips": [{"address": "x"}]}),
                r#"ips[0].address "x" is not an address/prefix"#,
            ),
            (
                json!({"ips": [{"address": "10.0.0.1"}]}),
                r#"ips[0].address "10.0.0.1" is not an address/prefix"#,
            ),
            (
                json!({"ips": [{"address": "10.0.0.1/32", "gateway": "g"}]}),
                r#"ips[0].gateway "g" is not an address"#,
            ),
            (
                json!({"ips": [{"address": "10.0.0.1/32", "gateway": 3}]}),
                "ips[0].gateway is not a string",
            ),
            (
                json!({"ips": [{"address": "10.0.0.1/32", "interface": -1}]}),
                "ips[0].interface is not an index",
            ),
            (
                json!({"ips": [{"address": "10.0.0.1/32", "interface": 1.0}]}),
                "ips[0].interface is not an index",
            ),
            (
                json!({"ips": [{"address": "10.0.0.1/32", "interface": "0"}]}),
                "ips[0].interface is not an index",
            ),
            (
                json!({"cniVersion": "1.0.0", "ips": [{"address": "x"}]}),
                r#"ips[0].address "x" is not an address/prefix"#,
            ),
            (json!({"routes": "x"}), "routes is not a list"),
            (json!({"routes": [{}]}), "routes[0].dst is missing"),
            (
                json!({"routes": [{"dst": "x"}]}),
                r#"routes[0].dst "x" is not a network"#,
            ),
            (
                json!({"routes": [{"dst": "0.0.0.0/0", "gw": "x"}]}),
                r#"routes[0].gw "x" is not an address"#,
            ),
            (
                json!({"routes": [{"dst": "0.0.0.0/0", "gw": true}]}),
                "routes[0].gw is not a string",
            ),
        ];
        for (value, reason) in cases {
            let e = CniResult::from_json(&value, "prevResult").unwrap_err();
            assert_eq!(e.code, code::DECODING_FAILURE, "{value}");
            assert_eq!(e.msg, format!("prevResult: {reason}"), "{value}");
        }
    }

    #[test]
    fn error_objects_leave_out_empty_details() {
        let e = CniError::new(code::INVALID_CONFIG, "name: must not be empty");
        assert_eq!(
            e.to_json("0.3.1").to_string(),
            r#"{"cniVersion":"0.3.1","code":7,"msg":"name: must not be empty"}"#
        );
        let e = e.with_details("more");
        assert_eq!(
            e.to_json("1.0.0").to_string(),
            r#"{"cniVersion":"1.0.0","code":7,"msg":"name: must not be empty","details":"more"}"#
        );
        let back: ErrorObject = serde_json::from_value(e.to_json("1.0.0")).unwrap();
        assert_eq!(back, e.to_object("1.0.0"));
        assert_eq!(
            crate::spec::version_json("0.4.0").to_string(),
            r#"{"cniVersion":"0.4.0","supportedVersions":["0.3.0","0.3.1","0.4.0","1.0.0"]}"#
        );
    }

    proptest::proptest! {
        /// Any JSON document (weighted towards result-like ones) is a result or an error
        /// object, never a panic; whatever is read writes and reads back the same.
        #[test]
        fn reading_any_json_never_panics(value in any_json()) {
            if let Ok(result) = CniResult::from_json(&value, "prevResult") {
                for version in crate::spec::SUPPORTED_VERSIONS {
                    let back = CniResult::from_json(&result.to_json(version), "result");
                    proptest::prop_assert_eq!(back.as_ref().map(|r| &r.ips), Ok(&result.ips));
                }
            }
        }
    }

    fn any_json() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<f64>().prop_map(|f| json!(f)),
            prop::sample::select(vec![
                "10.0.0.1/32",
                "fd00::1/128",
                "10.0.0.1",
                "0.0.0.0/0",
                "eth0",
                "1.0.0",
                "0.4.0",
            ])
            .prop_map(Value::from),
            "\\PC{0,8}".prop_map(Value::from),
        ];
        let keys = prop::sample::select(vec![
            "cniVersion",
            "interfaces",
            "ips",
            "routes",
            "dns",
            "name",
            "mac",
            "sandbox",
            "address",
            "gateway",
            "interface",
            "version",
            "dst",
            "gw",
            "other",
        ]);
        leaf.prop_recursive(4, 48, 6, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::vec((keys.clone(), inner), 0..6).prop_map(|pairs| {
                    Value::Object(pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
                }),
            ]
        })
    }
}
