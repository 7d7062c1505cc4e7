//! Two address spaces, both on 10.0.0.0/24, across two hosts joined only by IPv6: each
//! workload reaches its own space's peer (TCP, UDP, ping) and never the other space's.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use calico_linux::{Netns, in_netns};
use calico_testkit::NetNs;
use calico_xlat::{Prefix, Workload, exec, plan};

const PEER: &str = "10.0.0.6";

fn ip(ns: &str, args: &[&str]) -> String {
    let out = std::process::Command::new("ip")
        .arg("-n")
        .arg(ns)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ip -n {ns} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn mac(ns: &str, dev: &str) -> String {
    ip(ns, &["-br", "link", "show", "dev", dev])
        .split_whitespace()
        .nth(2)
        .unwrap()
        .to_owned()
}

/// A `/proc/net/snmp` counter inside a namespace (e.g. `Ip` `InReceives`).
fn snmp(ns: &NetNs, group: &str, field: &str) -> u64 {
    let text = ns.run_ok("cat", &["/proc/net/snmp"], "");
    let mut rows = text.lines().filter(|l| l.starts_with(&format!("{group}:")));
    let (names, values) = (rows.next().unwrap(), rows.next().unwrap());
    let at = names.split_whitespace().position(|n| n == field).unwrap();
    values.split_whitespace().nth(at).unwrap().parse().unwrap()
}

struct Lab {
    hosts: [NetNs; 2],
    /// `[space - 1][host]`: 10.0.0.5 on host A, 10.0.0.6 on host B.
    workloads: Vec<[NetNs; 2]>,
    _objects: tempfile::TempDir,
}

fn lab() -> Lab {
    let hosts = [NetNs::new("xlat-ha"), NetNs::new("xlat-hb")];
    let (a, b) = (hosts[0].name(), hosts[1].name());
    ip(
        a,
        &[
            "link", "add", "fab-a", "type", "veth", "peer", "name", "fab-b", "netns", b,
        ],
    );
    for (ns, dev, addr) in [(a, "fab-a", "fd00:f::1/64"), (b, "fab-b", "fd00:f::2/64")] {
        ip(ns, &["addr", "add", addr, "dev", dev, "nodad"]);
        ip(ns, &["link", "set", dev, "up"]);
    }
    let objects = tempfile::tempdir().unwrap();
    let prefix = Prefix::new("fd00:ca1::/48".parse().unwrap()).unwrap();
    let mut workloads = Vec::new();
    for id in [1u32, 2] {
        let space = prefix.space(id).unwrap();
        let pair = [NetNs::new("xlat-w"), NetNs::new("xlat-w")];
        for (h, (addr, remote)) in [("10.0.0.5", PEER), (PEER, "10.0.0.5")]
            .into_iter()
            .enumerate()
        {
            let (host, wl, dev) = (hosts[h].name(), pair[h].name(), format!("cali{id}"));
            ip(
                host,
                &[
                    "link", "add", &dev, "type", "veth", "peer", "name", "eth0", "netns", wl,
                ],
            );
            ip(host, &["link", "set", &dev, "up"]);
            // The workload's side, as the CNI plugin sets it: MTU 20 below the fabric's.
            let mtu = (1500 - plan::HEADER_GROWTH).to_string();
            ip(wl, &["addr", "add", &format!("{addr}/32"), "dev", "eth0"]);
            ip(wl, &["link", "set", "eth0", "up", "mtu", &mtu]);
            ip(
                wl,
                &[
                    "route",
                    "add",
                    "169.254.1.1",
                    "dev",
                    "eth0",
                    "scope",
                    "link",
                ],
            );
            ip(
                wl,
                &[
                    "route",
                    "add",
                    "default",
                    "via",
                    "169.254.1.1",
                    "dev",
                    "eth0",
                ],
            );
            let gw = mac(host, &dev);
            ip(
                wl,
                &[
                    "neigh",
                    "replace",
                    "169.254.1.1",
                    "lladdr",
                    &gw,
                    "dev",
                    "eth0",
                    "nud",
                    "permanent",
                ],
            );
            let workload = Workload {
                space,
                host_if: dev.to_string(),
                ipv4: addr.parse().unwrap(),
                mac: mac(wl, "eth0"),
                object_dir: objects.path().to_owned(),
            };
            let mut steps = plan::attach(&workload).unwrap();
            let (via, fab) = if h == 0 {
                ("fd00:f::2", "fab-a")
            } else {
                ("fd00:f::1", "fab-b")
            };
            let block = format!("{remote}/32").parse().unwrap();
            steps.push(plan::remote_block(&space, block, via.parse().unwrap(), fab));
            exec::apply(&Netns::named(host), &steps).unwrap();
        }
        workloads.push(pair);
    }
    Lab {
        hosts,
        workloads,
        _objects: objects,
    }
}

fn ping(from: &NetNs, args: &[&str]) -> bool {
    let mut all = vec!["-c1", "-W1"];
    all.extend_from_slice(args);
    all.push(PEER);
    from.run("ping", &all, "").status.success()
}

/// A TCP server in `ns` that answers every connection with `name`.
fn serve_tcp(ns: &NetNs, port: u16, name: &'static str) {
    let listener = in_netns(&Netns::named(ns.name()), || {
        TcpListener::bind(("0.0.0.0", port))
    })
    .unwrap();
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            let _ = conn.write_all(name.as_bytes());
        }
    });
}

fn serve_udp(ns: &NetNs, port: u16, name: &'static str) {
    let socket = in_netns(&Netns::named(ns.name()), || {
        UdpSocket::bind(("0.0.0.0", port))
    })
    .unwrap();
    std::thread::spawn(move || {
        let mut buf = [0; 64];
        while let Ok((_, from)) = socket.recv_from(&mut buf) {
            let _ = socket.send_to(name.as_bytes(), from);
        }
    });
}

fn tcp_answer(from: &NetNs, port: u16) -> String {
    let peer: SocketAddr = format!("{PEER}:{port}").parse().unwrap();
    in_netns(&Netns::named(from.name()), || {
        let mut conn = TcpStream::connect_timeout(&peer, Duration::from_secs(3))?;
        conn.set_read_timeout(Some(Duration::from_secs(3)))?;
        let mut answer = String::new();
        conn.read_to_string(&mut answer)?;
        Ok(answer)
    })
    .unwrap_or_else(|e| panic!("tcp from {} to {peer}: {e}", from.name()))
}

fn udp_answer(from: &NetNs, port: u16) -> String {
    in_netns(&Netns::named(from.name()), || {
        let socket = UdpSocket::bind("0.0.0.0:0")?;
        socket.set_read_timeout(Some(Duration::from_secs(3)))?;
        socket.send_to(b"who", (PEER, port))?;
        let mut buf = [0; 64];
        let (n, _) = socket.recv_from(&mut buf)?;
        Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
    })
    .unwrap_or_else(|e| panic!("udp from {} to {PEER}:{port}: {e}", from.name()))
}

#[test]
fn overlapping_spaces_cross_an_ipv6_fabric_without_meeting() {
    let lab = lab();
    let [s1, s2] = [&lab.workloads[0], &lab.workloads[1]];
    for host in &lab.hosts {
        let routes = ip(host.name(), &["-4", "route", "show", "table", "all"]);
        assert!(
            !routes.contains("10.0.0."),
            "IPv4 route on {}: {routes}",
            host.name()
        );
    }
    // The first packet waits for neighbour discovery on the fabric: poll, do not sleep.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !ping(&s1[0], &[]) {
        assert!(
            Instant::now() < deadline,
            "space 1: 10.0.0.5 never pinged {PEER}"
        );
    }
    let echos = |ns: &NetNs| snmp(ns, "Icmp", "InEchos");
    let (before1, before2) = (echos(&s1[1]), echos(&s2[1]));
    for _ in 0..3 {
        assert!(ping(&s1[0], &[]), "space 1 ping");
    }
    assert_eq!(
        echos(&s1[1]) - before1,
        3,
        "space 1's peer answers space 1's pings"
    );
    assert_eq!(
        echos(&s2[1]),
        before2,
        "space 2's 10.0.0.6 got space 1's pings"
    );
    assert!(ping(&s2[0], &[]), "space 2 ping");
    assert!(
        ping(&s2[0], &["-M", "do", "-s", "1372"]),
        "1,400-byte ping with DF"
    );

    let port = calico_testkit::free_port();
    serve_tcp(&s1[1], port, "space 1");
    serve_tcp(&s2[1], port, "space 2");
    serve_udp(&s1[1], port, "space 1");
    serve_udp(&s2[1], port, "space 2");
    assert_eq!(tcp_answer(&s1[0], port), "space 1");
    assert_eq!(tcp_answer(&s2[0], port), "space 2");
    assert_eq!(udp_answer(&s1[0], port), "space 1");
    assert_eq!(udp_answer(&s2[0], port), "space 2");

    // The hosts never received an IPv4 packet: translation happened before their IP stack.
    for host in &lab.hosts {
        assert_eq!(
            snmp(host, "Ip", "InReceives"),
            0,
            "IPv4 seen on {}",
            host.name()
        );
    }
}
