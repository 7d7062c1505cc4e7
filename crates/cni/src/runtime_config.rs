//! What a runtime asks for one container beyond the network configuration: `runtimeConfig`
//! keys (CNI conventions) for the capabilities the config declares, and the same requests in
//! `CNI_ARGS` (`IP=`, `MAC=`, as podman passes them).
//!
//! | capability | `runtimeConfig` | `CNI_ARGS` | effect |
//! | --- | --- | --- | --- |
//! | `ips` | `"ips": ["10.0.0.5/24", "fd00::5"]` | `IP=10.0.0.5,fd00::5` | exactly these addresses, through IPAM's explicit assignment |
//! | `mac` | `"mac": "c2:11:22:33:44:55"` | `MAC=c2:11:22:33:44:55` | the container interface's MAC |
//!
//! Nothing is ignored silently: another capability declared on this plugin, an `ips` or `mac`
//! the config did not declare, a malformed value, or `CNI_ARGS` and `runtimeConfig` asking for
//! different things are errors naming the field.

use std::collections::BTreeMap;
use std::net::IpAddr;

use calico_model::MacAddr;
use ipnet::IpNet;
use serde_json::Value;

use crate::spec::{CniError, Env, code};

/// The capabilities this plugin implements.
pub const IMPLEMENTED: [&str; 2] = ["ips", "mac"];

/// What the runtime asked for this container.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Requested {
    /// Static addresses; empty for automatic assignment.
    pub ips: Vec<IpAddr>,
    /// The container interface's MAC; `None` for the kernel's random one.
    pub mac: Option<MacAddr>,
}

/// Refuses a capability the `calico` plugin declares but does not implement (not checked by
/// `calico-ipam`, which may serve another plugin whose capabilities are its own business).
pub fn refuse_unimplemented(capabilities: &BTreeMap<String, bool>) -> Result<(), CniError> {
    for (name, declared) in capabilities {
        if *declared && !IMPLEMENTED.contains(&name.as_str()) {
            return Err(invalid(format!(
                "capabilities.{name}: the calico plugin does not implement it (it implements {}); \
                 declare it on the plugin of the list that does",
                IMPLEMENTED.join(" and ")
            )));
        }
    }
    Ok(())
}

/// Checks `runtimeConfig` against `capabilities` (at parse time, for every command) and
/// returns what it asks for.
pub fn from_config(
    capabilities: &BTreeMap<String, bool>,
    runtime_config: Option<&Value>,
) -> Result<Requested, CniError> {
    let Some(runtime_config) = runtime_config.filter(|v| !v.is_null()) else {
        return Ok(Requested::default());
    };
    let Some(keys) = runtime_config.as_object() else {
        return Err(invalid("runtimeConfig: not a JSON object"));
    };
    let declared = |name: &str| -> Result<(), CniError> {
        if capabilities.get(name) == Some(&true) {
            return Ok(());
        }
        Err(invalid(format!(
            "runtimeConfig.{name}: given, but the config does not declare \
             \"capabilities\": {{\"{name}\": true}}, so a runtime would not pass it"
        )))
    };
    let mut requested = Requested::default();
    if let Some(ips) = keys.get("ips").filter(|v| !v.is_null()) {
        declared("ips")?;
        requested.ips = runtime_ips(ips)?;
    }
    if let Some(mac) = keys.get("mac").filter(|v| !v.is_null()) {
        declared("mac")?;
        let text = mac
            .as_str()
            .ok_or_else(|| invalid(format!("runtimeConfig.mac: {mac} is not a string")))?;
        requested.mac = Some(
            MacAddr::parse_unicast(text).map_err(|e| invalid(format!("runtimeConfig.mac: {e}")))?,
        );
    }
    Ok(requested)
}

/// Merges the config's requests with `CNI_ARGS` `IP=` and `MAC=`; both may be given only when
/// they agree.
pub fn with_args(from_config: Requested, env: &Env) -> Result<Requested, CniError> {
    let arg = |name: &str| env.args.get(name).filter(|v| !v.is_empty());
    let mut requested = from_config;
    if let Some(list) = arg("IP") {
        let ips = args_ips(list)?;
        if !requested.ips.is_empty() && !same_set(&requested.ips, &ips) {
            return Err(invalid(format!(
                "runtimeConfig.ips ({}) and CNI_ARGS IP={list} ask for different addresses",
                join(&requested.ips)
            )));
        }
        requested.ips = ips;
    }
    if let Some(text) = arg("MAC") {
        let mac = MacAddr::parse_unicast(text)
            .map_err(|e| CniError::new(code::INVALID_ENVIRONMENT, format!("CNI_ARGS MAC: {e}")))?;
        if requested.mac.is_some_and(|m| m != mac) {
            return Err(invalid(format!(
                "runtimeConfig.mac and CNI_ARGS MAC={text} ask for different MAC addresses"
            )));
        }
        requested.mac = Some(mac);
    }
    Ok(requested)
}

/// `runtimeConfig.ips`: addresses with or without a prefix length (the conventions write
/// `10.0.0.5/24`). The prefix says nothing to Calico: a workload always gets its address as a
/// /32 or /128 and reaches everything through the host.
fn runtime_ips(value: &Value) -> Result<Vec<IpAddr>, CniError> {
    let list = value
        .as_array()
        .ok_or_else(|| invalid(format!("runtimeConfig.ips: {value} is not a list")))?;
    let mut ips = Vec::new();
    for (i, item) in list.iter().enumerate() {
        let field = format!("runtimeConfig.ips[{i}]");
        let text = item
            .as_str()
            .ok_or_else(|| invalid(format!("{field}: {item} is not a string")))?;
        let ip = text
            .parse::<IpNet>()
            .map(|net| net.addr())
            .or_else(|_| text.parse::<IpAddr>())
            .map_err(|_| invalid(format!("{field}: {text:?} is not an address")))?;
        if ips.contains(&ip) {
            return Err(invalid(format!("{field}: {ip} is listed twice")));
        }
        ips.push(ip);
    }
    Ok(ips)
}

/// `CNI_ARGS` `IP=a[,b]`.
fn args_ips(list: &str) -> Result<Vec<IpAddr>, CniError> {
    let mut ips = Vec::new();
    for text in list.split(',').map(str::trim) {
        let ip: IpAddr = text.parse().map_err(|_| {
            CniError::new(
                code::INVALID_ENVIRONMENT,
                format!("CNI_ARGS IP={text:?} is not an address"),
            )
        })?;
        if ips.contains(&ip) {
            return Err(CniError::new(
                code::INVALID_ENVIRONMENT,
                format!("CNI_ARGS IP={list}: {ip} is listed twice"),
            ));
        }
        ips.push(ip);
    }
    Ok(ips)
}

fn same_set(a: &[IpAddr], b: &[IpAddr]) -> bool {
    a.len() == b.len() && a.iter().all(|ip| b.contains(ip))
}

fn join(ips: &[IpAddr]) -> String {
    let parts: Vec<String> = ips.iter().map(IpAddr::to_string).collect();
    parts.join(",")
}

fn invalid(msg: impl Into<String>) -> CniError {
    CniError::new(code::INVALID_CONFIG, msg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    proptest! {
        /// Whatever a runtime puts in `runtimeConfig`, the answer is a request or error 7.
        #[test]
        fn any_runtime_config_is_a_request_or_a_config_error(
            ips in prop::collection::vec("[0-9a-f.:/x]{0,20}", 0..4),
            mac in "[0-9a-fA-F:]{0,20}",
            declare_ips in any::<bool>(),
            declare_mac in any::<bool>(),
        ) {
            let caps = caps(&[("ips", declare_ips), ("mac", declare_mac)]);
            let runtime = json!({"ips": ips, "mac": mac});
            if let Err(e) = from_config(&caps, Some(&runtime)) {
                prop_assert_eq!(e.code, 7);
                prop_assert!(e.msg.starts_with("runtimeConfig."), "{:?}", e);
            }
        }
    }

    fn caps(pairs: &[(&str, bool)]) -> BTreeMap<String, bool> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
    }

    fn env(args: &str) -> Env {
        let vars: BTreeMap<String, String> = [
            ("CNI_COMMAND", "ADD"),
            ("CNI_CONTAINERID", "c1"),
            ("CNI_NETNS", "/proc/1/ns/net"),
            ("CNI_IFNAME", "eth0"),
            ("CNI_ARGS", args),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        Env::parse(&vars).unwrap()
    }

    #[test]
    fn declared_ips_and_mac_are_read_with_or_without_prefix() {
        let both = caps(&[("ips", true), ("mac", true)]);
        let runtime = json!({"ips": ["10.0.0.5/24", "fd00::5"], "mac": "C2:11:22:33:44:55"});
        let requested = from_config(&both, Some(&runtime)).unwrap();
        assert_eq!(
            requested.ips,
            [
                "10.0.0.5".parse::<IpAddr>().unwrap(),
                "fd00::5".parse().unwrap()
            ]
        );
        assert_eq!(
            requested.mac,
            Some(MacAddr([0xc2, 0x11, 0x22, 0x33, 0x44, 0x55]))
        );
        assert_eq!(requested.mac.unwrap().to_string(), "c2:11:22:33:44:55");
    }

    #[test]
    fn undeclared_or_unimplemented_capabilities_are_refused() {
        let e = from_config(&caps(&[]), Some(&json!({"ips": ["10.0.0.5"]}))).unwrap_err();
        assert_eq!(e.code, 7);
        assert!(e.msg.starts_with("runtimeConfig.ips: given, but"), "{e:?}");
        let e = from_config(
            &caps(&[("ips", true)]),
            Some(&json!({"mac": "c2:00:00:00:00:01"})),
        )
        .unwrap_err();
        assert!(e.msg.starts_with("runtimeConfig.mac: given, but"), "{e:?}");
        let e = refuse_unimplemented(&caps(&[("portMappings", true)])).unwrap_err();
        assert!(
            e.msg
                .starts_with("capabilities.portMappings: the calico plugin does not implement it"),
            "{e:?}"
        );
        // Declared false is not declared; keys meant for other plugins are not ours to judge.
        assert!(refuse_unimplemented(&caps(&[("portMappings", false), ("ips", true)])).is_ok());
        assert!(
            from_config(
                &caps(&[("portMappings", true)]),
                Some(&json!({"aliases": []}))
            )
            .is_ok()
        );
    }

    #[test]
    fn malformed_values_name_the_field() {
        let both = caps(&[("ips", true), ("mac", true)]);
        let cases = [
            (
                json!({"ips": "10.0.0.5"}),
                "runtimeConfig.ips: \"10.0.0.5\" is not a list",
            ),
            (
                json!({"ips": ["10.0.0.5", "x"]}),
                "runtimeConfig.ips[1]: \"x\" is not an address",
            ),
            (
                json!({"ips": ["10.0.0.5", "10.0.0.5/32"]}),
                "runtimeConfig.ips[1]: 10.0.0.5 is listed twice",
            ),
            (
                json!({"ips": [5]}),
                "runtimeConfig.ips[0]: 5 is not a string",
            ),
            (
                json!({"mac": "c2:11:22:33:44"}),
                "runtimeConfig.mac: invalid MAC address \"c2:11:22:33:44\": expected the form",
            ),
            (
                json!({"mac": "01:00:5e:00:00:01"}),
                "runtimeConfig.mac: \"01:00:5e:00:00:01\" is a multicast address",
            ),
            (json!({"mac": 7}), "runtimeConfig.mac: 7 is not a string"),
            (json!([]), "runtimeConfig: not a JSON object"),
        ];
        for (runtime, expected) in cases {
            let e = from_config(&both, Some(&runtime)).unwrap_err();
            assert!(e.msg.starts_with(expected), "{runtime}: {e:?}");
        }
    }

    #[test]
    fn cni_args_agree_with_runtime_config_or_are_refused() {
        let from_runtime = Requested {
            ips: vec!["10.0.0.5".parse().unwrap()],
            mac: None,
        };
        let merged = with_args(
            from_runtime.clone(),
            &env("IP=10.0.0.5;MAC=c2:00:00:00:00:07"),
        )
        .unwrap();
        assert_eq!(merged.ips, from_runtime.ips);
        assert_eq!(merged.mac, Some(MacAddr([0xc2, 0, 0, 0, 0, 7])));
        let e = with_args(from_runtime, &env("IP=10.0.0.6")).unwrap_err();
        assert!(e.msg.contains("ask for different addresses"), "{e:?}");
        let e = with_args(Requested::default(), &env("IP=10.0.0.5,10.0.0.5")).unwrap_err();
        assert_eq!(
            (e.code, e.msg.as_str()),
            (4, "CNI_ARGS IP=10.0.0.5,10.0.0.5: 10.0.0.5 is listed twice")
        );
        let e = with_args(Requested::default(), &env("MAC=zz")).unwrap_err();
        assert_eq!(e.code, 4);
        assert!(
            e.msg
                .starts_with("CNI_ARGS MAC: invalid MAC address \"zz\""),
            "{e:?}"
        );
    }
}
