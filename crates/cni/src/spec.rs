//! The CNI protocol as the spec defines it: the `CNI_*` environment, the versions this plugin
//! speaks, and error objects with the spec's codes. Results in each version's shape are serde
//! types in [`crate::result`], re-exported here.
//! Everything here is pure, so that bad input of any kind is an error object, never a panic.

use std::collections::BTreeMap;

use serde_json::Value;

pub use crate::error::{CniError, code};
use crate::result::VersionInfo;
pub use crate::result::{CniResult, Interface, IpConfig, RouteConfig};

/// The spec versions this plugin speaks, oldest first.
pub const SUPPORTED_VERSIONS: [&str; 4] = ["0.3.0", "0.3.1", "0.4.0", "1.0.0"];

/// The version CHECK appeared in.
const FIRST_WITH_CHECK: &str = "0.4.0";

/// What the runtime asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    Add,
    Del,
    Check,
    Version,
}

/// The `CNI_*` environment of one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Env {
    pub command: Command,
    pub container_id: String,
    /// Empty when the runtime sends DEL after the namespace is gone.
    pub netns: String,
    pub ifname: String,
    /// `CNI_ARGS` as key/value pairs (`IgnoreUnknown`, `K8S_POD_NAMESPACE`, `IP`, ...).
    pub args: BTreeMap<String, String>,
    /// `CNI_PATH`, split on `:`.
    pub path: Vec<String>,
    /// `CALICO_CNI_ABORT_AFTER`: not the spec's, a test seam (see `fault`).
    pub abort_after: Option<crate::fault::Step>,
}

impl Env {
    /// Reads the environment the spec defines; each missing or malformed variable is an error
    /// naming it (code 4).
    pub fn parse(vars: &BTreeMap<String, String>) -> Result<Env, CniError> {
        let get = |name: &str| vars.get(name).map(String::as_str).unwrap_or("");
        let command = match get("CNI_COMMAND") {
            "ADD" => Command::Add,
            "DEL" => Command::Del,
            "CHECK" => Command::Check,
            "VERSION" => Command::Version,
            "" => {
                return Err(invalid_env(
                    "CNI_COMMAND is not set (expected ADD, DEL, CHECK or VERSION)",
                ));
            }
            other => {
                return Err(invalid_env(format!(
                    "CNI_COMMAND={other:?} is not one of ADD, DEL, CHECK, VERSION"
                )));
            }
        };
        let env = Env {
            command,
            container_id: get("CNI_CONTAINERID").to_owned(),
            netns: get("CNI_NETNS").to_owned(),
            ifname: get("CNI_IFNAME").to_owned(),
            args: parse_args(get("CNI_ARGS"))?,
            path: get("CNI_PATH")
                .split(':')
                .filter(|p| !p.is_empty())
                .map(str::to_owned)
                .collect(),
            abort_after: crate::fault::parse(vars.get(crate::fault::VAR).map(String::as_str))?,
        };
        if command == Command::Version {
            return Ok(env);
        }
        require(&env.container_id, "CNI_CONTAINERID")?;
        check_container_id(&env.container_id)?;
        require(&env.ifname, "CNI_IFNAME")?;
        check_ifname(&env.ifname)?;
        if command != Command::Del {
            require(&env.netns, "CNI_NETNS")?;
        }
        Ok(env)
    }
}

fn invalid_env(msg: impl Into<String>) -> CniError {
    CniError::new(code::INVALID_ENVIRONMENT, msg)
}

fn require(value: &str, name: &str) -> Result<(), CniError> {
    if value.is_empty() {
        return Err(invalid_env(format!("{name} is not set")));
    }
    Ok(())
}

/// The spec: alphanumerics plus `_`, `.` and `-`, starting with an alphanumeric.
fn check_container_id(id: &str) -> Result<(), CniError> {
    let valid = id.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
    if !valid {
        return Err(invalid_env(format!(
            "CNI_CONTAINERID={id:?}: only letters, digits, '_', '.' and '-', starting with a letter or digit"
        )));
    }
    Ok(())
}

/// A Linux interface name: 1-15 bytes, no '/', ':' or whitespace, not "." or "..".
fn check_ifname(name: &str) -> Result<(), CniError> {
    let valid = name.len() <= 15
        && name != "."
        && name != ".."
        && name
            .chars()
            .all(|c| c.is_ascii_graphic() && c != '/' && c != ':');
    if !valid {
        return Err(invalid_env(format!(
            "CNI_IFNAME={name:?} is not a valid interface name (1-15 characters, no '/', ':' or spaces)"
        )));
    }
    Ok(())
}

/// `CNI_ARGS`: `KEY=VALUE` pairs separated by `;` (empty pairs and surrounding whitespace are
/// tolerated, as runtimes write them).
pub fn parse_args(text: &str) -> Result<BTreeMap<String, String>, CniError> {
    let mut args = BTreeMap::new();
    for pair in text.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((key, value)) = pair.split_once('=') else {
            return Err(invalid_env(format!("CNI_ARGS: {pair:?} is not KEY=VALUE")));
        };
        if key.trim().is_empty() {
            return Err(invalid_env(format!("CNI_ARGS: {pair:?} has an empty key")));
        }
        args.insert(key.trim().to_owned(), value.trim().to_owned());
    }
    Ok(args)
}

/// Checks a config's `cniVersion` (code 1 when this plugin does not speak it).
pub fn check_version(version: &str) -> Result<(), CniError> {
    if SUPPORTED_VERSIONS.contains(&version) {
        return Ok(());
    }
    Err(CniError::new(
        code::INCOMPATIBLE_VERSION,
        format!(
            "cniVersion {version:?} is not supported (supported: {})",
            SUPPORTED_VERSIONS.join(", ")
        ),
    ))
}

/// Whether `version` has CHECK.
pub fn has_check(version: &str) -> bool {
    version_tuple(version) >= version_tuple(FIRST_WITH_CHECK)
}

fn version_tuple(version: &str) -> Vec<u32> {
    version.split('.').map(|p| p.parse().unwrap_or(0)).collect()
}

/// The answer to VERSION.
pub fn version_json(requested: &str) -> Value {
    let version = if SUPPORTED_VERSIONS.contains(&requested) {
        requested
    } else {
        SUPPORTED_VERSIONS[SUPPORTED_VERSIONS.len() - 1]
    };
    let info = VersionInfo {
        cni_version: version.to_owned(),
        supported_versions: SUPPORTED_VERSIONS.map(str::to_owned).to_vec(),
    };
    serde_json::to_value(info).expect("version info always serializes")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn vars(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn add_needs_container_id_ifname_and_netns() {
        let e = Env::parse(&vars(&[("CNI_COMMAND", "ADD")])).unwrap_err();
        assert_eq!((e.code, e.msg.as_str()), (4, "CNI_CONTAINERID is not set"));
        let e = Env::parse(&vars(&[
            ("CNI_COMMAND", "ADD"),
            ("CNI_CONTAINERID", "abc"),
            ("CNI_IFNAME", "eth0"),
        ]))
        .unwrap_err();
        assert_eq!(e.msg, "CNI_NETNS is not set");
        // DEL may come without a namespace (the container is gone).
        let env = Env::parse(&vars(&[
            ("CNI_COMMAND", "DEL"),
            ("CNI_CONTAINERID", "abc"),
            ("CNI_IFNAME", "eth0"),
            (
                "CNI_ARGS",
                "IgnoreUnknown=1; K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-1;",
            ),
            ("CNI_PATH", "/opt/cni/bin:/usr/lib/cni"),
        ]))
        .unwrap();
        assert_eq!(env.args["K8S_POD_NAME"], "web-1");
        assert_eq!(env.path, ["/opt/cni/bin", "/usr/lib/cni"]);
    }

    #[test]
    fn bad_environment_values_name_the_variable() {
        let base = [("CNI_COMMAND", "ADD"), ("CNI_NETNS", "/proc/1/ns/net")];
        let with = |extra: &[(&'static str, &'static str)]| {
            let mut v = vars(&base);
            v.extend(vars(extra));
            Env::parse(&v).unwrap_err().msg
        };
        assert!(
            with(&[("CNI_CONTAINERID", "a/b"), ("CNI_IFNAME", "eth0")])
                .starts_with("CNI_CONTAINERID=\"a/b\"")
        );
        assert!(
            with(&[
                ("CNI_CONTAINERID", "a"),
                ("CNI_IFNAME", "a-very-long-ifname")
            ])
            .starts_with("CNI_IFNAME=")
        );
        assert!(
            with(&[
                ("CNI_CONTAINERID", "a"),
                ("CNI_IFNAME", "eth0"),
                ("CNI_ARGS", "novalue")
            ])
            .starts_with("CNI_ARGS: \"novalue\"")
        );
        let e = Env::parse(&vars(&[("CNI_COMMAND", "UP")])).unwrap_err();
        assert!(e.msg.contains("CNI_COMMAND=\"UP\""), "{e:?}");
    }

    #[test]
    fn results_take_the_shape_of_the_requested_version() {
        let result = CniResult {
            interfaces: vec![Interface {
                name: "eth0".into(),
                mac: Some("aa:bb:cc:dd:ee:ff".into()),
                sandbox: Some("/run/netns/x".into()),
            }],
            ips: vec![IpConfig {
                address: "10.0.0.5/32".parse().unwrap(),
                gateway: None,
                interface: Some(0),
            }],
            routes: vec![RouteConfig {
                dst: "0.0.0.0/0".parse().unwrap(),
                gw: None,
            }],
            dns: json!({}),
        };
        let old = result.to_json("0.3.1");
        assert_eq!(old["ips"][0]["version"], "4");
        let new = result.to_json("1.0.0");
        assert!(new["ips"][0].get("version").is_none());
        assert_eq!(new["cniVersion"], "1.0.0");
        for version in SUPPORTED_VERSIONS {
            let back = CniResult::from_json(&result.to_json(version), "result").unwrap();
            assert_eq!(back, result, "{version}");
        }
    }

    #[test]
    fn check_exists_from_0_4_0() {
        assert!(!has_check("0.3.1"));
        assert!(has_check("0.4.0") && has_check("1.0.0"));
        assert_eq!(check_version("0.2.0").unwrap_err().code, 1);
        assert_eq!(version_json("9.9.9")["cniVersion"], "1.0.0");
    }
}
