//! BIRD as calico-node drives it: a configuration is checked with `bird -p` before it replaces
//! the running one, BIRD is told with `birdc configure`, and runs in the foreground as a child.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::process::{Child, Command};

/// Where BIRD's files are and how to call it.
#[derive(Debug, Clone)]
pub struct Bird {
    pub bird: PathBuf,
    pub birdc: PathBuf,
    /// The configuration BIRD runs with.
    pub config: PathBuf,
    /// The control socket (`birdc -s`, `calicoctl node status --bird-socket`).
    pub socket: PathBuf,
}

impl Bird {
    /// In `dir`: `bird.conf` and `bird.ctl`.
    pub fn in_dir(dir: &Path, bird: PathBuf, birdc: PathBuf) -> Bird {
        Bird {
            bird,
            birdc,
            config: dir.join("bird.conf"),
            socket: dir.join("bird.ctl"),
        }
    }

    /// Installs `text` as the configuration if BIRD accepts it; returns whether it changed.
    /// A rejected configuration leaves the current one in place; the error is BIRD's message.
    pub async fn install(&self, text: &str) -> Result<bool, String> {
        if std::fs::read_to_string(&self.config).is_ok_and(|current| current == text) {
            return Ok(false);
        }
        let candidate = self.config.with_extension("conf.new");
        std::fs::write(&candidate, text)
            .map_err(|e| format!("cannot write {}: {e}", candidate.display()))?;
        let out = Command::new(&self.bird)
            .arg("-p")
            .arg("-c")
            .arg(&candidate)
            .output()
            .await
            .map_err(|e| format!("cannot run {}: {e}", self.bird.display()))?;
        if !out.status.success() {
            return Err(format!(
                "BIRD rejects the new configuration (kept the running one; the rejected one is {}): {}{}",
                candidate.display(),
                String::from_utf8_lossy(&out.stderr).trim(),
                String::from_utf8_lossy(&out.stdout).trim()
            ));
        }
        std::fs::rename(&candidate, &self.config)
            .map_err(|e| format!("cannot replace {}: {e}", self.config.display()))?;
        Ok(true)
    }

    /// Asks the running BIRD to load the configuration file.
    pub async fn reconfigure(&self) -> Result<(), String> {
        let out = Command::new(&self.birdc)
            .arg("-s")
            .arg(&self.socket)
            .arg("configure")
            .output()
            .await
            .map_err(|e| format!("cannot run {}: {e}", self.birdc.display()))?;
        let text = String::from_utf8_lossy(&out.stdout);
        if out.status.success()
            && (text.contains("Reconfigured") || text.contains("Reconfiguration in progress"))
        {
            return Ok(());
        }
        Err(format!(
            "birdc configure: {}{}",
            text.trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }

    /// Starts BIRD in the foreground (its log goes to ours).
    pub fn start(&self) -> std::io::Result<Child> {
        let _ = std::fs::remove_file(&self.socket);
        Command::new(&self.bird)
            // Graceful restart recovery: the kernel keeps the routes of the BIRD before this
            // one until the BGP sessions are back (see the `graceful restart` options of the
            // configuration).
            .arg("-R")
            .arg("-f")
            .arg("-c")
            .arg(&self.config)
            .arg("-s")
            .arg(&self.socket)
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .spawn()
    }
}
