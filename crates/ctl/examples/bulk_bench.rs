//! `calicoctl` on a file of many resources against a real etcd (one node, fsync on): `create`,
//! `apply` of the same file (nothing changes) and `delete -f`, each run as an operator runs it
//! (process start to exit), ROUNDS times; beside them `datastore migrate --from-v2 --apply` of
//! the same kind of data from an etcd serving the v2 API, the baseline of writing keys in bulk.
//! Every run is checked: the output line of every resource, the keys in etcd after it.
//!
//! Prints, per command, the time per 1,000 resources (median, p99 and max over the rounds),
//! the time of the whole file, and the time per 1,000 keys against `migrate`'s.
//!
//! cargo build --release -p calico-ctl
//! cargo run --release -p calico-ctl --example bulk_bench [-- RESOURCES ROUNDS MIGRATE_RESOURCES]
//! BULK_BENCH_CALICOCTL=/path/to/calicoctl cargo run --release -p calico-ctl --example bulk_bench

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use calico_testkit::etcd_v2::EtcdV2Server;
use calico_testkit::{EtcdServer, Tails};

/// Keys per profile: rules, tags, labels.
const KEYS: usize = 3;

fn main() {
    let mut args = std::env::args()
        .skip(1)
        .map(|n| n.parse().expect("a number"));
    let resources: usize = args.next().unwrap_or(10_000);
    let rounds: usize = args.next().unwrap_or(10);
    let migrated: usize = args.next().unwrap_or(2_000);
    let calicoctl = calicoctl();
    println!("load average before: {}", load_average());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("profiles.yaml");
    std::fs::write(&file, profiles(resources)).unwrap();
    let etcd = EtcdServer::start();
    let timed = |command: &str, expect: &str| {
        let took = run(
            &calicoctl,
            &etcd,
            &[command, "-f", path(&file)],
            resources,
            expect,
        );
        (took, keys(&etcd))
    };
    let mut times: [Vec<Duration>; 3] = Default::default();
    for _ in 0..rounds {
        let (took, stored) = timed("create", "created");
        assert_eq!(stored, resources * KEYS, "create wrote every key");
        times[0].push(took);
        let (took, stored) = timed("apply", "unchanged");
        assert_eq!(stored, resources * KEYS);
        times[1].push(took);
        let (took, stored) = timed("delete", "deleted");
        assert_eq!(stored, 0, "delete removed every key");
        times[2].push(took);
    }
    let migrate = migrate(&calicoctl, &etcd, migrated, rounds);
    println!("load average after: {}", load_average());
    let per_key = |d: &Duration, keys: usize| ms(*d) * 1000.0 / keys as f64;
    let baseline = Tails::of(migrate.iter().map(|d| per_key(d, migrated * KEYS))).unwrap();
    println!(
        "\n{resources} profiles ({} keys), {rounds} rounds; migrate: {migrated} profiles ({} keys)",
        resources * KEYS,
        migrated * KEYS
    );
    println!(
        "| command | per 1,000 resources p50 / p99 / max | whole file p50 / max | per 1,000 keys p50 | × migrate (p50 / p99) |"
    );
    println!("| --- | --- | --- | --- | --- |");
    let rows = [
        ("create", &times[0]),
        ("apply (unchanged)", &times[1]),
        ("delete -f", &times[2]),
    ];
    for (name, samples) in rows {
        let per_1000 = Tails::of(samples.iter().map(|d| ms(*d) * 1000.0 / resources as f64));
        let whole = Tails::of(samples.iter().map(|d| d.as_secs_f64())).unwrap();
        let keys = Tails::of(samples.iter().map(|d| per_key(d, resources * KEYS))).unwrap();
        let per_1000 = per_1000.unwrap();
        let ratio = keys.ratio(&baseline);
        println!(
            "| {name} | {:.0} / {:.0} / {:.0} ms | {:.2} / {:.2} s | {:.0} ms | {:.2} / {:.2} |",
            per_1000.median,
            per_1000.p99,
            per_1000.max,
            whole.median,
            whole.max,
            keys.median,
            ratio.median,
            ratio.p99
        );
    }
    let whole = Tails::of(migrate.iter().map(|d| d.as_secs_f64())).unwrap();
    println!(
        "| migrate --apply (baseline) | {:.0} / {:.0} / {:.0} ms | {:.2} / {:.2} s | {:.0} ms | 1 / 1 |",
        baseline.median * KEYS as f64,
        baseline.p99 * KEYS as f64,
        baseline.max * KEYS as f64,
        whole.median,
        whole.max,
        baseline.median
    );
}

/// `count` profiles with rules, tags and labels, one document each.
fn profiles(count: usize) -> String {
    (0..count)
        .map(|n| {
            format!(
                "---\napiVersion: projectcalico.org/v1\nkind: profile\nmetadata: {{name: p{n}}}\n\
                 spec: {{inbound_rules: [{{action: allow, src_tag: p{n}}}], tags: [p{n}], \
                 labels: {{n: \"{n}\"}}}}\n"
            )
        })
        .collect()
}

/// Runs calicoctl; checks that every resource got its line; returns how long it took.
fn run(
    calicoctl: &Path,
    etcd: &EtcdServer,
    args: &[&str],
    resources: usize,
    outcome: &str,
) -> Duration {
    let started = Instant::now();
    let out = Command::new(calicoctl)
        .env("ETCD_ENDPOINTS", etcd.endpoint())
        .args(args)
        .output()
        .unwrap();
    let took = started.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "calicoctl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = stdout.lines().filter(|l| l.ends_with(outcome)).count();
    assert_eq!(
        lines, resources,
        "calicoctl {args:?}: every resource {outcome}"
    );
    took
}

/// `datastore migrate --apply` of `count` profiles into an empty v3 datastore, `rounds` times.
fn migrate(calicoctl: &Path, v3: &EtcdServer, count: usize, rounds: usize) -> Vec<Duration> {
    let v2 = EtcdV2Server::start();
    populate_v2(&v2.endpoint(), count);
    let mut times = Vec::new();
    for _ in 0..rounds {
        let started = Instant::now();
        let out = Command::new(calicoctl)
            .env("ETCD_ENDPOINTS", v3.endpoint())
            .args([
                "datastore",
                "migrate",
                "--from-v2",
                &v2.endpoint(),
                "--apply",
            ])
            .stdout(Stdio::piped())
            .output()
            .unwrap();
        times.push(started.elapsed());
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{stdout}");
        assert!(
            stdout.contains(&format!("wrote {} keys", count * KEYS)),
            "{stdout}"
        );
        let cleared = v3.etcdctl(&["del", "--prefix", "/calico/"]);
        assert!(cleared.status.success());
    }
    times
}

/// Writes the profiles' keys through etcd's v2 HTTP API on one kept-alive connection.
fn populate_v2(endpoint: &str, count: usize) {
    let address = endpoint.trim_start_matches("http://");
    let mut stream = BufReader::new(TcpStream::connect(address).unwrap());
    for n in 0..count {
        let values = [
            (
                "rules",
                format!(
                    r#"{{"inbound_rules":[{{"action":"allow","src_tag":"p{n}"}}],"outbound_rules":[]}}"#
                ),
            ),
            ("tags", format!(r#"["p{n}"]"#)),
            ("labels", format!(r#"{{"n":"{n}"}}"#)),
        ];
        for (key, value) in values {
            let body = format!("value={}", form_encode(&value));
            let request = format!(
                "PUT /v2/keys/calico/v1/policy/profile/p{n}/{key} HTTP/1.1\r\nHost: {address}\r\n\
                 Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            stream.get_mut().write_all(request.as_bytes()).unwrap();
            read_response(&mut stream);
        }
    }
}

/// Reads one HTTP response (with a Content-Length) and checks its status.
fn read_response(stream: &mut BufReader<TcpStream>) {
    let mut status = String::new();
    stream.read_line(&mut status).unwrap();
    assert!(status.contains(" 20"), "v2 PUT: {status}");
    let mut length = 0;
    loop {
        let mut line = String::new();
        stream.read_line(&mut line).unwrap();
        if line == "\r\n" {
            break;
        }
        if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = value.trim().parse().unwrap();
        }
    }
    let mut body = vec![0; length];
    stream.read_exact(&mut body).unwrap();
}

fn form_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn keys(etcd: &EtcdServer) -> usize {
    // etcd's count is of every key in the range, whatever the limit.
    let out = etcd.etcdctl(&["get", "--prefix", "/calico/", "--limit", "1", "-w", "json"]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    json["count"].as_u64().unwrap_or(0) as usize
}

fn path(file: &Path) -> &str {
    file.to_str().unwrap()
}

/// calicoctl beside this example (target/release/calicoctl for a release example), or
/// `BULK_BENCH_CALICOCTL` (another build, an earlier commit's say).
fn calicoctl() -> PathBuf {
    if let Some(path) = std::env::var_os("BULK_BENCH_CALICOCTL") {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().and_then(Path::parent).unwrap();
    let calicoctl = dir.join("calicoctl");
    assert!(
        calicoctl.is_file(),
        "{} is missing: cargo build --release -p calico-ctl",
        calicoctl.display()
    );
    calicoctl
}

fn load_average() -> String {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    text.split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
