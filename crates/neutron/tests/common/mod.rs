//! Fixtures of the OpenStack tests: a real neutron-server ([`neutron::Neutron`]) and the
//! `calico-neutron` binary ([`SyncProcess`]); a forwarder into a network namespace
//! ([`forward::Forwarder`]).

#![allow(dead_code)] // each test binary uses part of the fixtures

pub mod dhcp;
pub mod forward;
pub mod neutron;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// `calico-neutron` running against an etcd and a Neutron, its log in a file; killed on `Drop`.
pub struct SyncProcess {
    child: Child,
    log: PathBuf,
}

impl SyncProcess {
    /// Starts the binary against `neutron` (authenticated as its plane says) with a short
    /// resync interval so tests can see drift repaired.
    pub fn start(etcd: &str, neutron: &neutron::Neutron, log: &Path, resync: &str) -> SyncProcess {
        Self::start_logging(etcd, neutron, log, resync, "info")
    }

    /// [`SyncProcess::start`] with the log filter `filter`.
    pub fn start_logging(
        etcd: &str,
        neutron: &neutron::Neutron,
        log: &Path,
        resync: &str,
        filter: &str,
    ) -> SyncProcess {
        let (args, mut env) = neutron.sync_args();
        env.push(("CALICO_NEUTRON_LOG".to_owned(), filter.to_owned()));
        Self::start_in(None, etcd, &neutron.url, (&args, &env), log, resync)
    }

    /// [`SyncProcess::start`] inside a network namespace (`ip netns exec` execs the binary, so
    /// the child is the process itself), at `url`, with the arguments and environment `auth`.
    pub fn start_in(
        netns: Option<&str>,
        etcd: &str,
        url: &str,
        auth: (&[String], &[(String, String)]),
        log: &Path,
        resync: &str,
    ) -> SyncProcess {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .expect("log file");
        let binary = env!("CARGO_BIN_EXE_calico-neutron");
        let mut command = match netns {
            None => Command::new(binary),
            Some(netns) => {
                let mut command = Command::new("ip");
                command.args(["netns", "exec", netns, binary]);
                command
            }
        };
        let child = command
            .args(["--neutron-url", url, "--etcd-endpoints", etcd])
            .args(["--resync-interval", resync])
            .env("CALICO_NEUTRON_LOG", "info")
            .args(auth.0)
            .envs(auth.1.iter().map(|(k, v)| (k, v)))
            .env_remove("ETCD_ENDPOINTS")
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("log file"))
            .stderr(file)
            .spawn()
            .expect("calico-neutron starts");
        SyncProcess {
            child,
            log: log.to_owned(),
        }
    }

    /// Everything it logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Whether it is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Kills it (SIGKILL: no chance to tidy up, as in a crash).
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for SyncProcess {
    fn drop(&mut self) {
        self.stop();
    }
}
