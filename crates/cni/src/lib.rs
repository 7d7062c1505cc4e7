//! The `calico` and `calico-ipam` CNI plugins (seed 004: "Creating K8s POD and Calico
//! endpoint"), for spec versions 0.3.0, 0.3.1, 0.4.0 and 1.0.0.
//!
//! | module | owns |
//! | --- | --- |
//! | `error` | `CniError`: the error object with the spec's codes (and ours from 100) |
//! | `spec` | the protocol: `CNI_*` environment, versions |
//! | `result` | results as serde types per spec version (0.3.x/0.4.0, 1.0.0) |
//! | `config` | the network configuration on stdin |
//! | `runtime_config` | `capabilities`/`runtimeConfig` (`ips`, `mac`) and `CNI_ARGS` `IP=`/`MAC=` |
//! | `workload` | endpoint key, veth name and IPAM handle of a call |
//! | `delegate` | where a `calico` call's IPAM runs: `calico-ipam` in this process, another plugin as a child |
//! | `ipam_plugin` | `calico-ipam`: Calico IPAM under the handle `<network>.<container id>`, under the per-host lock |
//! | `plugin` | `calico`: one call, to the plan's executor |
//! | `plan` | pure: ADD as steps with their undo (IPAM, the kernel side as `calico_plumbing`'s plan, the endpoint and profile), DEL as that undo read back from what exists |
//! | `read` | what exists, as the plans need it: the container's interface and source rules, the endpoint and its addresses' holders |
//! | `execute` | the executor: ADD's steps with the crash points between them and its rollback, DEL's undo |
//! | `check` | `calico` CHECK: everything ADD made is still there |
//! | `fault` | `CALICO_CNI_ABORT_AFTER`: ADD crashed after a step, for the crash tests |

pub mod check;
pub mod config;
pub mod delegate;
pub mod error;
pub mod execute;
pub mod fault;
pub mod ipam_plugin;
pub mod plan;
pub mod plugin;
pub mod read;
pub mod result;
pub mod runtime_config;
pub mod spec;
pub mod workload;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::process::ExitCode;

use serde_json::Value;

use config::{MAX_CONFIG_BYTES, NetConf};
use spec::{CniError, Command, Env, code};

/// Which plugin a binary is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plugin {
    Calico,
    CalicoIpam,
}

/// A plugin binary's `main`: reads the environment and stdin, prints the result or an error
/// object, and exits 0 or 1.
pub fn main(plugin: Plugin) -> ExitCode {
    let vars: BTreeMap<String, String> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect();
    let mut stdin = Vec::new();
    let read = std::io::stdin()
        .lock()
        .take(MAX_CONFIG_BYTES as u64 + 1)
        .read_to_end(&mut stdin);
    let (version, outcome) = match read {
        Ok(_) => handle(plugin, &vars, &stdin),
        Err(e) => (
            "1.0.0".to_owned(),
            Err(CniError::new(
                code::IO_FAILURE,
                format!("cannot read stdin: {e}"),
            )),
        ),
    };
    let mut out = std::io::stdout().lock();
    match outcome {
        Ok(None) => ExitCode::SUCCESS,
        Ok(Some(value)) => {
            let _ = writeln!(out, "{value}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            let _ = writeln!(out, "{}", error.to_json(&version));
            ExitCode::FAILURE
        }
    }
}

/// One call: returns the cniVersion to answer in and the outcome. Pure up to the point where
/// the plugin runs, so that parsing can be fuzzed.
pub fn handle(
    plugin: Plugin,
    vars: &BTreeMap<String, String>,
    stdin: &[u8],
) -> (String, Result<Option<Value>, CniError>) {
    let version = requested_version(stdin);
    let outcome = (|| {
        let (env, conf) = match parse(vars, stdin)? {
            Parsed::Version(requested) => return Ok(Some(spec::version_json(&requested))),
            Parsed::Call(env, conf) => (env, conf),
        };
        init_logging(conf.log_level.as_deref());
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| CniError::new(code::IO_FAILURE, format!("cannot start: {e}")))?;
        runtime.block_on(async {
            match plugin {
                Plugin::Calico => plugin::run(&env, &conf, stdin).await,
                Plugin::CalicoIpam => ipam_plugin::run(&env, &conf).await,
            }
        })
    })();
    (version, outcome)
}

/// What a call asks for, once its environment and configuration have been read.
#[derive(Debug)]
pub enum Parsed {
    /// VERSION, with the cniVersion of the config (if any).
    Version(String),
    /// ADD, DEL or CHECK.
    Call(Env, Box<NetConf>),
}

/// Reads and checks the environment and the configuration: every bad input is an error
/// object, never a panic.
pub fn parse(vars: &BTreeMap<String, String>, stdin: &[u8]) -> Result<Parsed, CniError> {
    let env = Env::parse(vars)?;
    if env.command == Command::Version {
        return Ok(Parsed::Version(requested_version(stdin)));
    }
    let conf = NetConf::parse(stdin)?;
    if conf.cni_version.is_empty() {
        return Err(CniError::new(code::INVALID_CONFIG, "cniVersion: missing"));
    }
    spec::check_version(&conf.cni_version)?;
    if env.command == Command::Check && !spec::has_check(&conf.cni_version) {
        return Err(CniError::new(
            code::INCOMPATIBLE_VERSION,
            format!(
                "CHECK needs cniVersion 0.4.0 or later, the config says {}",
                conf.cni_version
            ),
        ));
    }
    Ok(Parsed::Call(env, Box::new(conf)))
}

/// The config's `cniVersion`, if stdin is a JSON object with one; else the newest version.
fn requested_version(stdin: &[u8]) -> String {
    serde_json::from_slice::<Value>(stdin)
        .ok()
        .and_then(|v| v.get("cniVersion")?.as_str().map(str::to_owned))
        .filter(|v| spec::SUPPORTED_VERSIONS.contains(&v.as_str()))
        .unwrap_or_else(|| spec::SUPPORTED_VERSIONS[spec::SUPPORTED_VERSIONS.len() - 1].to_owned())
}

/// Logs to stderr (runtimes keep it) at the config's `log_level`, default warning.
fn init_logging(level: Option<&str>) {
    let filter = level
        .and_then(|l| config::log_filter(l).ok())
        .unwrap_or("warn");
    // Runtimes keep the plugin's stderr as a log file: colour only on a terminal.
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn add_vars() -> BTreeMap<String, String> {
        [
            ("CNI_COMMAND", "ADD"),
            ("CNI_CONTAINERID", "abc"),
            ("CNI_NETNS", "/proc/1/ns/net"),
            ("CNI_IFNAME", "eth0"),
            ("CNI_PATH", "/opt/cni/bin"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
    }

    proptest! {
        /// Arbitrary bytes on stdin and arbitrary CNI_* values never panic the parser.
        #[test]
        fn parsing_never_panics_on_any_input(
            stdin in prop::collection::vec(any::<u8>(), 0..300),
            command in "(ADD|DEL|CHECK|VERSION|[A-Z]{0,6})",
            container in "\\PC{0,20}",
            ifname in "\\PC{0,20}",
            args in "\\PC{0,40}",
        ) {
            let mut vars = add_vars();
            vars.insert("CNI_COMMAND".into(), command);
            vars.insert("CNI_CONTAINERID".into(), container);
            vars.insert("CNI_IFNAME".into(), ifname);
            vars.insert("CNI_ARGS".into(), args);
            let _ = parse(&vars, &stdin);
        }

        /// Structured but wrong configs are refused with code 6 or 7 (or 1 for the version).
        #[test]
        fn wrong_configs_are_errors_with_spec_codes(
            version in prop::sample::select(vec!["0.3.1", "1.0.0", "0.2.0", "", "x"]),
            name in prop::sample::select(vec!["net", "", "a b"]),
            ipam in prop::sample::select(vec![
                r#"{"type": "calico-ipam"}"#, r#"{"type": 5}"#, r#"{"type": "calico-ipam", "ipv4_pools": "10.0.0.0/8"}"#,
                r#"{"type": "calico-ipam", "assign_ipv6": 3}"#, "[]", "null",
            ]),
        ) {
            let stdin = format!(r#"{{"cniVersion": "{version}", "name": "{name}", "type": "calico", "ipam": {ipam}}}"#);
            match parse(&add_vars(), stdin.as_bytes()) {
                Ok(_) => prop_assert!(spec::SUPPORTED_VERSIONS.contains(&version) && !name.is_empty()),
                Err(e) => prop_assert!([1, 6, 7].contains(&e.code), "{e:?}"),
            }
        }
    }

    #[test]
    fn version_needs_no_config() {
        let vars: BTreeMap<String, String> =
            [("CNI_COMMAND".to_owned(), "VERSION".to_owned())].into();
        match parse(&vars, b"").unwrap() {
            Parsed::Version(v) => assert_eq!(v, "1.0.0"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn check_before_0_4_0_is_an_incompatible_version() {
        let mut vars = add_vars();
        vars.insert("CNI_COMMAND".into(), "CHECK".into());
        let stdin = br#"{"cniVersion": "0.3.1", "name": "n", "ipam": {"type": "calico-ipam"}}"#;
        assert_eq!(parse(&vars, stdin).unwrap_err().code, 1);
    }
}
