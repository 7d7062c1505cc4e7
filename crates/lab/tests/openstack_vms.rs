//! `calico-lab vm boot|delete` on an `up --openstack` lab of two hosts: real neutron-server,
//! calico-neutron, DHCP agents with dnsmasq, Felix and BIRD; each VM is a namespace plugged by
//! a TAP-named veth whose IPv4 address comes from busybox's udhcpc inside it and whose IPv6
//! address from ISC dhclient -6 (the lab's network is dual-stack; on a `slaac` or
//! `dhcpv6-stateless` network, from the router advertisements), its IPv6 default route from
//! dnsmasq's router advertisements. The lab's services are restarted after any end, as their
//! systemd units do.
//! Needs root, etcd, bird, busybox and scripts/setup-neutron.sh (neutron-server, MariaDB,
//! dnsmasq, dhclient).

mod common;

use std::net::IpAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use calico_lab::openstack::SUBNET6_CIDR;
use calico_lab::openstack::vm::Vm;
use calico_lab::processes::pid_alive;
use calico_lab::topology::netns_pids;
use calico_testkit::eventually;
use common::TestLab;
use common::openstack::{Cli, Neutron, openstack_lab};

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
    ping_address(from, IpAddr::V4(to.ip))
}

/// One ping (IPv4 or IPv6) from a VM's namespace to `to`.
fn ping_address(from: &Vm, to: IpAddr) -> bool {
    Command::new("ip")
        .args(["netns", "exec", &from.netns, "ping", "-c1", "-W1"])
        .arg(to.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("ping runs")
        .success()
}

fn pings_eventually(from: &Vm, to: &Vm, limit: Duration) {
    pings_address_eventually(from, IpAddr::V4(to.ip), limit);
}

fn pings_address_eventually(from: &Vm, to: IpAddr, limit: Duration) {
    eventually(
        &format!("{} to ping {to}", from.name),
        limit,
        || match ping_address(from, to) {
            true => Ok(()),
            false => Err(format!(
                "no answer from {to}; {}'s IPv6 routes: {:?}, neighbours: {:?}",
                from.name,
                in_vm(from, &["-6", "route"]),
                in_vm(from, &["-6", "neigh"])
            )),
        },
    );
}

/// `ip ARGS` in a VM's namespace.
fn in_vm(vm: &Vm, args: &[&str]) -> String {
    let out = Command::new("ip")
        .args(["-n", &vm.netns])
        .args(args)
        .output()
        .expect("ip runs");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The VM's IPv6 address.
fn ip6(vm: &Vm) -> IpAddr {
    IpAddr::V6(
        vm.ip6
            .unwrap_or_else(|| panic!("{} has no IPv6 address", vm.name)),
    )
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

/// The routes a host has to a VM's IPv6 address.
fn routes6_to(lab: &TestLab, host: &str, vm: &Vm) -> String {
    let dest = format!("{}/128", ip6(vm));
    let out = lab.in_host(host, "ip", &["-6", "route", "show", &dest]);
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
        let fixed: Vec<&str> = port["fixed_ips"]
            .as_array()
            .expect("fixed_ips")
            .iter()
            .filter_map(|f| f["ip_address"].as_str())
            .collect();
        assert_eq!(fixed, [vm.ip.to_string(), ip6(vm).to_string()]);
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
        dual_stack_as_served(&lab, vm);
    }
    // The lab's default group allows everything from its members, IPv4 and IPv6.
    pings_eventually(&vm1, &vm2, WAIT);
    pings_eventually(&vm2, &vm1, WAIT);
    // IPv6: each VM sends to its router (its TAP), which routes the /128 Felix programmed on
    // the peer's host and BIRD exported (the address is in no Calico pool).
    eventually("each host's route to the other's VM", WAIT, || {
        let (to2, to1) = (
            routes6_to(&lab, "host1", &vm2),
            routes6_to(&lab, "host2", &vm1),
        );
        match to2.contains("proto bird") && to1.contains("proto bird") {
            true => Ok(()),
            false => Err(format!("host1 to vm2: {to2:?}, host2 to vm1: {to1:?}")),
        }
    });
    pings_address_eventually(&vm1, ip6(&vm2), WAIT);
    pings_address_eventually(&vm2, ip6(&vm1), WAIT);
    for vm in [&vm1, &vm2] {
        let neighbours = in_vm(vm, &["-6", "neigh", "show", "dev", "eth0"]);
        assert!(
            neighbours.lines().all(|n| n.starts_with("fe80:")),
            "{} looked a global address up on its link: {neighbours}",
            vm.name
        );
    }

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
    assert_eq!(
        clients.len(),
        4,
        "udhcpc and dhclient -6 in each VM: {clients:?}"
    );
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

/// The VM's IPv6 as served (DHCPv6, RA) and as Calico's docs configure a guest: its address
/// a /128, no route for the subnet (the RAs announce it off-link), and a default route to the
/// link-local address of its TAP on the host, which the host answers for.
fn dual_stack_as_served(lab: &TestLab, vm: &Vm) {
    let addresses = in_vm(
        vm,
        &["-6", "addr", "show", "dev", "eth0", "scope", "global"],
    );
    assert!(
        addresses.contains(&format!("inet6 {}/128 ", ip6(vm))),
        "{}'s eth0 has not its port's IPv6 address as a /128: {addresses}",
        vm.name
    );
    let on_link = in_vm(vm, &["-6", "route", "show", SUBNET6_CIDR]);
    assert_eq!(on_link, "", "{} routes {SUBNET6_CIDR} on its link", vm.name);
    let out = lab.in_host(
        &vm.host,
        "ip",
        &["-6", "addr", "show", "dev", &vm.tap, "scope", "link"],
    );
    let tap = String::from_utf8_lossy(&out.stdout);
    let tap_ll = tap
        .split_whitespace()
        .skip_while(|w| *w != "inet6")
        .nth(1)
        .and_then(|a| a.split('/').next())
        .unwrap_or_else(|| panic!("{} has no link-local address: {tap}", vm.tap))
        .to_owned();
    let default = in_vm(vm, &["-6", "route", "show", "default"]);
    assert!(
        default.contains(&format!("via {tap_ll} dev eth0 proto ra")),
        "{}'s default route is not its TAP {tap_ll} by RA: {default}",
        vm.name
    );
}

#[test]
fn a_security_group_rule_opens_and_closes_a_vm() {
    let started = Instant::now();
    let lab = openstack_lab(&[]);
    // What an operator types: the openstack CLI with the lab's openrc.
    let cli = Cli::of(&lab);
    cli.id(&["security", "group", "create", "egress-only"]);
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

    let rule = cli.id(&[
        "security",
        "group",
        "rule",
        "create",
        "--ingress",
        "--ethertype",
        "IPv4",
        "--protocol",
        "icmp",
        "egress-only",
    ]);
    let opened = Instant::now();
    pings_eventually(&vm1, &vm2, WAIT);
    eprintln!("ICMP allowed into vm2 after {:?}", opened.elapsed());

    // An ingress rule of ethertype IPv6 and nothing else: only its `ip_version` keeps it to
    // IPv6. It lets vm1's IPv6 ping in ...
    cli.id(&[
        "security",
        "group",
        "rule",
        "create",
        "--ingress",
        "--ethertype",
        "IPv6",
        "egress-only",
    ]);
    pings_address_eventually(&vm1, ip6(&vm2), WAIT);

    // ... and not IPv4: with the IPv4 ICMP rule deleted, vm2 stops answering over IPv4 and
    // still answers over IPv6.
    cli.run(&["security", "group", "rule", "delete", &rule]);
    let closed = Instant::now();
    eventually("vm2 to stop answering vm1", CLOSE_WAIT, || {
        match ping(&vm1, &vm2) {
            true => Err("vm2 still answers".to_owned()),
            false => Ok(()),
        }
    });
    eprintln!("ICMP blocked again after {:?}", closed.elapsed());
    assert!(
        ping_address(&vm1, ip6(&vm2)),
        "vm2 stopped answering over IPv6"
    );

    // vm2's port moved into vm1's group (`openstack port set`; `vm boot` names the port after
    // the VM): vm1 reaches it over IPv4 again, as a member of lab-default.
    cli.run(&[
        "port",
        "set",
        "--no-security-group",
        "--security-group",
        "lab-default",
        "vm2",
    ]);
    pings_eventually(&vm1, &vm2, WAIT);
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
fn calico_neutron_killed_while_ports_change_is_restarted_and_converges_to_neutron() {
    let started = Instant::now();
    let lab = openstack_lab(&[]);
    let openstack = lab.state().openstack.expect("an OpenStack lab");
    let vm1 = boot(&lab, "host1", "vm1", &[]);
    assert_eq!(openstack_endpoints(&lab), [vm1.endpoint_key()]);

    // Frozen (SIGSTOP), calico-neutron misses what changes meanwhile: a port is created and
    // another deleted.
    let sync = calico_neutron_pid(&lab).expect("calico-neutron runs");
    signal(sync, "STOP");
    // An operator's port for a VM on host2, and vm1's port deleted, both with the CLI.
    let cli = Cli::of(&lab);
    let port_id = cli.id(&[
        "port",
        "create",
        "--network",
        "lab-net",
        "--host",
        "host2",
        "--device-owner",
        "compute:nova",
        "--device",
        "vm-b",
        "--security-group",
        &openstack.security_group,
        "port-b",
    ]);
    cli.run(&["port", "delete", &vm1.port]);
    assert_eq!(
        openstack_endpoints(&lab),
        [vm1.endpoint_key()],
        "etcd changed while calico-neutron was stopped"
    );

    // SIGKILL: its supervisor starts it again (Restart=always), and it makes etcd what Neutron
    // says.
    signal(sync, "KILL");
    let killed = Instant::now();
    eventually(
        "calico-neutron started again",
        WAIT,
        || match calico_neutron_pid(&lab) {
            Some(pid) if pid != sync => Ok(()),
            other => Err(format!("calico-neutron: {other:?} (killed: {sync})")),
        },
    );
    let wanted = [format!(
        "/calico/v1/host/host2/workload/openstack/vm-b/endpoint/{port_id}"
    )];
    eventually("etcd's endpoints to match Neutron's ports", WAIT, || {
        let keys = openstack_endpoints(&lab);
        match keys == wanted {
            true => Ok(()),
            false => Err(format!("{keys:?}")),
        }
    });
    eprintln!("etcd converged {:?} after the kill", killed.elapsed());

    // The restarted calico-neutron follows what changes next: a VM boots (port, endpoint,
    // DHCP) and pings.
    let vm2 = boot(&lab, "host1", "vm2", &[]);
    let vm3 = boot(&lab, "host2", "vm3", &[]);
    pings_eventually(&vm2, &vm3, WAIT);
    eprintln!("test done in {:?}", started.elapsed());
}

#[test]
fn a_killed_dhcp_agent_comes_back_and_neutron_server_restarts_with_calicos_driver() {
    let started = Instant::now();
    let lab = openstack_lab(&[]);
    let neutron = Neutron::of(&lab);

    // SIGKILL host2's agent: its supervisor starts it again, the new agent takes over from the
    // dnsmasq the old one left, and a VM booted afterwards gets its addresses from it.
    let agent = dhcp_agent_pid(&lab, "host2").expect("host2's DHCP agent runs");
    signal(agent, "KILL");
    eventually(
        "host2's DHCP agent started again",
        WAIT,
        || match dhcp_agent_pid(&lab, "host2") {
            Some(pid) if pid != agent => Ok(()),
            other => Err(format!("agent: {other:?} (killed: {agent})")),
        },
    );
    let vm1 = boot(&lab, "host2", "vm1", &[]);
    assert!(
        dhcp_hosts(&lab, "host2").contains(&vm1.mac),
        "vm1's MAC not in the restarted agent's hosts file"
    );

    // `restart-neutron`: a new neutron-server, with Calico's driver loaded (it binds ports as
    // TAPs; without the driver on its PYTHONPATH neutron-server would not even start).
    let before = lab.state().openstack.and_then(|o| o.server_pid);
    lab.ok(&["restart-neutron"]);
    let after = lab.state().openstack.and_then(|o| o.server_pid);
    assert!(after.is_some() && after != before, "{before:?} → {after:?}");
    assert!(
        !before.is_some_and(pid_alive),
        "the old neutron-server still runs"
    );
    let vm2 = boot(&lab, "host1", "vm2", &[]);
    let port = &neutron.call("GET", &format!("/v2.0/ports/{}", vm2.port), None)["port"];
    assert_eq!(port["binding:vif_type"], "tap", "{port}");
    assert!(etcd_value(&lab, &vm2.endpoint_key()).contains(&vm2.ip.to_string()));
    pings_eventually(&vm2, &vm1, WAIT);
    pings_address_eventually(&vm2, ip6(&vm1), WAIT);
    eprintln!("test done in {:?}", started.elapsed());
}

/// `kill -SIGNAL pid`.
fn signal(pid: i32, signal: &str) {
    let status = Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill -{signal} {pid}");
}

/// The pid of the process in `node`'s namespace whose program is `program` (not its
/// supervisor's).
fn pid_of(lab: &TestLab, node: &str, program: &str) -> Option<i32> {
    let suffix = format!("/{program}");
    netns_pids(&lab.netns(node)).into_iter().find(|pid| {
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let first = cmdline.split(|&b| b == 0).next().unwrap_or_default();
        first.ends_with(suffix.as_bytes()) && pid_alive(*pid)
    })
}

/// calico-neutron's own pid in the fabric.
fn calico_neutron_pid(lab: &TestLab) -> Option<i32> {
    pid_of(lab, "fabric", "calico-neutron")
}

/// The DHCP agent's own pid in a host.
fn dhcp_agent_pid(lab: &TestLab, host: &str) -> Option<i32> {
    pid_of(lab, host, "calico-dhcp-agent")
}

/// `vm boot --network NETWORK`; the VM as the lab's state records it.
fn boot_on(lab: &TestLab, host: &str, name: &str, network: &str) -> Vm {
    let args = [
        "vm",
        "boot",
        "--host",
        host,
        "--name",
        name,
        "--network",
        network,
    ];
    let out = lab.ok(&args);
    eprintln!("{}", out.trim());
    vm_named(lab, name).unwrap_or_else(|| panic!("VM {name} not in the lab's state"))
}

/// A network of an IPv4 subnet and an IPv6 one in `mode` (address and RA mode alike).
fn network(cli: &Cli, name: &str, v4: &str, v6: &str, mode: &str) {
    cli.id(&["network", "create", name]);
    let subnet = |cidr: &str, extra: &[&str], suffix: &str| {
        let mut args = vec![
            "subnet",
            "create",
            "--network",
            name,
            "--subnet-range",
            cidr,
        ];
        args.extend_from_slice(extra);
        let subnet_name = format!("{name}-{suffix}");
        args.push(&subnet_name);
        cli.id(&args);
    };
    subnet(v4, &[], "v4");
    let v6_args = [
        "--ip-version",
        "6",
        "--ipv6-address-mode",
        mode,
        "--ipv6-ra-mode",
        mode,
    ];
    subnet(v6, &v6_args, "v6");
}

#[test]
fn vms_on_slaac_and_dhcpv6_stateless_subnets_of_one_host_boot_with_their_own_addresses_from_the_ras()
 {
    let started = Instant::now();
    let lab = openstack_lab(&[]);
    let cli = Cli::of(&lab);
    network(&cli, "net-slaac", "10.71.0.0/24", "fd00:71::/64", "slaac");
    network(
        &cli,
        "net-stateless",
        "10.72.0.0/24",
        "fd00:72::/64",
        "dhcpv6-stateless",
    );
    // `vm boot` returns once each VM's kernel has made its port's address from the RAs (no
    // DHCPv6 lease comes in these modes: waiting for one failed the boot after 60 s).
    // Both on one host: each TAP hears its own network's RAs only.
    let slaac = boot_on(&lab, "host1", "vm-a", "net-slaac");
    let stateless = boot_on(&lab, "host1", "vm-s", "net-stateless");
    for (vm, prefix) in [(&slaac, "fd00:71::/64"), (&stateless, "fd00:72::/64")] {
        let addresses = in_vm(
            vm,
            &["-6", "-o", "addr", "show", "dev", "eth0", "scope", "global"],
        );
        let global: Vec<&str> = addresses
            .lines()
            .filter_map(|l| l.split_whitespace().nth(3))
            .collect();
        assert_eq!(
            global,
            [format!("{}/64", ip6(vm))],
            "{} has not made exactly its port's address by SLAAC",
            vm.name
        );
        let on_link = in_vm(vm, &["-6", "route", "show", prefix]);
        assert_eq!(on_link, "", "{} routes {prefix} on its link", vm.name);
        let default = in_vm(vm, &["-6", "route", "show", "default"]);
        assert!(default.contains("proto ra"), "{}: {default}", vm.name);
    }
    // The stateless VM asks DHCPv6 for its options (dhclient -6 -S) beside udhcpc; the slaac
    // VM runs udhcpc only.
    let clients = |vm: &Vm| {
        netns_pids(&vm.netns)
            .iter()
            .map(|pid| std::fs::read_to_string(format!("/proc/{pid}/cmdline")).unwrap_or_default())
            .map(|c| c.replace('\0', " "))
            .collect::<Vec<_>>()
    };
    let s = clients(&stateless);
    assert!(s.iter().any(|c| c.contains("dhclient -6 -S")), "{s:?}");
    let a = clients(&slaac);
    assert!(!a.iter().any(|c| c.contains("dhclient")), "{a:?}");
    // Felix routes each /128 through its TAP: the VMs of the two networks reach each other
    // from their own addresses (the lab's default group admits its members).
    pings_address_eventually(&stateless, ip6(&slaac), WAIT);
    pings_address_eventually(&slaac, ip6(&stateless), WAIT);
    lab.ok(&["vm", "delete", "vm-a"]);
    lab.ok(&["vm", "delete", "vm-s"]);
    eprintln!("test done in {:?}", started.elapsed());
}
