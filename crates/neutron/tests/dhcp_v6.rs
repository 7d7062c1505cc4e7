//! `calico-dhcp-agent` for the IPv6 modes a VM configures itself in, and the names Neutron
//! gives ports: a real neutron-server (DNS integration on), the real `calico-neutron` and a real
//! etcd, and two compute hosts (namespaces, each with its own agent and dnsmasq): one serves a
//! network with a `dhcpv6-stateless` subnet, the other one with a `slaac` subnet, each beside an
//! IPv4 subnet. Each VM's own
//! kernel autoconfigures its address from the router advertisements; ISC `dhclient -6 -S`
//! (stateless: an Information-Request) gets the DNS server and domain; busybox `udhcpc` gets the
//! host name and domain; busybox `nslookup` asks the host's dnsmasq for the VM's name.
//! Needs root, etcd, busybox and scripts/setup-neutron.sh (neutron-server, dnsmasq, dhclient).

mod common;

use std::net::{IpAddr, Ipv6Addr};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use calico_testkit::{EtcdServer, NetNs, eventually};
use common::SyncProcess;
use common::dhcp::{
    Agent, BUSYBOX, DHCLIENT, DNSMASQ, DnsmasqGuard, Reaper, SCRIPT, Vm, assert_no_dnsmasq_left,
    id, require,
};
use common::forward::Forwarder;
use common::neutron::{Neutron, Options};
use serde_json::{Value, json};

/// What `dhclient -6 -S` hears: the variables its script is given, written to `file` (dhclient
/// gives its script an environment of its own, so the path is in the script).
fn info_script(file: &Path) -> String {
    format!(
        "#!/bin/sh\nenv | grep -E '^new_dhcp6_' | sort >> '{}'\nexit 0\n",
        file.display()
    )
}

/// A compute host: its namespace, the agent and the forwarders to etcd and Neutron. Fields
/// drop in order: the agent stops (and its dnsmasq with it), then what is left in the
/// namespace is killed, then the namespace goes (a reaper after it would find no namespace of
/// that name and leave dnsmasq running).
struct Host {
    agent: Agent,
    _reaper: Reaper,
    ns: NetNs,
    _forwards: [Forwarder; 2],
}

impl Host {
    fn start(name: &str, neutron: &Neutron, etcd: &EtcdServer, dir: &Path) -> Host {
        let ns = NetNs::new("dhcp6-host");
        let reaper = Reaper(ns.name().to_owned());
        let port = |url: &str| url.rsplit(':').next().unwrap().parse::<u16>().unwrap();
        let to_neutron = Forwarder::start(ns.name(), port(&neutron.url));
        let to_etcd = Forwarder::start(ns.name(), port(&etcd.endpoint()));
        let agent = Agent::start_as(
            name,
            ns.name(),
            &to_neutron.url(),
            &to_etcd.url(),
            &dir.join(format!("{name}-state")),
            &dir.join(format!("{name}.log")),
        );
        Host {
            agent,
            _reaper: reaper,
            ns,
            _forwards: [to_neutron, to_etcd],
        }
    }

    /// Routes the VM's IPv4 address through its TAP with proxy ARP, as Felix does (so that
    /// dnsmasq's DNS answers reach it).
    fn route(&self, vm: &Vm, address: &str) {
        let ns = &self.ns;
        ns.run_ok(
            "ip",
            &["route", "add", &format!("{address}/32"), "dev", &vm.tap],
            "",
        );
        let proxy = format!("net.ipv4.conf.{}.proxy_arp=1", vm.tap);
        ns.run_ok("sysctl", &["-qw", &proxy], "");
    }
}

/// The port's fixed IPs as Neutron gave them.
fn fixed_ips(port: &Value) -> Vec<IpAddr> {
    port["fixed_ips"]
        .as_array()
        .expect("fixed_ips")
        .iter()
        .filter_map(|f| f["ip_address"].as_str()?.parse().ok())
        .collect()
}

fn v6(port: &Value) -> Ipv6Addr {
    fixed_ips(port)
        .into_iter()
        .find_map(|a| match a {
            IpAddr::V6(a) => Some(a),
            IpAddr::V4(_) => None,
        })
        .expect("an IPv6 fixed IP")
}

fn v4(port: &Value) -> String {
    fixed_ips(port)
        .into_iter()
        .find(IpAddr::is_ipv4)
        .expect("an IPv4 fixed IP")
        .to_string()
}

/// The VM's global IPv6 addresses once none is tentative (duplicate address detection done).
fn global_v6(vm: &Vm) -> Result<Vec<String>, String> {
    let out = vm.ns.run_ok(
        "ip",
        &["-6", "-o", "addr", "show", "dev", "eth0", "scope", "global"],
        "",
    );
    if out.contains("tentative") {
        return Err(format!("still tentative: {out}"));
    }
    Ok(out
        .lines()
        .filter_map(|l| l.split_whitespace().nth(3).map(str::to_owned))
        .collect())
}

/// The VM autoconfigures exactly its port's address (the EUI-64 of its MAC Neutron computed),
/// with the prefix off-link and a default route from the RA.
fn autoconfigures_exactly(vm: &Vm, port: &Value, prefix: &str, agent: &Agent) {
    let wanted = format!("{}/64", v6(port));
    eventually(
        &format!("{}'s SLAAC address", vm.ns.name()),
        Duration::from_secs(30),
        || {
            let addresses = global_v6(vm)?;
            match addresses == [wanted.clone()] {
                true => Ok(()),
                false => Err(format!(
                    "{addresses:?}, wanted [{wanted}]\nagent:\n{}",
                    agent.log()
                )),
            }
        },
    );
    let on_link = vm.ns.run_ok("ip", &["-6", "route", "show", prefix], "");
    assert_eq!(
        on_link.trim(),
        "",
        "{} routes {prefix} on its link",
        vm.ns.name()
    );
    let default = vm.ns.run_ok("ip", &["-6", "route", "show", "default"], "");
    assert!(
        default.contains("proto ra"),
        "no default route by RA: {default:?}"
    );
}

/// One Information-Request (`dhclient -6 -S -1`) from the VM: the variables its script heard.
fn information(vm: &Vm, dir: &Path, info_file: &Path) -> String {
    let _ = std::fs::remove_file(info_file);
    let name = vm.ns.name();
    let (pid, leases) = (
        dir.join(format!("{name}.pid")),
        dir.join(format!("{name}.leases")),
    );
    let _ = Command::new("timeout")
        .args([
            "15", "ip", "netns", "exec", name, DHCLIENT, "-6", "-S", "-1",
        ])
        .arg("-sf")
        .arg(dir.join("info.script"))
        .arg("-lf")
        .arg(&leases)
        .arg("-pf")
        .arg(&pid)
        .arg("eth0")
        .output();
    let _ = Command::new("ip")
        .args(["netns", "exec", name, DHCLIENT, "-6", "-x", "-pf"])
        .arg(&pid)
        .output();
    std::fs::read_to_string(info_file).unwrap_or_default()
}

/// `nslookup NAME SERVER` in the VM: busybox's output.
fn nslookup(vm: &Vm, args: &[&str]) -> String {
    let out = Command::new("ip")
        .args(["netns", "exec", vm.ns.name(), BUSYBOX, "nslookup"])
        .args(args)
        .output()
        .expect("nslookup runs");
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

#[test]
fn stateless_and_slaac_vms_configure_their_ports_addresses_and_ports_have_their_names() {
    require(DNSMASQ, "dnsmasq-base");
    require(BUSYBOX, "busybox");
    require(DHCLIENT, "isc-dhcp-client");
    let neutron = Neutron::start_with(Options {
        noauth: true,
        ..Options::default()
    });
    let etcd = EtcdServer::start();
    let dir = tempfile::tempdir().expect("temporary directory");
    let _dnsmasq = DnsmasqGuard(dir.path().to_owned());
    let mode = |path: &Path, mode| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    };
    // dnsmasq re-reads its files as an unprivileged user after SIGHUP.
    mode(dir.path(), 0o755);
    let info_file = dir.path().join("info.env");
    for (name, text) in [
        ("udhcpc.script", SCRIPT.to_owned()),
        ("info.script", info_script(&info_file)),
    ] {
        std::fs::write(dir.path().join(name), text).expect("script");
        mode(&dir.path().join(name), 0o755);
    }

    // Two networks (Neutron gives every port an address in each SLAAC or stateless subnet of
    // its network): an IPv4 subnet without DNS servers (the agent's dnsmasq is then the VMs'
    // DNS server, answering their names) beside a dhcpv6-stateless one, and beside a slaac one.
    let Networks {
        net_s,
        subnet_s4,
        net_a,
        subnet_a4,
    } = two_networks(
        &neutron,
        ["10.66.0", "2001:db8:51", "2001:db8::53"],
        ["10.67.0", "2001:db8:5a", "2001:db8::54"],
    );
    let port = |host: &str, vm: &str, dns_name: &str, network: &str, subnet4: &str| {
        neutron.create(
            "ports",
            json!({"network_id": network, "device_owner": "compute:nova", "device_id": vm,
                   "binding:host_id": host, "dns_name": dns_name,
                   "fixed_ips": [{"subnet_id": subnet4}]}),
        )
    };
    let web = port("compute-s", "vm-s", "web-1", &net_s, &subnet_s4);
    let db = port("compute-a", "vm-a", "db-1", &net_a, &subnet_a4);
    // Neutron computed each IPv6 address from the MAC (EUI-64) and names the port in its domain.
    assert_eq!(web["dns_assignment"][0]["hostname"], "web-1", "{web}");
    let fqdn = web["dns_assignment"][0]["fqdn"]
        .as_str()
        .expect("fqdn")
        .to_owned();
    let domain = fqdn
        .strip_prefix("web-1.")
        .expect("web-1's domain")
        .trim_end_matches('.');

    let _sync = SyncProcess::start(
        &etcd.endpoint(),
        &neutron,
        &dir.path().join("sync.log"),
        "60s",
    );
    let host_s = Host::start("compute-s", &neutron, &etcd, dir.path());
    let host_a = Host::start("compute-a", &neutron, &etcd, dir.path());
    let vm_s = Vm::plug(&host_s.ns, &web);
    let vm_a = Vm::plug(&host_a.ns, &db);

    // 1. dhcpv6-stateless: the VM's kernel makes exactly the port's address from the RA, the
    //    prefix off-link; an Information-Request gets the subnet's DNS server and the domain.
    autoconfigures_exactly(&vm_s, &web, "2001:db8:51::/64", &host_s.agent);
    eventually("vm-s's DHCPv6 information", Duration::from_secs(30), || {
        let info = information(&vm_s, dir.path(), &info_file);
        let servers = info
            .lines()
            .any(|l| l == "new_dhcp6_name_servers=2001:db8::53");
        let search = info
            .lines()
            .any(|l| l == format!("new_dhcp6_domain_search={domain}."));
        match servers && search {
            true => Ok(()),
            false => Err(format!(
                "dhclient heard: {info:?}\nagent:\n{}",
                host_s.agent.log()
            )),
        }
    });

    // 2. Names: the lease carries the port's host name and domain, the DNS server is the
    //    agent's dnsmasq, which answers the name with the port's IPv4 and (SLAAC) IPv6 address.
    let mut lease = String::new();
    eventually("vm-s's lease", Duration::from_secs(30), || {
        lease = vm_s.dhcp(dir.path())?;
        Ok(())
    });
    for expected in [
        format!("ip={}", v4(&web)),
        "hostname=web-1".to_owned(),
        format!("domain={domain}"),
        "dns=10.66.0.1".to_owned(),
    ] {
        assert!(
            lease.lines().any(|l| l == expected),
            "{expected} not in lease:\n{lease}"
        );
    }
    host_s.route(&vm_s, &v4(&web));
    let name = format!("web-1.{domain}");
    let answer = nslookup(&vm_s, &[&name, "10.66.0.1"]);
    assert!(
        answer.contains(&format!("Address: {}", v4(&web))),
        "{answer}"
    );
    let answer = nslookup(&vm_s, &["-type=AAAA", &name, "10.66.0.1"]);
    assert!(
        answer.contains(&format!("Address: {}", v6(&web))),
        "{answer}"
    );
    // Nothing else is answered (no upstream).
    let answer = nslookup(&vm_s, &["example.com", "10.66.0.1"]);
    assert!(!answer.contains("Address: 9"), "{answer}");

    // 3. slaac: exactly the port's address again (nothing from the stateless subnet, which
    //    this host does not serve), the prefix off-link; its name answered by its host.
    autoconfigures_exactly(&vm_a, &db, "2001:db8:5a::/64", &host_a.agent);
    eventually("vm-a's lease", Duration::from_secs(30), || {
        vm_a.dhcp(dir.path()).map(drop)
    });
    host_a.route(&vm_a, &v4(&db));
    let answer = nslookup(
        &vm_a,
        &["-type=AAAA", &format!("db-1.{domain}"), "10.67.0.1"],
    );
    assert!(
        answer.contains(&format!("Address: {}", v6(&db))),
        "{answer}"
    );

    // 4. Nothing is left running: the VMs and hosts gone, no dnsmasq of this test's agents.
    drop((vm_s, vm_a, host_s, host_a));
    assert_no_dnsmasq_left(dir.path());
}

/// A `ping -6` from the VM to `to` (its source the VM's own address, the only global one).
fn ping6(vm: &Vm, to: Ipv6Addr) -> Result<(), String> {
    let out = Command::new("ip")
        .args(["netns", "exec", vm.ns.name(), "ping", "-6", "-c1", "-W1"])
        .arg(to.to_string())
        .output()
        .expect("ping runs");
    match out.status.success() {
        true => Ok(()),
        false => Err(String::from_utf8_lossy(&out.stdout).into_owned()),
    }
}

#[test]
fn vms_of_two_networks_on_one_host_hear_only_their_own_network() {
    require(DNSMASQ, "dnsmasq-base");
    require(BUSYBOX, "busybox");
    require(DHCLIENT, "isc-dhcp-client");
    let neutron = Neutron::start_with(Options {
        noauth: true,
        ..Options::default()
    });
    let etcd = EtcdServer::start();
    let dir = tempfile::tempdir().expect("temporary directory");
    let _dnsmasq = DnsmasqGuard(dir.path().to_owned());
    let mode = |path: &Path, mode| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    };
    mode(dir.path(), 0o755);
    let info_file = dir.path().join("info.env");
    std::fs::write(dir.path().join("info.script"), info_script(&info_file)).expect("script");
    mode(&dir.path().join("info.script"), 0o755);

    // A dhcpv6-stateless network and a slaac one, each with its own DNS server, both served by
    // one host.
    let Networks {
        net_s,
        subnet_s4,
        net_a,
        subnet_a4,
    } = two_networks(
        &neutron,
        ["10.68.0", "2001:db8:61", "2001:db8:61::53"],
        ["10.69.0", "2001:db8:6a", "2001:db8:6a::53"],
    );
    let port = |vm: &str, dns_name: &str, network: &str, subnet4: &str| {
        neutron.create(
            "ports",
            json!({"network_id": network, "device_owner": "compute:nova", "device_id": vm,
                   "binding:host_id": "compute-1", "dns_name": dns_name,
                   "fixed_ips": [{"subnet_id": subnet4}]}),
        )
    };
    let web = port("vm-s", "web-2", &net_s, &subnet_s4);
    let db = port("vm-a", "db-2", &net_a, &subnet_a4);
    let fqdn = web["dns_assignment"][0]["fqdn"].as_str().expect("fqdn");
    let domain = fqdn
        .strip_prefix("web-2.")
        .expect("web-2's domain")
        .to_owned();

    let _sync = SyncProcess::start(
        &etcd.endpoint(),
        &neutron,
        &dir.path().join("sync.log"),
        "60s",
    );
    let host = Host::start("compute-1", &neutron, &etcd, dir.path());
    let vm_s = Vm::plug(&host.ns, &web);
    let vm_a = Vm::plug(&host.ns, &db);

    // 1. Each VM makes exactly its own port's address: no address of the other network's
    //    prefix from the host's RAs.
    autoconfigures_exactly(&vm_s, &web, "2001:db8:61::/64", &host.agent);
    autoconfigures_exactly(&vm_a, &db, "2001:db8:6a::/64", &host.agent);

    // 2. The stateless VM's Information-Request gets its own subnet's DNS server and domain,
    //    and nothing of the other network's.
    eventually("vm-s's DHCPv6 information", Duration::from_secs(30), || {
        let info = information(&vm_s, dir.path(), &info_file);
        let lines: Vec<&str> = info.lines().collect();
        let servers = lines.contains(&"new_dhcp6_name_servers=2001:db8:61::53");
        let search = lines.contains(&format!("new_dhcp6_domain_search={domain}").as_str());
        match servers && search {
            true => Ok(()),
            false => Err(format!(
                "dhclient heard: {info:?}\nagent:\n{}",
                host.agent.log()
            )),
        }
    });

    // 3. Routed as Felix routes them (a /128 through each TAP, the host forwarding), each VM
    //    pings the other network's VM from its own address.
    host.ns
        .run_ok("sysctl", &["-qw", "net.ipv6.conf.all.forwarding=1"], "");
    for (vm, port) in [(&vm_s, &web), (&vm_a, &db)] {
        let dest = format!("{}/128", v6(port));
        host.ns
            .run_ok("ip", &["-6", "route", "add", &dest, "dev", &vm.tap], "");
    }
    eventually("vm-s to ping vm-a", Duration::from_secs(20), || {
        ping6(&vm_s, v6(&db))
    });
    eventually("vm-a to ping vm-s", Duration::from_secs(20), || {
        ping6(&vm_a, v6(&web))
    });
    // Still only their own addresses (periodic RAs came meanwhile).
    assert_eq!(global_v6(&vm_s), Ok(vec![format!("{}/64", v6(&web))]));
    assert_eq!(global_v6(&vm_a), Ok(vec![format!("{}/64", v6(&db))]));

    drop((vm_s, vm_a, host));
    assert_no_dnsmasq_left(dir.path());
}

/// The networks [`two_networks`] made, and their IPv4 subnets.
struct Networks {
    net_s: String,
    subnet_s4: String,
    net_a: String,
    subnet_a4: String,
}

/// A dhcpv6-stateless network and a slaac one, each with an IPv4 /24 and an IPv6 /64 with its
/// own DNS server: `[IPv4 /24 without ".0", IPv6 /64 without "::", DNS server]` for each.
fn two_networks(neutron: &Neutron, stateless: [&str; 3], slaac: [&str; 3]) -> Networks {
    let network = |name: &str, [v4, v6, dns]: [&str; 3], mode: &str| {
        let net = id(&neutron.create("networks", json!({"name": name})));
        let subnet = |fields: Value| {
            let mut fields = fields;
            fields["network_id"] = json!(net);
            id(&neutron.create("subnets", fields))
        };
        let subnet4 = subnet(
            json!({"cidr": format!("{v4}.0/24"), "ip_version": 4, "gateway_ip": format!("{v4}.1")}),
        );
        subnet(json!({"cidr": format!("{v6}::/64"), "ip_version": 6,
            "gateway_ip": format!("{v6}::1"), "dns_nameservers": [dns],
            "ipv6_address_mode": mode, "ipv6_ra_mode": mode}));
        (net, subnet4)
    };
    let (net_s, subnet_s4) = network("stateless", stateless, "dhcpv6-stateless");
    let (net_a, subnet_a4) = network("slaac", slaac, "slaac");
    Networks {
        net_s,
        subnet_s4,
        net_a,
        subnet_a4,
    }
}
