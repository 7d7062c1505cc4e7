//! Workloads on addresses in no IP pool (seed 002: an OpenStack VM on a Neutron subnet): Felix
//! routes the address through the workload's interface on its host, and BIRD exports that /32 so
//! that every other host routes it there, over the mesh and through a route reflector. Nothing
//! else outside the pools leaves a host.
//!
//! The "VM" is plugged by hand as Nova's VIF plugging would: a namespace with a veth whose host
//! end is named as the endpoint in etcd says, the address on it, and a default route through
//! 169.254.1.1, which the host answers by proxy ARP.

mod common;

use std::time::Duration;

use calico_lab::sh;
use calico_testkit::eventually;
use common::{OPEN, TestLab};

/// How long a BGP change may take to show.
const WAIT: Duration = Duration::from_secs(30);

/// The VM's address: in none of the lab's pools (10.65/16, 10.66/16, fd00:65::/64).
const VM_IP: &str = "10.200.0.5";
const VM_MAC: &str = "02:00:0a:c8:00:05";
/// The host side of the VM's veth, as the endpoint names it.
const VM_IF: &str = "calivm5";
/// An ordinary workload on host2, on a pool address.
const W2_IP: &str = "10.65.2.1";
const PORT: u16 = 8080;

/// A VM's namespace; removed (with its veth) on drop, also when the test fails.
struct Vm {
    netns: String,
}

impl Drop for Vm {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip")
            .args(["netns", "del", &self.netns])
            .output();
    }
}

fn ip(args: &[&str]) {
    let out = std::process::Command::new("ip")
        .args(args)
        .output()
        .expect("ip runs");
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Plugs a VM on `host` as `<lab>.<name>`: veth `VM_IF` in the host, `eth0` with `VM_IP`/32 and
/// `VM_MAC` inside, routes through 169.254.1.1.
fn plug_vm(lab: &TestLab, host: &str, name: &str) -> Vm {
    let vm = Vm {
        netns: lab.netns(name),
    };
    let (ns, host_ns) = (vm.netns.as_str(), lab.netns(host));
    ip(&["netns", "add", ns]);
    ip(&["-n", ns, "link", "set", "lo", "up"]);
    ip(&[
        "-n", &host_ns, "link", "add", VM_IF, "type", "veth", "peer", "name", "eth0", "netns", ns,
    ]);
    ip(&["-n", ns, "link", "set", "eth0", "address", VM_MAC]);
    ip(&[
        "-n",
        ns,
        "addr",
        "add",
        &format!("{VM_IP}/32"),
        "dev",
        "eth0",
    ]);
    ip(&["-n", ns, "link", "set", "eth0", "up"]);
    ip(&["-n", &host_ns, "link", "set", VM_IF, "up"]);
    ip(&[
        "-n",
        ns,
        "route",
        "add",
        "169.254.1.1",
        "dev",
        "eth0",
        "scope",
        "link",
    ]);
    ip(&[
        "-n",
        ns,
        "route",
        "add",
        "default",
        "via",
        "169.254.1.1",
        "dev",
        "eth0",
    ]);
    vm
}

fn endpoint_json() -> String {
    serde_json::json!({
        "state": "active",
        "name": VM_IF,
        "mac": VM_MAC,
        "profile_ids": ["open"],
        "ipv4_nets": [format!("{VM_IP}/32")],
    })
    .to_string()
}

fn routes(lab: &TestLab, host: &str) -> String {
    let out = lab.in_host(host, "ip", &["route"]);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `birdc <args>` against a host's BIRD.
fn birdc(lab: &TestLab, host: &str, args: &[&str]) -> String {
    let socket = lab.state().dir.join(host).join("bird.ctl");
    let mut all = vec!["-s", socket.to_str().unwrap()];
    all.extend_from_slice(args);
    let out = lab.in_host(host, "birdc", &all);
    assert!(
        out.status.success(),
        "birdc {args:?} on {host}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The prefixes a host's BIRD learned over BGP (`show route where source = RTS_BGP`).
fn learned_over_bgp(lab: &TestLab, host: &str) -> Vec<String> {
    let table = birdc(lab, host, &["show", "route", "where", "source = RTS_BGP"]);
    table
        .lines()
        .filter(|l| !l.starts_with(char::is_whitespace))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|first| first.contains('/'))
        .map(str::to_owned)
        .collect()
}

/// Inside one of the lab's pools (the only other thing BGP may carry).
fn in_a_pool(prefix: &str) -> bool {
    let net: ipnet::IpNet = prefix.parse().expect("a prefix");
    calico_lab::cni::POOLS
        .iter()
        .map(|p| p.parse::<ipnet::IpNet>().expect("a pool"))
        .any(|pool| pool.contains(&net))
}

/// host2 routes the VM's address to host1, learned from `session` (a BIRD protocol name
/// prefix), and learned nothing else outside the pools.
fn host2_routes_the_vm_through(lab: &TestLab, session: &str) {
    let wanted = format!("{VM_IP} via 10.99.0.11 dev eth0 proto bird");
    eventually(
        &format!("host2 routes {VM_IP} to host1, learned from {session}"),
        WAIT,
        || {
            let table = routes(lab, "host2");
            let bird = birdc(lab, "host2", &["show", "route", "for", VM_IP]);
            match table.contains(&wanted) && bird.contains(&format!("[{session}")) {
                true => Ok(()),
                false => Err(format!("ip route:\n{table}\nbirdc:\n{bird}")),
            }
        },
    );
    let outside: Vec<String> = learned_over_bgp(lab, "host2")
        .into_iter()
        .filter(|p| !in_a_pool(p))
        .collect();
    assert_eq!(
        outside,
        vec![format!("{VM_IP}/32")],
        "outside the pools host2 learns the VM's address and nothing else"
    );
}

/// Ping both ways and TCP from the workload to the VM.
fn reach_each_other(lab: &TestLab) {
    assert!(lab.ping("w2", VM_IP), "w2 cannot ping the VM at {VM_IP}");
    assert!(
        lab.tcp("w2", VM_IP, PORT),
        "w2 cannot open a TCP connection to the VM at {VM_IP}:{PORT}"
    );
    let back = lab.probe_in("vm1", &[format!("icmp:{W2_IP}")]);
    assert_eq!(back, ["ok"], "the VM cannot ping w2 at {W2_IP}");
}

#[test]
fn a_vm_outside_every_pool_is_routed_from_other_hosts_over_the_mesh_and_a_reflector() {
    let lab = TestLab::up(3, &[]);
    lab.put("/calico/v1/policy/profile/open/rules", OPEN);
    lab.workload("host2", "w2", W2_IP, &["open"], &[]);
    let _vm = plug_vm(&lab, "host1", "vm1");
    let _server = lab.serve_in("vm1", &[PORT]);
    lab.put(
        "/calico/v1/host/host1/workload/openstack/vm1/endpoint/port1",
        &endpoint_json(),
    );
    lab.wait();

    // host1: Felix routes the address through the VM's interface (protocol 80, as for any
    // endpoint) and answers ARP on it.
    eventually("host1 routes the VM through its interface", WAIT, || {
        let table = routes(&lab, "host1");
        match table.contains(&format!("{VM_IP} dev {VM_IF} proto 80")) {
            true => Ok(()),
            false => Err(table),
        }
    });
    let proxy_arp = format!("/proc/sys/net/ipv4/conf/{VM_IF}/proxy_arp");
    let out = sh::command_in(&lab.netns("host1"), "cat")
        .arg(&proxy_arp)
        .output()
        .expect("cat runs");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "1",
        "{proxy_arp}"
    );

    // Over the mesh: host2 learns the /32 from host1 and the workloads reach each other.
    host2_routes_the_vm_through(&lab, "Mesh_10_99_0_11");
    reach_each_other(&lab);

    // Mesh off, host3 reflecting: host2 learns the /32 from the reflector, next hop host1.
    lab.put("/calico/bgp/v1/host/host3/rr_cluster_id", "1.0.0.1");
    lab.put("/calico/bgp/v1/global/node_mesh", r#"{"enabled": false}"#);
    host2_routes_the_vm_through(&lab, "Rr_10_99_0_13");
    reach_each_other(&lab);

    // The endpoint deleted: Felix removes its route and every host forgets the address.
    lab.del("/calico/v1/host/host1/workload/openstack/vm1/endpoint/port1");
    eventually("host2 forgets the VM's address", WAIT, || {
        let (one, two) = (routes(&lab, "host1"), routes(&lab, "host2"));
        match one.contains(VM_IP) || two.contains(VM_IP) {
            true => Err(format!("host1:\n{one}\nhost2:\n{two}")),
            false => Ok(()),
        }
    });
}
