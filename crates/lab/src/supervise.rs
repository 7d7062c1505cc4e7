//! What the lab's long-running services run under, as systemd runs them on a real host:
//! `calico-lab supervise [--restart POLICY] -- PROGRAM ARGS...` starts the program and starts it
//! again when it ends, as its policy says.
//!
//! | policy | systemd's | for | a restart after |
//! | --- | --- | --- | --- |
//! | `on-clean-exit` (default) | `Restart=on-success` | Felix | exit status 0 only: Felix exits 0 to apply a configuration change that needs a restart, as Felix 1.x's init system restarted it; any other end (a crash, a kill) ends the supervisor too, with Felix's status, so the lab (and its tests) see a dead Felix |
//! | `always` | `Restart=always` | `calico-neutron`, `calico-dhcp-agent` | any end, SIGKILL included, as docs/openstack.md's units do |
//!
//! A restart waits a backoff: [`Backoff`]. SIGTERM, SIGINT or SIGHUP to the supervisor is a
//! stop: the child gets SIGTERM (SIGKILL after [`STOP_GRACE`]), nothing is restarted, and the
//! supervisor exits 0; `calico-lab down` stops every supervisor so ([`stop_all`]) before it
//! kills whatever is left. The supervisor and its child share one process group:
//! `restart-felix` kills the group.

use std::fmt;
use std::process::ExitStatus;
use std::str::FromStr;
use std::time::{Duration, Instant};

use anyhow::Context;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::process::{Child, Command};
use tokio::signal::unix::{SignalKind, signal};

use crate::processes::pid_alive;

/// How long a child may take to exit after SIGTERM before it is killed.
pub const STOP_GRACE: Duration = Duration::from_secs(5);

/// When the child is started again.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Restart {
    /// After exit status 0 only; otherwise the supervisor ends with the child's status.
    #[default]
    OnCleanExit,
    /// After any end.
    Always,
}

impl Restart {
    /// Whether to start the child again after `status`; otherwise the code to exit with.
    pub fn after(self, status: ExitStatus) -> Result<(), i32> {
        match (self, status.success()) {
            (Restart::Always, _) | (Restart::OnCleanExit, true) => Ok(()),
            (Restart::OnCleanExit, false) => Err(status.code().unwrap_or(1)),
        }
    }
}

impl FromStr for Restart {
    type Err = String;

    fn from_str(text: &str) -> Result<Restart, String> {
        match text {
            "on-clean-exit" => Ok(Restart::OnCleanExit),
            "always" => Ok(Restart::Always),
            other => Err(format!(
                "--restart {other:?}: expected on-clean-exit or always"
            )),
        }
    }
}

impl fmt::Display for Restart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Restart::OnCleanExit => "on-clean-exit",
            Restart::Always => "always",
        })
    }
}

/// The wait before a restart: 250 ms, doubled after each run shorter than [`Backoff::STABLE`]
/// (a crash loop), up to 8 s; a run of `STABLE` or longer starts again from 250 ms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backoff {
    next: Duration,
}

impl Backoff {
    const FIRST: Duration = Duration::from_millis(250);
    const MAX: Duration = Duration::from_secs(8);
    pub const STABLE: Duration = Duration::from_secs(10);

    /// The wait after a run that lasted `ran`.
    pub fn after(&mut self, ran: Duration) -> Duration {
        if ran >= Self::STABLE {
            self.next = Self::FIRST;
        }
        let wait = self.next;
        self.next = (self.next * 2).min(Self::MAX);
        wait
    }
}

impl Default for Backoff {
    fn default() -> Backoff {
        Backoff { next: Self::FIRST }
    }
}

/// Runs `command` under `restart`; returns the exit code to end with.
pub fn run(command: &[String], restart: Restart) -> anyhow::Result<i32> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the supervisor's runtime")?;
    runtime.block_on(supervise(command, restart))
}

async fn supervise(command: &[String], restart: Restart) -> anyhow::Result<i32> {
    let (program, args) = command.split_first().context("nothing to supervise")?;
    let mut stop = Stop::install()?;
    let mut backoff = Backoff::default();
    loop {
        let started = Instant::now();
        let mut child = Command::new(program)
            .args(args)
            .spawn()
            .with_context(|| format!("cannot start {program}"))?;
        let status = tokio::select! {
            status = child.wait() => status.with_context(|| format!("cannot wait for {program}"))?,
            signal = stop.next() => {
                eprintln!("calico-lab supervise: {signal}: stopping {program}");
                stop_child(&mut child).await;
                return Ok(0);
            }
        };
        if let Err(code) = restart.after(status) {
            eprintln!("calico-lab supervise: {program} ended ({status}); not restarting it");
            return Ok(code);
        }
        let wait = backoff.after(started.elapsed());
        eprintln!(
            "calico-lab supervise: {program} ended ({status}); starting it again in {wait:?}"
        );
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            signal = stop.next() => {
                eprintln!("calico-lab supervise: {signal}: not restarting {program}");
                return Ok(0);
            }
        }
    }
}

/// SIGTERM, then SIGKILL after [`STOP_GRACE`]; the child reaped.
async fn stop_child(child: &mut Child) {
    if let Some(pid) = child.id() {
        // ESRCH: it has just exited; the wait below reaps it.
        let _ = kill(Pid::from_raw(pid as i32), Signal::SIGTERM);
    }
    if tokio::time::timeout(STOP_GRACE, child.wait())
        .await
        .is_err()
    {
        eprintln!("calico-lab supervise: no exit within {STOP_GRACE:?} of SIGTERM; killing it");
        let _ = child.kill().await;
    }
}

/// The signals that stop the supervisor.
struct Stop {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

impl Stop {
    fn install() -> anyhow::Result<Stop> {
        let on = |kind| signal(kind).context("cannot install the supervisor's signal handlers");
        Ok(Stop {
            term: on(SignalKind::terminate())?,
            int: on(SignalKind::interrupt())?,
            hup: on(SignalKind::hangup())?,
        })
    }

    async fn next(&mut self) -> &'static str {
        tokio::select! {
            _ = self.term.recv() => "SIGTERM",
            _ = self.int.recv() => "SIGINT",
            _ = self.hup.recv() => "SIGHUP",
        }
    }
}

/// Stops the supervisors among `pids` (with their children: see the module's doc) and waits
/// until they are gone, at most [`STOP_GRACE`] and a second; other pids are left alone.
pub fn stop_all(pids: &[i32]) {
    let supervisors: Vec<i32> = pids.iter().copied().filter(|&p| is_supervisor(p)).collect();
    for &pid in &supervisors {
        let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
    }
    let deadline = Instant::now() + STOP_GRACE + Duration::from_secs(1);
    while supervisors.iter().any(|&p| pid_alive(p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether `pid` runs `calico-lab supervise`.
fn is_supervisor(pid: i32) -> bool {
    let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let mut args = cmdline.split(|&b| b == 0);
    let program = args.next().unwrap_or_default();
    program.ends_with(b"calico-lab")
        && args
            .take_while(|arg| *arg != b"--")
            .any(|arg| arg == b"supervise")
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt;

    use super::*;

    fn exited(code: i32) -> ExitStatus {
        ExitStatus::from_raw(code << 8)
    }

    fn killed(signal: Signal) -> ExitStatus {
        ExitStatus::from_raw(signal as i32)
    }

    #[test]
    fn felix_is_restarted_after_a_clean_exit_only_the_services_after_any_end() {
        let felix = Restart::OnCleanExit;
        assert_eq!(felix.after(exited(0)), Ok(()));
        assert_eq!(felix.after(exited(3)), Err(3));
        assert_eq!(felix.after(killed(Signal::SIGKILL)), Err(1));
        for status in [exited(0), exited(1), killed(Signal::SIGKILL)] {
            assert_eq!(Restart::Always.after(status), Ok(()), "{status}");
        }
    }

    #[test]
    fn the_policy_is_named_on_the_command_line() {
        for policy in [Restart::OnCleanExit, Restart::Always] {
            assert_eq!(policy.to_string().parse(), Ok(policy));
        }
        let error = "sometimes".parse::<Restart>().unwrap_err();
        assert!(error.contains("--restart \"sometimes\""), "{error}");
    }

    #[test]
    fn the_backoff_doubles_in_a_crash_loop_and_resets_after_a_stable_run() {
        let mut backoff = Backoff::default();
        let quick = Duration::from_millis(10);
        let waits: Vec<u64> = (0..7)
            .map(|_| backoff.after(quick).as_millis() as u64)
            .collect();
        assert_eq!(waits, [250, 500, 1000, 2000, 4000, 8000, 8000]);
        assert_eq!(backoff.after(Backoff::STABLE), Duration::from_millis(250));
        assert_eq!(backoff.after(quick), Duration::from_millis(500));
    }
}
