//! What `calicoctl diags` collects, as data, and the one `.tar.gz` it becomes. Every part is
//! either collected or listed in `not-collected.txt` with the reason, so the archive is written
//! whatever is down.
//!
//! | file | from |
//! | --- | --- |
//! | `versions.txt` | calicoctl, `calico-felix`/`calico-node`/`bird`/`iptables`/`ipset`/`nft`/`ip` `--version`, `uname -a` |
//! | `logs/felix.log`, `logs/calico-node.log` | the log files given (`--felix-log`, `--node-log`) |
//! | `iptables-save.txt` … `ip-neigh.txt` | the tools of [`COMMANDS`] (`nft-ruleset.txt`: `nft -a list ruleset`, Felix's nftables backend) |
//! | `bird-protocols.txt`, `bird-routes.txt` | `birdc show protocols all`, `show route` on calico-node's socket |
//! | `etcd-keys.json` | this host's keys and the global Felix config, as `calicoctl get -o json` writes them |
//! | `felix-config.txt` | the effective configuration Felix logged at start (`config NAME = "value" (source)`), then the datastore's layer of it |
//! | `not-collected.txt` | what could not be collected, and why |

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use flate2::Compression;
use flate2::write::GzEncoder;

/// The kernel's view, each as (file, command line).
pub const COMMANDS: &[(&str, &[&str])] = &[
    ("iptables-save.txt", &["iptables-save", "-c"]),
    ("ip6tables-save.txt", &["ip6tables-save", "-c"]),
    ("ipset-list.txt", &["ipset", "list"]),
    // Felix's nftables backend (NFTablesMode) and anything else in nf_tables, with handles.
    ("nft-ruleset.txt", &["nft", "-a", "list", "ruleset"]),
    ("ip-addr.txt", &["ip", "addr"]),
    ("ip-link.txt", &["ip", "-d", "link"]),
    ("ip-rule.txt", &["ip", "rule"]),
    ("ip-route.txt", &["ip", "route"]),
    ("ip-6-route.txt", &["ip", "-6", "route"]),
    (
        "ip-route-all-tables.txt",
        &["ip", "route", "show", "table", "all"],
    ),
    ("ip-neigh.txt", &["ip", "neigh"]),
];

/// The programs whose `--version` goes into `versions.txt`.
pub const VERSIONS: &[&[&str]] = &[
    &["calico-felix", "--version"],
    &["calico-node", "--version"],
    &["bird", "--version"],
    &["iptables", "--version"],
    &["ipset", "--version"],
    &["nft", "--version"],
    &["ip", "-V"],
    &["uname", "-a"],
];

/// How long one tool may run.
const TOOL_TIMEOUT: Duration = Duration::from_secs(30);

/// What one file of the archive holds.
#[derive(Debug)]
pub enum Content {
    Text(String),
    /// A file on disk, copied as it is (logs can be large).
    File(PathBuf),
}

/// The archive being assembled.
#[derive(Debug, Default)]
pub struct Collection {
    pub files: Vec<(String, Content)>,
    /// (what, why) for `not-collected.txt`.
    pub missing: Vec<(String, String)>,
}

impl Collection {
    pub fn text(&mut self, name: &str, text: String) {
        self.files.push((name.to_owned(), Content::Text(text)));
    }

    pub fn missing(&mut self, what: impl Into<String>, why: impl Into<String>) {
        self.missing.push((what.into(), why.into()));
    }

    /// A log file, or a line saying why not.
    pub fn log(&mut self, name: &str, path: &Path) {
        match std::fs::metadata(path) {
            Ok(meta) if meta.is_file() => {
                self.files
                    .push((name.to_owned(), Content::File(path.to_owned())));
            }
            Ok(_) => self.missing(name, format!("{} is not a file", path.display())),
            Err(e) => self.missing(name, format!("cannot read {}: {e}", path.display())),
        }
    }

    /// The standard output of a tool into `name`, or why not.
    pub async fn command(&mut self, name: &str, argv: &[&str]) {
        match run(argv).await {
            Ok(text) => self.text(name, text),
            Err(why) => self.missing(name, why),
        }
    }

    /// `not-collected.txt`, the last file of the archive.
    fn not_collected(&self) -> String {
        if self.missing.is_empty() {
            return "everything was collected\n".to_owned();
        }
        self.missing
            .iter()
            .map(|(what, why)| format!("{what}: {why}\n"))
            .collect()
    }

    /// Writes `<dir>/<base>.tar.gz` with every file under `<base>/`; returns its path.
    pub fn write(&self, dir: &Path, base: &str) -> std::io::Result<PathBuf> {
        let path = dir.join(format!("{base}.tar.gz"));
        let file = std::fs::File::create(&path)?;
        let mut archive = tar::Builder::new(GzEncoder::new(file, Compression::default()));
        let not_collected = Content::Text(self.not_collected());
        let all = self
            .files
            .iter()
            .map(|(n, c)| (n.as_str(), c))
            .chain([("not-collected.txt", &not_collected)]);
        for (name, content) in all {
            let name = format!("{base}/{name}");
            match content {
                Content::Text(text) => {
                    let mut header = tar::Header::new_gnu();
                    header.set_size(text.len() as u64);
                    header.set_mode(0o644);
                    header.set_mtime(now());
                    archive.append_data(&mut header, &name, text.as_bytes())?;
                }
                Content::File(source) => archive.append_path_with_name(source, &name)?,
            }
        }
        archive.into_inner()?.finish()?.flush()?;
        Ok(path)
    }
}

/// Runs a tool, standard output as text; a failure says which tool and why.
pub async fn run(argv: &[&str]) -> Result<String, String> {
    let line = argv.join(" ");
    let child = tokio::process::Command::new(argv[0])
        .args(&argv[1..])
        .kill_on_drop(true)
        .output();
    let output = match tokio::time::timeout(TOOL_TIMEOUT, child).await {
        Err(_) => return Err(format!("`{line}` did not finish within {TOOL_TIMEOUT:?}")),
        Ok(Err(e)) => return Err(format!("cannot run `{line}`: {e}")),
        Ok(Ok(output)) => output,
    };
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        return Err(format!(
            "`{line}` failed ({}): {}",
            output.status,
            stderr.trim()
        ));
    }
    // Some tools (bird --version) answer on standard error.
    Ok(if stdout.trim().is_empty() {
        stderr.into_owned()
    } else {
        stdout
    })
}

/// The `config NAME = "value" (source)` lines Felix logs at start: its effective configuration
/// with the source of each value. The last start's lines win.
pub fn felix_config_from_log(log: &str) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for line in log.lines() {
        if line.contains("connecting to etcd") {
            lines.clear(); // Felix (re)started: its report follows
            continue;
        }
        let Some(at) = line.find("config ") else {
            continue;
        };
        let entry = &line[at..];
        if !entry.contains(" = ") || !entry.ends_with(')') || entry.contains("applied while") {
            continue;
        }
        lines.push(entry.trim_start_matches("config ").to_owned());
    }
    lines
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn felix_config_comes_from_the_last_start_in_the_log() {
        let log = "\
2026-11-23T10:00:00Z INFO calico_felix: connecting to etcd endpoints=[]
2026-11-23T10:00:00Z INFO calico_felix: config LogSeverityScreen = \"info\" (default)
2026-11-23T11:00:00Z INFO calico_felix: connecting to etcd endpoints=[]
2026-11-23T11:00:00Z INFO calico_felix: config LogSeverityScreen = \"debug\" (etcd host config)
2026-11-23T11:00:00Z INFO calico_felix: config HealthPort = \"9099\" (default)
2026-11-23T11:05:00Z INFO calico_felix: config X = \"1\" (etcd host config): applied while running";
        assert_eq!(
            felix_config_from_log(log),
            [
                "LogSeverityScreen = \"debug\" (etcd host config)",
                "HealthPort = \"9099\" (default)"
            ]
        );
    }
}
