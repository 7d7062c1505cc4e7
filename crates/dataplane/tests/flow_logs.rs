//! Flow logs and staged policies on both backends.
//!
//! - Rendering: with flow logs on, every acting rule of the iptables backend is preceded by an
//!   NFLOG rule with the same matches and the step's prefix (as the nftables backend logs it);
//!   a staged policy's chain logs and returns, never marks or drops; a tier of staged policies
//!   only has no end-of-tier drop; with flow logs off, staged policies render nothing and the
//!   output is what it is without them.
//! - Packets: two workloads behind a host, each in a namespace made for the test, with a
//!   policy that denies TCP 8081 to the server and a staged policy (in that tier, and alone in a
//!   tier of its own) that would deny ICMP. A ping passes and a TCP connection to 8081 is
//!   dropped, and the NFLOG group receives the steps that decided them and the staged denies.

use std::collections::BTreeSet;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use calico_calc::{Calculator, DesiredState};
use calico_dataplane::flowlog::{Decoder, Logged, NFLOG_GROUP, Step, StepAction, prefix};
use calico_dataplane::nft::NftRenderer;
use calico_dataplane::{
    IpVersion, NftDataplane, RenderConfig, calico_table, kernel_jumps, render_filter, render_ipsets,
};
use calico_linux::nflog::{LoggedPacket, Nflog};
use calico_linux::nft::Nft;
use calico_linux::{Netns, in_netns};
use calico_testkit::NetNs;

const HOST: &str = "h1";

fn endpoint(name: &str, iface: &str, ip: &str, role: &str) -> (String, String) {
    (
        format!("/calico/v1/host/{HOST}/workload/k8s/ns.{name}/endpoint/eth0"),
        format!(
            r#"{{"state": "active", "name": "{iface}", "profile_ids": ["open"], "ipv4_nets": ["{ip}/32"], "labels": {{"role": "{role}"}}}}"#
        ),
    )
}

/// A client and a server; `guard` (tier t1) denies TCP 8081 to the server and allows the rest;
/// with `staged`, t1's staged `lockdown` and tier `preview`'s staged `preview` (a tier of staged
/// policies only) would deny ICMP to the server.
fn calculator(staged: bool) -> Calculator {
    let mut updates = vec![
        endpoint("client", "calicl", "10.65.0.1", "client"),
        endpoint("server", "calisv", "10.65.0.2", "server"),
        (
            "/calico/v1/policy/profile/open/rules".to_owned(),
            r#"{"inbound_rules": [{"action": "allow"}], "outbound_rules": [{"action": "allow"}]}"#
                .to_owned(),
        ),
        (
            "/calico/v1/policy/tier/t1/metadata".to_owned(),
            r#"{"order": 10}"#.to_owned(),
        ),
        (
            "/calico/v1/policy/tier/t1/policy/guard".to_owned(),
            r#"{"selector": "role == 'server'", "inbound_rules": [{"protocol": "tcp", "dst_ports": [8081], "action": "deny"}, {"action": "allow"}]}"#.to_owned(),
        ),
    ];
    if staged {
        let would_deny_icmp = r#"{"selector": "role == 'server'", "inbound_rules": [{"protocol": "icmp", "action": "deny"}, {"action": "log"}]}"#;
        updates.push((
            "/calico/v1/policy/tier/t1/stagedpolicy/lockdown".to_owned(),
            would_deny_icmp.to_owned(),
        ));
        updates.push((
            "/calico/v1/policy/tier/preview/metadata".to_owned(),
            r#"{"order": 1}"#.to_owned(),
        ));
        updates.push((
            "/calico/v1/policy/tier/preview/stagedpolicy/preview".to_owned(),
            would_deny_icmp.to_owned(),
        ));
    }
    let mut calc = Calculator::new(HOST);
    for (key, value) in updates {
        calc.apply(&key, Some(&value));
    }
    calc
}

fn flow_logs(on: bool) -> RenderConfig {
    RenderConfig {
        flow_logs: on,
        ..RenderConfig::default()
    }
}

fn staged_step(tier: &str, name: &str) -> Step {
    Step::StagedPolicy {
        tier: tier.to_owned(),
        name: name.to_owned(),
        rule: 0,
    }
}

fn guard(rule: u32) -> Step {
    Step::Policy {
        tier: "t1".to_owned(),
        name: "guard".to_owned(),
        rule,
    }
}

/// The rules of one chain in iptables-restore text.
fn chain<'a>(text: &'a str, name: &str) -> Vec<&'a str> {
    let head = format!("-A {name} ");
    text.lines()
        .filter_map(|l| l.strip_prefix(head.as_str()))
        .collect()
}

#[test]
fn iptables_logs_each_acting_rule_before_it_acts() {
    let calc = calculator(false);
    let text = render_filter(calc.state(), &flow_logs(true), IpVersion::V4);
    let nflog = |step: &Step, action: StepAction| {
        format!(
            "-j NFLOG --nflog-group {NFLOG_GROUP} --nflog-prefix \"{}\"",
            prefix(step, action, true)
        )
    };
    let policy = chain(&text, &calico_dataplane::policy_chain(true, "t1", "guard"));
    let comment =
        "-m comment --comment \"policy t1/guard inbound rule 1\" -p tcp -m multiport --dports 8081";
    assert_eq!(
        policy[..2],
        [
            format!("{comment} {}", nflog(&guard(0), StepAction::Deny)),
            format!("{comment} -j DROP"),
        ],
        "{text}"
    );
    assert!(
        policy[2].ends_with(&nflog(&guard(1), StepAction::Allow)) && policy[3].contains("MARK"),
        "{policy:?}"
    );
    let server = chain(&text, "cali-wi-calisv");
    let end = Step::EndOfTier {
        tier: "t1".to_owned(),
    };
    let at = server
        .iter()
        .position(|r| r.ends_with(&nflog(&end, StepAction::Deny)))
        .unwrap_or_else(|| panic!("no end-of-tier log: {server:?}"));
    assert!(
        server[at + 1].ends_with("-j DROP")
            && server[at].replace(&nflog(&end, StepAction::Deny), "-j DROP") == server[at + 1],
        "the log has the drop's matches: {server:?}"
    );
    let last = &server[server.len() - 2..];
    assert_eq!(
        last[0],
        format!(
            "-m comment --comment \"no profile matched\" {}",
            nflog(&Step::NoProfileMatched, StepAction::Deny)
        )
    );
    // Every prefix decodes to a step of the state.
    let decoder = Decoder::of(calc.state());
    let prefixes: Vec<&str> = text
        .lines()
        .filter_map(|l| l.split("--nflog-prefix \"").nth(1))
        .map(|rest| rest.split('"').next().unwrap())
        .collect();
    assert!(prefixes.len() > 8, "{text}");
    for p in prefixes {
        assert!(decoder.decode(p).is_some(), "{p}");
    }
    // Off: not one NFLOG rule.
    let off = render_filter(calc.state(), &flow_logs(false), IpVersion::V4);
    assert!(!off.contains("NFLOG"), "{off}");
}

#[test]
fn iptables_staged_chains_log_and_return_and_a_staged_tier_drops_nothing() {
    let calc = calculator(true);
    let text = render_filter(calc.state(), &flow_logs(true), IpVersion::V4);
    let lockdown = calico_dataplane::iptables::staged_policy_chain(true, "t1", "lockdown");
    let staged = chain(&text, &lockdown);
    let logged = prefix(&staged_step("t1", "lockdown"), StepAction::Deny, true);
    assert_eq!(
        staged,
        [format!(
            "-m comment --comment \"staged policy t1/lockdown inbound rule 1\" -p icmp -j NFLOG --nflog-group {NFLOG_GROUP} --nflog-prefix \"{logged}\""
        )],
        "logs the deny, then (last rule) falls off the end: no mark, no drop, no log rule"
    );
    let server = chain(&text, "cali-wi-calisv");
    let preview = calico_dataplane::iptables::staged_policy_chain(true, "preview", "preview");
    let jump_preview = server
        .iter()
        .position(|r| *r == format!("-j {preview}"))
        .unwrap_or_else(|| panic!("{server:?}"));
    let jump_lockdown = server
        .iter()
        .position(|r| *r == format!("-j {lockdown}"))
        .unwrap_or_else(|| panic!("{server:?}"));
    let jump_guard = server
        .iter()
        .position(|r| r.contains(&calico_dataplane::policy_chain(true, "t1", "guard")))
        .unwrap();
    assert!(
        jump_preview < jump_lockdown && jump_lockdown < jump_guard,
        "{server:?}"
    );
    assert!(
        !server.iter().any(|r| r.contains("end of tier preview")),
        "a tier of staged policies only enforces nothing: {server:?}"
    );
    insta::assert_snapshot!("iptables_staged_server_inbound", server.join("\n"));
    // Flow logs off: staged policies render nothing at all.
    let off = render_filter(calc.state(), &flow_logs(false), IpVersion::V4);
    let without = render_filter(calculator(false).state(), &flow_logs(false), IpVersion::V4);
    assert_eq!(off, without);
}

#[test]
fn nftables_staged_chains_log_and_return_and_a_staged_tier_drops_nothing() {
    let calc = calculator(true);
    let mut renderer = NftRenderer::new(flow_logs(true));
    let ruleset = renderer.render_all(calc.state()).clone();
    let rules = |name: &str| -> Vec<String> {
        let chain = ruleset
            .chains
            .get(name)
            .unwrap_or_else(|| panic!("no chain {name}: {:?}", ruleset.chains.keys()));
        chain.rules.iter().map(ToString::to_string).collect()
    };
    let server: Vec<String> = rules("to-wl-calisv");
    let staged: Vec<&String> = ruleset
        .chains
        .keys()
        .filter(|name| name.starts_with("staged-in-"))
        .collect();
    assert_eq!(staged.len(), 2, "{:?}", ruleset.chains.keys());
    let mut text = server.join("\n");
    for name in &staged {
        let body = rules(name);
        assert!(
            body.iter()
                .all(|r| r.contains(&format!("group {NFLOG_GROUP} return"))
                    && !r.contains("mark set")
                    && !r.contains("drop")),
            "{body:?}"
        );
        text.push_str(&format!("\n\nchain {name}\n{}", body.join("\n")));
    }
    assert!(
        !server.iter().any(|r| r.contains("end of tier preview")),
        "{server:?}"
    );
    insta::assert_snapshot!("nftables_staged_server_inbound", text);
    let off = NftRenderer::new(flow_logs(false))
        .render_all(calc.state())
        .clone();
    let without = NftRenderer::new(flow_logs(false))
        .render_all(calculator(false).state())
        .clone();
    assert_eq!(off, without, "flow logs off: nothing of staged policies");
}

/// A host namespace with two workloads (client 10.65.0.1 on `calicl`, server 10.65.0.2 on
/// `calisv`), each in a namespace of its own, routed through the host with static neighbours.
struct Topology {
    host: NetNs,
    client: NetNs,
    server: NetNs,
}

impl Topology {
    fn new(name: &str) -> Topology {
        let topology = Topology {
            host: NetNs::new(&format!("{name}-h")),
            client: NetNs::new(&format!("{name}-c")),
            server: NetNs::new(&format!("{name}-s")),
        };
        let h = &topology.host;
        h.run_ok("sysctl", &["-w", "net.ipv4.ip_forward=1"], "");
        for (ns, iface, ip, n, peer) in [
            (&topology.client, "calicl", "10.65.0.1", 1, "10.65.0.2"),
            (&topology.server, "calisv", "10.65.0.2", 2, "10.65.0.1"),
        ] {
            let host_mac = format!("ee:ee:ee:ee:ee:0{n}");
            let wl_mac = format!("02:00:00:00:00:0{n}");
            h.run_ok(
                "ip",
                &[
                    "link",
                    "add",
                    iface,
                    "address",
                    &host_mac,
                    "type",
                    "veth",
                    "peer",
                    "name",
                    "eth0",
                    "address",
                    &wl_mac,
                    "netns",
                    ns.name(),
                ],
                "",
            );
            h.run_ok("ip", &["link", "set", iface, "up"], "");
            h.run_ok(
                "ip",
                &["route", "add", &format!("{ip}/32"), "dev", iface],
                "",
            );
            h.run_ok(
                "ip",
                &["neigh", "replace", ip, "lladdr", &wl_mac, "dev", iface],
                "",
            );
            ns.run_ok(
                "ip",
                &["addr", "add", &format!("{ip}/32"), "dev", "eth0"],
                "",
            );
            ns.run_ok("ip", &["link", "set", "eth0", "up"], "");
            ns.run_ok("ip", &["route", "add", "default", "dev", "eth0"], "");
            ns.run_ok(
                "ip",
                &["neigh", "replace", peer, "lladdr", &host_mac, "dev", "eth0"],
                "",
            );
        }
        topology
    }

    /// Loads the iptables backend's filter table (and sets) into the host.
    fn load_iptables(&self, state: &DesiredState, config: &RenderConfig) {
        let h = &self.host;
        h.run_ok("ipset", &["restore"], &render_ipsets(state, IpVersion::V4));
        h.run_ok(
            "iptables-restore",
            &["--noflush"],
            &render_filter(state, config, IpVersion::V4),
        );
        for (table, kernel, ours) in kernel_jumps() {
            if table == "filter" {
                h.run_ok("iptables", &["-t", table, "-I", kernel, "-j", ours], "");
            }
        }
    }

    fn load_nftables(&self, state: &DesiredState, config: &RenderConfig) {
        let nft = Box::new(Nft::new(Netns::named(self.host.name()), calico_table()));
        let mut dataplane = NftDataplane::with_kernel(nft, config.clone());
        dataplane
            .sync(state)
            .expect("the kernel takes the nftables table");
    }

    /// Pings the server from the client; whether it answered.
    fn ping(&self) -> bool {
        let out = self
            .client
            .run("ping", &["-c", "1", "-W", "5", "10.65.0.2"], "");
        out.status.success()
    }

    /// A TCP connection from the client to the server's port 8081 (nothing listens: a reset
    /// if the SYN gets through); the error.
    fn connect_8081(&self) -> std::io::ErrorKind {
        let address = "10.65.0.2:8081".parse().unwrap();
        let result = in_netns(&Netns::named(self.client.name()), || {
            TcpStream::connect_timeout(&address, Duration::from_secs(2)).map(|_| ())
        });
        match result {
            Ok(()) => panic!("nothing listens on 8081, yet a connection was made"),
            Err(error) => error.kind(),
        }
    }
}

/// What the group received until `want` is in it (or 10 s passed), decoded.
fn steps_until(nflog: &mut Nflog, decoder: &Decoder, want: &[Logged]) -> BTreeSet<String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut seen: Vec<LoggedPacket> = Vec::new();
    let decoded = |seen: &[LoggedPacket]| -> Vec<Logged> {
        seen.iter()
            .filter_map(|p| decoder.decode(&p.prefix))
            .collect()
    };
    while Instant::now() < deadline && !want.iter().all(|w| decoded(&seen).contains(w)) {
        seen.extend(nflog.receive().expect("reading the NFLOG group"));
    }
    seen.iter().map(|p| p.prefix.clone()).collect()
}

fn logged(step: Step, action: StepAction, inbound: bool) -> Logged {
    Logged {
        step,
        action,
        inbound,
    }
}

/// Drives the traffic and checks the verdicts and the log, whichever backend is loaded.
fn traffic_is_judged_and_logged(topology: &Topology, state: &DesiredState) {
    let mut nflog = Nflog::bind(&Netns::named(topology.host.name()), NFLOG_GROUP)
        .expect("binding the flow logs' NFLOG group");
    nflog.set_read_timeout(Duration::from_millis(200)).unwrap();
    assert!(
        topology.ping(),
        "the staged denies must not drop the ping (nsenter --net=/run/netns/{} iptables-save / nft list ruleset)",
        topology.host.name()
    );
    assert_eq!(
        topology.connect_8081(),
        std::io::ErrorKind::TimedOut,
        "guard's deny drops the SYN (a refusal would mean it got through)"
    );
    let decoder = Decoder::of(state);
    let want = [
        logged(guard(1), StepAction::Allow, true),
        logged(guard(0), StepAction::Deny, true),
        logged(staged_step("t1", "lockdown"), StepAction::Deny, true),
        logged(staged_step("preview", "preview"), StepAction::Deny, true),
        logged(
            Step::Profile {
                name: "open".to_owned(),
                rule: 0,
            },
            StepAction::Allow,
            false,
        ),
    ];
    let seen = steps_until(&mut nflog, &decoder, &want);
    for step in &want {
        let text = prefix(&step.step, step.action, step.inbound);
        assert!(
            seen.contains(&text),
            "{step:?} ({text}) not logged: {seen:?}"
        );
    }
    let ends_of_preview = prefix(
        &Step::EndOfTier {
            tier: "preview".to_owned(),
        },
        StepAction::Deny,
        true,
    );
    assert!(
        !seen.contains(&ends_of_preview),
        "a staged-only tier never ends in a drop"
    );
}

#[test]
fn iptables_backend_logs_verdicts_and_staged_denies_without_dropping() {
    let topology = Topology::new("flowipt");
    let calc = calculator(true);
    topology.load_iptables(calc.state(), &flow_logs(true));
    traffic_is_judged_and_logged(&topology, calc.state());
}

#[test]
fn nftables_backend_logs_verdicts_and_staged_denies_without_dropping() {
    let topology = Topology::new("flownft");
    let calc = calculator(true);
    topology.load_nftables(calc.state(), &flow_logs(true));
    traffic_is_judged_and_logged(&topology, calc.state());
}
