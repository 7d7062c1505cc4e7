//! `calicoctl node remove` and `calicoctl status` through the built binary against a real etcd.
//! Felix is played honestly by what it leaves in etcd (its TTL'd status report and endpoint
//! statuses) and, for `status`, by a stand-in answering 200 on a health port.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::{Command, Output};

use calico_testkit::{EtcdServer, output_with_stdin, refusing_port};

const POOL: &str = "/calico/v1/ipam/v4/pool/10.65.0.0-16";
const FELIX_REPORT: &str =
    r#"{"time": "2026-11-23T12:00:00Z", "uptime": 42.0, "first_update": false}"#;

fn calicoctl(endpoint: &str, args: &[&str], stdin: &str) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_calicoctl"));
    command.env("ETCD_ENDPOINTS", endpoint).args(args);
    output_with_stdin(&mut command, stdin)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[track_caller]
fn expect(out: &Output, success: bool) -> String {
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.success(),
        success,
        "{stdout}\n{}",
        text(&out.stderr)
    );
    stdout
}

fn keys(etcd: &EtcdServer, prefix: &str) -> Vec<String> {
    let out = etcd.etcdctl(&["get", "--prefix", prefix, "--keys-only"]);
    text(&out.stdout)
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

fn endpoint_json(ip: &str) -> String {
    format!(
        r#"{{"state": "active", "name": "cali1", "profile_ids": ["p"], "ipv4_nets": ["{ip}/32"]}}"#
    )
}

/// Host `host` with one workload on an IPAM address (and one more address nobody uses), a host
/// endpoint, per-host config, a BGP address and Felix's statuses.
fn populate(etcd: &EtcdServer, host: &str) {
    let assigned = calicoctl(
        &etcd.endpoint(),
        &[
            "ipam",
            "assign",
            "--handle",
            &format!("w-{host}"),
            "--ipv4",
            "2",
            "--host",
            host,
        ],
        "",
    );
    let ips = expect(&assigned, true);
    let ip = ips.lines().next().expect("an address");
    let workload = format!("/calico/v1/host/{host}/workload/k8s/w1/endpoint/e1");
    etcd.put(&workload, &endpoint_json(ip));
    etcd.put(
        &format!("/calico/v1/host/{host}/endpoint/eth0"),
        r#"{"name": "eth0", "profile_ids": ["p"]}"#,
    );
    etcd.put(
        &format!("/calico/v1/host/{host}/config/LogSeverityScreen"),
        "debug",
    );
    etcd.put(
        &format!("/calico/bgp/v1/host/{host}/ip_addr_v4"),
        "10.0.0.2",
    );
    etcd.put(
        &format!("/calico/felix/v1/host/{host}/workload/k8s/w1/endpoint/e1"),
        r#"{"status": "up"}"#,
    );
}

fn felix_reports(etcd: &EtcdServer, host: &str) {
    etcd.put(
        &format!("/calico/felix/v1/host/{host}/status"),
        FELIX_REPORT,
    );
}

#[test]
fn node_remove_takes_everything_of_the_host_and_nothing_else() {
    let etcd = EtcdServer::start();
    let endpoint = etcd.endpoint();
    etcd.put(POOL, r#"{"cidr": "10.65.0.0/16"}"#);
    for host in ["h1", "h2", "h22"] {
        populate(&etcd, host);
    }
    felix_reports(&etcd, "h2");
    let others_before = [
        keys(&etcd, "/calico/v1/host/h1/"),
        keys(&etcd, "/calico/v1/host/h22/"),
    ];

    let refused = expect(
        &calicoctl(&endpoint, &["node", "remove", "h2", "--yes"], ""),
        false,
    );
    assert!(
        refused.contains("refused: Felix on h2 still reports status"),
        "{refused}"
    );
    assert_eq!(
        keys(&etcd, "/calico/v1/host/h2/").len(),
        3,
        "refused, yet removed"
    );

    let declined = calicoctl(&endpoint, &["node", "remove", "h2", "--force"], "n\n");
    let declined = expect(&declined, false);
    assert!(
        declined.contains("remove host h2 from the datastore? [y/N]"),
        "{declined}"
    );
    assert!(declined.contains("nothing removed"), "{declined}");
    assert!(!keys(&etcd, "/calico/ipam/v2/host/h2/").is_empty());

    let removed = calicoctl(&endpoint, &["node", "remove", "h2", "--force"], "y\n");
    let removed = expect(&removed, true);
    println!("{removed}");
    assert!(
        removed.contains("host h2: 6 key(s), 2 address(es) to release, 1 block"),
        "{removed}"
    );
    assert!(removed.contains("released 2 address(es)"), "{removed}");
    assert!(removed.contains("deleted (empty)"), "{removed}");
    for prefix in [
        "/calico/v1/host/h2/",
        "/calico/bgp/v1/host/h2/",
        "/calico/felix/v1/host/h2/",
        "/calico/ipam/v2/host/h2/",
    ] {
        assert_eq!(keys(&etcd, prefix), Vec::<String>::new(), "{prefix}");
    }
    let others_after = [
        keys(&etcd, "/calico/v1/host/h1/"),
        keys(&etcd, "/calico/v1/host/h22/"),
    ];
    assert_eq!(others_after, others_before, "another host lost keys");
    assert_eq!(keys(&etcd, "/calico/ipam/v2/host/h22/").len(), 1);

    // What is left is consistent: h1's and h22's second addresses are the only leaks.
    let check = text(&calicoctl(&endpoint, &["ipam", "check"], "").stdout);
    assert_eq!(check.matches("leaked").count(), 2, "{check}");
    assert!(!check.contains("h2 "), "{check}");

    let again = expect(
        &calicoctl(&endpoint, &["node", "remove", "h2", "--yes"], ""),
        true,
    );
    assert!(
        again.contains("nothing in the datastore for host h2"),
        "{again}"
    );
}

/// Answers every request on a free port with `status`, as Felix's health server would.
fn health_stand_in(status: &'static str) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut buffer = [0u8; 1024];
            let _ = stream.read(&mut buffer);
            let response =
                format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
            let _ = stream.write_all(response.as_bytes());
        }
    });
    port
}

fn status(endpoint: &str, health_port: u16) -> Output {
    let url = format!("http://127.0.0.1:{health_port}");
    let args = [
        "status",
        "--hostname",
        "h1",
        "--felix-health-url",
        &url,
        "--bird-socket",
        "/nonexistent/bird.ctl",
    ];
    calicoctl(endpoint, &args, "")
}

#[test]
fn status_shows_health_report_endpoints_and_says_what_is_missing() {
    let etcd = EtcdServer::start();
    etcd.put(POOL, r#"{"cidr": "10.65.0.0/16"}"#);
    populate(&etcd, "h1");
    felix_reports(&etcd, "h1");

    let healthy = expect(&status(&etcd.endpoint(), health_stand_in("200 OK")), true);
    println!("{healthy}");
    assert!(
        healthy.contains("host: h1\nFelix health (http://127.0.0.1:"),
        "{healthy}"
    );
    assert!(healthy.contains("): live, ready"), "{healthy}");
    assert!(
        healthy.contains("Felix last status report: 2026-11-23T12:00:00Z (uptime 42s)"),
        "{healthy}"
    );
    assert!(
        healthy.contains("endpoints: 2 configured or reported, 1 up"),
        "{healthy}"
    );
    assert!(
        healthy.contains("endpoint/eth0                not reported"),
        "{healthy}"
    );
    assert!(
        healthy.contains("workload/k8s/w1/endpoint/e1  up"),
        "{healthy}"
    );
    assert!(
        healthy.contains("BGP sessions:\n  not available: "),
        "{healthy}"
    );

    let unready = expect(
        &status(&etcd.endpoint(), health_stand_in("503 Service Unavailable")),
        false,
    );
    assert!(unready.contains("NOT live, NOT ready"), "{unready}");

    let refusing = refusing_port();
    let closed_port = refusing.port();
    etcd.etcdctl(&["del", "/calico/felix/v1/host/h1/status"]);
    let down = expect(&status(&etcd.endpoint(), closed_port), false);
    println!("{down}");
    assert!(
        down.contains(&format!(
            "Felix health: not reachable at http://127.0.0.1:{closed_port} ("
        )),
        "{down}"
    );
    assert!(down.contains("Felix last status report: none"), "{down}");

    let no_etcd_port = refusing_port();
    let no_etcd = no_etcd_port.url();
    let offline = expect(&status(&no_etcd, closed_port), false);
    println!("{offline}");
    assert!(offline.contains("datastore: not reachable ("), "{offline}");
    assert!(offline.contains("BGP sessions:"), "{offline}");
}

/// `status -o json`: one document with every part, the same exit status as the table.
#[test]
fn status_json_has_every_part_for_scripts() {
    let etcd = EtcdServer::start();
    etcd.put(POOL, r#"{"cidr": "10.65.0.0/16"}"#);
    populate(&etcd, "h1");
    felix_reports(&etcd, "h1");
    let url = format!("http://127.0.0.1:{}", health_stand_in("200 OK"));
    let args = [
        "status",
        "--hostname",
        "h1",
        "--felix-health-url",
        &url,
        "--bird-socket",
        "/nonexistent/bird.ctl",
        "-o",
        "json",
    ];
    let json = expect(&calicoctl(&etcd.endpoint(), &args, ""), true);
    println!("{json}");
    let v: serde_json::Value = serde_json::from_str(&json).expect("status -o json is JSON");
    assert_eq!(v["host"], "h1");
    assert_eq!(v["healthy"], true);
    assert_eq!(v["felixHealth"]["live"], true);
    assert_eq!(v["felixHealth"]["ready"], true);
    assert_eq!(v["datastore"]["reachable"], true);
    assert_eq!(v["lastReport"]["time"], "2026-11-23T12:00:00Z");
    assert_eq!(v["lastReport"]["uptimeSecs"], 42.0);
    assert_eq!(
        v["endpoints"],
        serde_json::json!([
            {"endpoint": "endpoint/eth0", "status": "not reported", "configured": true},
            {"endpoint": "workload/k8s/w1/endpoint/e1", "status": "up", "configured": true},
        ])
    );
    assert_eq!(v["bgp"]["available"], false);
    assert!(
        v["bgp"]["error"]
            .as_str()
            .unwrap()
            .contains("BIRD is not answering")
    );

    let refusing = refusing_port();
    let no_etcd = refusing.url();
    let mut offline_args = args.to_vec();
    offline_args[4] = "http://127.0.0.1:1";
    let yaml = expect(&calicoctl(&no_etcd, &offline_args, ""), false);
    assert!(yaml.starts_with('{'), "json even when unhealthy: {yaml}");
    let v: serde_json::Value = serde_json::from_str(&yaml).unwrap();
    assert_eq!(v["healthy"], false);
    assert_eq!(v["datastore"]["reachable"], false);
    assert_eq!(v["felixHealth"]["reachable"], false);
    assert_eq!(v["lastReport"], serde_json::Value::Null);
}
