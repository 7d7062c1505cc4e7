//! Bad input at volume for what the CNI plugins read from the runtime: the network
//! configuration on stdin with the `CNI_*` environment (`CNI_ARGS` `IP=`/`MAC=`/`K8S_POD_*`,
//! `runtimeConfig`, `prevResult`, the etcd settings, the workload's names), and a delegated
//! IPAM plugin's result. Arbitrary bytes and mutated real configs and environments; every
//! refusal must be an error object with a spec code and a message naming the field or variable.
//! Harness: `crates/model/tests/fuzzing/mod.rs`.

#[path = "../../model/tests/fuzzing/mod.rs"]
mod fuzzing;
#[path = "../../model/tests/fuzzing/json.rs"]
mod fuzzing_json;

use std::collections::BTreeMap;

use calico_cni::result::CniResult;
use calico_cni::spec::CniError;
use calico_cni::workload::Workload;
use calico_cni::{Parsed, parse};
use fuzzing::{Rng, Target, Verdict, ensure, input, run, text};
use serde_json::Value;

const CONFIGS: &[&str] = &[
    r#"{"cniVersion": "1.0.0", "name": "testnet", "type": "calico", "etcd_endpoints": "http://127.0.0.1:2379",
        "nodename": "node1", "log_level": "info", "ipam": {"type": "calico-ipam"}}"#,
    r#"{"cniVersion": "0.3.1", "name": "k8s-pod-network", "type": "calico", "etcd_authority": "10.0.0.1:2379",
        "etcd_scheme": "http", "hostname": "node-2", "mtu": 1440,
        "ipam": {"type": "calico-ipam", "assign_ipv4": "true", "assign_ipv6": "false",
                 "ipv4_pools": ["10.80.0.0/16"], "ipv6_pools": ["fd00:80::/64"]},
        "dns": {"nameservers": ["10.96.0.10"], "search": ["svc.cluster.local"]}}"#,
    r#"{"cniVersion": "0.4.0", "name": "net", "type": "calico", "etcd_endpoints": "https://e1:2379,https://e2:2379",
        "etcd_ca_cert_file": "/etc/calico/ca.pem", "etcd_cert_file": "/etc/calico/cert.pem",
        "etcd_key_file": "/etc/calico/key.pem", "ipam": {"type": "host-local", "subnet": "10.1.0.0/16"},
        "capabilities": {"ips": true, "mac": true},
        "runtimeConfig": {"ips": ["10.80.0.5/24", "fd00:80::5"], "mac": "c2:11:22:33:44:55"},
        "prevResult": {"cniVersion": "0.4.0",
            "interfaces": [{"name": "cali12345678901"}, {"name": "eth0", "mac": "c2:11:22:33:44:55", "sandbox": "/var/run/netns/x"}],
            "ips": [{"version": "4", "address": "10.80.0.5/32", "interface": 1}],
            "routes": [{"dst": "0.0.0.0/0"}], "dns": {}}}"#,
    r#"{"cniVersion": "1.0.0", "name": "net", "type": "calico", "ipam": {"type": "calico-ipam"},
        "prevResult": {"cniVersion": "1.0.0", "interfaces": [{"name": "eth0", "sandbox": "/run/netns/a"}],
            "ips": [{"address": "fd00:80::7/128", "gateway": "fe80::1", "interface": 0}],
            "routes": [{"dst": "::/0", "gw": "fe80::1"}]}}"#,
];

const CONFIG_TOKENS: &[&[u8]] = &[
    b"\"cniVersion\": \"0.2.0\"",
    b"\"ipam\": ",
    b"\"type\": ",
    b"\"mtu\": 4294967296",
    b"\"log_level\": \"loud\"",
    b"\"capabilities\": {\"portMappings\": true}",
    b"\"runtimeConfig\": {\"ips\": [\"10.0.0.1\", \"10.0.0.1\"]}",
    b"\"mac\": \"01:00:00:00:00:00\"",
    b"\"prevResult\": ",
    b"\"etcd_endpoints\": \" , \"",
    b"\"address\": \"10.0.0.1/33\"",
    b"\"interface\": -1",
    b"\"version\": \"6\"",
    b"\"10.80.0.0/16\"",
    b"\"fd00::/129\"",
    b"\"true\"",
];

/// The `CNI_*` environment of each command, and values to mutate from.
const COMMANDS: &[&str] = &["ADD", "DEL", "CHECK", "VERSION", "add", ""];
/// How often a variable is left out, and how often its value is mutated: rarely, so that most
/// calls get past the environment to the configuration.
const LEFT_OUT: usize = 30;
const MUTATED: usize = 8;
const VARIABLES: &[(&str, &[&str])] = &[
    ("CNI_CONTAINERID", &["abc", "df3c4ad4098f", "crash-veth"]),
    ("CNI_NETNS", &["/run/netns/ctr", "/proc/1/ns/net"]),
    ("CNI_IFNAME", &["eth0", "eth1", "net1"]),
    (
        "CNI_ARGS",
        &[
            "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=nginx-1;K8S_POD_INFRA_CONTAINER_ID=abc",
            "IP=10.80.0.5,fd00:80::5;MAC=c2:11:22:33:44:55",
            "IgnoreUnknown=true; K8S_POD_NAMESPACE = kube-system ; K8S_POD_NAME=dns",
            "",
        ],
    ),
    ("CNI_PATH", &["/opt/cni/bin:/usr/lib/cni", ""]),
    ("CALICO_CNI_ABORT_AFTER", &["", "ipam"]),
];

const ENV_TOKENS: &[&[u8]] = &[
    b";",
    b"=",
    b",",
    b"IP=",
    b"MAC=",
    b"K8S_POD_NAME=",
    b"K8S_POD_NAMESPACE=",
    b"::",
    b"/",
    b" ",
    b"..",
    b"ff:ff:ff:ff:ff:ff",
];

#[test]
fn network_config_and_environment() {
    let seeds: Vec<&[u8]> = CONFIGS.iter().map(|s| s.as_bytes()).collect();
    let stdin = Target {
        name: "cni config and environment",
        seeds: &seeds,
        tokens: CONFIG_TOKENS,
    };
    run(
        stdin.name,
        |rng| {
            let vars = environment(rng);
            // Half of the configs keep their JSON and have their tree changed.
            let stdin = match rng.one_in(2) {
                true => {
                    let seed = rng.bytes(&seeds);
                    fuzzing_json::mutated(rng, seed, CONFIG_TOKENS)
                }
                false => input(rng, &stdin),
            };
            (vars, Stdin(stdin))
        },
        |(vars, stdin)| check_call(vars, &stdin.0),
    );
}

/// Stdin, shown as text when an input fails.
struct Stdin(Vec<u8>);

impl std::fmt::Debug for Stdin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(&self.0))
    }
}

/// A runtime's environment: each variable from its seeds, sometimes mutated or left out.
fn environment(rng: &mut Rng) -> BTreeMap<String, String> {
    let mut vars = BTreeMap::new();
    let command = match rng.one_in(MUTATED) {
        true => rng.pick(COMMANDS),
        false => rng.pick(&COMMANDS[..3]),
    };
    vars.insert("CNI_COMMAND".to_owned(), (*command).to_owned());
    for (name, values) in VARIABLES {
        if rng.one_in(LEFT_OUT) || (*name == "CALICO_CNI_ABORT_AFTER" && !rng.one_in(MUTATED)) {
            continue;
        }
        let value = *rng.pick(values);
        let value = match rng.one_in(MUTATED) {
            true => {
                let seeds = [value.as_bytes()];
                text(&input(
                    rng,
                    &Target {
                        name,
                        seeds: &seeds,
                        tokens: ENV_TOKENS,
                    },
                ))
            }
            false => value.to_owned(),
        };
        vars.insert((*name).to_owned(), value);
    }
    vars
}

/// Parses a call as the plugins do before they touch anything, then everything else read from
/// the same input: the requested addresses and MAC, `prevResult`, the etcd settings, the
/// workload's names.
fn check_call(vars: &BTreeMap<String, String>, stdin: &[u8]) -> Result<Verdict, String> {
    let (env, conf) = match parse(vars, stdin) {
        Ok(Parsed::Version(_)) => return Ok(Verdict::Accepted),
        Ok(Parsed::Call(env, conf)) => (env, conf),
        Err(e) => return refusal(&e),
    };
    let nodename = conf.nodename.clone().unwrap_or_else(|| "node1".to_owned());
    let steps: [Result<(), CniError>; 5] = [
        conf.requested(&env).map(drop),
        conf.prev_result().map(drop),
        conf.ipam().map(drop),
        conf.etcd().map(drop),
        Workload::from_env(&env, &nodename).map(|w| drop(w.veth_name())),
    ];
    for step in steps {
        if let Err(e) = step {
            return refusal(&e);
        }
    }
    Ok(Verdict::Accepted)
}

/// A refusal is a CNI error object: a code of the spec (or Calico's 100+ range) and a message
/// that names the field or variable at fault.
fn refusal(e: &CniError) -> Result<Verdict, String> {
    let object = e.to_json("1.0.0");
    ensure((1..=11).contains(&e.code) || e.code >= 100, || {
        format!("code {} is not a CNI error code: {object}", e.code)
    })?;
    ensure(names_what(&e.msg), || {
        format!("the message names no field or variable: {object}")
    })?;
    Ok(Verdict::Rejected)
}

/// The message starts with the field's path (`ipam.ipv4_pools[0]: ...`), or names a variable,
/// a field or the configuration as a whole.
fn names_what(msg: &str) -> bool {
    let path = msg.split_once(": ").is_some_and(|(path, _)| {
        !path.is_empty()
            && path
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_.[]".contains(c))
    });
    const NAMES: &[&str] = &[
        "CNI_",
        "CALICO_CNI_",
        "cniVersion",
        "name",
        "ipam",
        "runtimeConfig",
        "capabilities",
        "prevResult",
        "etcd_",
        "ETCD_ENDPOINTS",
        "log_level",
        "network configuration",
        "mtu",
        "dns",
        "nodename",
        "workload id",
    ];
    !msg.trim().is_empty() && (path || NAMES.iter().any(|name| msg.contains(name)))
}

const RESULTS: &[&str] = &[
    r#"{"cniVersion": "0.3.1", "ips": [{"version": "4", "address": "10.80.0.5/32"}], "dns": {}}"#,
    r#"{"cniVersion": "1.0.0", "interfaces": [{"name": "eth0", "mac": "c2:11:22:33:44:55", "sandbox": "/run/netns/a"}],
        "ips": [{"address": "10.80.0.5/32", "gateway": "10.80.0.1", "interface": 0},
                {"address": "fd00:80::5/128", "interface": 0}],
        "routes": [{"dst": "0.0.0.0/0", "gw": "10.80.0.1"}], "dns": {"nameservers": ["10.96.0.10"]}}"#,
    r#"{"ips": [{"version": "6", "address": "fd00::1/64", "gateway": "fd00::ffff"}]}"#,
];

/// A delegated IPAM plugin's output, as ADD reads it (its JSON, then the result in it).
#[test]
fn ipam_plugin_results() {
    let seeds: Vec<&[u8]> = RESULTS.iter().map(|s| s.as_bytes()).collect();
    let target = Target {
        name: "cni ipam plugin result",
        seeds: &seeds,
        tokens: CONFIG_TOKENS,
    };
    run(
        target.name,
        |rng| text(&input(rng, &target)),
        |output| {
            let Ok(value) = serde_json::from_str::<Value>(output) else {
                return Ok(Verdict::Rejected);
            };
            match CniResult::from_json(&value, "the result of IPAM plugin x") {
                Ok(result) => {
                    // What ADD answers with it, in every version, is valid JSON.
                    for version in ["0.3.1", "0.4.0", "1.0.0"] {
                        let answer = result.to_json(version);
                        ensure(answer.is_object(), || format!("{version}: {answer}"))?;
                    }
                    Ok(Verdict::Accepted)
                }
                Err(e) => {
                    ensure(e.msg.starts_with("the result of IPAM plugin x: "), || {
                        format!("the error does not say whose result: {}", e.msg)
                    })?;
                    ensure(e.msg.len() > "the result of IPAM plugin x: ".len(), || {
                        "no reason given".to_owned()
                    })?;
                    Ok(Verdict::Rejected)
                }
            }
        },
    );
}

#[test]
fn every_seed_config_is_valid() {
    let vars: BTreeMap<String, String> = VARIABLES
        .iter()
        .map(|(name, values)| ((*name).to_owned(), values[0].to_owned()))
        .chain([("CNI_COMMAND".to_owned(), "ADD".to_owned())])
        .collect();
    for config in CONFIGS {
        assert_eq!(
            check_call(&vars, config.as_bytes()),
            Ok(Verdict::Accepted),
            "{config}"
        );
    }
}
