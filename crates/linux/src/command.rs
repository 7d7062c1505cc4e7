//! Running a kernel tool with input, in the right network namespace, with errors that say what
//! ran and what it printed.

use std::ffi::OsStr;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// Where tools run: the current network namespace, a named one (`ip netns add <name>`), or the
/// namespace behind a file (`/proc/<pid>/ns/net`, a bind mount like the `CNI_NETNS` of a
/// container runtime).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Netns(Place);

#[derive(Debug, Clone, Default, PartialEq, Eq)]
enum Place {
    #[default]
    Current,
    Named(String),
    File(PathBuf),
}

impl Netns {
    /// The namespace this process is in.
    pub fn current() -> Netns {
        Netns(Place::Current)
    }

    /// A namespace made with `ip netns add <name>`.
    pub fn named(name: impl Into<String>) -> Netns {
        Netns(Place::Named(name.into()))
    }

    /// The namespace a file refers to.
    pub fn at_path(path: impl Into<PathBuf>) -> Netns {
        Netns(Place::File(path.into()))
    }

    /// The namespace's name, for a named one.
    pub fn name(&self) -> Option<&str> {
        match &self.0 {
            Place::Named(name) => Some(name),
            _ => None,
        }
    }

    /// The file to enter the namespace through, or `None` for the current one.
    pub fn path(&self) -> Option<PathBuf> {
        match &self.0 {
            Place::Current => None,
            Place::Named(name) => Some(Path::new("/run/netns").join(name)),
            Place::File(path) => Some(path.clone()),
        }
    }

    /// A command that runs `program` inside this namespace (`ip netns exec`, which also gives it
    /// the namespace's `/sys`; `nsenter` for a namespace given by file): add arguments,
    /// environment and stdio, then spawn it. The one place that enters a namespace to run a
    /// program.
    pub fn command(&self, program: impl AsRef<OsStr>) -> Command {
        match &self.0 {
            Place::Current => Command::new(program),
            Place::Named(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec"]).arg(ns).arg(program);
                c
            }
            Place::File(path) => {
                let mut c = Command::new("nsenter");
                c.arg(format!("--net={}", path.display())).arg(program);
                c
            }
        }
    }

    /// Runs `program args` with `input` on stdin; returns stdout.
    pub fn run(&self, program: &str, args: &[&str], input: &str) -> Result<String, CommandError> {
        let mut command = self.command(program);
        command.args(args);
        let describe = || format!("{program} {}", args.join(" "));
        let out = output_with_input(&mut command, input.as_bytes()).map_err(|e| CommandError {
            command: describe(),
            reason: format!("cannot run: {e} (is it installed?)"),
        })?;
        if !out.status.success() {
            return Err(CommandError {
                command: describe(),
                reason: format!(
                    "{}: {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim()
                ),
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

/// Runs `command` with `input` on its stdin and collects stdout and stderr, whatever its exit
/// status (callers decide what a failure means).
pub fn output_with_input(command: &mut Command, input: &[u8]) -> std::io::Result<Output> {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    // A program that fails early may not read all its input; its exit status says why.
    let _ = child.stdin.take().expect("stdin is piped").write_all(input);
    child.wait_with_output()
}

impl std::fmt::Display for Netns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Place::Current => f.write_str("the current namespace"),
            Place::Named(name) => write!(f, "namespace {name}"),
            Place::File(path) => write!(f, "namespace {}", path.display()),
        }
    }
}

/// A kernel tool failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{command} failed: {reason}")]
pub struct CommandError {
    pub command: String,
    pub reason: String,
}
