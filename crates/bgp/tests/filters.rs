//! What the rendered export filter lets out, asked of a real BIRD (`birdc show route table
//! masterX filter calico_export_vX`) running host2's configuration in a private namespace, with
//! routes of every kind in its kernel and over BGP: this host's blocks and workloads, addresses
//! borrowed inside the pools, workloads outside every pool (an OpenStack VM), other protocols'
//! routes, connected networks, a default route; and as BGP peers another Calico host (mesh) and a
//! top-of-rack router (a global peer), each a BIRD in a namespace of its own.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use calico_bgp::{BgpConfig, render};
use calico_model::{Key, parse_value};
use calico_testkit::{NetNs, NsProcess, eventually, require_tool};

/// host2 (under test) at 10.98.0.12, host1 at 10.98.0.11, a router (a global peer, AS 65001)
/// at 10.97.0.1.
const CLUSTER: &[(&str, &str)] = &[
    (
        "/calico/v1/ipam/v4/pool/10.65.0.0-16",
        r#"{"cidr": "10.65.0.0/16"}"#,
    ),
    (
        "/calico/v1/ipam/v6/pool/fd00:65::-64",
        r#"{"cidr": "fd00:65::/64"}"#,
    ),
    ("/calico/bgp/v1/host/host1/ip_addr_v4", "10.98.0.11"),
    ("/calico/bgp/v1/host/host2/ip_addr_v4", "10.98.0.12"),
    ("/calico/ipam/v2/host/host2/ipv4/block/10.65.2.0-26", ""),
    ("/calico/ipam/v2/host/host2/ipv6/block/fd00:65::-122", ""),
    (
        "/calico/bgp/v1/global/peer_v4/10.97.0.1",
        r#"{"ip": "10.97.0.1", "as_num": 65001}"#,
    ),
];

/// host1 (another Calico host) sends 10.201.0.0/16's routes over the mesh session.
const HOST1: &str = r#"
router id 10.98.0.11;
protocol device {}
protocol static {
  ipv4;
  route 10.201.0.9/32 blackhole;
  route 10.201.1.0/24 blackhole;
}
protocol bgp host1 {
  local 10.98.0.11 as 64512;
  neighbor 10.98.0.12 as 64512;
  multihop;
  ipv4 { import none; export all; };
}
"#;

/// A top-of-rack router (a global peer, on its own link 10.97.0.0/24) sends 10.202.0.0/16's.
const TOR: &str = r#"
router id 10.97.0.1;
protocol device {}
protocol static {
  ipv4;
  route 10.202.0.9/32 blackhole;
  route 10.202.1.0/24 blackhole;
}
protocol bgp tor {
  local 10.97.0.1 as 65001;
  neighbor 10.98.0.12 as 64512;
  multihop;
  ipv4 { import none; export all; };
}
"#;

/// Kernel routes of host2 (`ip route add …` on the workload veth `cali1`), with whether
/// host2's BIRD may export them.
const KERNEL: &[(&str, bool)] = &[
    // Inside the pools, as before: a borrowed address travels, one inside the own block does
    // not (the block does), a tunnel route (protocol 81) never.
    ("10.65.3.7/32 dev cali1 proto 80", true),
    ("10.65.2.5/32 dev cali1 proto 80", false),
    ("10.65.4.0/26 dev cali1 proto 81", false),
    // Outside: Felix's route to a workload (a VM on a Neutron subnet) travels; a wider
    // protocol-80 route, anyone else's host route, a default route do not.
    ("10.200.0.5/32 dev cali1 proto 80", true),
    ("10.200.1.0/24 dev cali1 proto 80", false),
    ("10.200.0.6/32 dev cali1", false),
    ("10.200.0.7/32 dev cali1 proto static", false),
    ("default via 10.98.0.1 dev eth0", false),
    ("10.96.0.0/24 via 10.97.0.1 dev eth1", false),
    ("fd00:65::1:7/128 dev cali1 proto 80", true),
    ("fd00:65::5/128 dev cali1 proto 80", false),
    ("2001:db8:200::5/128 dev cali1 proto 80", true),
    ("2001:db8:200:1::/64 dev cali1 proto 80", false),
    ("2001:db8:200::6/128 dev cali1", false),
];

fn ip(netns: &NetNs, args: &str) {
    let args: Vec<&str> = args.split_whitespace().collect();
    netns.run_ok("ip", &args, "");
}

/// The networks of `table` that `filter` accepts (all without one), per the BIRD at `socket`,
/// or why `birdc` failed (BIRD may not listen yet).
fn exported(
    netns: &NetNs,
    socket: &Path,
    table: &str,
    filter: Option<&str>,
) -> Result<BTreeSet<String>, String> {
    let socket = socket.to_str().unwrap();
    let mut args = vec!["-s", socket, "show", "route", "table", table];
    if let Some(filter) = filter {
        args.extend(["filter", filter]);
    }
    let out = netns.run("birdc", &args, "");
    if !out.status.success() {
        return Err(format!(
            "birdc {args:?}: {}",
            String::from_utf8_lossy(&out.stdout)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.starts_with(char::is_whitespace))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|first| first.contains('/'))
        .map(str::to_owned)
        .collect())
}

fn start_bird(netns: &NetNs, dir: &Path, name: &str, config: &str) -> NsProcess {
    let (conf, socket) = (
        dir.join(format!("{name}.conf")),
        dir.join(format!("{name}.ctl")),
    );
    std::fs::write(&conf, config).unwrap();
    let bird = Path::new("bird");
    let args = [
        "-f".as_ref(),
        "-c".as_ref(),
        conf.as_os_str(),
        "-s".as_ref(),
        socket.as_os_str(),
    ];
    NsProcess::start(netns.name(), dir.join(format!("{name}.log")), bird, &args)
}

#[test]
fn only_pool_routes_and_single_workload_addresses_leave_a_host() {
    for tool in ["bird", "birdc", "ip", "nsenter"] {
        require_tool(tool);
    }
    let mut config = BgpConfig::default();
    for (key, value) in CLUSTER {
        let key = Key::parse(key).unwrap();
        config.apply(&key, Some(&parse_value(&key, value).unwrap()));
    }
    let host2_conf = render(&config, "host2").unwrap();

    let host2 = NetNs::new("bgp-filter-h2");
    let (host1, tor) = (NetNs::new("bgp-filter-h1"), NetNs::new("bgp-filter-tor"));
    for (dev, peer, mine, theirs) in [
        ("eth0", &host1, "10.98.0.12/24", "10.98.0.11/24"),
        ("eth1", &tor, "10.97.0.12/24", "10.97.0.1/24"),
    ] {
        let peer_ns = peer.name();
        ip(
            &host2,
            &format!("link add {dev} type veth peer name eth0 netns {peer_ns}"),
        );
        ip(&host2, &format!("addr add {mine} dev {dev}"));
        ip(&host2, &format!("link set {dev} up"));
        ip(peer, &format!("addr add {theirs} dev eth0"));
        ip(peer, "link set eth0 up");
    }
    ip(&tor, "route add 10.98.0.0/24 via 10.97.0.12");
    ip(&host2, "link add cali1 type veth peer name cali2");
    ip(&host2, "link set cali1 up");
    ip(&host2, "link set cali2 up");
    for (route, _) in KERNEL {
        let family = if route.contains(':') { "-6 " } else { "" };
        ip(&host2, &format!("{family}route add {route}"));
    }

    let dir = tempfile::tempdir().unwrap();
    let bird = start_bird(&host2, dir.path(), "host2", &host2_conf);
    let _host1_bird = start_bird(&host1, dir.path(), "host1", HOST1);
    let _tor_bird = start_bird(&tor, dir.path(), "tor", TOR);
    let socket = dir.path().join("host2.ctl");
    let wanted: BTreeSet<String> = KERNEL
        .iter()
        .filter(|(_, out)| *out)
        .map(|(route, _)| route.split_whitespace().next().unwrap().to_owned())
        .chain(["10.65.2.0/26", "fd00:65::/122", "10.201.0.9/32"].map(str::to_owned))
        .collect();
    eventually(
        "host2's BIRD learns both peers' routes",
        Duration::from_secs(30),
        || {
            let all = exported(&host2, &socket, "master4", None)?;
            let learned = ["10.201.0.9/32", "10.202.0.9/32"]
                .iter()
                .all(|n| all.contains(*n));
            match learned {
                true => Ok(()),
                false => {
                    let socket = socket.to_str().unwrap();
                    let sessions =
                        host2.run("birdc", &["-s", socket, "show", "protocols", "all"], "");
                    Err(format!(
                        "{all:?}\n{}\nhost2's BIRD:\n{}",
                        String::from_utf8_lossy(&sessions.stdout),
                        bird.log()
                    ))
                }
            }
        },
    );
    let mut out = BTreeSet::new();
    for (table, filter) in [
        ("master4", "calico_export_v4"),
        ("master6", "calico_export_v6"),
    ] {
        out.extend(exported(&host2, &socket, table, Some(filter)).unwrap());
    }
    assert_eq!(out, wanted, "{host2_conf}");
}
