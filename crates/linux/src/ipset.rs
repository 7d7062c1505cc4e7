//! IP sets through `ipset restore` and `ipset list -n`.

use crate::command::{CommandError, Netns};

/// The IP sets of one network namespace.
#[derive(Debug, Clone, Default)]
pub struct Ipset {
    netns: Netns,
}

impl Ipset {
    pub fn new(netns: Netns) -> Ipset {
        Ipset { netns }
    }

    /// Applies `ipset restore` input (`-exist` tolerates creating what exists).
    pub fn restore(&self, input: &str) -> Result<(), CommandError> {
        if input.is_empty() {
            return Ok(());
        }
        self.netns
            .run("ipset", &["restore", "-exist"], input)
            .map(drop)
    }

    /// The names of every set.
    pub fn names(&self) -> Result<Vec<String>, CommandError> {
        let out = self.netns.run("ipset", &["list", "-n"], "")?;
        Ok(out
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect())
    }

    /// Every set and its members, as `ipset save` prints them.
    pub fn save(&self) -> Result<String, CommandError> {
        self.netns.run("ipset", &["save"], "")
    }

    /// The members of one set, as ipset prints them.
    pub fn members(&self, name: &str) -> Result<Vec<String>, CommandError> {
        let out = self.netns.run("ipset", &["list", name], "")?;
        let members = out
            .lines()
            .skip_while(|l| !l.starts_with("Members:"))
            .skip(1)
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect();
        Ok(members)
    }
}
