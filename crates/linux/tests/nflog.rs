//! NFLOG on a real kernel: a rule that logs to a group, in a namespace made for the test, and a
//! subscription to that group that receives each logged packet with the rule's prefix and the
//! packet's addresses and ports; both firewall front ends (nf_tables `log group`, iptables
//! `-j NFLOG`) reach it.

use std::net::{IpAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use calico_linux::nflog::{LoggedPacket, Nflog};
use calico_linux::nft::{
    BaseChain, Batch, ChainPolicy, ChainSpec, ChainType, Expr, Hook, NfTables, Nft, Op, Rule,
    Table, TableFamily,
};
use calico_linux::{Netns, in_netns};
use calico_testkit::NetNs;

/// Packets logged to `nflog` until `want` says it saw what it needs (or 10 s pass).
fn collect(nflog: &mut Nflog, want: impl Fn(&[LoggedPacket]) -> bool) -> Vec<LoggedPacket> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut seen = Vec::new();
    while Instant::now() < deadline && !want(&seen) {
        seen.extend(nflog.receive().expect("reading the group"));
    }
    seen
}

/// Connects to a listener on `127.0.0.1:<port>` inside `ns`.
fn connect(ns: &NetNs, port: u16) {
    in_netns(&Netns::named(ns.name()), || {
        let listener = TcpListener::bind(("127.0.0.1", port))?;
        let _stream = TcpStream::connect(("127.0.0.1", port))?;
        drop(listener);
        Ok(())
    })
    .expect("a TCP connection on loopback");
}

#[test]
fn nf_tables_log_group_reaches_the_subscription_with_prefix_and_ports() {
    let ns = NetNs::new("nflog");
    ns.run_ok("ip", &["link", "set", "lo", "up"], "");
    let netns = Netns::named(ns.name());
    let mut nflog = Nflog::bind(&netns, 31).expect("binding NFLOG group 31");
    nflog.set_read_timeout(Duration::from_millis(200)).unwrap();
    let table = Table {
        family: TableFamily::Inet,
        name: "t".to_owned(),
    };
    let nft = Nft::new(netns.clone(), table);
    let log = Rule {
        exprs: vec![
            Expr::L4Proto {
                proto: 6,
                negate: false,
            },
            Expr::Log {
                prefix: "AI|p0123|2".to_owned(),
                group: Some(31),
            },
        ],
        comment: None,
    };
    nft.apply(&Batch {
        ops: vec![
            Op::AddTable,
            Op::AddChain(ChainSpec {
                name: "out".to_owned(),
                base: Some(BaseChain {
                    kind: ChainType::Filter,
                    hook: Hook::Output,
                    priority: 0,
                    policy: ChainPolicy::Accept,
                }),
            }),
            Op::AddRule {
                chain: "out".to_owned(),
                rule: log,
            },
        ],
    })
    .expect("the logging rule");
    connect(&ns, 8081);
    let seen = collect(&mut nflog, |seen| {
        seen.iter()
            .any(|p| p.header.and_then(|h| h.dst_port) == Some(8081))
    });
    let syn = seen
        .iter()
        .find(|p| p.header.and_then(|h| h.dst_port) == Some(8081))
        .unwrap_or_else(|| panic!("no logged packet to port 8081: {seen:?}"));
    assert_eq!(syn.prefix, "AI|p0123|2");
    let header = syn.header.unwrap();
    let loopback: IpAddr = "127.0.0.1".parse().unwrap();
    assert_eq!(
        (header.src, header.dst, header.protocol),
        (loopback, loopback, 6)
    );
    assert!(header.src_port.is_some());
    assert_eq!(syn.hook, 3, "logged at the output hook");
}

#[test]
fn iptables_nflog_reaches_the_same_subscription() {
    let ns = NetNs::new("nflogipt");
    ns.run_ok("ip", &["link", "set", "lo", "up"], "");
    let netns = Netns::named(ns.name());
    let mut nflog = Nflog::bind(&netns, 32).expect("binding NFLOG group 32");
    nflog.set_read_timeout(Duration::from_millis(200)).unwrap();
    ns.run_ok(
        "iptables",
        &[
            "-A",
            "OUTPUT",
            "-p",
            "tcp",
            "--dport",
            "8082",
            "-j",
            "NFLOG",
            "--nflog-group",
            "32",
            "--nflog-prefix",
            "DO|t9|end",
        ],
        "",
    );
    // Nothing listens: the SYN is answered with a reset, and logged on its way out.
    let _ = in_netns(&netns, || {
        let _ = TcpStream::connect_timeout(
            &"127.0.0.1:8082".parse().unwrap(),
            Duration::from_millis(500),
        );
        Ok(())
    });
    let seen = collect(&mut nflog, |seen| !seen.is_empty());
    assert!(
        seen.iter()
            .any(|p| p.prefix == "DO|t9|end" && p.header.and_then(|h| h.dst_port) == Some(8082)),
        "{seen:?}"
    );
}

#[test]
fn a_group_bound_by_another_subscriber_is_refused_by_name() {
    let ns = NetNs::new("nflogbusy");
    let netns = Netns::named(ns.name());
    let _first = Nflog::bind(&netns, 33).unwrap();
    let error = Nflog::bind(&netns, 33).unwrap_err().to_string();
    assert!(error.contains("group 33"), "{error}");
}

/// Connections with their counters, for the flow logs' packets and bytes each way.
#[tokio::test(flavor = "multi_thread")]
async fn connections_carry_their_packet_and_byte_counters() {
    use std::io::{Read, Write};
    let ns = NetNs::new("ctacct");
    ns.run_ok("ip", &["link", "set", "lo", "up"], "");
    ns.run_ok("sysctl", &["-w", "net.netfilter.nf_conntrack_acct=1"], "");
    // A rule that needs connection tracking, so the namespace tracks connections.
    ns.run_ok(
        "iptables",
        &["-A", "INPUT", "-m", "conntrack", "--ctstate", "NEW"],
        "",
    );
    let netns = Netns::named(ns.name());
    in_netns(&netns, || {
        let listener = TcpListener::bind(("127.0.0.1", 8090))?;
        let mut client = TcpStream::connect(("127.0.0.1", 8090))?;
        let (mut server, _) = listener.accept()?;
        client.write_all(&[7; 1000])?;
        let mut got = [0; 1000];
        server.read_exact(&mut got)?;
        server.write_all(&[9; 10])?;
        let mut back = [0; 10];
        client.read_exact(&mut back)?;
        Ok(())
    })
    .unwrap();
    let found = calico_linux::connections(&netns).await.unwrap();
    let ours = found
        .iter()
        .find(|c| c.original.dst_port == Some(8090))
        .unwrap_or_else(|| panic!("the connection to 8090 is tracked: {found:?}"));
    assert_eq!(ours.original.protocol, 6);
    assert_eq!(ours.reply.src_port, Some(8090));
    assert!(ours.bytes_out >= 1000, "{ours:?}");
    assert!(ours.bytes_back >= 10 && ours.packets_back >= 2, "{ours:?}");
}
