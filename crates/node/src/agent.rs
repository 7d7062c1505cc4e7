//! The calico-node loop: follow the BGP-related keys, render BIRD's configuration when they
//! change (checked before it is used), and keep BIRD and Felix running.
//!
//! ```text
//!  etcd watches (calico_bgp::datastore_prefixes, the host's vxlan_tunnel key)
//!        │ each event: BgpConfig::apply (BGP keys), pools and the tunnel record noted
//!        ▼
//!  all watches in sync? ──no──► wait
//!        │ yes, and something changed
//!        ├─► render BIRD's configuration ─► `bird -p` check ─► install ─► `birdc configure`
//!        │     (a configuration BIRD rejects is logged; the running one stays)
//!        └─► VXLAN tunnel endpoint kept (vxlan::TunnelKeeper; failures retried ≥ 10 s apart)
//!  every second and after each pass: BIRD and Felix started again if they exited
//!  at start: a BIRD or Felix an earlier calico-node left running (killed with SIGKILL, it
//!  could not stop them) is stopped first, found by its pid file in the run directory
//!  SIGTERM / SIGINT: Felix and BIRD stopped (SIGTERM, then SIGKILL after 5 s)
//! ```

use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use calico_bgp::{BgpConfig, render};
use calico_datastore::{Datastore, WatchEvent};
use calico_model::key::Prefix;
use calico_model::{Key, parse_value};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

use crate::bird::Bird;
use crate::vxlan::TunnelKeeper;

/// How calico-node runs Felix.
#[derive(Debug, Clone)]
pub struct FelixProcess {
    pub binary: PathBuf,
    /// Extra environment (etcd endpoints, hostname) on top of calico-node's own.
    pub env: Vec<(String, String)>,
}

/// What the loop needs.
pub struct Node {
    pub hostname: String,
    /// The host's registered IPv4 address (the VXLAN tunnel endpoint's parent address).
    pub ipv4: Option<Ipv4Addr>,
    pub store: Arc<dyn Datastore>,
    pub bird: Bird,
    pub felix: Option<FelixProcess>,
}

/// A child process kept running; its pid is kept in `pid_file` so that a calico-node started
/// after this one was killed can find and stop it.
struct Supervised {
    what: &'static str,
    child: Option<Child>,
    restarts: u32,
    /// Its program's file name (what `/proc/PID/comm` shows).
    program: String,
    pid_file: PathBuf,
}

impl Supervised {
    fn new(what: &'static str, program: &Path, pid_file: PathBuf) -> Supervised {
        let program = program.file_name().unwrap_or(program.as_os_str());
        Supervised {
            what,
            child: None,
            restarts: 0,
            program: program.to_string_lossy().into_owned(),
            pid_file,
        }
    }

    /// Stops the process the pid file names if it still runs the program (e.g. a BIRD an earlier
    /// calico-node started: a second one would find the BGP port taken and the control socket
    /// replaced, and the first would never hear of a new configuration).
    async fn stop_leftover(&self) {
        let Some(pid) = std::fs::read_to_string(&self.pid_file)
            .ok()
            .and_then(|text| text.trim().parse::<i32>().ok())
        else {
            return;
        };
        if !runs_as(pid, &self.program) {
            return;
        }
        tracing::warn!(
            process = self.what,
            pid,
            "stopping the one an earlier calico-node left running"
        );
        let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while runs_as(pid, &self.program) && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Whether it needs (re)starting: never started, or exited.
    fn needs_start(&mut self) -> bool {
        match &mut self.child {
            None => true,
            Some(child) => match child.try_wait() {
                Ok(None) => false,
                Ok(Some(status)) => {
                    tracing::warn!(process = self.what, %status, "exited; restarting it");
                    self.restarts += 1;
                    self.child = None;
                    true
                }
                Err(e) => {
                    tracing::warn!(process = self.what, "cannot check it: {e}");
                    false
                }
            },
        }
    }

    fn started(&mut self, child: std::io::Result<Child>) {
        match child {
            Ok(child) => {
                tracing::info!(process = self.what, pid = child.id(), "started");
                if let Some(pid) = child.id()
                    && let Err(e) = std::fs::write(&self.pid_file, format!("{pid}\n"))
                {
                    tracing::warn!(
                        process = self.what,
                        "cannot write {}: {e}",
                        self.pid_file.display()
                    );
                }
                self.child = Some(child);
            }
            Err(e) => tracing::error!(process = self.what, "cannot start: {e}"),
        }
    }

    /// SIGTERM, then SIGKILL after a grace period.
    async fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        if let Some(pid) = child.id() {
            let _ = kill(Pid::from_raw(pid as i32), Signal::SIGTERM);
        }
        if tokio::time::timeout(Duration::from_secs(5), child.wait())
            .await
            .is_err()
        {
            let _ = child.kill().await;
        }
    }
}

/// Whether `pid` is a live process named `name` (its `comm`, which the kernel cuts at 15
/// bytes; a zombie is not live).
fn runs_as(pid: i32, name: &str) -> bool {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let zombie = stat
        .rsplit(')')
        .next()
        .is_some_and(|rest| rest.trim_start().starts_with('Z'));
    let short: String = name.chars().take(15).collect();
    !zombie && comm.trim_end() == short
}

/// The prefixes whose keys make up the BGP configuration of `host` (owned by
/// [`calico_bgp::datastore_prefixes`], which `calicoctl node list` reads too), and the host's
/// VXLAN tunnel record.
fn prefixes(host: &str) -> Vec<String> {
    let mut prefixes = calico_bgp::datastore_prefixes(Some(host));
    prefixes.push(
        Key::VxlanTunnel {
            hostname: host.to_owned(),
        }
        .to_string(),
    );
    prefixes
}

/// Whether an event may change what the host's VXLAN tunnel record should be: the pools, the
/// record itself (someone removed or changed it), or a watch coming into sync.
fn touches_vxlan(prefix: &str, event: &WatchEvent) -> bool {
    matches!(event, WatchEvent::InSync { .. })
        || prefix == Prefix::Pools.to_string()
        || prefix.ends_with("/vxlan_tunnel")
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node")
            .field("hostname", &self.hostname)
            .field("ipv4", &self.ipv4)
            .field("bird", &self.bird)
            .field("felix", &self.felix)
            .finish()
    }
}

impl Node {
    /// Runs until SIGTERM or SIGINT, then stops Felix and BIRD.
    pub async fn run(self) -> anyhow::Result<()> {
        let (events, mut incoming) = mpsc::channel::<(usize, WatchEvent)>(4096);
        let prefixes = prefixes(&self.hostname);
        for (index, prefix) in prefixes.iter().enumerate() {
            let mut watch = self.store.watch(prefix).await?;
            let events = events.clone();
            tokio::spawn(async move {
                while let Some(event) = watch.next().await {
                    if events.send((index, event)).await.is_err() {
                        break;
                    }
                }
            });
        }
        let mut config = BgpConfig::default();
        let mut synced = BTreeSet::new();
        let mut dirty = false;
        let run_dir = self.bird.config.parent().unwrap_or(Path::new("."));
        let mut bird = Supervised::new("bird", &self.bird.bird, run_dir.join("bird.pid"));
        let felix_binary = self.felix.as_ref().map(|f| f.binary.as_path());
        let felix_binary = felix_binary.unwrap_or(Path::new("calico-felix"));
        let mut felix = Supervised::new("calico-felix", felix_binary, run_dir.join("felix.pid"));
        bird.stop_leftover().await;
        felix.stop_leftover().await;
        let mut tunnel = TunnelKeeper::new(
            self.hostname.clone(),
            self.ipv4,
            calico_ipam::Ipam::new(self.store.clone()),
        );
        let mut vxlan_dirty = false;
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        let mut terminate =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        loop {
            tokio::select! {
                Some((index, event)) = incoming.recv() => {
                    vxlan_dirty |= touches_vxlan(&prefixes[index], &event);
                    dirty |= self.apply(&mut config, &mut synced, index, event);
                    while let Ok((index, event)) = incoming.try_recv() {
                        vxlan_dirty |= touches_vxlan(&prefixes[index], &event);
                        dirty |= self.apply(&mut config, &mut synced, index, event);
                    }
                }
                _ = tick.tick() => {}
                _ = terminate.recv() => break,
                _ = tokio::signal::ctrl_c() => break,
            }
            if dirty && synced.len() == prefixes.len() {
                dirty = false;
                self.render(&config, bird.child.is_some()).await;
            }
            // After a failure the tick retries, at most every `vxlan::RETRY_AFTER`.
            if (vxlan_dirty || tunnel.retry_due()) && synced.len() == prefixes.len() {
                vxlan_dirty = false;
                tunnel.update(&config.pools).await;
            }
            self.supervise(&mut bird, &mut felix);
        }
        tracing::info!("stopping");
        felix.stop().await;
        bird.stop().await;
        Ok(())
    }

    /// Applies one watch event; returns whether the configuration may have changed.
    fn apply(
        &self,
        config: &mut BgpConfig,
        synced: &mut BTreeSet<usize>,
        index: usize,
        event: WatchEvent,
    ) -> bool {
        let (key, value) = match event {
            WatchEvent::InSync { .. } => {
                synced.insert(index);
                return true;
            }
            WatchEvent::Put(pair) => (pair.key, Some(pair.value)),
            WatchEvent::Delete { key, .. } => (key, None),
        };
        let Ok(parsed) = Key::parse(&key) else {
            return false;
        };
        if !BgpConfig::is_relevant(&parsed) {
            return false;
        }
        let value = value.and_then(|raw| match parse_value(&parsed, &raw) {
            Ok(value) => Some(value),
            Err(e) => {
                tracing::warn!("{}", calico_model::invalid_warning(&key, &e));
                None
            }
        });
        config.apply(&parsed, value.as_ref());
        true
    }

    /// Renders and installs BIRD's configuration; a running BIRD is told to reload it.
    async fn render(&self, config: &BgpConfig, running: bool) {
        let text = match render(config, &self.hostname) {
            Ok(text) => text,
            Err(e) => {
                tracing::error!("cannot render the BIRD configuration: {e}");
                return;
            }
        };
        match self.bird.install(&text).await {
            Ok(false) => {}
            Ok(true) => {
                tracing::info!(config = %self.bird.config.display(), "new BIRD configuration");
                if running && let Err(e) = self.bird.reconfigure().await {
                    tracing::error!("{e}");
                }
            }
            Err(e) => tracing::error!("{e}"),
        }
    }

    /// Starts what is not running: BIRD once it has a configuration, Felix if asked for.
    fn supervise(&self, bird: &mut Supervised, felix: &mut Supervised) {
        if self.bird.config.is_file() && bird.needs_start() {
            bird.started(self.bird.start());
        }
        if let Some(process) = &self.felix
            && felix.needs_start()
        {
            let child = Command::new(&process.binary)
                .envs(process.env.iter().map(|(k, v)| (k, v)))
                .stdin(std::process::Stdio::null())
                .kill_on_drop(true)
                .spawn();
            felix.started(child);
        }
    }
}
