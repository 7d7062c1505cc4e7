//! `calico-neutron`'s command line: every flag documented, bad values refused by name.

use std::process::Command;

fn calico_neutron(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_calico-neutron"))
        .args(args)
        .env_remove("ETCD_ENDPOINTS")
        .env_remove("OS_AUTH_URL")
        .env_remove("CALICO_AUTH_CONFIG")
        .output()
        .expect("calico-neutron runs");
    let text = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text.into_owned())
}

#[test]
fn help_documents_every_flag_and_its_environment_variable() {
    let (code, help) = calico_neutron(&["--help"]);
    assert_eq!(code, 0, "{help}");
    for (flag, env) in [
        ("--neutron-url", "NEUTRON_URL"),
        ("--auth-strategy", "NEUTRON_AUTH_STRATEGY"),
        ("--auth-config", "CALICO_AUTH_CONFIG"),
        ("--poll-interval", "CALICO_NEUTRON_POLL_INTERVAL"),
        ("--resync-interval", "CALICO_NEUTRON_RESYNC_INTERVAL"),
        ("--log", "CALICO_NEUTRON_LOG"),
        ("--etcd-endpoints", "ETCD_ENDPOINTS"),
        ("--etcd-ca-cert-file", "ETCD_CA_CERT_FILE"),
        ("--etcd-cert-file", "ETCD_CERT_FILE"),
        ("--etcd-key-file", "ETCD_KEY_FILE"),
    ] {
        let line = help
            .lines()
            .position(|l| l.trim_start().starts_with(flag))
            .unwrap_or_else(|| panic!("{flag} is not in --help:\n{help}"));
        // The flag's description follows on the next lines, with its environment variable.
        let entry: String = help.lines().skip(line).take(6).collect();
        assert!(
            entry.contains(&format!("[env: {env}")),
            "{flag}: no {env} in\n{entry}"
        );
        let described = help
            .lines()
            .nth(line + 1)
            .is_some_and(|l| !l.trim().is_empty());
        assert!(described, "{flag} has no description:\n{help}");
    }
}

#[test]
fn bad_settings_are_refused_naming_the_flag() {
    let (code, text) = calico_neutron(&["--poll-interval", "0s"]);
    assert_eq!(code, 2, "{text}");
    assert!(
        text.contains("--poll-interval") && text.contains("must be longer than zero"),
        "{text}"
    );
    let (code, text) =
        calico_neutron(&["--neutron-url", "neutron:9696", "--auth-strategy", "noauth"]);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("--neutron-url") && text.contains("expected http://HOST:PORT"),
        "{text}"
    );
    // Keystone (the default) without settings: the missing one is named, nothing else done.
    let (code, text) = calico_neutron(&[]);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("OS_AUTH_URL") && text.contains("not set"),
        "{text}"
    );
    let (code, text) = calico_neutron(&["--auth-strategy", "nokeystone"]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("--auth-strategy"), "{text}");
}
