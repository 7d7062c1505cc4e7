//! The plugin's standard error, which runtimes keep as a log file (containerd, CRI-O): plain
//! text, no terminal colour codes, when it is not a terminal.

use std::io::Write;
use std::process::{Command, Stdio};

const CONFIG: &str = r#"{"cniVersion": "1.0.0", "name": "testnet", "type": "calico",
    "etcd_endpoints": "http://127.0.0.1:1", "nodename": "node1", "log_level": "debug",
    "ipam": {"type": "calico-ipam"}}"#;

#[test]
fn the_log_on_a_pipe_has_no_escape_codes() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_calico"))
        .env_clear()
        .env("CNI_COMMAND", "DEL")
        .env("CNI_CONTAINERID", "stderr-test")
        .env("CNI_NETNS", "/var/run/netns/calico-stderr-test-missing")
        .env("CNI_IFNAME", "eth0")
        .env("CNI_PATH", "/opt/cni/bin")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the calico plugin");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(CONFIG.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("DEBUG") || stderr.contains("INFO") || stderr.contains("WARN"),
        "the plugin logged something at log_level debug: {stderr:?}"
    );
    assert!(
        !out.stderr.contains(&0x1b),
        "no ANSI escape codes in a log that is not a terminal: {stderr:?}"
    );
}
