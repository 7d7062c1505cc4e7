//! Which firewall backend a test lab's Felixes run, and the host's firewall as text for it, so
//! that a test reads the kernel the same way on both.
//!
//! | `CALICO_TEST_BACKEND` | Felix runs | [`TestLab::firewall`] is |
//! | --- | --- | --- |
//! | unset, `iptables` | iptables and IP sets (`NFTablesMode` left at its default) | `iptables-save` and `ip6tables-save` |
//! | `nftables` | one nf_tables table (`--felix-config NFTablesMode=Enabled` for every `up`) | `nft list table inet calico` |
//!
//! A test that names `NFTablesMode` itself runs what it names, whatever the variable says.

use calico_lab::check::fetch_in_netns;

use super::TestLab;

/// The variable that picks the backend of every lab a test brings up.
pub const BACKEND_VARIABLE: &str = "CALICO_TEST_BACKEND";

/// Felix's metrics port in the lab's hosts.
const METRICS_PORT: u16 = 9091;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Iptables,
    Nftables,
}

impl Backend {
    /// The backend [`BACKEND_VARIABLE`] asks for (iptables when unset).
    pub fn from_env() -> Backend {
        match std::env::var(BACKEND_VARIABLE).ok().as_deref() {
            None | Some("" | "iptables") => Backend::Iptables,
            Some("nftables") => Backend::Nftables,
            Some(other) => {
                panic!("{BACKEND_VARIABLE}={other:?}: expected `iptables` or `nftables`")
            }
        }
    }

    /// The backend an `NFTablesMode` value gives on this machine (whose kernel has nf_tables).
    pub fn of_mode(value: &str) -> Backend {
        match value.to_ascii_lowercase().as_str() {
            "enabled" | "auto" => Backend::Nftables,
            "disabled" => Backend::Iptables,
            other => panic!("NFTablesMode={other:?}: expected Enabled, Disabled or Auto"),
        }
    }

    /// As Felix names it (its status report, `felix_dataplane_backend{backend=…}`).
    pub fn name(self) -> &'static str {
        match self {
            Backend::Iptables => "iptables",
            Backend::Nftables => "nftables",
        }
    }
}

/// The `NFTablesMode` value among `up`'s arguments (`--felix-config NFTablesMode=V`), if any.
pub fn named_mode(extra: &[&str]) -> Option<String> {
    let settings = extra.windows(2).filter_map(|pair| match pair {
        ["--felix-config", setting] => Some(*setting),
        _ => None,
    });
    let inline = extra
        .iter()
        .filter_map(|arg| arg.strip_prefix("--felix-config="));
    settings.chain(inline).find_map(|setting| {
        let (name, value) = setting.split_once('=')?;
        name.eq_ignore_ascii_case("NFTablesMode")
            .then(|| value.to_owned())
    })
}

impl TestLab {
    /// The host's firewall as text, for the backend the lab runs: `iptables-save` then
    /// `ip6tables-save` (no counters, no comment lines), or `nft list table inet calico`
    /// (empty when there is no such table).
    pub fn firewall(&self, host: &str) -> String {
        match self.backend {
            Backend::Iptables => self.iptables_save(host),
            Backend::Nftables => self.nft_table(host).unwrap_or_default(),
        }
    }

    /// As [`TestLab::firewall`], and on nftables with each rule's handle (`nft -a`): a rule
    /// written again gets a new one, so equal texts mean nothing was rewritten.
    pub fn firewall_with_handles(&self, host: &str) -> String {
        match self.backend {
            Backend::Iptables => self.iptables_save(host),
            Backend::Nftables => self.nft(host, &["-a", "list", "table", "inet", "calico"]),
        }
    }

    /// `iptables-save` and `ip6tables-save` of every table, without comment lines and without
    /// the counters of the chains' policies (`:INPUT ACCEPT [12:345]`).
    pub fn iptables_save(&self, host: &str) -> String {
        let mut all = String::new();
        for tool in ["iptables-save", "ip6tables-save"] {
            let out = self.in_host(host, tool, &[]);
            assert!(
                out.status.success(),
                "{tool} in {host}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let text = String::from_utf8_lossy(&out.stdout);
            for line in text.lines().filter(|l| !l.starts_with('#')) {
                match line.rfind(" [") {
                    Some(at) if line.starts_with(':') => all.push_str(&line[..at]),
                    _ => all.push_str(line),
                }
                all.push('\n');
            }
        }
        all
    }

    /// `nft list table inet calico` in a host; `None` when the table does not exist.
    pub fn nft_table(&self, host: &str) -> Option<String> {
        let tables = self.nft(host, &["list", "tables"]);
        tables
            .lines()
            .any(|l| l.trim() == "table inet calico")
            .then(|| self.nft(host, &["list", "table", "inet", "calico"]))
    }

    /// `nft ARGS` in a host; its output (fails naming the command and its error).
    pub fn nft(&self, host: &str, args: &[&str]) -> String {
        calico_testkit::require_tool("nft");
        let out = self.in_host(host, "nft", args);
        assert!(
            out.status.success(),
            "nft {args:?} in {host}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The IP sets of a host (`ipset list -n`).
    pub fn ipsets(&self, host: &str) -> Vec<String> {
        let out = self.in_host(host, "ipset", &["list", "-n"]);
        assert!(
            out.status.success(),
            "ipset list -n in {host}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// What the iptables backend left in a host: its `cali-` chains and the rules that jump to
    /// them (both IP versions), and its `cali4`/`cali6` IP sets. Empty when there is none.
    pub fn iptables_leftovers(&self, host: &str) -> Vec<String> {
        let mut found: Vec<String> = self
            .iptables_save(host)
            .lines()
            .filter(|l| l.contains("cali-"))
            .map(str::to_owned)
            .collect();
        found.extend(
            self.ipsets(host)
                .into_iter()
                .filter(|s| s.starts_with("cali4") || s.starts_with("cali6")),
        );
        found
    }

    /// Felix's `felix_dataplane_backend` metric in a host: the backend whose value is 1.
    pub fn running_backend(&self, host: &str) -> Result<String, String> {
        let metrics = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime")
            .block_on(fetch_in_netns(&self.netns(host), METRICS_PORT, "/metrics"))
            .map_err(|e| format!("Felix's metrics in {host}: {e:#}"))?;
        metrics
            .lines()
            .filter(|l| l.starts_with("felix_dataplane_backend{"))
            .find(|l| l.trim_end().ends_with(" 1"))
            .and_then(|l| l.split('"').nth(1))
            .map(str::to_owned)
            .ok_or_else(|| format!("no felix_dataplane_backend of 1 in {host}'s metrics"))
    }

    /// Checks that every host runs `backend` and nothing of the other is in its kernel: the
    /// metric, and the table or the chains and sets.
    pub fn assert_backend(&self, backend: Backend) {
        for host in self.state().hosts.iter().map(|h| h.name.clone()) {
            self.assert_backend_on(&host, backend);
        }
    }

    /// [`TestLab::assert_backend`] for one host.
    pub fn assert_backend_on(&self, host: &str, backend: Backend) {
        if let Err(why) = self.check_backend(host, backend) {
            panic!(
                "{host} does not run {} alone: {why}\n{}",
                backend.name(),
                self.felix_logs()
            );
        }
    }

    /// Whether `host` runs `backend` alone; what differs when not.
    pub fn check_backend(&self, host: &str, backend: Backend) -> Result<(), String> {
        let running = self.running_backend(host)?;
        if running != backend.name() {
            return Err(format!("Felix says it runs {running}"));
        }
        let table = self.nft_table(host);
        let leftovers = self.iptables_leftovers(host);
        match backend {
            Backend::Nftables if table.is_none() => Err("no table inet calico".to_owned()),
            Backend::Nftables if !leftovers.is_empty() => {
                Err(format!("iptables leftovers: {leftovers:#?}"))
            }
            Backend::Iptables if table.is_some() => {
                Err("the table inet calico is still there".to_owned())
            }
            Backend::Iptables if !leftovers.iter().any(|l| l.contains("-j cali-FORWARD")) => {
                Err("no jump to cali-FORWARD in iptables".to_owned())
            }
            _ => Ok(()),
        }
    }
}

/// The body of `chain NAME { … }` (or `map NAME`, `set NAME`) in an `nft list` text: its lines
/// up to the closing brace.
pub fn nft_block<'a>(listing: &'a str, kind: &str, name: &str) -> Option<&'a str> {
    let head = format!("\t{kind} {name} {{\n");
    let start = listing.find(&head)? + head.len();
    let end = listing[start..].find("\n\t}")?;
    Some(&listing[start..start + end])
}
