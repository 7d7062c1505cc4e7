//! Plugging workloads in with the `calico` CNI plugin, called the way a runtime calls it: in
//! the host's namespace, `CNI_*` variables, the network configuration on stdin.

use std::net::IpAddr;
use std::path::PathBuf;

use anyhow::{Context, bail};
use serde_json::{Value, json};

use crate::sh;
use crate::state::{Host, Lab};

/// The lab's CNI network: also the name of the profile its workloads start with.
pub const NETWORK: &str = "lab";

/// The IP pools the lab creates (workloads get addresses from them).
pub const POOLS: [&str; 3] = ["10.65.0.0/16", "10.66.0.0/16", "fd00:65::/64"];

/// The directory holding `calico` and `calico-ipam`: `$CALICO_CNI_DIR`, else beside
/// calico-lab.
pub fn plugin_dir() -> anyhow::Result<PathBuf> {
    if let Some(dir) = std::env::var_os("CALICO_CNI_DIR") {
        return Ok(PathBuf::from(dir));
    }
    let me = std::env::current_exe().context("cannot find the calico-lab binary")?;
    let dir = me
        .parent()
        .context("calico-lab has no directory")?
        .to_owned();
    if !dir.join("calico").is_file() || !dir.join("calico-ipam").is_file() {
        bail!(
            "the CNI plugins calico and calico-ipam are not beside calico-lab in {}; build them \
             with `cargo build -p calico-cni` or set CALICO_CNI_DIR",
            dir.display()
        );
    }
    Ok(dir)
}

/// The network configuration a host's runtime would pass. Each host has its own IPAM lock
/// (`ipam_lock_file`, in its run directory): the hosts share one machine, and one lock for all
/// would make a host cut off from etcd hold up the others' plugins.
pub fn network_config(lab: &Lab, host: &Host) -> Value {
    let lock = lab.dir.join(&host.name).join("ipam.lock");
    json!({
        "cniVersion": "1.0.0",
        "name": NETWORK,
        "type": "calico",
        "etcd_endpoints": lab.etcd_endpoints(),
        "nodename": host.name,
        "log_level": "info",
        "ipam_lock_file": lock,
        "ipam": {"type": "calico-ipam", "assign_ipv4": true, "assign_ipv6": true},
    })
}

/// Runs the plugin with `command` (ADD or DEL) for `container` in `netns`; `ips` are static
/// addresses (`CNI_ARGS IP=`), none for IPAM's choice. Returns the result (ADD) or Null.
pub fn call(
    lab: &Lab,
    host: &Host,
    command: &str,
    container: &str,
    netns: &str,
    ips: &[IpAddr],
) -> anyhow::Result<Value> {
    let dir = plugin_dir()?;
    let mut args = "IgnoreUnknown=1".to_owned();
    if !ips.is_empty() {
        let list: Vec<String> = ips.iter().map(IpAddr::to_string).collect();
        args.push_str(&format!(";IP={}", list.join(",")));
    }
    let netns_path = if netns.is_empty() {
        String::new()
    } else {
        format!("/run/netns/{netns}")
    };
    let mut cni = sh::command_in(&host.netns, dir.join("calico"));
    cni.env("CNI_COMMAND", command)
        .env("CNI_CONTAINERID", container)
        .env("CNI_NETNS", netns_path)
        .env("CNI_IFNAME", "eth0")
        .env("CNI_ARGS", args)
        .env("CNI_PATH", format!("{}:/usr/lib/cni", dir.display()));
    let config = network_config(lab, host).to_string();
    let out = sh::output_with_stdin(&mut cni, &config).context("cannot run the CNI plugin")?;
    let log = lab.log_path(&format!("cni-{container}"));
    let _ = std::fs::write(&log, &out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!(
            "CNI {command} of {container} on {} failed: {}\n(plugin log: {})",
            host.name,
            stdout.trim(),
            log.display()
        );
    }
    if stdout.trim().is_empty() {
        return Ok(Value::Null);
    }
    serde_json::from_str(&stdout).with_context(|| format!("CNI {command} printed {stdout}"))
}

/// The addresses of an ADD result.
pub fn addresses(result: &Value) -> anyhow::Result<Vec<IpAddr>> {
    let ips = result["ips"]
        .as_array()
        .context("the CNI result has no ips")?;
    ips.iter()
        .map(|ip| {
            let text = ip["address"].as_str().context("an ip without address")?;
            let net: ipnet::IpNet = text.parse()?;
            Ok(net.addr())
        })
        .collect()
}
