//! The dnsmasq child. [`Dnsmasq::apply`] writes the hosts, options and names files (each
//! through a temporary file and a rename, so dnsmasq never reads half a file) and then sends
//! SIGHUP, which makes dnsmasq re-read them; only when its arguments change (the set of subnets) is it
//! restarted. Its stdout and stderr (the DHCP log) go to the agent's stderr.
//!
//! An agent killed with SIGKILL cannot stop its dnsmasq, which keeps serving (good) but holds
//! the DHCP ports; the next agent finds it through the pid file in the state directory and
//! stops it before starting its own ([`Dnsmasq::stop_stale`]).

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use rustix::process::{Pid, Signal, kill_process};
use tokio::process::{Child, Command};

use super::DhcpError;
use super::render::{HOSTS_FILE, NAMES_FILE, OPTS_FILE, PID_FILE, Rendered};

/// How long dnsmasq may take to exit after SIGTERM before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// The dnsmasq process the agent owns.
#[derive(Debug)]
pub struct Dnsmasq {
    binary: PathBuf,
    state_dir: PathBuf,
    child: Option<Child>,
    /// The arguments it runs with; `None` when not running.
    args: Option<Vec<String>>,
    hosts: String,
    opts: String,
    names: String,
}

impl Dnsmasq {
    pub fn new(binary: &Path, state_dir: &Path) -> Dnsmasq {
        Dnsmasq {
            binary: binary.to_owned(),
            state_dir: state_dir.to_owned(),
            child: None,
            args: None,
            hosts: String::new(),
            opts: String::new(),
            names: String::new(),
        }
    }

    /// Stops a dnsmasq that a previous agent left running: the pid in the pid file, if that
    /// process is a dnsmasq serving this state directory's hosts file.
    pub async fn stop_stale(&self) {
        let Some(pid) = self.stale_pid() else {
            return;
        };
        tracing::warn!(pid, "stopping the dnsmasq a previous run left behind");
        let Some(target) = Pid::from_raw(pid) else {
            return;
        };
        let _ = kill_process(target, Signal::TERM);
        let alive = || is_running(pid);
        let deadline = tokio::time::Instant::now() + STOP_GRACE;
        while alive() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // Not our child: its parent reaps it (a zombie counts as gone).
        if alive() {
            let _ = kill_process(target, Signal::KILL);
        }
    }

    fn stale_pid(&self) -> Option<i32> {
        let text = std::fs::read_to_string(self.state_dir.join(PID_FILE)).ok()?;
        let pid: i32 = text.trim().parse().ok()?;
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let cmdline = String::from_utf8_lossy(&cmdline);
        let hosts = format!(
            "--dhcp-hostsfile={}",
            self.state_dir.join(HOSTS_FILE).display()
        );
        let ours = cmdline.split('\0').any(|arg| arg == hosts);
        ours.then_some(pid)
    }

    /// The pid of the running dnsmasq, if any.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().and_then(Child::id)
    }

    /// Makes dnsmasq serve `rendered`: the files written, then SIGHUP if they changed, or a
    /// restart if the arguments did. Nothing to serve (no ranges) stops it.
    pub async fn apply(&mut self, rendered: &Rendered, serving: bool) -> Result<(), DhcpError> {
        let changed = self.write(HOSTS_FILE, &rendered.hosts, |d| &mut d.hosts)?
            | self.write(OPTS_FILE, &rendered.opts, |d| &mut d.opts)?
            | self.write(NAMES_FILE, &rendered.names, |d| &mut d.names)?;
        if !serving {
            self.stop().await;
            return Ok(());
        }
        if self.args.as_ref() != Some(&rendered.args) || self.child.is_none() {
            self.stop().await;
            return self.start(&rendered.args);
        }
        if changed {
            self.signal(Signal::HUP);
            tracing::debug!("dnsmasq told to re-read its hosts and options (SIGHUP)");
        }
        Ok(())
    }

    /// Waits until the child exits (forever when there is none); forgets it, so the next
    /// [`Dnsmasq::apply`] or [`Dnsmasq::restart`] starts a new one.
    pub async fn exited(&mut self) -> ExitStatus {
        let Some(child) = self.child.as_mut() else {
            return std::future::pending().await;
        };
        let status = child.wait().await;
        self.child = None;
        status.unwrap_or_default()
    }

    /// Starts dnsmasq again with the arguments it last had (after it died).
    pub fn restart(&mut self) -> Result<(), DhcpError> {
        match self.args.clone() {
            // Not when an apply has started one since, nor when there is nothing to serve.
            Some(args) if self.child.is_none() => self.start(&args),
            _ => Ok(()),
        }
    }

    /// SIGTERM, then SIGKILL after [`STOP_GRACE`]; the child reaped.
    pub async fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            self.args = None;
            return;
        };
        self.args = None;
        self.signal_child(&child, Signal::TERM);
        if tokio::time::timeout(STOP_GRACE, child.wait())
            .await
            .is_err()
        {
            tracing::warn!("dnsmasq did not exit within {STOP_GRACE:?} of SIGTERM; killing it");
            let _ = child.kill().await;
        }
    }

    fn start(&mut self, args: &[String]) -> Result<(), DhcpError> {
        let fail = |reason: String| DhcpError::Dnsmasq {
            binary: self.binary.display().to_string(),
            reason,
        };
        let child = Command::new(&self.binary)
            .args(args)
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| fail(format!("cannot start: {e}")))?;
        tracing::info!(pid = child.id(), ?args, "dnsmasq started");
        self.child = Some(child);
        self.args = Some(args.to_vec());
        Ok(())
    }

    fn signal(&self, signal: Signal) {
        if let Some(child) = &self.child {
            self.signal_child(child, signal);
        }
    }

    fn signal_child(&self, child: &Child, signal: Signal) {
        let pid = child.id().and_then(|id| Pid::from_raw(id as i32));
        // ESRCH: it exited just now; `exited` reports that and it is restarted.
        if let Some(pid) = pid {
            let _ = kill_process(pid, signal);
        }
    }

    /// Writes `text` to `name` unless it already holds it; returns whether it wrote.
    fn write(
        &mut self,
        name: &str,
        text: &str,
        last: fn(&mut Dnsmasq) -> &mut String,
    ) -> Result<bool, DhcpError> {
        let path = self.state_dir.join(name);
        if *last(self) == text && path.exists() {
            return Ok(false);
        }
        let fail = |source| DhcpError::File {
            path: path.display().to_string(),
            source,
        };
        let temporary = self.state_dir.join(format!(".{name}.new"));
        std::fs::write(&temporary, text).map_err(fail)?;
        std::fs::rename(&temporary, &path).map_err(fail)?;
        *last(self) = text.to_owned();
        Ok(true)
    }
}

/// Whether `pid` is a process that has not exited (a zombie has).
fn is_running(pid: i32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The state is the first field after the command name, which is in parentheses.
    let state = stat
        .rsplit_once(") ")
        .and_then(|(_, rest)| rest.chars().next());
    state.is_some_and(|s| s != 'Z')
}
