//! Running a kernel tool with input, in the right network namespace, with errors that say what
//! ran and what it printed.

use std::io::Write;
use std::process::{Command, Stdio};

/// Where tools run: the current network namespace, or a named one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Netns(Option<String>);

impl Netns {
    /// The namespace this process is in.
    pub fn current() -> Netns {
        Netns(None)
    }

    /// A namespace made with `ip netns add <name>`.
    pub fn named(name: impl Into<String>) -> Netns {
        Netns(Some(name.into()))
    }

    /// The namespace's name, or `None` for the current one.
    pub fn name(&self) -> Option<&str> {
        self.0.as_deref()
    }

    /// Runs `program args` with `input` on stdin; returns stdout.
    pub fn run(&self, program: &str, args: &[&str], input: &str) -> Result<String, CommandError> {
        let mut command = match &self.0 {
            None => Command::new(program),
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns, program]);
                c
            }
        };
        command
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let describe = || format!("{program} {}", args.join(" "));
        let mut child = command.spawn().map_err(|e| CommandError {
            command: describe(),
            reason: format!("cannot start: {e} (is it installed?)"),
        })?;
        // A tool that fails early may not read all its input; its exit status says why.
        let _ = child
            .stdin
            .take()
            .expect("stdin is piped")
            .write_all(input.as_bytes());
        let out = child.wait_with_output().map_err(|e| CommandError {
            command: describe(),
            reason: e.to_string(),
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

/// A kernel tool failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{command} failed: {reason}")]
pub struct CommandError {
    pub command: String,
    pub reason: String,
}
