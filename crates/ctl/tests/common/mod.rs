//! What the resource tests share: the built `calicoctl` against a real etcd, and etcdctl beside
//! it to see what was (not) written.
#![allow(dead_code)] // each test binary uses a different part of the fixtures

use std::process::{Command, Output};

use calico_testkit::{EtcdServer, output_with_stdin, require_tool};

pub struct Ctl {
    pub etcd: EtcdServer,
}

impl Ctl {
    pub fn start() -> Self {
        Self {
            etcd: EtcdServer::start(),
        }
    }

    pub fn stdin(&self, args: &[&str], stdin: &str) -> Output {
        let mut command = Command::new(env!("CARGO_BIN_EXE_calicoctl"));
        command
            .env("ETCD_ENDPOINTS", self.etcd.endpoint())
            .args(args);
        output_with_stdin(&mut command, stdin)
    }

    /// Runs a command that must succeed; returns its stdout.
    #[track_caller]
    pub fn ok(&self, args: &[&str], stdin: &str) -> String {
        let out = self.stdin(args, stdin);
        assert!(
            out.status.success(),
            "calicoctl {args:?} failed:\n{}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
        text(&out.stdout)
    }

    /// Runs a command that must fail; returns its stderr.
    #[track_caller]
    pub fn fails(&self, args: &[&str], stdin: &str) -> String {
        let out = self.stdin(args, stdin);
        assert!(
            !out.status.success(),
            "calicoctl {args:?} succeeded:\n{}",
            text(&out.stdout)
        );
        text(&out.stderr)
    }

    pub fn etcdctl(&self, args: &[&str]) -> String {
        require_tool("etcdctl");
        let out = Command::new("etcdctl")
            .env("ETCDCTL_API", "3")
            .arg("--endpoints")
            .arg(self.etcd.endpoint())
            .args(args)
            .output()
            .expect("etcdctl runs");
        text(&out.stdout)
    }

    /// etcd's revision: one more per write or transaction.
    pub fn revision(&self) -> u64 {
        let out = self.etcdctl(&["get", "/", "-w", "json"]);
        let json: serde_json::Value = serde_json::from_str(&out).expect("etcdctl json");
        json["header"]["revision"].as_u64().expect("a revision")
    }

    pub fn value(&self, key: &str) -> String {
        self.etcdctl(&["get", key, "--print-value-only"])
            .trim_end()
            .to_owned()
    }

    /// The keys under `prefix`, sorted.
    pub fn keys(&self, prefix: &str) -> Vec<String> {
        let out = self.etcdctl(&["get", "--prefix", "--keys-only", prefix]);
        out.split_whitespace().map(str::to_owned).collect()
    }
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// One document, its metadata and spec in YAML's flow style.
pub fn doc(kind: &str, metadata: &str, spec: &str) -> String {
    format!("apiVersion: projectcalico.org/v1\nkind: {kind}\nmetadata: {metadata}\nspec: {spec}\n")
}
