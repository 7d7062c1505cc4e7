//! `calico-lab vm boot|delete` on an `up --openstack` lab of two hosts: real neutron-server,
//! calico-neutron, DHCP agents with dnsmasq, Felix and BIRD; each VM is a namespace plugged by
//! a TAP-named veth whose address comes from busybox's udhcpc inside it.
//! Needs root, etcd, bird, busybox and scripts/setup-neutron.sh (neutron-server, MariaDB,
//! dnsmasq).

mod common;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use calico_lab::openstack::vm::Vm;
use calico_lab::processes::pid_alive;
use calico_lab::topology::netns_pids;
use calico_testkit::eventually;
use common::openstack::{Guard, Neutron, openstack_lab};
use common::{BIN, TestLab};
use serde_json::json;

/// How long calico-neutron, the agents, Felix and BIRD may take to act on a change.
const WAIT: Duration = Duration::from_secs(30);
/// How long an ICMP flow Felix allowed may outlive the rule (conntrack's ICMP timeout).
const CLOSE_WAIT: Duration = Duration::from_secs(60);

/// `vm boot`; the VM as the lab's state records it.
fn boot(lab: &TestLab, host: &str, name: &str, groups: &[&str]) -> Vm {
    let mut args = vec!["vm", "boot", "--host", host, "--name", name];
    for group in groups {
        args.extend(["--security-group", group]);
    }
    let out = lab.ok(&args);
    eprintln!("{}", out.trim());
    vm_named(lab, name).unwrap_or_else(|| panic!("VM {name} not in the lab's state"))
}

fn vm_named(lab: &TestLab, name: &str) -> Option<Vm> {
    let openstack = lab.state().openstack.expect("an OpenStack lab");
    openstack.vms.into_iter().find(|vm| vm.name == name)
}

/// One ping from a VM's namespace.
fn ping(from: &Vm, to: &Vm) -> bool {
    Command::new("ip")
        .args(["netns", "exec", &from.netns, "ping", "-c1", "-W1"])
        .arg(to.ip.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("ping runs")
        .success()
}

fn pings_eventually(from: &Vm, to: &Vm, limit: Duration) {
    eventually(
        &format!("{} to ping {}", from.name, to.name),
        limit,
        || match ping(from, to) {
            true => Ok(()),
            false => Err(format!("no answer from {}", to.ip)),
        },
    );
}

fn etcd_value(lab: &TestLab, key: &str) -> String {
    let out = lab.etcdctl(&["get", key, "--print-value-only"]);
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The keys of every OpenStack endpoint in etcd.
fn openstack_endpoints(lab: &TestLab) -> Vec<String> {
    let out = lab.etcdctl(&["get", "/calico/v1/host/", "--prefix", "--keys-only"]);
    let mut keys: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|k| k.contains("/workload/openstack/"))
        .map(str::to_owned)
        .collect();
    keys.sort();
    keys
}

/// The routes a host has to a VM's address.
fn routes_to(lab: &TestLab, host: &str, vm: &Vm) -> String {
    let out = lab.in_host(host, "ip", &["route", "show", &format!("{}/32", vm.ip)]);
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The DHCP agent's hosts file on `host` (what its dnsmasq leases).
fn dhcp_hosts(lab: &TestLab, host: &str) -> String {
    let path = lab.state().dir.join(host).join("dhcp/hosts");
    std::fs::read_to_string(path).unwrap_or_default()
}

/// The hosts file's line for `mac`, or nothing.
fn leased(hosts: &str, mac: &str) -> String {
    let line = hosts.lines().find(|line| line.contains(mac));
    line.unwrap_or_default().to_owned()
}

#[test]
fn vms_on_two_hosts_get_their_ports_addresses_by_dhcp_and_ping_each_other() {
    let started = Instant::now();
    let lab = openstack_lab(&[]);
    let neutron = Neutron::of(&lab);
    let vm1 = boot(&lab, "host1", "vm1", &[]);
    let vm2 = boot(&lab, "host2", "vm2", &[]);
    for vm in [&vm1, &vm2] {
        let port = &neutron.call("GET", &format!("/v2.0/ports/{}", vm.port), None)["port"];
        assert_eq!(port["fixed_ips"][0]["ip_address"], vm.ip.to_string());
        assert_eq!(port["mac_address"], vm.mac.as_str());
        assert_eq!(port["binding:host_id"], vm.host.as_str());
        assert_eq!(port["device_owner"], "compute:nova");
        let out = lab.in_host(&vm.host, "ip", &["-n", &vm.netns, "addr", "show", "eth0"]);
        let addresses = String::from_utf8_lossy(&out.stdout);
        assert!(
            addresses.contains(&format!("inet {}/24", vm.ip)) && addresses.contains(&vm.mac),
            "{}'s eth0 has not its port's address and MAC: {addresses}",
            vm.name
        );
        assert!(
            vm.tap.starts_with("tap") && port["id"].as_str().unwrap().starts_with(&vm.tap[3..])
        );
    }
    // The lab's default group allows everything from its members.
    pings_eventually(&vm1, &vm2, WAIT);
    pings_eventually(&vm2, &vm1, WAIT);

    // Bad input gets one line naming the flag.
    for (args, flag) in [
        (vec!["--host", "host9"], "--host"),
        (
            vec!["--host", "host1", "--network", "no-such-net"],
            "--network",
        ),
        (
            vec!["--host", "host1", "--security-group", "no-such-group"],
            "--security-group",
        ),
        (vec!["--host", "host1", "--name", "vm1"], "--name"),
    ] {
        let mut all = vec!["vm", "boot"];
        all.extend(args);
        let out = lab.cli(&all);
        let error = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && error.contains(flag),
            "{all:?}: {error}"
        );
    }

    // `down` takes the VMs' DHCP clients and namespaces too.
    let clients: Vec<i32> = [&vm1, &vm2]
        .iter()
        .flat_map(|vm| netns_pids(&vm.netns))
        .collect();
    assert_eq!(clients.len(), 2, "one udhcpc per VM: {clients:?}");
    lab.ok(&["down"]);
    assert!(
        clients.iter().all(|&pid| !pid_alive(pid)),
        "udhcpc outlived down"
    );
    let names = calico_lab::sh::namespaces().expect("ip netns list");
    assert!(
        !names.contains(&vm1.netns) && !names.contains(&vm2.netns),
        "{names:?}"
    );
    eprintln!("test done in {:?}", started.elapsed());
}

#[test]
fn a_security_group_rule_opens_and_closes_a_vm() {
    let started = Instant::now();
    let lab = openstack_lab(&[]);
    let neutron = Neutron::of(&lab);
    let group = neutron.create("security_group", json!({"name": "egress-only"}));
    let group_id = group["id"].as_str().expect("group id").to_owned();
    let vm1 = boot(&lab, "host1", "vm1", &[]);
    let vm2 = boot(&lab, "host2", "vm2", &["egress-only"]);
    // Everything written so far is programmed and vm2 routed to from host1: a lost ping is the
    // group's doing.
    eventually("host1's route to vm2", WAIT, || {
        match routes_to(&lab, "host1", &vm2).contains("proto bird") {
            true => Ok(()),
            false => Err(routes_to(&lab, "host1", &vm2)),
        }
    });
    lab.wait();
    assert!(!ping(&vm1, &vm2), "vm2 (egress only) answered vm1's ping");

    let rule = neutron.create(
        "security_group_rule",
        json!({"security_group_id": group_id, "direction": "ingress",
               "ethertype": "IPv4", "protocol": "icmp"}),
    );
    let opened = Instant::now();
    pings_eventually(&vm1, &vm2, WAIT);
    eprintln!("ICMP allowed into vm2 after {:?}", opened.elapsed());

    let path = format!(
        "/v2.0/security-group-rules/{}",
        rule["id"].as_str().unwrap()
    );
    neutron.call("DELETE", &path, None);
    let closed = Instant::now();
    eventually("vm2 to stop answering vm1", CLOSE_WAIT, || {
        match ping(&vm1, &vm2) {
            true => Err("vm2 still answers".to_owned()),
            false => Ok(()),
        }
    });
    eprintln!("ICMP blocked again after {:?}", closed.elapsed());
    eprintln!("test done in {:?}", started.elapsed());
}

#[test]
fn vm_delete_removes_the_endpoint_routes_and_dhcp_entry() {
    let started = Instant::now();
    let lab = openstack_lab(&[]);
    let vm1 = boot(&lab, "host1", "vm1", &[]);
    let vm2 = boot(&lab, "host2", "vm2", &[]);
    let key = vm2.endpoint_key();
    assert!(
        etcd_value(&lab, &key).contains(&vm2.ip.to_string()),
        "{key} not in etcd"
    );
    eventually("routes to vm2 on both hosts", WAIT, || {
        let (on1, on2) = (
            routes_to(&lab, "host1", &vm2),
            routes_to(&lab, "host2", &vm2),
        );
        match on1.contains("proto bird") && on2.contains(&vm2.tap) {
            true => Ok(()),
            false => Err(format!("host1: {on1:?}, host2: {on2:?}")),
        }
    });
    assert!(
        dhcp_hosts(&lab, "host2").contains(&vm2.mac),
        "vm2's MAC not leased"
    );
    pings_eventually(&vm1, &vm2, WAIT);

    lab.ok(&["vm", "delete", "vm2"]);
    assert!(
        vm_named(&lab, "vm2").is_none(),
        "vm2 still in the lab's state"
    );
    let names = calico_lab::sh::namespaces().expect("ip netns list");
    assert!(
        !names.contains(&vm2.netns),
        "vm2's namespace is still there"
    );
    let out = lab.in_host("host2", "ip", &["link", "show", &vm2.tap]);
    assert!(!out.status.success(), "{} is still on host2", vm2.tap);
    eventually("vm2's endpoint, routes and DHCP entry gone", WAIT, || {
        let left = [
            ("endpoint", etcd_value(&lab, &key)),
            ("route on host1", routes_to(&lab, "host1", &vm2)),
            ("route on host2", routes_to(&lab, "host2", &vm2)),
            (
                "MAC in host2's DHCP hosts",
                leased(&dhcp_hosts(&lab, "host2"), &vm2.mac),
            ),
        ];
        let left: Vec<String> = left
            .into_iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(what, v)| format!("{what}: {v}"))
            .collect();
        match left.is_empty() {
            true => Ok(()),
            false => Err(left.join("; ")),
        }
    });
    let again = lab.cli(&["vm", "delete", "vm2"]);
    assert!(!again.status.success(), "deleting vm2 twice succeeded");
    assert!(vm_named(&lab, "vm1").is_some(), "vm1 went too");
    eprintln!("test done in {:?}", started.elapsed());
}

#[test]
fn calico_neutron_restarted_while_ports_change_converges_to_neutron() {
    let started = Instant::now();
    let lab = openstack_lab(&[]);
    let neutron = Neutron::of(&lab);
    let openstack = lab.state().openstack.expect("an OpenStack lab");
    let vm1 = boot(&lab, "host1", "vm1", &[]);
    assert_eq!(openstack_endpoints(&lab), [vm1.endpoint_key()]);

    // SIGKILL: its supervisor ends with it (it only restarts a clean exit).
    let sync = calico_neutron_pid(&lab).expect("calico-neutron runs");
    Command::new("kill")
        .args(["-KILL", &sync.to_string()])
        .status()
        .expect("kill");
    eventually("calico-neutron gone", WAIT, || {
        match calico_neutron_pid(&lab) {
            Some(pid) => Err(format!("calico-neutron {pid} still runs")),
            None => Ok(()),
        }
    });

    // Meanwhile a port is created and another deleted.
    let port = neutron.create(
        "port",
        json!({"network_id": openstack.network, "device_owner": "compute:nova",
               "device_id": "vm-b", "binding:host_id": "host2",
               "security_groups": [openstack.security_group]}),
    );
    let port_id = port["id"].as_str().expect("port id");
    neutron.call("DELETE", &format!("/v2.0/ports/{}", vm1.port), None);
    assert_eq!(
        openstack_endpoints(&lab),
        [vm1.endpoint_key()],
        "etcd changed while no calico-neutron ran"
    );

    // Started again (as the lab starts it), it makes etcd what Neutron says.
    let _sync = start_calico_neutron(&lab, &openstack.neutron_url);
    let wanted = [format!(
        "/calico/v1/host/host2/workload/openstack/vm-b/endpoint/{port_id}"
    )];
    let converging = Instant::now();
    eventually("etcd's endpoints to match Neutron's ports", WAIT, || {
        let keys = openstack_endpoints(&lab);
        match keys == wanted {
            true => Ok(()),
            false => Err(format!("{keys:?}")),
        }
    });
    eprintln!(
        "etcd converged {:?} after the restart",
        converging.elapsed()
    );
    eprintln!("test done in {:?}", started.elapsed());
}

/// calico-neutron's own pid in the fabric (not its supervisor's).
fn calico_neutron_pid(lab: &TestLab) -> Option<i32> {
    netns_pids(&lab.netns("fabric")).into_iter().find(|pid| {
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let program = cmdline.split(|&b| b == 0).next().unwrap_or_default();
        program.ends_with(b"/calico-neutron")
    })
}

/// calico-neutron in the fabric with the lab's arguments.
fn start_calico_neutron(lab: &TestLab, neutron_url: &str) -> Guard {
    let state = lab.state();
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(state.log_path("calico-neutron"))
        .expect("calico-neutron's log");
    let child = calico_lab::sh::command_in(
        &lab.netns("fabric"),
        PathBuf::from(BIN).with_file_name("calico-neutron"),
    )
    .args([
        "--neutron-url",
        neutron_url,
        "--etcd-endpoints",
        &state.etcd_endpoints(),
    ])
    .stdin(Stdio::null())
    .stdout(log.try_clone().expect("log"))
    .stderr(log)
    .spawn()
    .expect("calico-neutron starts");
    Guard(child)
}
