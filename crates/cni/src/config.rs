//! The network configuration on stdin: the CNI fields, Calico's etcd and node settings, and
//! the `ipam` section that `calico-ipam` reads.

use std::collections::BTreeMap;
use std::path::PathBuf;

use calico_datastore::{DatastoreError, EtcdConfig};
use calico_ipam::HostLock;
use ipnet::IpNet;
use serde::Deserialize;
use serde_json::Value;

use crate::runtime_config::{self, Requested};
use crate::spec::{CniError, CniResult, Env, code};

/// The largest stdin accepted: network configs are a few kilobytes.
pub const MAX_CONFIG_BYTES: usize = 1 << 20;

/// One network's configuration (a plugin entry of a config list, as the runtime passes it).
#[derive(Debug, Clone, Deserialize)]
pub struct NetConf {
    #[serde(rename = "cniVersion", default)]
    pub cni_version: String,
    /// The network name: also the name of the Calico profile its workloads get.
    pub name: String,
    #[serde(rename = "type", default)]
    pub plugin_type: String,
    /// Comma-separated etcd endpoints (default: $ETCD_ENDPOINTS, else http://127.0.0.1:2379).
    #[serde(default)]
    pub etcd_endpoints: Option<String>,
    /// The 1.x form: `host:port`, used with `etcd_scheme` (default http).
    #[serde(default)]
    pub etcd_authority: Option<String>,
    #[serde(default)]
    pub etcd_scheme: Option<String>,
    #[serde(default)]
    pub etcd_ca_cert_file: Option<PathBuf>,
    #[serde(default)]
    pub etcd_cert_file: Option<PathBuf>,
    #[serde(default)]
    pub etcd_key_file: Option<PathBuf>,
    /// This host's name in the datastore (default: the kernel's hostname). `hostname` is the
    /// older spelling.
    #[serde(default, alias = "hostname")]
    pub nodename: Option<String>,
    /// debug, info, warning or error (default warning); logs go to stderr.
    #[serde(default)]
    pub log_level: Option<String>,
    /// The per-host lock file the IPAM calls of this host take in turn (default
    /// `/var/run/calico/ipam.lock`, as Calico's).
    #[serde(default)]
    pub ipam_lock_file: Option<PathBuf>,
    /// The MTU of the workload's interface (default: the kernel's veth default, 1500).
    #[serde(default)]
    pub mtu: Option<u32>,
    #[serde(default)]
    pub ipam: Option<IpamConf>,
    /// DNS settings copied into the result.
    #[serde(default)]
    pub dns: Option<Value>,
    #[serde(rename = "prevResult", default)]
    pub prev_result: Option<Value>,
    /// CNI conventions: the `runtimeConfig` keys this plugin takes (`ips`, `mac`).
    #[serde(default)]
    pub capabilities: BTreeMap<String, bool>,
    /// What the runtime passes for the declared capabilities.
    #[serde(rename = "runtimeConfig", default)]
    pub runtime_config: Option<Value>,
}

/// The `ipam` section.
#[derive(Debug, Clone, Deserialize)]
pub struct IpamConf {
    #[serde(rename = "type")]
    pub plugin_type: String,
    /// Whether to assign an IPv4 address (default true); `"true"`/`"false"` strings too.
    #[serde(default, deserialize_with = "flag")]
    pub assign_ipv4: Option<bool>,
    /// Whether to assign an IPv6 address (default false).
    #[serde(default, deserialize_with = "flag")]
    pub assign_ipv6: Option<bool>,
    #[serde(default)]
    pub ipv4_pools: Vec<IpNet>,
    #[serde(default)]
    pub ipv6_pools: Vec<IpNet>,
}

impl IpamConf {
    pub fn ipv4(&self) -> bool {
        self.assign_ipv4.unwrap_or(true)
    }

    pub fn ipv6(&self) -> bool {
        self.assign_ipv6.unwrap_or(false)
    }
}

/// A boolean written as JSON `true` or as the string `"true"` (Calico's examples quote it).
fn flag<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<bool>, D::Error> {
    match Value::deserialize(deserializer)? {
        Value::Null => Ok(None),
        Value::Bool(b) => Ok(Some(b)),
        Value::String(s) if s.eq_ignore_ascii_case("true") => Ok(Some(true)),
        Value::String(s) if s.eq_ignore_ascii_case("false") => Ok(Some(false)),
        other => Err(serde::de::Error::custom(format!(
            "expected true or false, got {other}"
        ))),
    }
}

impl NetConf {
    /// Parses stdin; a malformed document is code 6, a wrong field code 7 naming the field.
    pub fn parse(stdin: &[u8]) -> Result<NetConf, CniError> {
        if stdin.len() > MAX_CONFIG_BYTES {
            return Err(CniError::new(
                code::DECODING_FAILURE,
                format!("the network configuration is over {MAX_CONFIG_BYTES} bytes"),
            ));
        }
        let value: Value = serde_json::from_slice(stdin).map_err(|e| {
            CniError::new(
                code::DECODING_FAILURE,
                format!("the network configuration on stdin is not JSON: {e}"),
            )
        })?;
        if !value.is_object() {
            return Err(CniError::new(
                code::DECODING_FAILURE,
                "the network configuration on stdin is not a JSON object",
            ));
        }
        let conf: NetConf = serde_path_to_error::deserialize(&value).map_err(|e| {
            let path = e.path().to_string();
            let field = if path == "." {
                "network configuration".to_owned()
            } else {
                path
            };
            CniError::new(code::INVALID_CONFIG, format!("{field}: {}", e.inner()))
        })?;
        if conf.name.is_empty() {
            return Err(CniError::new(
                code::INVALID_CONFIG,
                "name: must not be empty",
            ));
        }
        if let Some(level) = &conf.log_level {
            log_filter(level)?;
        }
        conf.requested_by_config()?;
        conf.etcd()?;
        conf.host_lock()?;
        Ok(conf)
    }

    /// The per-host IPAM lock: `ipam_lock_file`, else Calico's default path.
    pub fn host_lock(&self) -> Result<HostLock, CniError> {
        let Some(path) = &self.ipam_lock_file else {
            return Ok(HostLock::default());
        };
        let refuse = |why: &str| {
            CniError::new(
                code::INVALID_CONFIG,
                format!("ipam_lock_file: {path:?} {why}"),
            )
        };
        if path.as_os_str().is_empty() {
            return Err(refuse(
                "is empty (leave it out for /var/run/calico/ipam.lock)",
            ));
        }
        if !path.is_absolute() {
            return Err(refuse("is not an absolute path"));
        }
        Ok(HostLock::new(path))
    }

    /// The `ipam` section, which ADD, DEL and CHECK need.
    pub fn ipam(&self) -> Result<&IpamConf, CniError> {
        self.ipam.as_ref().ok_or_else(|| {
            CniError::new(
                code::INVALID_CONFIG,
                "ipam: missing (e.g. \"ipam\": {\"type\": \"calico-ipam\"})",
            )
        })
    }

    /// `prevResult`, parsed.
    pub fn prev_result(&self) -> Result<Option<CniResult>, CniError> {
        self.prev_result
            .as_ref()
            .map(|v| CniResult::from_json(v, "prevResult"))
            .transpose()
    }

    /// What `runtimeConfig` asks for (checked against `capabilities`; the `calico` plugin also
    /// refuses capabilities it does not implement, `runtime_config::refuse_unimplemented`).
    fn requested_by_config(&self) -> Result<Requested, CniError> {
        runtime_config::from_config(&self.capabilities, self.runtime_config.as_ref())
    }

    /// What the runtime asks for this container: `runtimeConfig` and `CNI_ARGS` together.
    pub fn requested(&self, env: &Env) -> Result<Requested, CniError> {
        runtime_config::with_args(self.requested_by_config()?, env)
    }

    /// How to reach etcd. Settings that contradict each other are refused here, naming the
    /// config fields (the datastore's own errors speak of command-line flags).
    pub fn etcd(&self) -> Result<EtcdConfig, CniError> {
        let endpoints = match (&self.etcd_endpoints, &self.etcd_authority) {
            (Some(endpoints), _) => endpoints.clone(),
            (None, Some(authority)) => {
                let scheme = self.etcd_scheme.as_deref().unwrap_or("http");
                format!("{scheme}://{authority}")
            }
            (None, None) => std::env::var("ETCD_ENDPOINTS")
                .unwrap_or_else(|_| calico_datastore::DEFAULT_ENDPOINTS.to_owned()),
        };
        let endpoints = calico_datastore::split_endpoints(&endpoints);
        if endpoints.is_empty() {
            return Err(CniError::new(
                code::INVALID_CONFIG,
                format!("{}: no endpoint in it", self.endpoints_source()),
            ));
        }
        // With no etcd fields at all the plugin reaches etcd as every other component does on
        // this host: ETCD_ENDPOINTS and, with it, ETCD_CA_CERT_FILE, ETCD_CERT_FILE and
        // ETCD_KEY_FILE.
        let from_env = self.etcd_endpoints.is_none() && self.etcd_authority.is_none();
        let file = |field: &Option<PathBuf>, var: &str| match (field, from_env) {
            (Some(file), _) => Some(file.clone()),
            (None, true) => std::env::var_os(var).map(PathBuf::from),
            (None, false) => None,
        };
        let ca_file = file(&self.etcd_ca_cert_file, "ETCD_CA_CERT_FILE");
        let cert_file = file(&self.etcd_cert_file, "ETCD_CERT_FILE");
        let key_file = file(&self.etcd_key_file, "ETCD_KEY_FILE");
        let tls_files = [
            ("etcd_ca_cert_file", &ca_file),
            ("etcd_cert_file", &cert_file),
            ("etcd_key_file", &key_file),
        ];
        let given: Vec<&str> = tls_files
            .iter()
            .filter(|(_, file)| file.is_some())
            .map(|(field, _)| *field)
            .collect();
        if !given.is_empty() && !endpoints.iter().any(|e| e.starts_with("https://")) {
            return Err(CniError::new(
                code::INVALID_CONFIG,
                format!(
                    "{}: the endpoints are not https://, but {} given for TLS",
                    self.endpoints_source(),
                    given.join(" and ")
                ),
            ));
        }
        match (&cert_file, &key_file) {
            (Some(_), None) => {
                return Err(CniError::new(
                    code::INVALID_CONFIG,
                    "etcd_key_file: missing, but etcd_cert_file is given (a client certificate needs its key)",
                ));
            }
            (None, Some(_)) => {
                return Err(CniError::new(
                    code::INVALID_CONFIG,
                    "etcd_cert_file: missing, but etcd_key_file is given (a client key needs its certificate)",
                ));
            }
            _ => {}
        }
        Ok(EtcdConfig {
            endpoints,
            ca_file,
            cert_file,
            key_file,
            ..EtcdConfig::default()
        })
    }

    /// Where the etcd endpoints came from, as the operator would fix it.
    fn endpoints_source(&self) -> &'static str {
        match (&self.etcd_endpoints, &self.etcd_authority) {
            (Some(_), _) => "etcd_endpoints",
            (None, Some(_)) => "etcd_authority",
            (None, None) => "ETCD_ENDPOINTS (the config has no etcd_endpoints)",
        }
    }

    /// A datastore error in the words of this configuration: the fields to check, not the
    /// command-line flags the datastore's own messages name.
    pub fn etcd_error(&self, error: DatastoreError) -> CniError {
        let msg = match &error {
            DatastoreError::Unreachable { endpoints, reason } => format!(
                "cannot reach etcd at {endpoints}: {reason}; check {} in the network \
                 configuration {:?} and that etcd is running",
                self.endpoints_source(),
                self.name
            ),
            DatastoreError::TlsFile { kind, file, reason } => {
                let field = match *kind {
                    "CA certificate" => "etcd_ca_cert_file",
                    "client certificate" => "etcd_cert_file",
                    "client key" => "etcd_key_file",
                    _ => "etcd TLS file",
                };
                format!("{field}: cannot read {kind} {}: {reason}", file.display())
            }
            _ => flags_to_fields(&error.to_string()),
        };
        CniError::new(code::DATASTORE, msg)
    }

    /// This host's name in the datastore.
    pub fn nodename(&self) -> String {
        self.nodename
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(calico_linux::hostname)
    }
}

/// Any command-line flag a lower layer's message names, as the config field that sets it.
pub(crate) fn flags_to_fields(msg: &str) -> String {
    [
        ("--etcd-endpoints / ETCD_ENDPOINTS", "etcd_endpoints"),
        ("--etcd-endpoints", "etcd_endpoints"),
        ("--etcd-ca-cert-file", "etcd_ca_cert_file"),
        ("--etcd-cert-file", "etcd_cert_file"),
        ("--etcd-key-file", "etcd_key_file"),
    ]
    .iter()
    .fold(msg.to_owned(), |text, (flag, field)| {
        text.replace(flag, field)
    })
}

/// The tracing filter for a `log_level` (code 7 for an unknown level).
pub fn log_filter(level: &str) -> Result<&'static str, CniError> {
    Ok(match level.to_ascii_lowercase().as_str() {
        "debug" => "debug",
        "info" => "info",
        "warn" | "warning" => "warn",
        "error" | "critical" | "fatal" => "error",
        "none" | "off" => "off",
        _ => {
            return Err(CniError::new(
                code::INVALID_CONFIG,
                format!("log_level: {level:?} is not one of debug, info, warning, error, none"),
            ));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_minimal_calico_config_parses_with_defaults() {
        let conf = NetConf::parse(
            br#"{"cniVersion": "0.3.1", "name": "net1", "type": "calico",
                 "ipam": {"type": "calico-ipam", "assign_ipv6": "true"}}"#,
        )
        .unwrap();
        let ipam = conf.ipam().unwrap();
        assert!(ipam.ipv4() && ipam.ipv6());
        assert_eq!(conf.nodename(), calico_linux::hostname());
    }

    #[test]
    fn wrong_fields_are_named() {
        let e = NetConf::parse(
            br#"{"name": "n", "ipam": {"type": "calico-ipam", "ipv4_pools": ["10.0.0.0/33"]}}"#,
        )
        .unwrap_err();
        assert_eq!(e.code, 7);
        assert!(e.msg.starts_with("ipam.ipv4_pools[0]: "), "{e:?}");
        let e = NetConf::parse(br#"{"name": "n", "ipam": {"type": "x", "assign_ipv4": "maybe"}}"#)
            .unwrap_err();
        assert!(
            e.msg
                .starts_with("ipam.assign_ipv4: expected true or false"),
            "{e:?}"
        );
        let e = NetConf::parse(br#"{"name": "n", "log_level": "loud"}"#).unwrap_err();
        assert!(e.msg.starts_with("log_level: \"loud\""), "{e:?}");
        let e = NetConf::parse(b"{").unwrap_err();
        assert_eq!(e.code, 6);
        let e = NetConf::parse(br#"{"cniVersion": "1.0.0"}"#).unwrap_err();
        assert!(e.msg.contains("name"), "{e:?}");
    }

    #[test]
    fn the_ipam_lock_file_defaults_to_calico_s_and_must_be_an_absolute_path() {
        let lock = |extra: &str| {
            NetConf::parse(format!(r#"{{"name": "n"{extra}}}"#).as_bytes())
                .and_then(|conf| conf.host_lock())
        };
        let path = |extra: &str| lock(extra).unwrap().path().display().to_string();
        assert_eq!(path(""), "/var/run/calico/ipam.lock");
        assert_eq!(path(r#", "ipam_lock_file": "/run/x.lock""#), "/run/x.lock");
        for (extra, msg) in [
            (
                r#", "ipam_lock_file": """#,
                r#"ipam_lock_file: "" is empty (leave it out for /var/run/calico/ipam.lock)"#,
            ),
            (
                r#", "ipam_lock_file": "run/x.lock""#,
                r#"ipam_lock_file: "run/x.lock" is not an absolute path"#,
            ),
        ] {
            let e = lock(extra).unwrap_err();
            assert_eq!((e.code, e.msg.as_str()), (code::INVALID_CONFIG, msg));
        }
    }

    #[test]
    fn contradicting_etcd_settings_name_the_config_fields() {
        let parse = |extra: &str| {
            let text = format!(r#"{{"name": "n", "ipam": {{"type": "calico-ipam"}}, {extra}}}"#);
            NetConf::parse(text.as_bytes()).unwrap_err().msg
        };
        assert_eq!(
            parse(r#""etcd_endpoints": "http://e:2379", "etcd_ca_cert_file": "/ca""#),
            "etcd_endpoints: the endpoints are not https://, but etcd_ca_cert_file given for TLS"
        );
        assert!(
            parse(r#""etcd_endpoints": "https://e:2379", "etcd_key_file": "/k""#)
                .starts_with("etcd_cert_file: missing, but etcd_key_file is given")
        );
        assert_eq!(
            parse(r#""etcd_endpoints": " , ""#),
            "etcd_endpoints: no endpoint in it"
        );
    }

    #[test]
    fn datastore_errors_name_the_field_that_sets_the_endpoints() {
        let conf = NetConf::parse(br#"{"name": "net1", "etcd_authority": "e:2379"}"#).unwrap();
        let e = conf.etcd_error(DatastoreError::Unreachable {
            endpoints: "http://e:2379".into(),
            reason: "refused".into(),
        });
        assert_eq!(e.code, 100);
        assert_eq!(
            e.msg,
            "cannot reach etcd at http://e:2379: refused; check etcd_authority in the network \
             configuration \"net1\" and that etcd is running"
        );
        let e = conf.etcd_error(DatastoreError::Config(
            "no etcd endpoints given (--etcd-endpoints / ETCD_ENDPOINTS)".into(),
        ));
        assert_eq!(
            e.msg,
            "invalid datastore configuration: no etcd endpoints given (etcd_endpoints)"
        );
    }
}
