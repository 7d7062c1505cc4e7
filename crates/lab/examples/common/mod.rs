#![allow(dead_code)] // each benchmark uses a part
//! What the lab benchmarks share: running calico-lab, and taking a lab down however the
//! benchmark ends.

use std::path::PathBuf;
use std::process::Command;

/// calico-lab: `$CALICO_LAB_BIN`, else the one of this build profile.
pub fn lab_bin() -> PathBuf {
    std::env::var_os("CALICO_LAB_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let me = std::env::current_exe().expect("own path");
            me.parent()
                .and_then(|p| p.parent())
                .expect("target dir")
                .join("calico-lab")
        })
}

/// Runs `calico-lab --lab NAME ARGS…`; panics with its output if it fails.
pub fn lab(name: &str, args: &[&str]) -> String {
    let out = Command::new(lab_bin())
        .args(["--lab", name])
        .args(args)
        .output()
        .expect("calico-lab runs");
    assert!(
        out.status.success(),
        "calico-lab {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Takes the lab down on drop.
pub struct Down(pub String);

impl Drop for Down {
    fn drop(&mut self) {
        let _ = Command::new(lab_bin())
            .args(["--lab", &self.0, "down"])
            .output();
    }
}

/// Median and 99th percentile of samples.
pub fn median_p99(samples: &[f64]) -> (f64, f64) {
    let t = calico_testkit::Tails::of(samples.iter().copied()).expect("samples");
    (t.median, t.p99)
}
