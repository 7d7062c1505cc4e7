//! `calico-lab up --openstack`: a real MariaDB and neutron-server (with Calico's ML2 driver) in
//! the fabric, the real calico-neutron and a real calico-dhcp-agent per host (each under a
//! supervisor that restarts it after any end), Felix taking both `cali` and `tap` interfaces,
//! a dual-stack network; a port made through Neutron's API becomes an endpoint in etcd and the
//! host's agent starts dnsmasq for it; `down` stops the supervisors first and leaves nothing
//! behind.
//! Needs root, etcd, bird and scripts/setup-neutron.sh (neutron-server, MariaDB, dnsmasq).

mod common;

use std::time::Duration;

use calico_lab::openstack::{GATEWAY, GATEWAY6, NETWORK, SUBNET_CIDR, SUBNET6_CIDR, SUBNET6_NAME};
use calico_lab::processes::pid_alive;
use calico_testkit::eventually;
use common::TestLab;
use common::openstack::{Cli, Neutron, openstack_lab};

/// How long calico-neutron and the agent may take to act on a port.
const WAIT: Duration = Duration::from_secs(30);

/// The processes in one of the lab's namespaces, with their whole command lines.
fn commands_in(lab: &TestLab, node: &str) -> Vec<(i32, String)> {
    let pids = calico_lab::topology::netns_pids(&lab.netns(node));
    pids.into_iter()
        .filter_map(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            Some((pid, String::from_utf8_lossy(&cmdline).replace('\0', " ")))
        })
        .collect()
}

fn running(lab: &TestLab, node: &str, needle: &str) -> Result<i32, String> {
    let all = commands_in(lab, node);
    all.iter()
        .find(|(_, cmd)| cmd.contains(needle))
        .map(|(pid, _)| *pid)
        .ok_or_else(|| format!("no {needle:?} in {node}: {all:?}"))
}

/// Every process whose command line mentions `text`.
fn processes_naming(text: &str) -> Vec<(i32, String)> {
    let entries = std::fs::read_dir("/proc").expect("/proc");
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| pid_alive(pid))
        .filter_map(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            cmdline.contains(text).then_some((pid, cmdline))
        })
        .collect()
}

#[test]
fn up_openstack_runs_neutron_and_the_agents_and_down_removes_them() {
    let lab = openstack_lab(&[]);
    let openstack = lab.state().openstack.expect("the state names Neutron");
    let neutron = Neutron::of(&lab);

    // Neutron answers, with the lab's network, subnet and security group.
    let networks = neutron.call("GET", "/v2.0/networks", None);
    let network = &networks["networks"]
        .as_array()
        .expect("a list of networks")
        .iter()
        .find(|n| n["id"] == openstack.network.as_str())
        .unwrap_or_else(|| panic!("network {} not listed: {networks}", openstack.network))
        .clone();
    assert_eq!(network["name"], NETWORK);
    let subnet =
        &neutron.call("GET", &format!("/v2.0/subnets/{}", openstack.subnet), None)["subnet"];
    assert_eq!(subnet["cidr"], SUBNET_CIDR);
    assert_eq!(subnet["gateway_ip"], GATEWAY);
    assert_eq!(subnet["enable_dhcp"], true);
    let subnet6 =
        &neutron.call("GET", &format!("/v2.0/subnets/{}", openstack.subnet6), None)["subnet"];
    assert_eq!(subnet6["name"], SUBNET6_NAME);
    assert_eq!(subnet6["network_id"], openstack.network.as_str());
    assert_eq!(subnet6["cidr"], SUBNET6_CIDR);
    assert_eq!(subnet6["gateway_ip"], GATEWAY6);
    assert_eq!(subnet6["ipv6_address_mode"], "dhcpv6-stateful");
    assert_eq!(subnet6["ipv6_ra_mode"], "dhcpv6-stateful");
    let group_path = format!("/v2.0/security-groups/{}", openstack.security_group);
    let rules =
        neutron.call("GET", &group_path, None)["security_group"]["security_group_rules"].clone();
    let from_group = rules
        .as_array()
        .expect("rules")
        .iter()
        .filter(|r| {
            r["direction"] == "ingress" && r["remote_group_id"] == openstack.security_group.as_str()
        })
        .count();
    assert_eq!(
        from_group, 2,
        "ingress from the group, IPv4 and IPv6: {rules}"
    );

    // MariaDB, neutron-server and calico-neutron in the fabric; an agent in each host; the
    // services under supervisors that restart them after any end.
    for needle in [
        "mariadbd",
        "neutron-server",
        "calico-neutron --neutron-url",
        "supervise --restart always -- ",
    ] {
        running(&lab, "fabric", needle).unwrap_or_else(|e| panic!("{e}"));
    }
    for host in ["host1", "host2"] {
        let agent = format!("calico-dhcp-agent --host {host} ");
        running(&lab, host, &agent).unwrap_or_else(|e| panic!("{e}"));
        let bin_dir = std::path::Path::new(common::BIN)
            .parent()
            .expect("a directory");
        let supervisor = format!("supervise --restart always -- {}/", bin_dir.display());
        running(&lab, host, &supervisor).unwrap_or_else(|e| panic!("{e}"));
    }

    // Felix dispatches both containers' and VMs' interfaces.
    let out = lab.in_host("host1", "iptables-save", &["-t", "filter"]);
    let rules = String::from_utf8_lossy(&out.stdout);
    for prefix in ["cali+", "tap+"] {
        assert!(
            rules.contains(&format!("-i {prefix} ")) && rules.contains(&format!("-o {prefix} ")),
            "no rules for {prefix} on host1:\n{rules}"
        );
    }

    // The operator's client works with the openrc `up` wrote: it lists the lab's network.
    let cli = Cli::of(&lab);
    let names = cli.run(&["network", "list", "-f", "value", "-c", "Name"]);
    assert!(
        names.lines().any(|n| n == NETWORK),
        "openstack network list: {names}"
    );

    // The whole chain: a VM port on host1 made with the CLI → calico-neutron → etcd → host1's
    // agent → dnsmasq.
    let fixed_ip = format!("subnet={},ip-address=10.28.0.5", openstack.subnet);
    let id = cli.id(&[
        "port",
        "create",
        "--network",
        &openstack.network,
        "--host",
        "host1",
        "--device-owner",
        "compute:nova",
        "--device",
        "vm1",
        "--security-group",
        &openstack.security_group,
        "--fixed-ip",
        &fixed_ip,
        "vm1-port",
    ]);
    let id = id.as_str();
    let key = format!("/calico/v1/host/host1/workload/openstack/vm1/endpoint/{id}");
    eventually("the port as an endpoint in etcd", WAIT, || {
        let out = lab.etcdctl(&["get", &key, "--print-value-only"]);
        let value = String::from_utf8_lossy(&out.stdout);
        match value.contains("10.28.0.5/32") {
            true => Ok(()),
            false => Err(format!("{key}: {value:?}")),
        }
    });
    eventually("dnsmasq on host1", WAIT, || {
        running(&lab, "host1", "dnsmasq").map(drop)
    });

    // `down`: every process of the lab and every namespace gone.
    let mut pids: Vec<(i32, String)> = Vec::new();
    for node in ["fabric", "host1", "host2"] {
        pids.extend(commands_in(&lab, node));
    }
    let relay = lab.state().pids;
    let dir = lab.state().dir;
    lab.ok(&["down"]);
    let alive: Vec<&(i32, String)> = pids.iter().filter(|(pid, _)| pid_alive(*pid)).collect();
    assert!(alive.is_empty(), "still running after down: {alive:?}");
    // Nor was anything started again by a supervisor (the agents and dnsmasq name the lab's
    // directory on their command lines).
    let started_again = processes_naming(&format!("{}/", dir.display()));
    assert!(
        started_again.is_empty(),
        "running after down: {started_again:?}"
    );
    for pid in relay {
        assert!(!pid_alive(pid), "relay {pid} still running after down");
    }
    let names = calico_lab::sh::namespaces().expect("ip netns list");
    let left: Vec<&String> = names
        .iter()
        .filter(|n| n.starts_with(&format!("{}.", lab.name)))
        .collect();
    assert!(left.is_empty(), "namespaces left after down: {left:?}");
    let everything = pids
        .iter()
        .map(|(_, cmd)| cmd.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    for name in [
        "mariadbd",
        "neutron-server",
        "calico-neutron",
        "calico-dhcp-agent",
        "dnsmasq",
    ] {
        assert!(
            everything.contains(name),
            "{name} was not among the lab's processes"
        );
    }
}
