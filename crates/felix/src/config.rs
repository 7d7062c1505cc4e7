//! Felix's configuration, from four places in order of precedence (000 §2.5.1): environment
//! variables `FELIX_<NAME>` (name case-insensitive), the config file (ini, section names
//! ignored, keys case-insensitive), host config in etcd (`/calico/v1/host/<host>/config/<Name>`)
//! and global config in etcd (`/calico/v1/config/<Name>`, names case-sensitive), then defaults.
//!
//! `EtcdAddr`, `EtcdEndpoints`, `EtcdScheme`, the TLS files and `FelixHostname` are needed to
//! reach etcd, so etcd cannot set them ([`Bootstrap`] reads them first). The seed's table spells
//! the etcd parameters `Etdc…`; both spellings are read.
//!
//! Loading is pure: the caller passes the environment, the file text and the etcd values.

use std::collections::BTreeMap;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddrV4};
use std::path::PathBuf;
use std::time::Duration;

use calico_dataplane::{DropAction, EndpointToHostAction, InterfacePrefixes, MarkBits};

/// Where a value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Default,
    EtcdGlobal,
    EtcdHost,
    File(PathBuf),
    Env(String),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Default => f.write_str("default"),
            Source::EtcdGlobal => f.write_str("etcd /calico/v1/config"),
            Source::EtcdHost => f.write_str("etcd host config"),
            Source::File(path) => write!(f, "config file {}", path.display()),
            Source::Env(var) => write!(f, "environment variable {var}"),
        }
    }
}

/// A bad value: which parameter, from where, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {param} {value:?} from {origin}: {reason}")]
pub struct ConfigError {
    pub param: &'static str,
    pub value: String,
    pub origin: Source,
    pub reason: String,
}

/// The raw values of each place, by parameter name as written there.
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    /// The process environment (all of it; only `FELIX_*` is read).
    pub env: BTreeMap<String, String>,
    /// The config file's path and text, if it exists.
    pub file: Option<(PathBuf, String)>,
    pub etcd_host: BTreeMap<String, String>,
    pub etcd_global: BTreeMap<String, String>,
}

/// One parameter's name, aliases, default and meaning.
struct Param {
    name: &'static str,
    aliases: &'static [&'static str],
    default: &'static str,
    /// Whether etcd may set it.
    from_etcd: bool,
}

const fn param(name: &'static str, default: &'static str) -> Param {
    Param {
        name,
        aliases: &[],
        default,
        from_etcd: true,
    }
}

const fn bootstrap(
    name: &'static str,
    aliases: &'static [&'static str],
    default: &'static str,
) -> Param {
    Param {
        name,
        aliases,
        default,
        from_etcd: false,
    }
}

/// Every parameter, in the order they are logged. `""` means unset.
const PARAMS: &[Param] = &[
    bootstrap("EtcdAddr", &["EtdcAddr"], "localhost:4001"),
    bootstrap("EtcdScheme", &["EtdcScheme"], "http"),
    bootstrap("EtcdEndpoints", &[], ""),
    bootstrap("EtcdKeyFile", &["EtdcKeyFile"], ""),
    bootstrap("EtcdCertFile", &["EtdcCertFile"], ""),
    bootstrap(
        "EtcdCaFile",
        &["EtdcCaFile"],
        "/etc/ssl/certs/ca-certificates.crt",
    ),
    bootstrap("FelixHostname", &[], ""),
    param("LogFilePath", "/var/log/calico/felix.log"),
    param("LogSeverityScreen", "INFO"),
    param("LogSeverityFile", "INFO"),
    param("InterfacePrefix", "cali"),
    param("DefaultEndpointToHostAction", "DROP"),
    param("DropActionOverride", "DROP"),
    param("MetadataAddr", "127.0.0.1"),
    param("MetadataPort", "8775"),
    param("IpInIpEnabled", "false"),
    param("FailsafeInboundHostPorts", "22"),
    param("FailsafeOutboundHostPorts", "2379,2380,4001,7001"),
    param("IptablesMarkMask", "0xff000000"),
    param("IptablesRefreshInterval", "90"),
    param("RouteRefreshInterval", "90"),
    param("ReportingIntervalSecs", "30"),
    param("ReportingTTLSecs", "90"),
    param("HealthEnabled", "true"),
    param("HealthPort", "9099"),
    param("PrometheusMetricsEnabled", "false"),
    param("PrometheusMetricsPort", "9091"),
    param("FanoutAddr", ""),
    param("NFTablesMode", "Disabled"),
    param("FlowLogsEnabled", "false"),
    param("FlowLogsFlushInterval", "15"),
    param("FlowLogsAggregator", ""),
];

/// What Felix needs before it can read etcd.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bootstrap {
    pub etcd_endpoints: Vec<String>,
    pub etcd_key_file: Option<PathBuf>,
    pub etcd_cert_file: Option<PathBuf>,
    /// `None` when set to `none`, or when etcd is reached over plain http.
    pub etcd_ca_file: Option<PathBuf>,
    pub hostname: String,
}

/// The whole configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub bootstrap: Bootstrap,
    /// `None` when set to `none`.
    pub log_file_path: Option<PathBuf>,
    pub log_severity_screen: tracing::Level,
    pub log_severity_file: tracing::Level,
    pub interface_prefixes: InterfacePrefixes,
    pub endpoint_to_host: EndpointToHostAction,
    pub drop_action: DropAction,
    /// The metadata server's IPv4 address (as text); `None` when set to `None` (no metadata
    /// NAT and no metadata whitelist rule). Host names are refused at load (not resolved).
    pub metadata_addr: Option<String>,
    pub metadata_port: u16,
    pub ip_in_ip_enabled: bool,
    pub failsafe_inbound: Vec<u16>,
    pub failsafe_outbound: Vec<u16>,
    pub marks: MarkBits,
    pub iptables_refresh: Duration,
    pub route_refresh: Duration,
    pub reporting_interval: Duration,
    pub reporting_ttl: Duration,
    pub health_enabled: bool,
    pub health_port: u16,
    pub metrics_enabled: bool,
    pub metrics_port: u16,
    /// `host:port` of a `calico-fanout` to read the watches from, instead of etcd.
    pub fanout_addr: Option<String>,
    /// Which firewall backend programs the kernel (`NFTablesMode`).
    pub nftables_mode: NftablesMode,
    /// Flow logs (`FlowLogsEnabled`): the firewall logs each decision to NFLOG and Felix
    /// aggregates flows per `FlowLogsFlushInterval` and sends them to `FlowLogsAggregator`.
    pub flow_logs: bool,
    pub flow_logs_flush: Duration,
    /// `host:port` of a `calico-flows` aggregator; `None` when unset.
    pub flow_logs_aggregator: Option<String>,
    /// Each parameter's final value and where it came from, for the start-up log.
    pub report: Vec<(&'static str, String, Source)>,
    /// Invalid values found in etcd and treated as missing, one warning line each.
    pub warnings: Vec<String>,
}

/// `NFTablesMode`: whether Felix programs nf_tables directly (`Enabled`), through iptables
/// and IP sets (`Disabled`, the default), or nf_tables where the kernel has it (`Auto`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NftablesMode {
    Enabled,
    Disabled,
    Auto,
}

impl std::str::FromStr for NftablesMode {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text.to_ascii_lowercase().as_str() {
            "enabled" => Ok(NftablesMode::Enabled),
            "disabled" => Ok(NftablesMode::Disabled),
            "auto" => Ok(NftablesMode::Auto),
            _ => Err(format!(
                "invalid NFTablesMode {text:?}: expected Enabled, Disabled or Auto"
            )),
        }
    }
}

/// Resolves parameters across the places.
struct Resolver<'a> {
    inputs: &'a Inputs,
    file: BTreeMap<String, String>,
    use_etcd: bool,
}

impl<'a> Resolver<'a> {
    fn new(inputs: &'a Inputs, use_etcd: bool) -> Result<Resolver<'a>, ConfigError> {
        let file = match &inputs.file {
            Some((path, text)) => parse_ini(text).map_err(|(line, reason)| ConfigError {
                param: "config file",
                value: format!("line {line}"),
                origin: Source::File(path.clone()),
                reason,
            })?,
            None => BTreeMap::new(),
        };
        Ok(Resolver {
            inputs,
            file,
            use_etcd,
        })
    }

    /// Every value of a parameter with its source, in precedence order, the default last. The
    /// first that parses applies; a bad one from etcd falls through to the next place.
    fn candidates(&self, param: &Param) -> Vec<(String, Source)> {
        let names = || std::iter::once(param.name).chain(param.aliases.iter().copied());
        let mut found = Vec::new();
        let env = names().find_map(|name| {
            let var = format!("FELIX_{}", name.to_ascii_uppercase());
            self.inputs
                .env
                .iter()
                .find(|(k, _)| k.to_ascii_uppercase() == var)
        });
        if let Some((key, value)) = env {
            found.push((value.clone(), Source::Env(key.clone())));
        }
        if let Some((path, _)) = &self.inputs.file
            && let Some(value) = names().find_map(|name| self.file.get(&name.to_ascii_lowercase()))
        {
            found.push((value.clone(), Source::File(path.clone())));
        }
        if let Some(var) = shared_env(param.name)
            && let Some((key, value)) = self.inputs.env.iter().find(|(k, _)| k.as_str() == var)
        {
            found.push((value.clone(), Source::Env(key.clone())));
        }
        if self.use_etcd && param.from_etcd {
            if let Some(value) = self.inputs.etcd_host.get(param.name) {
                found.push((value.clone(), Source::EtcdHost));
            }
            if let Some(value) = self.inputs.etcd_global.get(param.name) {
                found.push((value.clone(), Source::EtcdGlobal));
            }
        }
        found.push((param.default.to_owned(), Source::Default));
        found
    }
}

/// The variables every component reads to reach etcd (`calicoctl`, `calico-node`, the CNI
/// plugins): Felix honours them after its own `FELIX_*` variables and its config file.
fn shared_env(param: &str) -> Option<&'static str> {
    match param {
        "EtcdEndpoints" => Some("ETCD_ENDPOINTS"),
        "EtcdCaFile" => Some("ETCD_CA_CERT_FILE"),
        "EtcdCertFile" => Some("ETCD_CERT_FILE"),
        "EtcdKeyFile" => Some("ETCD_KEY_FILE"),
        _ => None,
    }
}

fn lookup(name: &str) -> &'static Param {
    PARAMS
        .iter()
        .find(|p| p.name == name)
        .expect("a parameter of the table")
}

/// Typed parsing of one parameter, with errors naming it and its source.
struct Typed<'a> {
    resolver: &'a Resolver<'a>,
    report: Vec<(&'static str, String, Source)>,
    /// Invalid values from etcd, treated as missing.
    warnings: Vec<String>,
}

impl Typed<'_> {
    /// The parameter's value, parsed. A bad value from the environment or the file is an error
    /// (this host's own setting); a bad value from etcd (shared by every host) is treated as
    /// missing, with a warning, and the next place applies: the global key under a bad host
    /// key, else the default.
    fn parse<T>(
        &mut self,
        name: &'static str,
        parse: impl Fn(&str) -> Result<T, String>,
    ) -> Result<T, ConfigError> {
        let param = lookup(name);
        let mut refused: Vec<(String, Source, String)> = Vec::new();
        for (value, source) in self.resolver.candidates(param) {
            match parse(value.trim()) {
                Ok(parsed) => {
                    let applies = match source {
                        Source::Default => format!("the default {value:?} applies"),
                        _ => format!("the value {value:?} from {source} applies"),
                    };
                    for (bad, from, reason) in refused {
                        self.warnings.push(format!(
                            "Validation failed for {} {bad:?} from {from}, treating as missing: \
                             {reason} ({applies})",
                            param.name
                        ));
                    }
                    self.report.push((param.name, value, source));
                    return Ok(parsed);
                }
                Err(reason) if matches!(source, Source::EtcdGlobal | Source::EtcdHost) => {
                    refused.push((value, source, reason));
                }
                Err(reason) => {
                    return Err(ConfigError {
                        param: param.name,
                        value,
                        origin: source,
                        reason,
                    });
                }
            }
        }
        unreachable!("the default of {} is among the candidates", param.name)
    }
}

impl Bootstrap {
    /// From the environment and the config file only.
    pub fn load(inputs: &Inputs, hostname: &str) -> Result<Bootstrap, ConfigError> {
        let resolver = Resolver::new(inputs, false)?;
        let mut typed = Typed {
            resolver: &resolver,
            report: Vec::new(),
            warnings: Vec::new(),
        };
        Self::read(&mut typed, hostname)
    }

    fn read(typed: &mut Typed<'_>, hostname: &str) -> Result<Bootstrap, ConfigError> {
        let scheme = typed.parse("EtcdScheme", |v| match v {
            "http" | "https" => Ok(v.to_owned()),
            _ => Err("expected http or https".to_owned()),
        })?;
        let addr = typed.parse("EtcdAddr", |v| {
            if v.contains(':') && !v.contains('/') {
                Ok(v.to_owned())
            } else {
                Err("expected host:port".to_owned())
            }
        })?;
        let endpoints = typed.parse("EtcdEndpoints", |v| {
            let list = calico_datastore::split_endpoints(v);
            match list
                .iter()
                .find(|e| !e.starts_with("http://") && !e.starts_with("https://"))
            {
                Some(bad) => Err(format!("{bad:?} is not an http:// or https:// URL")),
                None => Ok(list),
            }
        })?;
        let etcd_endpoints = match endpoints.is_empty() {
            true => vec![format!("{scheme}://{addr}")],
            false => endpoints,
        };
        let path = |v: &str| Ok((!v.is_empty()).then(|| PathBuf::from(v)));
        let etcd_key_file = typed.parse("EtcdKeyFile", path)?;
        let etcd_cert_file = typed.parse("EtcdCertFile", path)?;
        let tls = etcd_endpoints.iter().any(|e| e.starts_with("https://"));
        let ca = typed.parse("EtcdCaFile", |v| {
            if v.eq_ignore_ascii_case("none") && tls {
                return Err(
                    "not verifying etcd's server certificate is not supported: give the \
                     CA file that signed it (or reach etcd over http)"
                        .to_owned(),
                );
            }
            Ok((!v.is_empty() && !v.eq_ignore_ascii_case("none")).then(|| PathBuf::from(v)))
        })?;
        let hostname = typed.parse("FelixHostname", |v| {
            let name = if v.is_empty() { hostname } else { v };
            calico_model::names::validate_hostname(name)
                .map(|()| name.to_owned())
                .map_err(|e| e.reason)
        })?;
        Ok(Bootstrap {
            etcd_endpoints,
            etcd_key_file,
            etcd_cert_file,
            etcd_ca_file: if tls { ca } else { None },
            hostname,
        })
    }
}

impl Config {
    /// From every place. `hostname` is the machine's, used when `FelixHostname` is unset.
    pub fn load(inputs: &Inputs, hostname: &str) -> Result<Config, ConfigError> {
        let resolver = Resolver::new(inputs, true)?;
        let mut t = Typed {
            resolver: &resolver,
            report: Vec::new(),
            warnings: Vec::new(),
        };
        let bootstrap = Bootstrap::read(&mut t, hostname)?;
        let log_file_path = t.parse("LogFilePath", |v| {
            Ok((!v.is_empty() && !v.eq_ignore_ascii_case("none")).then(|| PathBuf::from(v)))
        })?;
        let config = Config {
            bootstrap,
            log_file_path,
            log_severity_screen: t.parse("LogSeverityScreen", severity)?,
            log_severity_file: t.parse("LogSeverityFile", severity)?,
            interface_prefixes: t.parse("InterfacePrefix", interface_prefixes)?,
            endpoint_to_host: t.parse("DefaultEndpointToHostAction", str::parse)?,
            drop_action: t.parse("DropActionOverride", str::parse)?,
            metadata_addr: t.parse("MetadataAddr", metadata_addr)?,
            metadata_port: t.parse("MetadataPort", port)?,
            ip_in_ip_enabled: t.parse("IpInIpEnabled", boolean)?,
            failsafe_inbound: t.parse("FailsafeInboundHostPorts", ports)?,
            failsafe_outbound: t.parse("FailsafeOutboundHostPorts", ports)?,
            marks: t.parse("IptablesMarkMask", mark_mask)?,
            iptables_refresh: t.parse("IptablesRefreshInterval", seconds)?,
            route_refresh: t.parse("RouteRefreshInterval", seconds)?,
            reporting_interval: t.parse("ReportingIntervalSecs", seconds)?,
            reporting_ttl: t.parse("ReportingTTLSecs", seconds)?,
            health_enabled: t.parse("HealthEnabled", boolean)?,
            health_port: t.parse("HealthPort", port)?,
            metrics_enabled: t.parse("PrometheusMetricsEnabled", boolean)?,
            metrics_port: t.parse("PrometheusMetricsPort", port)?,
            fanout_addr: t.parse("FanoutAddr", fanout_addr)?,
            nftables_mode: t.parse("NFTablesMode", str::parse)?,
            flow_logs: t.parse("FlowLogsEnabled", boolean)?,
            flow_logs_flush: t.parse("FlowLogsFlushInterval", seconds)?,
            flow_logs_aggregator: t.parse("FlowLogsAggregator", aggregator_addr)?,
            report: Vec::new(),
            warnings: Vec::new(),
        };
        let mut warnings = t.warnings;
        let mut config = config;
        if config.flow_logs && config.flow_logs_aggregator.is_none() {
            warnings.push(
                "FlowLogsEnabled is true but FlowLogsAggregator is unset: flow logs stay off \
                 (set FlowLogsAggregator to the host:port of a calico-flows aggregator)"
                    .to_owned(),
            );
            config.flow_logs = false;
        }
        Ok(Config {
            report: t.report,
            warnings,
            ..config
        })
    }

    /// The render settings of the dataplane.
    pub fn render(&self) -> calico_dataplane::RenderConfig {
        calico_dataplane::RenderConfig {
            interface_prefixes: self.interface_prefixes.clone(),
            marks: self.marks,
            endpoint_to_host: self.endpoint_to_host,
            drop_action: self.drop_action,
            failsafe_inbound: self.failsafe_inbound.clone(),
            failsafe_outbound: self.failsafe_outbound.clone(),
            // `load` accepts only IPv4 addresses (or None) for MetadataAddr.
            metadata: self
                .metadata_addr
                .as_deref()
                .and_then(|addr| addr.parse::<Ipv4Addr>().ok())
                .map(|ip| SocketAddrV4::new(ip, self.metadata_port)),
            flow_logs: self.flow_logs,
        }
    }
}

impl Config {
    /// The parameters that differ in `new` and that Felix applies only at start: changing them
    /// means a restart (Felix exits and its supervisor, `calico-node`, starts it again).
    pub fn restart_needed(&self, new: &Config) -> Vec<&'static str> {
        let differs = [
            ("LogFilePath", self.log_file_path != new.log_file_path),
            (
                "LogSeverityScreen",
                self.log_severity_screen != new.log_severity_screen,
            ),
            (
                "LogSeverityFile",
                self.log_severity_file != new.log_severity_file,
            ),
            (
                "InterfacePrefix",
                self.interface_prefixes != new.interface_prefixes,
            ),
            (
                "IpInIpEnabled",
                self.ip_in_ip_enabled != new.ip_in_ip_enabled,
            ),
            ("IptablesMarkMask", self.marks != new.marks),
            (
                "ReportingIntervalSecs",
                self.reporting_interval != new.reporting_interval,
            ),
            ("ReportingTTLSecs", self.reporting_ttl != new.reporting_ttl),
            ("HealthEnabled", self.health_enabled != new.health_enabled),
            ("HealthPort", self.health_port != new.health_port),
            (
                "PrometheusMetricsEnabled",
                self.metrics_enabled != new.metrics_enabled,
            ),
            (
                "PrometheusMetricsPort",
                self.metrics_port != new.metrics_port,
            ),
            ("FanoutAddr", self.fanout_addr != new.fanout_addr),
            (
                "FlowLogsFlushInterval",
                self.flow_logs_flush != new.flow_logs_flush,
            ),
            (
                "FlowLogsAggregator",
                self.flow_logs_aggregator != new.flow_logs_aggregator,
            ),
        ];
        differs
            .into_iter()
            .filter_map(|(name, differs)| differs.then_some(name))
            .collect()
    }

    /// The parameters that differ in `new` and that Felix applies while running: the rendering
    /// settings (a full resync with the new rules) and the refresh intervals.
    pub fn live_changes(&self, new: &Config) -> Vec<&'static str> {
        let differs = [
            (
                "DefaultEndpointToHostAction",
                self.endpoint_to_host != new.endpoint_to_host,
            ),
            ("DropActionOverride", self.drop_action != new.drop_action),
            ("MetadataAddr", self.metadata_addr != new.metadata_addr),
            ("NFTablesMode", self.nftables_mode != new.nftables_mode),
            ("FlowLogsEnabled", self.flow_logs != new.flow_logs),
            ("MetadataPort", self.metadata_port != new.metadata_port),
            (
                "FailsafeInboundHostPorts",
                self.failsafe_inbound != new.failsafe_inbound,
            ),
            (
                "FailsafeOutboundHostPorts",
                self.failsafe_outbound != new.failsafe_outbound,
            ),
            (
                "IptablesRefreshInterval",
                self.iptables_refresh != new.iptables_refresh,
            ),
            (
                "RouteRefreshInterval",
                self.route_refresh != new.route_refresh,
            ),
        ];
        differs
            .into_iter()
            .filter_map(|(name, differs)| differs.then_some(name))
            .collect()
    }
}

/// Names given in the inputs that are not Felix parameters: `FELIX_*` variables, config file
/// keys, and etcd config keys (there also the parameters etcd cannot set: those needed to reach
/// it), each with where it was found. Felix warns about each once.
pub fn unknown_names(inputs: &Inputs) -> Vec<(String, Source)> {
    let known = |name: &str| {
        PARAMS.iter().any(|p| {
            std::iter::once(p.name)
                .chain(p.aliases.iter().copied())
                .any(|n| n.eq_ignore_ascii_case(name))
        })
    };
    let mut unknown = Vec::new();
    for var in inputs.env.keys() {
        if let Some(name) = var.strip_prefix("FELIX_")
            && !known(name)
        {
            unknown.push((var.clone(), Source::Env(var.clone())));
        }
    }
    if let Some((path, text)) = &inputs.file
        && let Ok(values) = parse_ini(text)
    {
        for name in values.keys().filter(|n| !known(n)) {
            unknown.push((name.clone(), Source::File(path.clone())));
        }
    }
    let settable = |name: &str| PARAMS.iter().any(|p| p.from_etcd && p.name == name);
    let etcd = [
        (&inputs.etcd_global, Source::EtcdGlobal),
        (&inputs.etcd_host, Source::EtcdHost),
    ];
    for (values, source) in etcd {
        for name in values.keys().filter(|n| !settable(n)) {
            unknown.push((name.clone(), source.clone()));
        }
    }
    unknown
}

/// Parses ini text into lowercase key → value; section headers are ignored.
fn parse_ini(text: &str) -> Result<BTreeMap<String, String>, (usize, String)> {
    let mut values = BTreeMap::new();
    for (index, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if line.starts_with('[') && line.ends_with(']') {
            continue;
        }
        let Some((key, value)) = line.split_once(['=', ':']) else {
            return Err((index + 1, format!("expected `Name = value`, got {line:?}")));
        };
        values.insert(key.trim().to_ascii_lowercase(), value.trim().to_owned());
    }
    Ok(values)
}

fn severity(v: &str) -> Result<tracing::Level, String> {
    match v.to_ascii_uppercase().as_str() {
        "DEBUG" => Ok(tracing::Level::DEBUG),
        "INFO" => Ok(tracing::Level::INFO),
        "WARNING" | "WARN" => Ok(tracing::Level::WARN),
        "ERROR" | "CRITICAL" => Ok(tracing::Level::ERROR),
        _ => Err("expected DEBUG, INFO, WARNING, ERROR or CRITICAL".to_owned()),
    }
}

fn boolean(v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "y" | "t" => Ok(true),
        "false" | "0" | "no" | "n" | "f" => Ok(false),
        _ => Err("expected true or false".to_owned()),
    }
}

fn port(v: &str) -> Result<u16, String> {
    match v.parse::<u16>() {
        Ok(p) if p > 0 => Ok(p),
        _ => Err("expected a port number 1-65535".to_owned()),
    }
}

/// A comma-separated list of ports; empty disables.
fn ports(v: &str) -> Result<Vec<u16>, String> {
    v.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| port(p).map_err(|_| format!("{p:?} is not a port number 1-65535")))
        .collect()
}

fn seconds(v: &str) -> Result<Duration, String> {
    match v.parse::<f64>() {
        // A timer needs a period it can count (not 0 ns) and a Duration one it can hold.
        Ok(s) if s.is_finite() && (0.001..=31_536_000.0).contains(&s) => {
            Ok(Duration::from_secs_f64(s))
        }
        _ => Err("expected a number of seconds from 0.001 to 31536000 (a year)".to_owned()),
    }
}

/// Empty (read etcd) or `host:port` of a calico-fanout.
fn fanout_addr(v: &str) -> Result<Option<String>, String> {
    if v.is_empty() || v.eq_ignore_ascii_case("none") {
        return Ok(None);
    }
    match v.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0) => {
            Ok(Some(v.to_owned()))
        }
        _ => Err("expected host:port of a calico-fanout (or empty to read etcd)".to_owned()),
    }
}

fn aggregator_addr(v: &str) -> Result<Option<String>, String> {
    fanout_addr(v).map_err(|_| {
        "expected host:port of a calico-flows aggregator (or empty for none)".to_owned()
    })
}

fn mark_mask(v: &str) -> Result<MarkBits, String> {
    let mask = match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        Some(hex) => u32::from_str_radix(hex, 16),
        None => v.parse(),
    }
    .map_err(|_| "expected a 32-bit number such as 0xff000000".to_owned())?;
    MarkBits::from_mask(mask)
}

/// `MetadataAddr`: an IPv4 address, or `None` (any case) for no metadata path. Calico 1.4 also
/// took a host name and resolved it once at start-up; here a host name is refused, so that what
/// Felix programs never depends on a DNS answer at start-up (and loading stays pure).
fn metadata_addr(v: &str) -> Result<Option<String>, String> {
    if v.eq_ignore_ascii_case("none") {
        return Ok(None);
    }
    match v.parse::<IpAddr>() {
        Ok(IpAddr::V4(ip)) => Ok(Some(ip.to_string())),
        Ok(IpAddr::V6(_)) => Err(
            "expected an IPv4 address or None: the metadata path (169.254.169.254) is IPv4 only"
                .to_owned(),
        ),
        Err(_) => Err(
            "expected an IPv4 address or None (host names are not resolved: give the address)"
                .to_owned(),
        ),
    }
}

/// One prefix (`cali`) or several, comma-separated (`cali,tap`).
fn interface_prefixes(v: &str) -> Result<InterfacePrefixes, String> {
    let mut prefixes = Vec::new();
    for prefix in v.split(',').map(str::trim) {
        if prefix.is_empty()
            || prefix.len() > 10
            || !prefix.chars().all(|c| c.is_ascii_alphanumeric())
        {
            return Err(format!(
                "{prefix:?}: expected 1-10 letters or digits, such as cali or tap (several \
                 comma-separated, such as cali,tap)"
            ));
        }
        prefixes.push(prefix);
    }
    Ok(InterfacePrefixes::new(prefixes).expect("split gives at least one"))
}

#[cfg(test)]
mod tests;
