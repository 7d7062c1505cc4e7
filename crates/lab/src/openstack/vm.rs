//! `vm boot` and `vm delete` on an `up --openstack` lab: what Nova's VIF plugging does. A port
//! is made through Neutron's API, bound to the host (`binding:host_id`, `device_owner`
//! `compute:nova`); a "VM" namespace `<lab>.<host>.<vm>` is plugged by a veth whose host end is
//! named as Nova names the TAP (`tap` + the port id's first 11 characters) and whose `eth0`
//! carries the port's MAC; busybox's udhcpc in the VM asks the host's DHCP agent (dnsmasq) for
//! its address, as a VM's guest would. When the port has an IPv6 address too (the network has
//! an IPv6 subnet), the VM is dual-stack as Calico's docs configure a guest, as its subnet's
//! `ipv6_address_mode` says: `dhcpv6-stateful`, ISC `dhclient -6` gets the address by DHCPv6
//! and puts it on `eth0` as a /128; `slaac` and `dhcpv6-stateless`, the VM's kernel makes it
//! from the router advertisements (and, stateless, `dhclient -6 -S` gets the DNS options). The
//! router advertisements of the host's dnsmasq (prefix off-link) give it a default route to its
//! TAP.
//!
//! ```text
//!  vm boot ── POST /v2.0/ports ──▶ neutron-server ◀── calico-neutron ──▶ etcd ──▶ Felix (route, tap)
//!     │                                                               └──▶ dhcp agent (dnsmasq)
//!     └── netns <lab>.<host>.<vm>: eth0 ◀─veth─▶ tapXXXXXXXXXXX; udhcpc, dhclient -6 ◀── DHCP, RA ──┘
//! ```
//!
//! The VMs are kept in the lab's state (`Lab.openstack.vms`); `down` removes their namespaces
//! and DHCP clients with the rest of the lab's namespaces.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use calico_openstack::client::Client;
use calico_openstack::error::NeutronError;
use serde_json::{Value, json};

pub use super::{DHCLIENT, openstack_of};
use crate::poll::poll;
use crate::processes::{self, stop_pids};
use crate::sh;
pub use crate::state::Vm;
use crate::state::{Lab, OpenStack, check_name};
use crate::topology::{add_netns, delete_netns, netns_pids};

/// The DHCP client run in each VM.
pub const BUSYBOX: &str = "/usr/bin/busybox";
/// How long a VM may take to get its address (the port reaches etcd, the agent, dnsmasq).
pub const BOOT_LIMIT: Duration = Duration::from_secs(60);

/// What udhcpc runs on a lease: the address, the router and the classless routes, as a guest's
/// network scripts apply them.
const SCRIPT: &str = r#"#!/bin/sh
case "$1" in
  deconfig)
    ip -4 addr flush dev "$interface"
    ;;
  bound|renew)
    ip -4 addr flush dev "$interface"
    ip addr add "$ip/$mask" dev "$interface"
    [ -n "$router" ] && ip route replace default via "${router%% *}" dev "$interface"
    set -- $staticroutes
    while [ $# -ge 2 ]; do
      ip route replace "$1" via "$2" dev "$interface"
      shift 2
    done
    ;;
esac
exit 0
"#;

/// What `dhclient -6` runs: the address it was given, with the prefix length it passes (128, its
/// default, as Calico's docs configure a guest: the subnet is not on the VM's link).
const SCRIPT6: &str = r#"#!/bin/sh
case "$reason" in
  BOUND6|RENEW6|REBIND6|REBOOT6)
    if [ -n "$old_ip6_address" ] && [ "$old_ip6_address" != "$new_ip6_address" ]; then
      ip -6 addr del "$old_ip6_address/$old_ip6_prefixlen" dev "$interface"
    fi
    ip -6 addr replace "$new_ip6_address/$new_ip6_prefixlen" dev "$interface"
    ;;
  EXPIRE6|RELEASE6|STOP6)
    [ -n "$old_ip6_address" ] && ip -6 addr del "$old_ip6_address/$old_ip6_prefixlen" dev "$interface"
    ;;
esac
exit 0
"#;

/// What `vm boot` is given.
#[derive(Debug, Clone, Default)]
pub struct VmSpec {
    pub host: String,
    pub name: String,
    /// A network's id or name; the lab's network when `None`.
    pub network: Option<String>,
    /// Security groups' ids or names; the lab's default group when empty.
    pub security_groups: Vec<String>,
    /// A port made beforehand (`openstack port create`), by id or name: bound to the host and
    /// plugged instead of a new one.
    pub port: Option<String>,
}

/// `vm` and the first number no VM of the lab has.
pub fn next_name(lab: &Lab) -> String {
    let vms = lab
        .openstack
        .as_ref()
        .map(|o| o.vms.as_slice())
        .unwrap_or_default();
    (1..)
        .map(|n| format!("vm{n}"))
        .find(|name| vms.iter().all(|vm| &vm.name != name))
        .expect("a free name")
}

/// Boots a VM: the port, the namespace and TAP, udhcpc; returns when the VM has the port's
/// address. If anything fails, what was made is removed again.
pub async fn boot(lab: &mut Lab, spec: &VmSpec) -> anyhow::Result<Vm> {
    let openstack = openstack_of(lab)?.clone();
    check_name("--name", &spec.name)?;
    let host = lab.host(&spec.host).context("--host")?.clone();
    if let Some(vm) = openstack.vms.iter().find(|vm| vm.name == spec.name) {
        bail!(
            "--name {:?}: a VM of that name is on {}",
            spec.name,
            vm.host
        );
    }
    sh::require(&["ip"])?;
    if !Path::new(BUSYBOX).is_file() {
        bail!("{BUSYBOX} is missing: install busybox (the VMs' DHCP client)");
    }
    let client = openstack.client()?;
    let (port, made) = match &spec.port {
        Some(given) => (bind_port(&client, &host.name, spec, given).await?, false),
        None => {
            let (network, groups) = resolve(&client, &openstack, spec).await?;
            let port = create_port(&client, &host.name, &spec.name, &network, &groups).await?;
            (port, true)
        }
    };
    let mut vm = vm_of(lab, &host.name, &spec.name, &port)?;
    vm.port_made = made;
    let plugged = match v6_mode(&client, &port).await {
        Ok(mode) => plug(lab, &vm, &host.netns, mode).await,
        Err(error) => Err(error),
    };
    if let Err(error) = plugged {
        let _ = unplug(&client, &vm).await;
        return Err(error.context(format!("booting VM {:?} failed; it was removed", vm.name)));
    }
    let openstack = lab
        .openstack
        .as_mut()
        .context("the lab lost its OpenStack")?;
    openstack.vms.push(vm.clone());
    lab.save()?;
    Ok(vm)
}

/// The network's id and the groups' ids `spec` names (by id or name), or the lab's.
async fn resolve(
    client: &Client,
    openstack: &OpenStack,
    spec: &VmSpec,
) -> anyhow::Result<(String, Vec<String>)> {
    let network = match &spec.network {
        Some(given) => find(client, "networks", "--network", given).await?,
        None => openstack.network.clone(),
    };
    let mut groups = Vec::new();
    for given in &spec.security_groups {
        groups.push(find(client, "security-groups", "--security-group", given).await?);
    }
    if groups.is_empty() {
        groups.push(openstack.security_group.clone());
    }
    Ok((network, groups))
}

/// Deletes a VM: its port in Neutron, its udhcpc, namespace and TAP.
pub async fn delete(lab: &mut Lab, name: &str) -> anyhow::Result<()> {
    let openstack = openstack_of(lab)?;
    let Some(vm) = openstack.vms.iter().find(|vm| vm.name == name).cloned() else {
        let names: Vec<&str> = openstack.vms.iter().map(|vm| vm.name.as_str()).collect();
        bail!(
            "no VM {name:?} in lab {:?}; VMs: {}",
            lab.name,
            names.join(", ")
        );
    };
    let client = openstack.client()?;
    unplug(&client, &vm).await?;
    if let Some(openstack) = lab.openstack.as_mut() {
        openstack.vms.retain(|vm| vm.name != name);
    }
    lab.save()
}

/// An object of `collection` by id or by name (one of that name); its id.
async fn find(
    client: &Client,
    collection: &str,
    flag: &str,
    given: &str,
) -> anyhow::Result<String> {
    let path = format!("/v2.0/{collection}");
    let answer = client.call("GET", &path, None).await?;
    let key = collection.replace('-', "_");
    let objects = answer[&key].as_array().cloned().unwrap_or_default();
    let by_id = objects.iter().find(|o| o["id"] == given);
    let by_name: Vec<&Value> = objects.iter().filter(|o| o["name"] == given).collect();
    let found = match (by_id, by_name.as_slice()) {
        (Some(object), _) | (None, &[object]) => object,
        (None, []) => bail!("{flag} {given:?}: Neutron has no such {}", singular(&key)),
        (None, _) => bail!("{flag} {given:?}: several {key} have that name; give the id"),
    };
    found["id"]
        .as_str()
        .map(str::to_owned)
        .with_context(|| format!("{flag} {given:?}: Neutron's answer has no id: {found}"))
}

fn singular(key: &str) -> String {
    key.trim_end_matches('s').replace('_', " ")
}

/// A port made beforehand, bound to `host` and given to the VM as Nova binds a port it is
/// given (`binding:host_id`, `device_owner` `compute:nova`, `device_id`); refused when another
/// device has it, or with `--network` / `--security-group` (the port has its own).
async fn bind_port(
    client: &Client,
    host: &str,
    spec: &VmSpec,
    given: &str,
) -> anyhow::Result<Value> {
    if spec.network.is_some() || !spec.security_groups.is_empty() {
        bail!(
            "--port {given:?}: the port has its network and security groups already; leave out \
             --network and --security-group (change them with `openstack port set`)"
        );
    }
    let id = find(client, "ports", "--port", given).await?;
    let path = format!("/v2.0/ports/{id}");
    let port = client.call("GET", &path, None).await?["port"].clone();
    let device = port["device_id"].as_str().unwrap_or_default();
    if !device.is_empty() && device != spec.name {
        bail!("--port {given:?}: the port belongs to device {device:?} already");
    }
    let body = json!({ "port": {
        "device_owner": "compute:nova", "device_id": spec.name, "binding:host_id": host,
    }});
    let answer = client
        .call("PUT", &path, Some(&body))
        .await
        .with_context(|| format!("cannot bind port {id} to {host}"))?;
    Ok(answer["port"].clone())
}

/// The port Nova would make: bound to `host`, owned by the VM.
async fn create_port(
    client: &Client,
    host: &str,
    vm: &str,
    network: &str,
    groups: &[String],
) -> anyhow::Result<Value> {
    let body = json!({ "port": {
        "network_id": network, "name": vm,
        "device_owner": "compute:nova", "device_id": vm, "binding:host_id": host,
        "security_groups": groups,
    }});
    let answer = client
        .call("POST", "/v2.0/ports", Some(&body))
        .await
        .with_context(|| format!("cannot create VM {vm:?}'s port through Neutron"))?;
    Ok(answer["port"].clone())
}

/// The VM a port describes (its first IPv4 fixed IP is the VM's address, its first IPv6 one
/// the VM's IPv6 address).
fn vm_of(lab: &Lab, host: &str, name: &str, port: &Value) -> anyhow::Result<Vm> {
    let field = |name: &str| {
        port[name]
            .as_str()
            .map(str::to_owned)
            .with_context(|| format!("Neutron's port has no {name}: {port}"))
    };
    let id = field("id")?;
    let fixed_ips = || {
        port["fixed_ips"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|f| f["ip_address"].as_str())
    };
    let ip = fixed_ips()
        .find_map(|text| text.parse::<Ipv4Addr>().ok())
        .with_context(|| format!("port {id} has no IPv4 fixed IP: {port}"))?;
    let ip6 = fixed_ips().find_map(|text| text.parse::<Ipv6Addr>().ok());
    Ok(Vm {
        name: name.to_owned(),
        host: host.to_owned(),
        netns: format!("{}.{host}.{name}", lab.name),
        tap: format!("tap{}", id.get(..11).unwrap_or(&id)),
        mac: field("mac_address")?,
        port: id,
        ip,
        ip6,
        device_id: name.to_owned(),
        port_made: true,
    })
}

/// How the VM gets its IPv6 address: its subnet's `ipv6_address_mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum V6Mode {
    /// `dhcpv6-stateful`: a DHCPv6 lease (`dhclient -6`), put on `eth0` as a /128.
    Stateful,
    /// `dhcpv6-stateless`: the address from the router advertisements (SLAAC), the DNS
    /// options by DHCPv6 (`dhclient -6 -S`).
    Stateless,
    /// `slaac`: the address from the router advertisements only.
    Slaac,
}

impl V6Mode {
    fn of(subnet: &Value) -> anyhow::Result<V6Mode> {
        let id = subnet["id"].as_str().unwrap_or_default();
        match subnet["ipv6_address_mode"].as_str() {
            Some("dhcpv6-stateful") => Ok(V6Mode::Stateful),
            Some("dhcpv6-stateless") => Ok(V6Mode::Stateless),
            Some("slaac") => Ok(V6Mode::Slaac),
            None => bail!(
                "subnet {id} has no ipv6_address_mode: no DHCP agent serves its addresses; give it \
                 one (openstack subnet set --ipv6-address-mode ..., or a new subnet), or boot the \
                 VM on a network without it"
            ),
            Some(other) => bail!("subnet {id}: ipv6_address_mode {other:?} is not known"),
        }
    }
}

/// The mode of the subnet of the port's first IPv6 fixed IP (the VM's `ip6`), if it has one.
async fn v6_mode(client: &Client, port: &Value) -> anyhow::Result<Option<V6Mode>> {
    let fixed_ips = port["fixed_ips"].as_array().into_iter().flatten();
    let subnet = fixed_ips
        .filter(|f| {
            f["ip_address"]
                .as_str()
                .is_some_and(|a| a.parse::<Ipv6Addr>().is_ok())
        })
        .find_map(|f| f["subnet_id"].as_str());
    let Some(subnet) = subnet else {
        return Ok(None);
    };
    let path = format!("/v2.0/subnets/{subnet}");
    let answer = client
        .call("GET", &path, None)
        .await
        .with_context(|| format!("cannot read the VM's IPv6 subnet {subnet} from Neutron"))?;
    V6Mode::of(&answer["subnet"]).map(Some)
}

/// The namespace, the veth (TAP on the host, `eth0` with the port's MAC in the VM), the DHCP
/// clients; waits until `eth0` has the port's addresses (and, for IPv6, a default route).
async fn plug(lab: &Lab, vm: &Vm, host_ns: &str, mode: Option<V6Mode>) -> anyhow::Result<()> {
    add_netns(&vm.netns)?;
    let (tap, ns) = (vm.tap.as_str(), vm.netns.as_str());
    sh::ip(&[
        "-n", host_ns, "link", "add", tap, "type", "veth", "peer", "name", "eth0", "netns", ns,
    ])?;
    sh::ip(&["-n", ns, "link", "set", "eth0", "address", &vm.mac])?;
    sh::ip(&["-n", ns, "link", "set", "eth0", "up"])?;
    sh::ip(&["-n", host_ns, "link", "set", tap, "up"])?;
    dhcp4(lab, vm).await?;
    match (vm.ip6, mode) {
        (Some(ip6), Some(V6Mode::Stateful)) => dhcp6(lab, vm, ip6).await?,
        (Some(ip6), Some(mode)) => slaac(lab, vm, ip6, mode).await?,
        _ => {}
    }
    Ok(())
}

/// udhcpc in the VM; waits until `eth0` has the port's IPv4 address.
async fn dhcp4(lab: &Lab, vm: &Vm) -> anyhow::Result<()> {
    let ns = vm.netns.as_str();
    let script = script(lab, "udhcpc.script", SCRIPT)?;
    let script = script
        .to_str()
        .context("the lab's directory is not UTF-8")?;
    let args = [
        "udhcpc",
        "-i",
        "eth0",
        "-f",
        "-t",
        "5",
        "-T",
        "1",
        "-A",
        "1",
        "-O",
        "staticroutes",
        "-s",
        script,
    ];
    let log = lab.log_path(&format!("vm-{}", vm.name));
    processes::spawn(Some(ns), Path::new(BUSYBOX), &args, &[], &log)?;
    let wanted = format!("inet {}/", vm.ip);
    let what = format!(
        "VM {} to get {} by DHCP (see {})",
        vm.name,
        vm.ip,
        log.display()
    );
    poll(&what, BOOT_LIMIT, || {
        let addresses = sh::ip(&["-n", ns, "-4", "addr", "show", "dev", "eth0"])?;
        Ok(addresses.contains(&wanted).then_some(()))
    })
    .await
}

/// `dhclient -6` in the VM, once `eth0`'s link-local address is usable (dhclient binds to it,
/// and exits when it cannot); waits until `eth0` has the port's IPv6 address as a /128, past
/// duplicate address detection, and a default route from a router advertisement.
async fn dhcp6(lab: &Lab, vm: &Vm, ip6: Ipv6Addr) -> anyhow::Result<()> {
    start_dhclient6(lab, vm, false).await?;
    let log = lab.log_path(&format!("vm-{}", vm.name));
    let what = format!(
        "VM {} to get {ip6} by DHCPv6 and a default route by RA (see {})",
        vm.name,
        log.display()
    );
    wait_v6(vm, &format!("inet6 {ip6}/128 "), &what).await
}

/// A `slaac` or `dhcpv6-stateless` subnet: waits until the VM's kernel has made the port's
/// address from the router advertisements (Neutron computed it from the MAC, EUI-64), past
/// duplicate address detection, with a default route by RA; `dhcpv6-stateless` then runs
/// `dhclient -6 -S` for the DNS server and search domain (an Information-Request; the client
/// keeps refreshing them).
async fn slaac(lab: &Lab, vm: &Vm, ip6: Ipv6Addr, mode: V6Mode) -> anyhow::Result<()> {
    if mode == V6Mode::Stateless {
        // Checked before the wait, so a missing client fails at once.
        require_dhclient()?;
    }
    let what = format!(
        "VM {} to make {ip6} from the router advertisements (SLAAC) and take a default route \
         from them (see the host's DHCP agent log)",
        vm.name
    );
    wait_v6(vm, &format!("inet6 {ip6}/"), &what).await?;
    if mode == V6Mode::Stateless {
        start_dhclient6(lab, vm, true).await?;
    }
    Ok(())
}

fn require_dhclient() -> anyhow::Result<()> {
    if !Path::new(DHCLIENT).is_file() {
        bail!("{DHCLIENT} is missing: install isc-dhcp-client (the VMs' DHCPv6 client)");
    }
    Ok(())
}

/// Starts `dhclient -6` (`-S`: options only) in the VM, once `eth0`'s link-local address is
/// usable (dhclient binds to it, and exits when it cannot).
async fn start_dhclient6(lab: &Lab, vm: &Vm, stateless: bool) -> anyhow::Result<()> {
    require_dhclient()?;
    let ns = vm.netns.as_str();
    let log = lab.log_path(&format!("vm-{}", vm.name));
    let link_local = format!("VM {}'s link-local address", vm.name);
    poll(&link_local, BOOT_LIMIT, || {
        let addresses = sh::ip(&[
            "-n", ns, "-6", "addr", "show", "dev", "eth0", "scope", "link",
        ])?;
        Ok((addresses.contains("inet6 fe80") && !addresses.contains("tentative")).then_some(()))
    })
    .await?;
    let script = script(lab, "dhclient6.script", SCRIPT6)?;
    let file = |suffix: &str| lab.dir.join(format!("vm-{}.{suffix}", vm.name));
    let (leases, pid) = (file("leases6"), file("dhclient6.pid"));
    let paths = [script.as_path(), leases.as_path(), pid.as_path()].map(Path::to_str);
    let [Some(script), Some(leases), Some(pid)] = paths else {
        bail!("the lab's directory {} is not UTF-8", lab.dir.display());
    };
    let mut args = vec!["-6", "-d", "-sf", script, "-lf", leases, "-pf", pid, "eth0"];
    if stateless {
        args.insert(1, "-S");
    }
    processes::spawn(Some(ns), Path::new(DHCLIENT), &args, &[], &log)?;
    Ok(())
}

/// Waits until a line of `eth0`'s IPv6 addresses holds `wanted` and is not tentative, and a
/// default route from a router advertisement is there.
async fn wait_v6(vm: &Vm, wanted: &str, what: &str) -> anyhow::Result<()> {
    let ns = vm.netns.as_str();
    poll(what, BOOT_LIMIT, || {
        let addresses = sh::ip(&["-n", ns, "-6", "addr", "show", "dev", "eth0"])?;
        let usable = addresses
            .lines()
            .any(|line| line.contains(wanted) && !line.contains("tentative"));
        let routes = sh::ip(&["-n", ns, "-6", "route", "show", "default"])?;
        Ok((usable && routes.contains("proto ra")).then_some(()))
    })
    .await
}

/// A DHCP client's script, written into the lab's directory (executable).
fn script(lab: &Lab, name: &str, text: &str) -> anyhow::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = lab.dir.join(name);
    std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
        .with_context(|| format!("cannot make {} executable", path.display()))?;
    Ok(path)
}

/// Deletes the port (already gone is fine; one given with `--port` is unbound instead), then
/// udhcpc and the namespace (its veth, hence the TAP, goes with it).
async fn unplug(client: &Client, vm: &Vm) -> anyhow::Result<()> {
    let path = format!("/v2.0/ports/{}", vm.port);
    // A port the VM was given is unbound and kept, as Nova does.
    let unbind = json!({"port": {"device_owner": "", "device_id": "", "binding:host_id": ""}});
    let call = match vm.port_made {
        true => client.call("DELETE", &path, None).await,
        false => client.call("PUT", &path, Some(&unbind)).await,
    };
    let deleted = match call {
        // Deleted already (by hand, or a retry): what was wanted.
        Err(NeutronError::Status { status: 404, .. }) => Ok(()),
        other => other.map(drop),
    };
    if sh::namespaces()?.contains(&vm.netns) {
        stop_pids(&netns_pids(&vm.netns));
        delete_netns(&vm.netns)?;
    }
    deleted.with_context(|| format!("cannot delete VM {:?}'s port {}", vm.name, vm.port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lab(openstack: Option<OpenStack>) -> Lab {
        serde_json::from_value(json!({
            "name": "l", "dir": "/nonexistent", "client_endpoint": "", "hosts": [],
            "workloads": [], "pids": [],
        }))
        .map(|lab: Lab| Lab { openstack, ..lab })
        .expect("a lab")
    }

    #[test]
    fn a_lab_without_openstack_names_the_flag() {
        let error = openstack_of(&lab(None)).unwrap_err().to_string();
        assert!(error.contains("--openstack"), "{error}");
        assert!(openstack_of(&lab(Some(OpenStack::default()))).is_ok());
    }

    #[test]
    fn a_port_becomes_a_vm_with_nova_s_tap_name() {
        let port = json!({
            "id": "0123456789abcdef", "mac_address": "fa:16:3e:00:00:01",
            "fixed_ips": [{"ip_address": "fd00::5"}, {"ip_address": "10.28.0.5"}],
        });
        let vm = vm_of(&lab(None), "host1", "vm1", &port).expect("a vm");
        assert_eq!(vm.tap, "tap0123456789a");
        assert_eq!(vm.ip, Ipv4Addr::new(10, 28, 0, 5));
        assert_eq!(vm.ip6, Some("fd00::5".parse().unwrap()));
        assert_eq!(vm.netns, "l.host1.vm1");
        assert_eq!(
            vm.endpoint_key(),
            "/calico/v1/host/host1/workload/openstack/vm1/endpoint/0123456789abcdef"
        );
        let v4_only =
            json!({"id": "x", "mac_address": "m", "fixed_ips": [{"ip_address": "10.0.0.1"}]});
        assert_eq!(vm_of(&lab(None), "h", "v", &v4_only).unwrap().ip6, None);
        let error = vm_of(
            &lab(None),
            "h",
            "v",
            &json!({"id": "x", "mac_address": "m"}),
        );
        assert!(error.unwrap_err().to_string().contains("no IPv4 fixed IP"));
    }
}
