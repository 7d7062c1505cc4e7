//! The seed examples as resource documents, applied by the `calicoctl` binary the way an
//! operator would: the command is printed, then what calicoctl answered. The YAML files are
//! built into calico-lab (so the demo runs from any directory) and fed to `calicoctl apply -f
//! -`; they are the files of `examples/` byte for byte.

use std::path::PathBuf;
use std::process::Command;

use anyhow::bail;
use calico_datastore::{Datastore, EtcdDatastore};

use crate::sh;
use crate::state::Lab;

/// A file of `examples/` and its text.
pub(super) struct Example {
    path: &'static str,
    text: &'static str,
}

pub(super) const PROFILES: Example = Example {
    path: "examples/30-profiles.yaml",
    text: include_str!("../../../../examples/30-profiles.yaml"),
};
pub(super) const WEBSERVER: Example = Example {
    path: "examples/20-webserver-tier.yaml",
    text: include_str!("../../../../examples/20-webserver-tier.yaml"),
};
pub(super) const FAILSAFE: Example = Example {
    path: "examples/10-failsafe-tier.yaml",
    text: include_str!("../../../../examples/10-failsafe-tier.yaml"),
};

/// `calicoctl apply -f FILE` against the lab's etcd, printing the command and its answer (one
/// line per resource: created, replaced or unchanged on a second run).
pub(super) fn apply(lab: &Lab, example: &Example) -> anyhow::Result<()> {
    println!("  calicoctl apply -f {}", example.path);
    let mut command = Command::new(calicoctl()?);
    command
        .env("ETCD_ENDPOINTS", &lab.client_endpoint)
        .args(["apply", "-f", "-"]);
    let out = sh::output_with_stdin(&mut command, example.text)?;
    if !out.status.success() {
        bail!(
            "calicoctl apply -f {} failed: {}",
            example.path,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        println!("    {line}");
    }
    Ok(())
}

/// What a profile's document became: its keys, each printed as the `etcdctl put` that writes
/// it (the raw way, for experts).
pub(super) async fn show_raw(store: &EtcdDatastore, profile: &str) -> anyhow::Result<()> {
    let prefix = calico_model::key::Prefix::Profile {
        profile: profile.to_owned(),
    }
    .to_string();
    println!(
        "  The raw form: the keys calicoctl wrote for {profile}, as etcdctl would write them:"
    );
    for pair in store.list(&prefix).await? {
        println!("    etcdctl put {} '{}'", pair.key, pair.value);
    }
    Ok(())
}

/// The calicoctl binary: beside calico-lab (where `cargo build` puts it), else on PATH.
fn calicoctl() -> anyhow::Result<PathBuf> {
    crate::processes::sibling_binary("calicoctl", "calico-ctl")
}
