//! `calico-dhcp-agent` on a compute host: a real neutron-server (with Calico's ML2 driver), the
//! real `calico-neutron` writing the endpoints to a real etcd, the real agent with a real
//! dnsmasq in a host namespace, and VMs (namespaces plugged by a veth whose host end is named
//! as Nova names the TAP) getting their leases with busybox's real DHCP client.
//! Needs root, etcd, busybox and scripts/setup-neutron.sh (neutron-server, dnsmasq).

mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use calico_testkit::{EtcdServer, NetNs, eventually};
use common::SyncProcess;
use common::dhcp::{
    Agent, BUSYBOX, DHCLIENT, DNSMASQ, DnsmasqGuard, HOST, INTERFACE, Reaper, SCRIPT, Vm,
    assert_no_dnsmasq_left, dnsmasq_pid, id, require,
};
use common::forward::Forwarder;
use common::neutron::{Neutron, Options};
use serde_json::json;

#[test]
fn vms_get_their_neutron_addresses_by_dhcp_from_one_dnsmasq() {
    require(DNSMASQ, "dnsmasq-base");
    require(BUSYBOX, "busybox");
    require(DHCLIENT, "isc-dhcp-client");
    let started = Instant::now();
    // noauth, named explicitly: the agent and calico-neutron run without Keystone here.
    let neutron = Neutron::start_with(Options {
        noauth: true,
        ..Options::default()
    });
    let host = NetNs::new("dhcp-host");
    let _reaper = Reaper(host.name().to_owned());
    let etcd = EtcdServer::start_in_netns(host.name());
    let neutron_port: u16 = neutron.url.rsplit(':').next().unwrap().parse().unwrap();
    let forward = Forwarder::start(host.name(), neutron_port);
    eprintln!("neutron-server and etcd up in {:?}", started.elapsed());

    let dir = tempfile::tempdir().expect("temporary directory");
    let _dnsmasq = DnsmasqGuard(dir.path().to_owned());
    std::fs::write(dir.path().join("udhcpc.script"), SCRIPT).expect("script");
    let mode = |path: &Path, mode| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    };
    mode(&dir.path().join("udhcpc.script"), 0o755);
    // dnsmasq re-reads its hosts file as an unprivileged user after SIGHUP.
    mode(dir.path(), 0o755);

    let network = id(&neutron.create("networks", json!({"name": "vms"})));
    let subnet = neutron.create(
        "subnets",
        json!({"network_id": network, "cidr": "10.65.0.0/24", "ip_version": 4,
               "gateway_ip": "10.65.0.1", "dns_nameservers": ["192.0.2.53"],
               "host_routes": [{"destination": "192.168.0.0/16", "nexthop": "10.65.0.254"}]}),
    );
    let subnet6 = neutron.create(
        "subnets",
        json!({"network_id": network, "cidr": "2001:db8:a41:2::/64", "ip_version": 6,
               "gateway_ip": "2001:db8:a41:2::1", "dns_nameservers": ["2001:db8::53"],
               "ipv6_address_mode": "dhcpv6-stateful", "ipv6_ra_mode": "dhcpv6-stateful"}),
    );
    let port = |vm: &str, n: u8| {
        neutron.create(
            "ports",
            json!({"network_id": network, "device_owner": "compute:nova", "device_id": vm,
            "binding:host_id": HOST,
            "fixed_ips": [
                {"subnet_id": id(&subnet), "ip_address": format!("10.65.0.{n}")},
                {"subnet_id": id(&subnet6), "ip_address": format!("2001:db8:a41:2::{n}")},
            ]}),
        )
    };

    let sync_log = dir.path().join("calico-neutron.log");
    let (args, _) = neutron.sync_args();
    let _sync = SyncProcess::start_in(
        Some(host.name()),
        &etcd.endpoint(),
        &forward.url(),
        (&args, &[]),
        &sync_log,
        "60s",
    );
    let mut agent = Agent::start(
        host.name(),
        &forward.url(),
        &etcd.endpoint(),
        &dir.path().join("state"),
        &dir.path().join("agent.log"),
    );

    // 1. A VM port bound to this host: the VM gets exactly its fixed IP, the gateway as router,
    //    the DNS server and the host routes (with the default route, RFC 3442).
    let port1 = port("vm-1", 11);
    let vm1 = Vm::plug(&host, &port1);
    let mut lease = String::new();
    eventually("vm-1's lease", Duration::from_secs(30), || {
        lease = vm1.dhcp(dir.path())?;
        Ok(())
    });
    for expected in [
        "ip=10.65.0.11",
        "mask=24",
        "router=10.65.0.1",
        "dns=192.0.2.53",
        "staticroutes=192.168.0.0/16 10.65.0.254 0.0.0.0/0 10.65.0.1",
        "lease=3600",
    ] {
        assert!(
            lease.lines().any(|l| l == expected),
            "{expected} not in lease:\n{lease}"
        );
    }
    assert!(dnsmasq_pid(host.name()).is_some(), "no dnsmasq runs");
    // noauth is said, not silent.
    let log = agent.log();
    assert!(
        log.contains("requests to neutron carry no token"),
        "the agent does not say it runs without Keystone:\n{log}"
    );

    // 2. Routing to the VM is untouched by the gateway address: as Felix does, the host routes
    //    the VM's /32 through its TAP with proxy ARP; no subnet route points at the interface.
    host.run_ok(
        "ip",
        &["route", "add", "10.65.0.11/32", "dev", &vm1.tap],
        "",
    );
    host.run_ok(
        "sysctl",
        &["-qw", &format!("net.ipv4.conf.{}.proxy_arp=1", vm1.tap)],
        "",
    );
    // The network's interface: the agent's prefix and the network's number.
    let interface = format!("{INTERFACE}0");
    let routes = host.run_ok("ip", &["route", "show", "dev", &interface], "");
    assert_eq!(routes.trim(), "", "routes through {interface}: {routes}");
    let via = host.run_ok("ip", &["route", "get", "10.65.0.11"], "");
    assert!(via.contains(&format!("dev {}", vm1.tap)), "{via}");
    vm1.ns
        .run_ok("ping", &["-c", "1", "-W", "2", "10.65.0.1"], "");
    host.run_ok("ping", &["-c", "1", "-W", "2", "10.65.0.11"], "");

    // 3. DHCPv6 (dhcpv6-stateful): vm-1 gets its fixed IPv6 address and DNS server, and the
    //    router advertisements dnsmasq sends on the TAP give it a default route and no more.
    let mut lease6 = String::new();
    eventually("vm-1's DHCPv6 lease", Duration::from_secs(30), || {
        let state = std::fs::read_to_string(dir.path().join("state/hosts")).unwrap_or_default();
        lease6 = vm1
            .dhcp6(dir.path())
            .map_err(|e| format!("{e}\nhosts file:\n{state}\nagent log:\n{}", agent.log()))?;
        Ok(())
    });
    for expected in [
        "iaaddr 2001:db8:a41:2::11 {",
        "option dhcp6.name-servers 2001:db8::53;",
    ] {
        assert!(
            lease6.lines().any(|l| l.trim() == expected),
            "{expected} not in:\n{lease6}"
        );
    }
    eventually(
        "a default route from dnsmasq's RA",
        Duration::from_secs(30),
        || {
            let routes = vm1.ns.run_ok("ip", &["-6", "route", "show", "default"], "");
            match routes.contains("proto ra") {
                true => Ok(()),
                false => Err(format!("vm-1's IPv6 default routes: {routes:?}")),
            }
        },
    );
    // The RAs announce the prefix off-link: Calico routes each VM as a /128 through its TAP,
    //    so a route for the whole prefix through eth0 would make vm-1 look its peers up by
    //    neighbour discovery on its TAP, where nobody answers. (The RA that gave the default
    //    route carried the prefix: a prefix route would be there by now.)
    let prefix_routes = vm1
        .ns
        .run_ok("ip", &["-6", "route", "show", "2001:db8:a41:2::/64"], "");
    assert_eq!(
        prefix_routes.trim(),
        "",
        "vm-1 routes the subnet on-link: {prefix_routes}"
    );
    let routes6 = host.run_ok("ip", &["-6", "route", "show", "dev", &interface], "");
    assert!(
        !routes6.contains("2001:db8"),
        "IPv6 routes through {interface}: {routes6}"
    );

    // 4. A second port added later gets its lease (its TAP is one of dnsmasq's start arguments,
    //    an alias of its network's interface: dnsmasq is restarted).
    let port2 = port("vm-2", 12);
    let vm2 = Vm::plug(&host, &port2);
    eventually("vm-2's lease", Duration::from_secs(30), || {
        let lease = vm2.dhcp(dir.path())?;
        match lease.lines().any(|l| l == "ip=10.65.0.12") {
            true => Ok(()),
            false => Err(format!("wrong lease: {lease}")),
        }
    });

    // 5. A deleted port's MAC gets no lease any more.
    neutron.delete("ports", &id(&port2));
    let hosts = dir.path().join("state/hosts");
    eventually(
        "vm-2's MAC gone from the hosts file",
        Duration::from_secs(15),
        || {
            let text = std::fs::read_to_string(&hosts).unwrap_or_default();
            match text.contains(&vm2.mac) {
                true => Err(text),
                false => Ok(()),
            }
        },
    );
    // Give dnsmasq the moment it takes to handle SIGHUP (the file is renamed before the signal).
    eventually(
        "dnsmasq to refuse vm-2",
        Duration::from_secs(10),
        || match vm2.dhcp(dir.path()) {
            Ok(lease) => Err(format!("still leased: {lease}")),
            Err(_) => Ok(()),
        },
    );
    let pid = dnsmasq_pid(host.name()).expect("dnsmasq runs");

    // 6. dnsmasq killed: the agent starts another, which serves vm-1 again.
    Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .expect("kill");
    eventually(
        "a new dnsmasq",
        Duration::from_secs(10),
        || match dnsmasq_pid(host.name()) {
            Some(new) if new != pid => Ok(()),
            other => Err(format!("dnsmasq pid {other:?}")),
        },
    );
    eventually(
        "vm-1's lease from the new dnsmasq",
        Duration::from_secs(20),
        || vm1.dhcp(dir.path()).map(drop),
    );

    // 7. The agent killed (SIGKILL): its dnsmasq keeps serving; the next agent replaces it with
    //    exactly one of its own, found through the pid file.
    let orphan = dnsmasq_pid(host.name()).expect("dnsmasq runs");
    agent.kill();
    vm1.dhcp(dir.path())
        .expect("vm-1 served while no agent runs");
    agent = Agent::start(
        host.name(),
        &forward.url(),
        &etcd.endpoint(),
        &dir.path().join("state"),
        &dir.path().join("agent2.log"),
    );
    eventually(
        "the new agent's dnsmasq",
        Duration::from_secs(15),
        || match dnsmasq_pid(host.name()) {
            Some(new) if new != orphan => Ok(()),
            other => Err(format!("dnsmasq pid {other:?}\n{}", agent.log())),
        },
    );
    eventually(
        "vm-1's lease from the new agent",
        Duration::from_secs(20),
        || vm1.dhcp(dir.path()).map(drop),
    );
    let log = agent.log();
    assert!(
        log.contains("stopping the dnsmasq a previous run left behind"),
        "{log}"
    );

    // 8. The agent stopped cleanly: dnsmasq goes with it.
    let status = agent.terminate();
    assert!(status.success(), "agent exited {status}:\n{}", agent.log());
    assert_eq!(dnsmasq_pid(host.name()), None, "dnsmasq outlived the agent");
    drop(agent);
    assert_no_dnsmasq_left(dir.path());
    eprintln!("test done in {:?}", started.elapsed());
}
