//! Every `nft` command of docs/dataplane.md, as written, against a real kernel: the commands of
//! the doc's code blocks (one line each, or `nft -f - <<'EOF'` with the lines up to `EOF` as
//! its input) run in order inside a network namespace made for the test, after Felix's table
//! (`inet calico`) is loaded there with the workload and policy the doc's examples name. A
//! command that fails, fails the test with the doc's line; `nft monitor …` runs in the
//! background until it reports a packet the test sends.

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use calico_calc::Calculator;
use calico_dataplane::{NftDataplane, RenderConfig, calico_table};
use calico_linux::Netns;
use calico_linux::nft::Nft;
use calico_testkit::{NetNs, eventually, require_tool};

const DOC: &str = include_str!("../../../docs/dataplane.md");

/// One command of the doc: its line number, its words, and what it reads on stdin.
#[derive(Debug)]
struct Snippet {
    line: usize,
    args: Vec<String>,
    stdin: String,
}

/// The `nft` commands of the doc's fenced code blocks, in order.
fn snippets(doc: &str) -> Vec<Snippet> {
    let mut found = Vec::new();
    let mut in_block = false;
    let mut lines = doc.lines().enumerate();
    while let Some((index, line)) = lines.next() {
        if line.starts_with("```") {
            in_block = !in_block;
            continue;
        }
        let Some(command) = line.strip_prefix("nft ").filter(|_| in_block) else {
            continue;
        };
        let (command, heredoc) = match command.split_once("<<") {
            Some((command, marker)) => (command, Some(marker.trim().trim_matches('\''))),
            None => (command, None),
        };
        // A shell comment: `#` after a space (nft's own arguments here have none).
        let command = command.split(" #").next().unwrap_or_default();
        assert!(
            !command.contains(['"', '\'', '$', '`', '|', ';']),
            "docs/dataplane.md:{}: the test runs commands without a shell: {line}",
            index + 1
        );
        let mut stdin = String::new();
        if let Some(marker) = heredoc {
            let body = lines.by_ref().map(|(_, l)| l).take_while(|l| *l != marker);
            stdin = body.map(|l| format!("{l}\n")).collect();
        }
        found.push(Snippet {
            line: index + 1,
            args: command.split_whitespace().map(str::to_owned).collect(),
            stdin,
        });
    }
    found
}

/// A workload `cali2927b4649cf` with policy `default/web`, and a profile: the names the doc's
/// examples use.
fn state() -> Calculator {
    let mut calc = Calculator::new("h1");
    let updates = [
        (
            "/calico/v1/host/h1/workload/k8s/ns.web/endpoint/eth0",
            r#"{"state": "active", "name": "cali2927b4649cf", "profile_ids": ["lab"], "ipv4_nets": ["10.65.0.2/32"], "labels": {"role": "web"}}"#,
        ),
        (
            "/calico/v1/policy/profile/lab/rules",
            r#"{"inbound_rules": [{"action": "allow"}], "outbound_rules": [{"action": "allow"}]}"#,
        ),
        (
            "/calico/v1/policy/tier/default/metadata",
            r#"{"order": 100}"#,
        ),
        (
            "/calico/v1/policy/tier/default/policy/web",
            r#"{"selector": "role == 'web'", "inbound_rules": [{"protocol": "tcp", "dst_ports": [80], "action": "allow"}]}"#,
        ),
    ];
    for (key, value) in updates {
        calc.apply(key, Some(value));
    }
    calc
}

/// A background process, killed when dropped (also when the test fails), and its output so far.
struct Monitor {
    child: Child,
    output: Arc<Mutex<String>>,
}

impl Monitor {
    fn start(mut command: Command) -> Monitor {
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("nft monitor starts");
        let output = Arc::new(Mutex::new(String::new()));
        for mut pipe in [
            Box::new(child.stdout.take().unwrap()) as Box<dyn Read + Send>,
            Box::new(child.stderr.take().unwrap()),
        ] {
            let output = Arc::clone(&output);
            std::thread::spawn(move || {
                let mut buffer = [0; 4096];
                while let Ok(n @ 1..) = pipe.read(&mut buffer) {
                    let text = String::from_utf8_lossy(&buffer[..n]);
                    output.lock().unwrap().push_str(&text);
                }
            });
        }
        Monitor { child, output }
    }

    fn output(&self) -> String {
        self.output.lock().unwrap().clone()
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `nft monitor …` until it reports a TCP connection to port 5432 (the port the doc's
/// tracing recipe marks) made inside the namespace.
fn monitor_sees_a_packet(ns: &NetNs, snippet: &Snippet) {
    let mut command = Command::new("ip");
    command
        .args(["netns", "exec", ns.name(), "nft"])
        .args(&snippet.args);
    let monitor = Monitor::start(command);
    eventually(
        &format!(
            "docs/dataplane.md:{}: nft {:?} to report a packet",
            snippet.line, snippet.args
        ),
        Duration::from_secs(20),
        || {
            // Refused (nothing listens): the SYN is what is traced.
            let _ = ns.run("bash", &["-c", "exec 3<>/dev/tcp/127.0.0.1/5432"], "");
            let output = monitor.output();
            match output.contains("trace id") {
                true => Ok(()),
                false => Err(format!("output so far: {output:?}")),
            }
        },
    );
}

#[test]
fn every_nft_command_of_the_dataplane_doc_runs_as_written() {
    require_tool("nft");
    require_tool("bash");
    let found = snippets(DOC);
    let has = |word: &str| {
        found
            .iter()
            .any(|s| s.stdin.contains(word) || s.args.iter().any(|a| a == word))
    };
    assert!(
        has("nftrace"),
        "the tracing recipe is in docs/dataplane.md: {found:?}"
    );
    assert!(has("monitor") && has("list"), "{found:?}");

    let ns = NetNs::new("docnft");
    let calc = state();
    let nft = Box::new(Nft::new(Netns::named(ns.name()), calico_table()));
    let mut dataplane = NftDataplane::with_kernel(nft, RenderConfig::default());
    dataplane
        .sync(calc.state())
        .expect("the kernel takes Calico's table");

    for snippet in &found {
        if snippet.args.first().map(String::as_str) == Some("monitor") {
            monitor_sees_a_packet(&ns, snippet);
            continue;
        }
        let args: Vec<&str> = snippet.args.iter().map(String::as_str).collect();
        let out = ns.run("nft", &args, &snippet.stdin);
        assert!(
            out.status.success(),
            "docs/dataplane.md:{}: nft {} failed: {}\ninput:\n{}",
            snippet.line,
            args.join(" "),
            String::from_utf8_lossy(&out.stderr),
            snippet.stdin
        );
    }
}

#[test]
fn heredocs_and_comments_are_read_as_a_shell_would() {
    let doc = "text\n```\nnft list table inet calico   # all of it\nnft -f - <<'EOF'\ntable inet t {}\nEOF\n```\nnft outside a block\n";
    let found = snippets(doc);
    assert_eq!(found.len(), 2, "{found:?}");
    assert_eq!(found[0].args, ["list", "table", "inet", "calico"]);
    assert_eq!(
        (found[1].args.as_slice(), found[1].stdin.as_str()),
        (&["-f".to_owned(), "-".to_owned()][..], "table inet t {}\n")
    );
    assert_eq!(found[1].line, 4);
}
