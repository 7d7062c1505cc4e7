//! `calico-neutron` and `calico-dhcp-agent` as OpenStack services: a real Keystone (uWSGI) and a
//! real neutron-server with `auth_strategy = keystone` (keystonemiddleware), both over https
//! with a throwaway CA, tokens that live 130 seconds, and a middleware that checks every token
//! with Keystone (so a revoked one fails at once). What an operator sees: the service user's
//! settings from a config file or `OS_*` variables, one line naming the setting when one is
//! wrong (and etcd not touched), tokens renewed before they expire, a revoked token replaced,
//! and the password in no log.
//! Needs scripts/setup-neutron.sh, etcd and openssl.

mod common;

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use calico_openstack::server::Tls;
use calico_testkit::{EtcdServer, Pki, eventually};
use common::neutron::{CALICO_PASSWORD, CALICO_USER, Neutron, Options};
use serde_json::json;

/// A port nothing answers on but that records whether anyone connected: stands in for etcd
/// where a program must not get as far as etcd.
struct Trap {
    listener: TcpListener,
}

impl Trap {
    fn new() -> Trap {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        Trap { listener }
    }

    fn endpoint(&self) -> String {
        format!("http://{}", self.listener.local_addr().expect("address"))
    }

    fn touched(&self) -> bool {
        self.listener.accept().is_ok()
    }
}

/// One of the two binaries, its output in a file; killed on `Drop`.
struct Daemon {
    child: Child,
    log: std::path::PathBuf,
}

impl Daemon {
    fn start(binary: &str, args: &[&str], env: &[(String, String)], log: &Path) -> Daemon {
        let file = std::fs::File::create(log).expect("log file");
        let child = Command::new(binary)
            .args(args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("log"))
            .stderr(file)
            .spawn()
            .expect("the binary starts");
        Daemon {
            child,
            log: log.to_owned(),
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Its exit code, waiting up to 30 s.
    fn exit_code(&mut self) -> i32 {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.code().unwrap_or(-1);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("still running after 30 s:\n{}", self.log());
    }

    fn wait_for_line(&self, what: &str, needle: &str) -> String {
        let mut found = String::new();
        eventually(what, Duration::from_secs(30), || {
            let log = self.log();
            match log.lines().find(|l| l.contains(needle)) {
                Some(line) => {
                    found = line.to_owned();
                    Ok(())
                }
                None => Err(format!("log so far:\n{log}")),
            }
        });
        found
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const TOKEN_LIFETIME: u32 = 130;
const NEUTRON_BIN: &str = env!("CARGO_BIN_EXE_calico-neutron");
const AGENT_BIN: &str = env!("CARGO_BIN_EXE_calico-dhcp-agent");

fn env_with(base: &[(String, String)], changes: &[(&str, Option<&str>)]) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = base.to_vec();
    for (name, value) in changes {
        env.retain(|(k, _)| k != name);
        if let Some(value) = value {
            env.push(((*name).to_owned(), (*value).to_owned()));
        }
    }
    env
}

/// Runs `binary` with `env` until it exits; its code, its error line and its whole output.
fn refused(
    binary: &str,
    neutron: &Neutron,
    env: &[(String, String)],
    extra: &[&str],
    dir: &Path,
    name: &str,
) -> (i32, String, String) {
    let trap = Trap::new();
    let etcd = trap.endpoint();
    let mut args = vec!["--neutron-url", &neutron.url, "--etcd-endpoints", &etcd];
    args.extend_from_slice(extra);
    let mut daemon = Daemon::start(binary, &args, env, &dir.join(format!("{name}.log")));
    let code = daemon.exit_code();
    let log = daemon.log();
    assert!(!trap.touched(), "{name}: etcd was contacted:\n{log}");
    let error: Vec<&str> = log.lines().filter(|l| l.contains("ERROR")).collect();
    assert_eq!(error.len(), 1, "{name}: not one error line:\n{log}");
    (code, error[0].to_owned(), log)
}

#[test]
fn services_authenticate_with_keystone_over_https_and_say_what_is_wrong() {
    let started = Instant::now();
    let pki = Pki::generate();
    let tls = pki.server_tls();
    let neutron = Neutron::start_with(Options {
        tls: Some((
            Tls {
                cert: tls.cert_file.clone(),
                key: tls.key_file.clone(),
            },
            pki.ca_cert(),
        )),
        // keystonemiddleware (keystoneauth) takes its own token for expired once less than
        // 120 s are left: a shorter lifetime would make neutron-server ask for a new token on
        // every request. 130 s is the shortest that works, and makes calico-neutron renew after
        // 65 s (half the lifetime).
        token_expiration: Some(TOKEN_LIFETIME),
        token_cache_time: Some(-1),
        ..Options::default()
    });
    assert!(neutron.url.starts_with("https://"), "{}", neutron.url);
    eprintln!(
        "keystone and neutron-server (https) up in {:?}",
        started.elapsed()
    );
    let dir = tempfile::tempdir().expect("temporary directory");
    let env = neutron.service_env();

    bad_settings_end_the_program_with_one_line_naming_them(&neutron, &env, dir.path());
    an_unreachable_keystone_is_retried_without_touching_etcd(&neutron, &env, dir.path());
    the_service_user_syncs_renews_its_tokens_and_replaces_a_revoked_one(&neutron, dir.path());
    eprintln!("test done in {:?}", started.elapsed());
}

/// A wrong password, an unknown project (from a config file), no CA for https: exit 1, one
/// error line naming the setting, etcd never contacted; the DHCP agent says the same.
fn bad_settings_end_the_program_with_one_line_naming_them(
    neutron: &Neutron,
    env: &[(String, String)],
    dir: &Path,
) {
    let wrong = env_with(env, &[("OS_PASSWORD", Some("not-the-password"))]);
    let (code, line, log) = refused(NEUTRON_BIN, neutron, &wrong, &[], dir, "wrong-password");
    assert_eq!(code, 1, "{log}");
    assert!(
        line.contains(&format!("refused user \"{CALICO_USER}\"")),
        "{line}"
    );
    assert!(line.contains("check OS_PASSWORD (environment)"), "{line}");
    assert!(
        !log.contains("not-the-password"),
        "the password was logged:\n{log}"
    );

    // The DHCP agent authenticates the same way, and says the same.
    let (code, line, _) = refused(
        AGENT_BIN,
        neutron,
        &wrong,
        &["--host", "compute1"],
        dir,
        "agent-wrong-password",
    );
    assert_eq!(code, 1);
    assert!(line.contains("check OS_PASSWORD (environment)"), "{line}");

    let file = dir.join("calico-auth.conf");
    let ca = neutron.ca_file().expect("https").display().to_string();
    std::fs::write(
        &file,
        format!(
            "[keystone_authtoken]\nauth_url = {}\nusername = {CALICO_USER}\npassword = {CALICO_PASSWORD}\n\
             project_name = no-such-project\ncafile = {ca}\n",
            neutron.auth_url.as_deref().expect("keystone")
        ),
    )
    .expect("config file");
    let file_arg = file.display().to_string();
    let (code, line, log) = refused(
        NEUTRON_BIN,
        neutron,
        &[],
        &["--auth-config", &file_arg],
        dir,
        "unknown-project",
    );
    assert_eq!(code, 1, "{log}");
    assert!(line.contains("not project \"no-such-project\""), "{line}");
    assert!(
        line.contains(&format!(
            "check project_name in [keystone_authtoken] of {file_arg}"
        )),
        "{line}"
    );

    let no_ca = env_with(env, &[("OS_CACERT", None)]);
    let (code, line, log) = refused(NEUTRON_BIN, neutron, &no_ca, &[], dir, "no-ca");
    assert_eq!(code, 1, "{log}");
    assert!(line.contains("TLS handshake"), "{line}");
    assert!(line.contains("OS_CACERT or cafile"), "{line}");
}

/// Keystone not answering: a warning naming OS_AUTH_URL per attempt, the program waits, etcd
/// is not contacted.
fn an_unreachable_keystone_is_retried_without_touching_etcd(
    neutron: &Neutron,
    env: &[(String, String)],
    dir: &Path,
) {
    let closed = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = closed.local_addr().expect("address").port();
    drop(closed);
    let url = format!("https://127.0.0.1:{port}/v3");
    let away = env_with(env, &[("OS_AUTH_URL", Some(&url))]);
    let trap = Trap::new();
    let etcd = trap.endpoint();
    let mut daemon = Daemon::start(
        NEUTRON_BIN,
        &["--neutron-url", &neutron.url, "--etcd-endpoints", &etcd],
        &away,
        &dir.join("unreachable.log"),
    );
    let line = daemon.wait_for_line("a warning that keystone is unreachable", "is unreachable");
    assert!(
        line.contains(&format!(
            "keystone at {url} (OS_AUTH_URL (environment)) is unreachable"
        )),
        "{line}"
    );
    daemon.wait_for_line("a second attempt", "retrying in");
    assert!(
        matches!(daemon.child.try_wait(), Ok(None)),
        "it exited:\n{}",
        daemon.log()
    );
    assert!(!trap.touched(), "etcd was contacted:\n{}", daemon.log());
}

/// The service user from a config file: a port becomes an endpoint; with 130-second tokens the
/// sync goes on for longer than one lifetime, renewing the token before it expires (no 401 on
/// the way); the
/// user's tokens revoked (its password set again), the next call is refused, a new token is
/// issued and the sync goes on. The password is in no log, at debug level.
fn the_service_user_syncs_renews_its_tokens_and_replaces_a_revoked_one(
    neutron: &Neutron,
    dir: &Path,
) {
    let etcd = EtcdServer::start();
    let file = dir.join("calico.conf");
    let ca = neutron.ca_file().expect("https").display().to_string();
    std::fs::write(
        &file,
        format!(
            "# as in neutron.conf\n[keystone_authtoken]\nauth_url = {}\nauth_type = password\n\
             username = {CALICO_USER}\npassword = {CALICO_PASSWORD}\nproject_name = service\n\
             user_domain_name = Default\nproject_domain_name = Default\ncafile = {ca}\n",
            neutron.auth_url.as_deref().expect("keystone")
        ),
    )
    .expect("config file");
    let file_arg = file.display().to_string();
    let endpoint = etcd.endpoint();
    let change = neutron.change_args();
    let mut args = vec!["--neutron-url", &neutron.url, "--etcd-endpoints", &endpoint];
    args.extend(["--auth-config", &file_arg]);
    args.extend(change.iter().map(String::as_str));
    let daemon = Daemon::start(
        NEUTRON_BIN,
        &args,
        &[("CALICO_NEUTRON_LOG".to_owned(), "debug".to_owned())],
        &dir.join("calico-neutron.log"),
    );
    daemon.wait_for_line("authentication", "authenticated with keystone");

    let network = neutron.create("networks", json!({"name": "net"}));
    let subnet = neutron.create(
        "subnets",
        json!({"network_id": network["id"], "cidr": "10.65.0.0/24", "ip_version": 4}),
    );
    let group = neutron.create("security-groups", json!({"name": "web"}));
    let group_id = group["id"].as_str().expect("id").to_owned();
    let port = neutron.create(
        "ports",
        json!({"network_id": network["id"], "device_owner": "compute:nova", "device_id": "vm1",
               "binding:host_id": "host1", "security_groups": [group_id],
               "fixed_ips": [{"subnet_id": subnet["id"]}]}),
    );
    let key = format!(
        "/calico/v1/host/host1/workload/openstack/vm1/endpoint/{}",
        port["id"].as_str().expect("id")
    );
    wait_for_key(&etcd, &daemon, &key, "the port's endpoint");

    // Longer than a token lives: each rule added reaches etcd.
    let rules_key = format!("/calico/v1/policy/profile/openstack-sg-{group_id}/rules");
    let until = Instant::now() + Duration::from_secs(u64::from(TOKEN_LIFETIME) + 10);
    let mut port_number = 1000;
    while Instant::now() < until {
        port_number += 1;
        neutron.create(
            "security-group-rules",
            json!({"security_group_id": group_id, "direction": "ingress", "ethertype": "IPv4",
                   "protocol": "tcp", "port_range_min": port_number, "port_range_max": port_number}),
        );
        wait_for_text(
            &etcd,
            &daemon,
            &rules_key,
            &format!("[{port_number}]"),
            "the rule in the profile",
        );
        std::thread::sleep(Duration::from_secs(5));
    }
    let log = daemon.log();
    let renewed = log
        .matches("keystone token renewed before it expired")
        .count();
    assert!(
        renewed >= 2,
        "{renewed} renewals in {TOKEN_LIFETIME} s of {TOKEN_LIFETIME}-second tokens:\n{log}"
    );
    assert!(
        !log.contains("HTTP 401"),
        "a token was used past its expiry:\n{log}"
    );

    // Revoked: Keystone revokes a user's tokens when its password is set (to the same one here).
    let user = neutron.keystone_user_id(CALICO_USER);
    neutron.keystone_call(
        "PATCH",
        &format!("/users/{user}"),
        Some(json!({"user": {"password": CALICO_PASSWORD}})),
    );
    let rule = neutron.create(
        "security-group-rules",
        json!({"security_group_id": group_id, "direction": "ingress", "ethertype": "IPv4",
               "protocol": "udp", "port_range_min": 53, "port_range_max": 53}),
    );
    wait_for_text(
        &etcd,
        &daemon,
        &rules_key,
        "\"udp\"",
        "the rule added after the revocation",
    );
    daemon.wait_for_line(
        "the refused token replaced",
        "neutron refused the token (HTTP 401); authenticating again",
    );
    assert!(rule["id"].is_string());
    let log = daemon.log();
    assert!(
        !log.contains(CALICO_PASSWORD),
        "the password was logged:\n{log}"
    );
    assert!(!log.contains("gAAAAA"), "a token was logged:\n{log}");
    assert!(
        log.contains(&format!(
            "password=\"set (password in [keystone_authtoken] of {file_arg})\""
        )),
        "the password's source is not logged:\n{log}"
    );
}

fn wait_for_key(etcd: &EtcdServer, daemon: &Daemon, key: &str, what: &str) {
    wait_for_text(etcd, daemon, key, "", what);
}

fn wait_for_text(etcd: &EtcdServer, daemon: &Daemon, key: &str, text: &str, what: &str) {
    eventually(what, Duration::from_secs(20), || {
        let out = etcd.etcdctl(&["get", key, "--print-value-only"]);
        let value = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        match !value.is_empty() && value.contains(text) {
            true => Ok(()),
            false => {
                let log = daemon.log();
                let tail: Vec<&str> = log.lines().rev().take(15).collect();
                Err(format!(
                    "{key}: {value:?}; calico-neutron's last lines:\n{}",
                    tail.join("\n")
                ))
            }
        }
    });
}
