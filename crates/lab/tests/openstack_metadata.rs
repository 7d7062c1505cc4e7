//! Issue 18 item 5, with real packets: on an `up --openstack` lab of two hosts, a VM booted by
//! `calico-lab vm boot` reaches the metadata server of its own compute host at
//! 169.254.169.254:80. Each host runs a metadata server (busybox httpd) at
//! `MetadataAddr:MetadataPort` (127.0.0.1:9697, as in metadata.rs) answering the host's name;
//! Felix DNATs the VM's TCP from its TAP to it, so the VM on host1 reads "host1" and the VM on
//! host2 reads "host2". Needs root, etcd, bird, busybox and scripts/setup-neutron.sh.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use calico_lab::openstack::vm::{BUSYBOX, Vm};
use calico_testkit::eventually;
use common::TestLab;
use common::openstack::{Guard, openstack_lab};

/// Not the default 8775, so that the test shows `MetadataPort` is used.
const METADATA_PORT: u16 = 9697;
const METADATA: &str = "169.254.169.254";
/// What a guest asks for; each host's server answers its host name there.
const HOSTNAME_PATH: &str = "latest/meta-data/hostname";
/// How long Felix may take to program a VM booted a moment ago.
const WAIT: Duration = Duration::from_secs(30);

/// A metadata server in `host`'s namespace at 127.0.0.1:9697: busybox httpd serving `root`,
/// where `latest/meta-data/hostname` holds the host's name. Returns when it listens.
fn metadata_server(lab: &TestLab, host: &str, root: &Path) -> Guard {
    let file = root.join(HOSTNAME_PATH);
    std::fs::create_dir_all(file.parent().unwrap()).expect("metadata directory");
    std::fs::write(&file, host).expect("metadata file");
    let netns = lab.netns(host);
    let listen = format!("127.0.0.1:{METADATA_PORT}");
    let child = calico_lab::sh::command_in(&netns, BUSYBOX)
        .args(["httpd", "-f", "-p", &listen, "-h"])
        .arg(root)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .expect("busybox httpd starts");
    let server = Guard(child);
    let filter = format!("sport = :{METADATA_PORT}");
    eventually(
        &format!("the metadata server in {netns}"),
        Duration::from_secs(10),
        || {
            let out = calico_lab::sh::command_in(&netns, "ss")
                .args(["-Hltn", &filter])
                .output()
                .map_err(|e| e.to_string())?;
            match out.stdout.is_empty() {
                true => Err("not listening yet".to_owned()),
                false => Ok(()),
            }
        },
    );
    server
}

/// `vm boot` with the lab's default group; the VM as the lab's state records it.
fn boot(lab: &TestLab, host: &str, name: &str) -> Vm {
    let out = lab.ok(&["vm", "boot", "--host", host, "--name", name]);
    eprintln!("{}", out.trim());
    let openstack = lab.state().openstack.expect("an OpenStack lab");
    let vm = openstack.vms.into_iter().find(|vm| vm.name == name);
    vm.unwrap_or_else(|| panic!("VM {name} not in the lab's state"))
}

/// An HTTP GET from inside the VM (busybox wget, as a guest's cloud-init would fetch): the
/// body, or why there is none.
fn fetch(vm: &Vm, port: u16, path: &str) -> Result<String, String> {
    let url = format!("http://{METADATA}:{port}/{path}");
    // Bounded by coreutils' timeout: Debian's busybox wget crashes on its own `-T`.
    let out = Command::new("timeout")
        .args([
            "5", "ip", "netns", "exec", &vm.netns, BUSYBOX, "wget", "-q", "-O", "-",
        ])
        .arg(&url)
        .output()
        .expect("ip netns exec runs");
    match out.status.success() {
        true => Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned()),
        false => Err(format!(
            "{} from {url}: {} {}",
            vm.name,
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )),
    }
}

fn nat_rules(lab: &TestLab, host: &str) -> String {
    let out = lab.in_host(host, "iptables-save", &["-t", "nat"]);
    assert!(out.status.success(), "iptables-save runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_vm_reaches_its_own_compute_hosts_metadata_server_at_169_254_169_254() {
    let started = Instant::now();
    let lab = metadata_lab();
    let roots = tempfile::tempdir().expect("temporary directory");
    // Declared after the lab, so dropped (killed) before the lab goes down.
    let _servers: Vec<Guard> = ["host1", "host2"]
        .iter()
        .map(|host| metadata_server(&lab, host, &roots.path().join(host)))
        .collect();
    let vm1 = boot(&lab, "host1", "vm1");
    let vm2 = boot(&lab, "host2", "vm2");
    lab.wait();

    // The DNAT is there for Nova's TAPs, not only for the lab's containers.
    let rule = format!(
        "-A cali-PREROUTING -d {METADATA}/32 -i tap+ -p tcp -m tcp --dport 80 \
         -m comment --comment metadata -j DNAT --to-destination 127.0.0.1:{METADATA_PORT}"
    );
    for host in ["host1", "host2"] {
        let nat = nat_rules(&lab, host);
        assert!(nat.contains(&rule), "{host} lacks {rule}:\n{nat}");
    }

    // Each VM gets its own host's answer: the request never left the compute host.
    let asked = Instant::now();
    for (vm, host) in [(&vm1, "host1"), (&vm2, "host2")] {
        eventually(
            &format!("{} to read its host's metadata", vm.name),
            WAIT,
            || match fetch(vm, 80, HOSTNAME_PATH)? {
                answer if answer == host => Ok(()),
                answer => Err(format!("{} read {answer:?}, not {host:?}", vm.name)),
            },
        );
    }
    eprintln!(
        "both VMs read their host's metadata after {:?}",
        asked.elapsed()
    );

    // Only port 80 of the metadata address is translated: another port reaches nothing.
    let other = fetch(&vm2, 8080, HOSTNAME_PATH);
    assert!(
        other.is_err(),
        "169.254.169.254:8080 answered vm2: {other:?}"
    );
    eprintln!("test done in {:?}", started.elapsed());
}

/// A lab of two hosts with OpenStack and Felix's metadata path to 127.0.0.1:9697; fails naming
/// what is missing.
fn metadata_lab() -> TestLab {
    calico_testkit::require_tool("timeout");
    let port = format!("MetadataPort={METADATA_PORT}");
    let felix = [
        "--felix-config",
        "MetadataAddr=127.0.0.1",
        "--felix-config",
        &port,
    ];
    openstack_lab(&felix)
}
