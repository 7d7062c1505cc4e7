//! The driver binary on a private socket against a real etcd, spoken to as dockerd would, without
//! dockerd: the plugin handshake, the IPAM calls end to end (assign, exact address, release,
//! the gateway address dockerd releases) and the `{"Err": ...}` answers to bad input.
//!
//! Needs etcd (etcd-server); no root.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use calico_datastore::{EtcdConfig, EtcdDatastore};
use calico_ipam::Ipam;
use calico_testkit::{EtcdServer, eventually};
use serde_json::{Value, json};

const DRIVER: &str = env!("CARGO_BIN_EXE_calico-libnetwork");

/// The driver, killed on drop (the socket lives in a temp dir that goes with it).
struct Driver {
    child: Child,
    socket: PathBuf,
    _dir: tempfile::TempDir,
}

impl Driver {
    fn start(etcd: &EtcdServer) -> Driver {
        let driver = Driver::spawn(etcd);
        driver.wait_for_socket();
        driver
    }

    /// Starts the driver without waiting for its socket.
    fn spawn(etcd: &EtcdServer) -> Driver {
        Driver::spawn_with_env(etcd, &[])
    }

    /// [`Driver::spawn`] with extra environment variables.
    fn spawn_with_env(etcd: &EtcdServer, env: &[(&str, &str)]) -> Driver {
        let dir = tempfile::tempdir().expect("temp dir");
        let socket = dir.path().join("calico.sock");
        let log = std::fs::File::create(dir.path().join("driver.log")).expect("log file");
        let child = Command::new(DRIVER)
            .args(["--socket", socket.to_str().expect("utf-8")])
            .args([
                "--hostname",
                "proto-host",
                "--etcd-endpoints",
                &etcd.endpoint(),
            ])
            .args(["--docker-socket", "/nonexistent/docker.sock"])
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("the driver starts");
        Driver {
            child,
            socket,
            _dir: dir,
        }
    }

    fn wait_for_socket(&self) {
        eventually("the driver's socket", Duration::from_secs(10), || {
            self.socket
                .exists()
                .then_some(())
                .ok_or_else(|| format!("the driver's log:\n{}", self.log()))
        });
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self._dir.path().join("driver.log")).unwrap_or_default()
    }

    /// The IPAM driver's second name's socket, beside the first (`calico-ipam.sock`).
    fn ipam_socket(&self) -> PathBuf {
        self.socket.with_file_name("calico-ipam.sock")
    }

    /// POSTs `body` to `/<call>`; the status and the JSON answer.
    fn call(&self, call: &str, body: &str) -> (u16, Value) {
        post(&self.socket, call, body)
    }

    fn ok(&self, call: &str, body: Value) -> Value {
        let (status, answer) = self.call(call, &body.to_string());
        assert_eq!(status, 200, "{call} {body}: {answer}");
        answer
    }

    fn err(&self, call: &str, body: &str) -> String {
        let (status, answer) = self.call(call, body);
        assert_eq!(status, 500, "{call} {body} should fail: {answer}");
        answer["Err"].as_str().expect("an Err string").to_owned()
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn post(socket: &Path, call: &str, body: &str) -> (u16, Value) {
    let mut stream = UnixStream::connect(socket).expect("connect to the driver");
    write!(
        stream,
        "POST /{call} HTTP/1.0\r\nHost: plugin\r\nContent-Type: \
         application/vnd.docker.plugins.v1.2+json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("send");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("answer");
    let (head, body) = answer.split_once("\r\n\r\n").expect("an HTTP answer");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/vnd.docker.plugins.v1.2+json"),
        "{head}"
    );
    let status = head
        .split_whitespace()
        .nth(1)
        .expect("status")
        .parse()
        .expect("a code");
    (status, serde_json::from_str(body).expect("a JSON body"))
}

fn ipam_check(etcd: &EtcdServer) -> calico_ipam::Report {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let config = EtcdConfig {
            endpoints: vec![etcd.endpoint()],
            ..EtcdConfig::default()
        };
        let store = EtcdDatastore::connect(config).await.expect("etcd");
        Ipam::new(Arc::new(store))
            .check()
            .await
            .expect("ipam check")
    })
}

fn started() -> (EtcdServer, Driver) {
    let etcd = EtcdServer::start();
    etcd.put(
        "/calico/v1/ipam/v4/pool/10.66.0.0-16",
        r#"{"cidr": "10.66.0.0/16"}"#,
    );
    let driver = Driver::start(&etcd);
    (etcd, driver)
}

#[test]
fn handshake_and_capabilities() {
    let (_etcd, driver) = started();
    let activate = driver.ok("Plugin.Activate", json!({}));
    assert_eq!(
        activate,
        json!({"Implements": ["NetworkDriver", "IpamDriver"]})
    );
    let caps = driver.ok("NetworkDriver.GetCapabilities", json!({}));
    assert_eq!(
        caps,
        json!({"Scope": "local", "ConnectivityScope": "local"})
    );
    let spaces = driver.ok("IpamDriver.GetDefaultAddressSpaces", json!({}));
    assert_eq!(spaces["LocalDefaultAddressSpace"], "CalicoLocal");
    for optional in [
        "NetworkDriver.DiscoverNew",
        "NetworkDriver.DiscoverDelete",
        "NetworkDriver.ProgramExternalConnectivity",
        "NetworkDriver.RevokeExternalConnectivity",
    ] {
        assert_eq!(driver.ok(optional, json!({})), json!({}));
    }
}

/// The IPAM driver answers to its upstream name too (`--ipam-driver calico-ipam`), on a socket
/// of its own: there it implements the IPAM driver only, and assigns from the same IPAM.
#[test]
fn the_ipam_driver_answers_to_calico_ipam_too() {
    let (etcd, driver) = started();
    let ipam = driver.ipam_socket();
    assert!(ipam.exists(), "no {}:\n{}", ipam.display(), driver.log());
    let (status, activate) = post(&ipam, "Plugin.Activate", "{}");
    assert_eq!(
        (status, activate),
        (200, json!({"Implements": ["IpamDriver"]}))
    );
    let (status, pool) = post(
        &ipam,
        "IpamDriver.RequestPool",
        r#"{"AddressSpace":"CalicoLocal","Pool":"","SubPool":"","Options":{},"V6":false}"#,
    );
    assert_eq!((status, &pool["PoolID"]), (200, &json!("CalicoPoolIPv4")));
    let (status, address) = post(
        &ipam,
        "IpamDriver.RequestAddress",
        r#"{"PoolID":"CalicoPoolIPv4","Address":"","Options":null}"#,
    );
    assert_eq!(status, 200, "{address}");
    let ip = address["Address"].as_str().expect("an address");
    assert!(ip.starts_with("10.66."), "{ip}");
    let (status, err) = post(&ipam, "NetworkDriver.CreateNetwork", r#"{"NetworkID":"n"}"#);
    assert_eq!(status, 500, "{err}");
    assert!(
        err["Err"]
            .as_str()
            .is_some_and(|e| e.contains("serves only the IPAM driver")),
        "{err}"
    );
    let body = json!({"PoolID": "CalicoPoolIPv4", "Address": ip.trim_end_matches("/32")});
    let (status, _) = post(&ipam, "IpamDriver.ReleaseAddress", &body.to_string());
    assert_eq!(status, 200);
    assert!(ipam_check(&etcd).is_clean());
}

/// `CALICO_LIBNETWORK_LOG=debug` (the documented setting) logs every request and answer of
/// the driver and nothing of the HTTP/2 stack under etcd's client; a word that is no level
/// stops the driver with the variable named.
#[test]
fn a_bare_debug_level_logs_the_drivers_calls_and_not_the_http2_frames() {
    let etcd = EtcdServer::start();
    let driver = Driver::spawn_with_env(&etcd, &[("CALICO_LIBNETWORK_LOG", "debug")]);
    driver.wait_for_socket();
    driver.ok("IpamDriver.GetCapabilities", json!({}));
    let log = driver.log();
    assert!(
        log.lines().any(|l| l.contains("DEBUG")
            && l.contains("calico_libnetwork")
            && l.contains("IpamDriver.GetCapabilities")),
        "no debug line of the call:\n{log}"
    );
    let foreign: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("DEBUG") || l.contains("TRACE"))
        .filter(|l| !l.contains("calico_"))
        .collect();
    assert!(
        foreign.is_empty(),
        "other crates' debug lines: {foreign:#?}"
    );

    let mut bad = Driver::spawn_with_env(&etcd, &[("CALICO_LIBNETWORK_LOG", "verbose")]);
    let status = bad.child.wait().expect("the driver exits");
    assert!(!status.success());
    let log = bad.log();
    assert!(
        log.contains("CALICO_LIBNETWORK_LOG \"verbose\": \"verbose\" is neither a level"),
        "{log}"
    );
}

#[test]
fn addresses_come_from_calico_ipam_and_go_back() {
    let (etcd, driver) = started();
    let pool = driver.ok(
        "IpamDriver.RequestPool",
        json!({"AddressSpace": "CalicoLocal", "Pool": "", "SubPool": "", "Options": {}, "V6": false}),
    );
    assert_eq!(pool["PoolID"], "CalicoPoolIPv4");
    assert_eq!(pool["Data"]["com.docker.network.gateway"], "0.0.0.0/0");
    let any = json!({"PoolID": "CalicoPoolIPv4", "Address": "", "Options": null});
    let first = driver.ok("IpamDriver.RequestAddress", any.clone());
    let address = first["Address"].as_str().expect("an address").to_owned();
    assert!(
        address.starts_with("10.66.") && address.ends_with("/32"),
        "{address}"
    );
    let ip = address.trim_end_matches("/32").to_owned();

    let taken = json!({"PoolID": "CalicoPoolIPv4", "Address": ip}).to_string();
    let err = driver.err("IpamDriver.RequestAddress", &taken);
    assert!(err.contains("address already in use"), "{err}");

    let exact = driver.ok(
        "IpamDriver.RequestAddress",
        json!({"PoolID": "CalicoPoolIPv4", "Address": "10.66.200.9"}),
    );
    assert_eq!(exact["Address"], "10.66.200.9/32");

    for address in [ip.as_str(), "10.66.200.9", "0.0.0.0"] {
        driver.ok(
            "IpamDriver.ReleaseAddress",
            json!({"PoolID": "CalicoPoolIPv4", "Address": address}),
        );
    }
    driver.ok(
        "IpamDriver.ReleasePool",
        json!({"PoolID": "CalicoPoolIPv4"}),
    );
    let report = ipam_check(&etcd);
    assert!(report.is_clean(), "{report:?}");
    let handles = etcd.etcdctl(&["get", "--prefix", "--keys-only", "/calico/ipam/v2/handle/"]);
    assert_eq!(
        String::from_utf8_lossy(&handles.stdout).trim(),
        "",
        "handles left"
    );
}

#[test]
fn bad_input_is_an_err_naming_the_cause() {
    let (etcd, driver) = started();
    let cases = [
        (
            "IpamDriver.RequestPool",
            r#"{"AddressSpace":"CalicoLocal","Pool":"192.168.0.0/24"}"#,
            "subnet 192.168.0.0/24 is not inside an enabled Calico pool (pools: 10.66.0.0/16)",
        ),
        (
            "NetworkDriver.Join",
            r#"{"NetworkID":"n","EndpointID":5}"#,
            "malformed request: EndpointID",
        ),
        (
            "NetworkDriver.Join",
            "not json",
            "NetworkDriver.Join: malformed request",
        ),
        (
            "NetworkDriver.Join",
            "",
            "empty body (dockerd re-sent a call that broke off",
        ),
        (
            "NetworkDriver.Bogus",
            "{}",
            "unknown plugin call NetworkDriver.Bogus",
        ),
        (
            "NetworkDriver.CreateNetwork",
            r#"{"NetworkID":"n","Options":{"com.docker.network.generic":{"mtu":"1400"}},"IPv4Data":[]}"#,
            "Options \"mtu\": unknown driver option",
        ),
        (
            "NetworkDriver.CreateNetwork",
            r#"{"NetworkID":"n","IPv4Data":[{"Pool":"172.18.0.0/16"}]}"#,
            "not inside an enabled Calico pool",
        ),
        (
            "NetworkDriver.CreateEndpoint",
            r#"{"NetworkID":"n","EndpointID":"d594538e6c7555095dd6","Interface":{"Address":"10.66.0.1/32"}}"#,
            "docker api at /nonexistent/docker.sock",
        ),
        (
            "NetworkDriver.Join",
            r#"{"NetworkID":"n","EndpointID":"d594538e6c7555095dd6","SandboxKey":"/run/netns/x"}"#,
            "no CreateEndpoint recorded at /calico/libnetwork/v1/host/proto-host/pending/d594538e6c7555095dd6",
        ),
        (
            "IpamDriver.RequestAddress",
            r#"{"PoolID":"CalicoPoolIPv4","Address":"10.67.0.1"}"#,
            "10.67.0.1 is in no configured IP pool",
        ),
    ];
    for (call, body, expected) in cases {
        let err = driver.err(call, body);
        assert!(err.contains(expected), "{call} {body}: {err}");
    }
    // Nothing written: no profile, no endpoint, no block.
    let keys = etcd.etcdctl(&["get", "--prefix", "--keys-only", "/calico/"]);
    let keys = String::from_utf8_lossy(&keys.stdout);
    let written: Vec<&str> = keys
        .lines()
        .filter(|k| !k.is_empty() && !k.starts_with("/calico/v1/ipam/v4/pool/"))
        .collect();
    assert!(
        written.is_empty(),
        "written after refused calls: {written:?}"
    );
}

/// etcd is down when the driver starts: it waits with the shared backoff (one warning per
/// attempt naming the endpoint), opens its socket only once it can answer, and then does.
#[test]
fn the_driver_waits_for_etcd_before_opening_its_socket() {
    let mut etcd = EtcdServer::start();
    etcd.stop();
    let mut driver = Driver::spawn(&etcd);
    eventually(
        "three warnings naming the endpoint",
        Duration::from_secs(30),
        || {
            let warnings = driver
                .log()
                .lines()
                .filter(|line| line.contains("retrying in") && line.contains(&etcd.endpoint()))
                .count();
            (warnings >= 3).then_some(()).ok_or_else(|| driver.log())
        },
    );
    assert!(!driver.socket.exists(), "no socket while etcd is down");
    assert!(
        driver.child.try_wait().unwrap().is_none(),
        "the driver exited while etcd was down:\n{}",
        driver.log()
    );
    etcd.restart();
    driver.wait_for_socket();
    let answer = driver.ok("Plugin.Activate", json!({}));
    assert_eq!(answer["Implements"], json!(["NetworkDriver", "IpamDriver"]));
}
