//! One way for every component to say how it reaches etcd, and one way to wait for it.
//!
//! - [`EtcdArgs`]: the `--etcd-endpoints`, `--etcd-ca-cert-file`, `--etcd-cert-file` and
//!   `--etcd-key-file` flags with their `ETCD_*` environment variables, flattened into the
//!   command line of `calicoctl`, `calico-node` and `calico-libnetwork` (Felix reads the same
//!   variables as a fallback for its own `FELIX_ETCD*` parameters; the CNI plugins read them
//!   when the network configuration has no `etcd_*` fields).
//! - [`connect_retrying`]: daemons wait for etcd with a bounded backoff, one warning line per
//!   attempt naming the endpoints and the cause. One-shot tools call
//!   [`EtcdDatastore::connect`] once and print its error, which is already one line naming the
//!   endpoints and the cause.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::backoff::Backoff;
use crate::etcd::DEFAULT_ENDPOINTS;
use crate::{DatastoreError, EtcdConfig, EtcdDatastore};

/// How to reach etcd, from flags or their environment variables (flags win).
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct EtcdArgs {
    /// Comma-separated etcd endpoints, e.g. https://10.0.0.1:2379,https://10.0.0.2:2379
    #[arg(long, env = "ETCD_ENDPOINTS", default_value = DEFAULT_ENDPOINTS, global = true)]
    pub etcd_endpoints: String,
    /// CA certificate that signed etcd's server certificate (needs https:// endpoints)
    #[arg(long, env = "ETCD_CA_CERT_FILE", global = true)]
    pub etcd_ca_cert_file: Option<PathBuf>,
    /// Client certificate presented to etcd (needs --etcd-key-file)
    #[arg(long, env = "ETCD_CERT_FILE", global = true)]
    pub etcd_cert_file: Option<PathBuf>,
    /// Private key of the client certificate
    #[arg(long, env = "ETCD_KEY_FILE", global = true)]
    pub etcd_key_file: Option<PathBuf>,
}

impl Default for EtcdArgs {
    fn default() -> Self {
        EtcdArgs {
            etcd_endpoints: DEFAULT_ENDPOINTS.to_owned(),
            etcd_ca_cert_file: None,
            etcd_cert_file: None,
            etcd_key_file: None,
        }
    }
}

impl EtcdArgs {
    /// The connection settings the flags describe (timeouts at their defaults).
    pub fn config(&self) -> EtcdConfig {
        EtcdConfig {
            endpoints: split_endpoints(&self.etcd_endpoints),
            ca_file: self.etcd_ca_cert_file.clone(),
            cert_file: self.etcd_cert_file.clone(),
            key_file: self.etcd_key_file.clone(),
            ..EtcdConfig::default()
        }
    }

    /// The environment a child process needs to reach etcd the same way.
    pub fn to_env(&self) -> Vec<(&'static str, String)> {
        let mut env = vec![("ETCD_ENDPOINTS", self.etcd_endpoints.clone())];
        let files = [
            ("ETCD_CA_CERT_FILE", &self.etcd_ca_cert_file),
            ("ETCD_CERT_FILE", &self.etcd_cert_file),
            ("ETCD_KEY_FILE", &self.etcd_key_file),
        ];
        for (name, file) in files {
            if let Some(file) = file {
                env.push((name, file.display().to_string()));
            }
        }
        env
    }
}

/// `a, b,,c` → `[a, b, c]`: comma-separated endpoints, blanks dropped.
pub fn split_endpoints(list: &str) -> Vec<String> {
    list.split(',')
        .map(str::trim)
        .filter(|endpoint| !endpoint.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Connects, retrying with [`Backoff`] while etcd is unreachable, with one warning per failed
/// attempt (the endpoints, the cause, the next delay). Gives up at once on a settings error
/// (a TLS file missing, no endpoints), which no retry can mend, and after `give_up_after` when
/// one is given; daemons pass `None` and wait as long as it takes.
pub async fn connect_retrying(
    config: &EtcdConfig,
    component: &str,
    give_up_after: Option<Duration>,
) -> Result<EtcdDatastore, DatastoreError> {
    let deadline = give_up_after.map(|limit| Instant::now() + limit);
    let mut backoff = Backoff::default();
    loop {
        let error = match EtcdDatastore::connect(config.clone()).await {
            Ok(store) => {
                if backoff.failures() > 0 {
                    tracing::info!(
                        endpoints = %config.endpoints.join(","),
                        attempts = backoff.failures() + 1,
                        "{component}: connected to etcd"
                    );
                }
                return Ok(store);
            }
            Err(error) if !is_transient(&error) => return Err(error),
            Err(error) => error,
        };
        let delay = backoff.next_delay();
        if deadline.is_some_and(|deadline| Instant::now() + delay >= deadline) {
            return Err(error);
        }
        tracing::warn!(
            attempt = backoff.failures(),
            "{component}: {error}; retrying in {delay:?}"
        );
        tokio::time::sleep(delay).await;
    }
}

/// Whether waiting can mend the error: etcd down, partitioned, electing or overloaded. A missing
/// TLS file or contradictory settings are not.
fn is_transient(error: &DatastoreError) -> bool {
    !matches!(
        error,
        DatastoreError::Config(_) | DatastoreError::TlsFile { .. }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        etcd: EtcdArgs,
    }

    #[test]
    fn endpoints_are_split_on_commas_and_blanks_dropped() {
        assert_eq!(
            split_endpoints(" http://a:2379, ,http://b:2379,"),
            ["http://a:2379", "http://b:2379"]
        );
    }

    #[test]
    fn flags_give_the_connection_settings() {
        let cli = Cli::parse_from([
            "x",
            "--etcd-endpoints",
            "https://a:2379,https://b:2379",
            "--etcd-ca-cert-file",
            "/ca.pem",
        ]);
        let config = cli.etcd.config();
        assert_eq!(config.endpoints, ["https://a:2379", "https://b:2379"]);
        assert_eq!(config.ca_file, Some(PathBuf::from("/ca.pem")));
        assert_eq!(config.cert_file, None);
        assert_eq!(
            cli.etcd.to_env(),
            [
                ("ETCD_ENDPOINTS", "https://a:2379,https://b:2379".to_owned()),
                ("ETCD_CA_CERT_FILE", "/ca.pem".to_owned())
            ]
        );
    }

    #[test]
    fn backoff_doubles_up_to_its_bound_with_jitter_and_resets() {
        let mut backoff = Backoff::default();
        let delays: Vec<_> = (0..8).map(|_| backoff.next_delay()).collect();
        let within = |delay: Duration, full: Duration| delay >= full / 2 && delay <= full;
        assert!(within(delays[0], Duration::from_millis(100)), "{delays:?}");
        assert!(within(delays[1], Duration::from_millis(200)), "{delays:?}");
        assert!(within(delays[4], Duration::from_millis(1600)), "{delays:?}");
        assert!(within(delays[5], Backoff::MAX), "{delays:?}");
        assert!(within(delays[7], Backoff::MAX), "{delays:?}");
        for _ in 0..100 {
            assert!(backoff.next_delay() <= Backoff::MAX);
        }
        backoff.reset();
        assert!(backoff.next_delay() <= Duration::from_millis(100));
    }

    #[tokio::test]
    async fn a_settings_error_is_not_retried() {
        let config = EtcdConfig {
            endpoints: vec!["https://127.0.0.1:1".into()],
            ca_file: Some("/nonexistent/ca.pem".into()),
            ..EtcdConfig::default()
        };
        let error = connect_retrying(&config, "test", None).await.unwrap_err();
        assert!(error.to_string().contains("/nonexistent/ca.pem"), "{error}");
    }
}
