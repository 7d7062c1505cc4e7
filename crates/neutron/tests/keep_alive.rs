//! The `openstack` CLI and keystoneauth against the real Keystone (uWSGI) and neutron-server
//! as any cloud serves them: clients keep their connections open and reuse them, and not one
//! call of a few hundred fails (a Keystone that closes connections it answered as
//! keep-alive made ~1 in 10 lab calls fail with `RemoteDisconnected`).
//! Needs scripts/setup-neutron.sh.

mod common;

use std::io::Write;
use std::process::{Command, Stdio};

use common::neutron::{ADMIN_PASSWORD, Neutron};

/// Rounds of the keystoneauth loop: each takes a new token from Keystone and lists networks
/// in Neutron, both on the session's kept-alive connections.
const ROUNDS: usize = 300;
/// Commands piped to one `openstack` process (one session, its connections reused).
const BATCH: usize = 40;
/// Separate `openstack` processes (each ~1.5 s of Python start-up).
const PROCESSES: usize = 5;

/// What the CLI does at start-up, `ROUNDS` times on one keep-alive session: Keystone's version
/// document (`GET /v3`) and at once a token (`POST /v3/auth/tokens`) on the same connection,
/// then `GET /v2.0/networks` from Neutron with it; then a keystoneauth session (the CLI's
/// library) taking fresh tokens. Prints each failure and `failed N`.
const LOOP: &str = r#"
import os, sys, requests
from keystoneauth1 import session
from keystoneauth1.identity import v3
env = os.environ
auth_url = env["OS_AUTH_URL"]
body = {"auth": {"identity": {"methods": ["password"], "password": {"user": {
    "name": env["OS_USERNAME"], "domain": {"name": "Default"}, "password": env["OS_PASSWORD"]}}},
    "scope": {"project": {"name": env["OS_PROJECT_NAME"], "domain": {"name": "Default"}}}}}
http = requests.Session()
failed = 0
for i in range(int(sys.argv[1])):
    try:
        http.get(auth_url).raise_for_status()
        answer = http.post(auth_url + "/auth/tokens?nocatalog", json=body)
        answer.raise_for_status()
        token = answer.headers["X-Subject-Token"]
        http.get(sys.argv[2] + "/v2.0/networks", headers={"X-Auth-Token": token}).raise_for_status()
    except Exception as e:
        failed += 1
        print("round %d: %r" % (i, e))
auth = v3.Password(auth_url=auth_url, username=env["OS_USERNAME"], password=env["OS_PASSWORD"],
                   project_name=env["OS_PROJECT_NAME"], user_domain_name="Default",
                   project_domain_name="Default")
sess = session.Session(auth=auth)
for i in range(int(sys.argv[1]) // 3):
    try:
        auth.invalidate()
        sess.get("/v2.0/networks", endpoint_filter={"service_type": "network"}).json()
    except Exception as e:
        failed += 1
        print("keystoneauth round %d: %r" % (i, e))
print("failed %d" % failed)
"#;

fn admin_env(neutron: &Neutron) -> Vec<(&'static str, String)> {
    vec![
        ("OS_AUTH_URL", neutron.auth_url.clone().expect("keystone")),
        ("OS_USERNAME", "admin".into()),
        ("OS_PASSWORD", ADMIN_PASSWORD.into()),
        ("OS_PROJECT_NAME", "admin".into()),
        ("OS_USER_DOMAIN_NAME", "Default".into()),
        ("OS_PROJECT_DOMAIN_NAME", "Default".into()),
        ("OS_IDENTITY_API_VERSION", "3".into()),
    ]
}

/// Runs `program` with the admin's `OS_*` and `stdin`; exit code and stdout + stderr.
fn run(neutron: &Neutron, program: &mut Command, stdin: &str) -> (i32, String) {
    let mut child = program
        .envs(admin_env(neutron))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {program:?}: {e}"));
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("write stdin");
    let out = child.wait_with_output().expect("wait");
    let text = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text.into_owned())
}

#[test]
fn hundreds_of_keep_alive_calls_through_keystone_and_neutron_all_succeed() {
    let neutron = Neutron::start();
    let network = neutron.create("networks", serde_json::json!({"name": "kept-alive"}));
    let id = network["id"].as_str().expect("an id").to_owned();

    let rounds = ROUNDS.to_string();
    let (code, out) = run(
        &neutron,
        Command::new("/usr/bin/python3").args(["-c", LOOP, &rounds, &neutron.url]),
        "",
    );
    assert_eq!(code, 0, "{out}");
    assert!(
        out.lines().any(|l| l == "failed 0"),
        "keystoneauth calls failed (of {ROUNDS} rounds):\n{out}\n{}",
        neutron.log_tail()
    );

    // One CLI process, commands on stdin: its session's connections are reused.
    let commands: String = (0..BATCH)
        .map(|i| match i % 2 {
            0 => "network list -f value -c ID\n",
            _ => "token issue -f value -c project_id\n",
        })
        .collect();
    let (code, out) = run(&neutron, &mut Command::new("/usr/bin/openstack"), &commands);
    assert_eq!(code, 0, "{out}");
    let listed = out.lines().filter(|l| *l == id).count();
    assert_eq!(
        listed,
        BATCH / 2,
        "not every `network list` of the batch answered:\n{out}"
    );
    assert!(
        !out.contains("Unable to establish connection") && !out.contains("Error"),
        "{out}"
    );

    for _ in 0..PROCESSES {
        let (code, out) = run(
            &neutron,
            Command::new("/usr/bin/openstack").args(["network", "list", "-f", "value", "-c", "ID"]),
            "",
        );
        assert_eq!(code, 0, "{out}");
        assert!(out.lines().any(|l| l == id), "{out}");
    }
}
