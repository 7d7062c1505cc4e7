//! Bad input at volume for Felix's configuration loading: `FELIX_*` variables, the ini config
//! file and the etcd host and global values, each with arbitrary and mutated values of every
//! parameter (and names Felix does not have). Loading must never panic or hang; a refusal names
//! the parameter, where its value came from and why; a bad etcd value is a warning, never a
//! refusal. Harness: `crates/model/tests/fuzzing/mod.rs`.

#[path = "../../model/tests/fuzzing/mod.rs"]
mod fuzzing;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use calico_felix::config::unknown_names;
use calico_felix::{Bootstrap, Config, Inputs, Source};
use fuzzing::{Rng, Target, Verdict, ensure, input, run, text};

/// Each parameter (and a few spellings Felix reads or refuses) with values to mutate from.
const PARAMS: &[(&str, &[&str])] = &[
    ("EtcdAddr", &["localhost:4001", "10.0.0.1:2379"]),
    ("EtdcAddr", &["e:2379"]),
    ("EtcdScheme", &["http", "https"]),
    (
        "EtcdEndpoints",
        &["http://10.0.0.1:2379,https://e2:2379", " , "],
    ),
    ("EtcdKeyFile", &["/etc/calico/key.pem", ""]),
    ("EtcdCertFile", &["/etc/calico/cert.pem"]),
    (
        "EtcdCaFile",
        &["/etc/ssl/certs/ca-certificates.crt", "none"],
    ),
    ("FelixHostname", &["node1", "compute-1.example.com"]),
    ("LogFilePath", &["/var/log/calico/felix.log", "none"]),
    ("LogSeverityScreen", &["INFO", "warning", "CRITICAL"]),
    ("LogSeverityFile", &["DEBUG"]),
    ("InterfacePrefix", &["cali", "tap"]),
    ("DefaultEndpointToHostAction", &["DROP", "RETURN", "ACCEPT"]),
    ("DropActionOverride", &["DROP", "LOGandDROP", "ACCEPT"]),
    ("MetadataAddr", &["127.0.0.1", "None"]),
    ("MetadataPort", &["8775", "65535"]),
    ("IpInIpEnabled", &["false", "true", "1"]),
    ("FailsafeInboundHostPorts", &["22", "22,179", ""]),
    ("FailsafeOutboundHostPorts", &["2379,2380,4001,7001"]),
    ("IptablesMarkMask", &["0xff000000", "0x7", "4278190080"]),
    ("IptablesRefreshInterval", &["90", "0.5"]),
    ("RouteRefreshInterval", &["90"]),
    ("ReportingIntervalSecs", &["30", "2.5"]),
    ("ReportingTTLSecs", &["90"]),
    ("HealthEnabled", &["true", "no"]),
    ("HealthPort", &["9099"]),
    ("PrometheusMetricsEnabled", &["false", "y"]),
    ("PrometheusMetricsPort", &["9091"]),
    ("NoSuchParameter", &["x"]),
];

const TOKENS: &[&[u8]] = &[
    b"0x",
    b"0X",
    b"e",
    b"E",
    b".",
    b",",
    b":",
    b"/",
    b"http://",
    b"https://",
    b"none",
    b"NaN",
    b"inf",
    b"1e400",
    b"-",
    b"+",
];

const FILES: &[&str] = &[
    "[global]\nEtcdAddr = 10.0.0.1:2379\nLogSeverityScreen = DEBUG\n# comment\n; comment\n",
    "[global]\nMetadataAddr: None\nFailsafeInboundHostPorts = 22, 179\nReportingIntervalSecs=10\n",
    "[log]\nLogFilePath = none\n[other]\nIptablesMarkMask = 0x00700000\n",
];

const FILE_TOKENS: &[&[u8]] = &[b"[", b"]", b"\n", b"=", b":", b"#", b";", b"[global]\n"];

#[test]
fn configuration_from_every_place() {
    run("felix config", inputs, check);
}

/// Inputs with each place holding some parameters, values from the seeds (often mutated).
fn inputs(rng: &mut Rng) -> Inputs {
    let mut env = BTreeMap::new();
    let mut etcd_host = BTreeMap::new();
    let mut etcd_global = BTreeMap::new();
    for _ in 0..rng.below(6) {
        let (name, value) = parameter(rng);
        env.insert(env_name(rng, name), value);
    }
    for _ in 0..rng.below(6) {
        let (name, value) = parameter(rng);
        etcd_host.insert(name.to_owned(), value);
    }
    for _ in 0..rng.below(6) {
        let (name, value) = parameter(rng);
        etcd_global.insert(name.to_owned(), value);
    }
    let file = rng.one_in(2).then(|| {
        let seeds: Vec<&[u8]> = FILES.iter().map(|f| f.as_bytes()).collect();
        let target = Target {
            name: "felix config file",
            seeds: &seeds,
            tokens: FILE_TOKENS,
        };
        let mut text = text(&input(rng, &target));
        for _ in 0..rng.below(4) {
            let (name, value) = parameter(rng);
            text.push_str(&format!("\n{name} = {value}\n"));
        }
        (PathBuf::from("/etc/calico/felix.cfg"), text)
    });
    Inputs {
        env,
        file,
        etcd_host,
        etcd_global,
    }
}

/// A parameter name and a value: a seed value, mutated two times in three.
fn parameter(rng: &mut Rng) -> (&'static str, String) {
    let (name, values) = *rng.pick(PARAMS);
    let value = *rng.pick(values);
    if rng.one_in(3) {
        return (name, value.to_owned());
    }
    let seeds = [value.as_bytes()];
    let target = Target {
        name,
        seeds: &seeds,
        tokens: TOKENS,
    };
    (name, text(&input(rng, &target)))
}

/// `FELIX_<NAME>` in some case (Felix reads the name case-insensitively).
fn env_name(rng: &mut Rng, name: &str) -> String {
    let name = match rng.below(3) {
        0 => name.to_ascii_uppercase(),
        1 => name.to_ascii_lowercase(),
        _ => name.to_owned(),
    };
    format!("FELIX_{name}")
}

fn check(inputs: &Inputs) -> Result<Verdict, String> {
    // Felix warns about each name it does not know; reading them must not fail either.
    let _ = unknown_names(inputs);
    let bootstrap = Bootstrap::load(inputs, "node1");
    match Config::load(inputs, "node1") {
        Ok(config) => {
            ensure(bootstrap.as_ref() == Ok(&config.bootstrap), || {
                format!("Bootstrap::load gave {bootstrap:?}, Config::load {config:?}")
            })?;
            // Each interval drives a tokio timer: zero panics it, and so does a period that
            // overflows an `Instant` when added to now.
            let intervals = [
                ("IptablesRefreshInterval", config.iptables_refresh),
                ("RouteRefreshInterval", config.route_refresh),
                ("ReportingIntervalSecs", config.reporting_interval),
                ("ReportingTTLSecs", config.reporting_ttl),
            ];
            for (name, period) in intervals {
                let runnable =
                    !period.is_zero() && Instant::now().checked_add(period * 2).is_some();
                ensure(runnable, || {
                    format!("{name} accepted as {period:?}, which no timer can run")
                })?;
            }
            for warning in &config.warnings {
                ensure(warning.contains("from etcd"), || {
                    format!("a warning that does not say where the value came from: {warning}")
                })?;
            }
            Ok(Verdict::Accepted)
        }
        Err(e) => {
            // Only this host's own settings are refused; bad shared (etcd) values are warnings.
            ensure(
                !matches!(e.origin, Source::EtcdGlobal | Source::EtcdHost),
                || format!("refused because of an etcd value: {e}"),
            )?;
            let shown = e.to_string();
            ensure(
                !e.param.is_empty() && !e.reason.trim().is_empty() && shown.contains(e.param),
                || format!("the error does not name the parameter and a reason: {shown}"),
            )?;
            Ok(Verdict::Rejected)
        }
    }
}
