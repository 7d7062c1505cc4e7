//! `calicoctl node remove HOST [--yes] [--force]`: everything the datastore holds for a host that
//! is gone, after one confirmation.
//!
//! | what | where | how |
//! | --- | --- | --- |
//! | endpoints, per-host Felix config, `bird_ip`, VXLAN tunnel record, 1.x per-host BGP peers | `/calico/v1/host/<host>/` | prefix deleted |
//! | BGP address, AS, route reflector id, log level, per-node peers | `/calico/bgp/v1/host/<host>/` | prefix deleted |
//! | Felix's status report and endpoint statuses | `/calico/felix/v1/host/<host>/` | prefix deleted |
//! | addresses still assigned there | IPAM blocks | released (see [`addresses_to_release`]) |
//! | block affinities | `/calico/ipam/v2/host/<host>/` | given up: empty blocks deleted, blocks still holding addresses kept, affine to no host |
//!
//! A host whose Felix still reports status (the TTL'd `/calico/felix/v1/host/<host>/status`
//! exists) is running: removing it would only be undone by it, so this is refused without
//! `--force`.

use std::collections::BTreeSet;
use std::io::{BufRead, Write};
use std::net::IpAddr;
use std::process::ExitCode;
use std::sync::Arc;

use calico_datastore::Datastore;
use calico_ipam::{Ipam, block};
use calico_model::ipam::AllocationBlock;
use calico_model::key::Prefix;
use calico_model::{Key, Value, parse_value};

use super::ipam::describe_outcome;
use crate::cli::NodeRemoveArgs;

/// The host's key prefixes, each ending in `/` so that host `a` never matches host `ab`.
pub fn host_prefixes(host: &str) -> [String; 3] {
    let [endpoints, bgp, status, _affinities] = Prefix::of_host(host);
    [endpoints, bgp, status].map(|prefix| prefix.to_string())
}

/// The addresses "still assigned there": those of the host's endpoints; every allocation whose
/// attributes name the host as its `node` (as the CNI plugin records it), wherever the block
/// is; and in the host's own blocks every allocation not attributed to another node (another
/// host may borrow from them). Sorted, without duplicates.
pub fn addresses_to_release(
    host: &str,
    endpoint_addresses: &[IpAddr],
    blocks: &[AllocationBlock],
) -> Vec<IpAddr> {
    let mut ips: BTreeSet<IpAddr> = endpoint_addresses.iter().copied().collect();
    for b in blocks {
        let affine_here = b.host() == Some(host);
        for (ip, attribute) in block::allocated(b) {
            let node = attribute.secondary.as_ref().and_then(|s| s.get("node"));
            let here = match node {
                Some(node) => node == host,
                None => affine_here,
            };
            if here {
                ips.insert(ip);
            }
        }
    }
    ips.into_iter().collect()
}

pub async fn run(
    store: Arc<dyn Datastore>,
    args: &NodeRemoveArgs,
    answers: &mut impl BufRead,
    out: &mut impl Write,
) -> anyhow::Result<ExitCode> {
    let host = args.host.as_str();
    calico_model::names::validate_hostname(host)
        .map_err(|e| anyhow::anyhow!("invalid host name {host:?}: {}", e.reason))?;
    let status_key = Key::FelixStatus {
        hostname: host.to_owned(),
    };
    if let Some(status) = store.get(&status_key.to_string()).await? {
        if !args.force {
            writeln!(
                out,
                "refused: Felix on {host} still reports status ({status_key} = {}); stop it \
                 first, wait for the report to expire, or use --force",
                status.value
            )?;
            return Ok(ExitCode::FAILURE);
        }
        writeln!(
            out,
            "warning: Felix on {host} still reports status (--force)"
        )?;
    }
    let mut keys = Vec::new();
    for prefix in host_prefixes(host) {
        keys.extend(
            store
                .list(&prefix)
                .await?
                .into_iter()
                .map(|p| (p.key, p.value)),
        );
    }
    let ipam = Ipam::new(store.clone());
    let blocks = ipam.all_blocks().await?;
    let ips = addresses_to_release(host, &endpoint_addresses(&keys), &blocks);
    let affine = blocks.iter().filter(|b| b.host() == Some(host)).count();
    if keys.is_empty() && ips.is_empty() && affine == 0 {
        writeln!(out, "nothing in the datastore for host {host}")?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(
        out,
        "host {host}: {} key(s), {} address(es) to release, {affine} block affinity(ies)",
        keys.len(),
        ips.len()
    )?;
    if !args.yes && !confirm(host, answers, out)? {
        writeln!(out, "nothing removed")?;
        return Ok(ExitCode::FAILURE);
    }
    remove(&ipam, store.as_ref(), host, &ips, out).await?;
    Ok(ExitCode::SUCCESS)
}

/// Releases the addresses (while the endpoints still show what they were for), gives up the
/// affinities, then deletes the host's keys.
async fn remove(
    ipam: &Ipam,
    store: &dyn Datastore,
    host: &str,
    ips: &[IpAddr],
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let freed = ipam.release_ips(ips).await?;
    writeln!(out, "released {} address(es)", freed.len())?;
    let tunnel = format!("vxlan-tunnel-addr-{host}");
    let tunnel_freed = ipam.release_by_handle(&tunnel).await?;
    if !tunnel_freed.is_empty() {
        writeln!(out, "released the VXLAN tunnel address(es) of {host}")?;
    }
    for (cidr, outcome) in ipam.release_host_affinities(host, true).await? {
        writeln!(out, "{}", describe_outcome(cidr, host, &outcome))?;
    }
    let mut deleted = 0;
    for prefix in host_prefixes(host) {
        deleted += store.delete_prefix(&prefix).await?;
    }
    writeln!(out, "deleted {deleted} key(s) of host {host}")?;
    Ok(())
}

/// The addresses of the workload endpoints among the host's keys (host endpoints name
/// addresses the host owns, not IPAM's).
fn endpoint_addresses(keys: &[(String, String)]) -> Vec<IpAddr> {
    let mut ips = Vec::new();
    for (key, value) in keys {
        let Ok(parsed) = Key::parse(key) else {
            continue;
        };
        if let Ok(Value::WorkloadEndpoint(ep)) = parse_value(&parsed, value) {
            ips.extend(ep.ipv4_nets.iter().chain(&ep.ipv6_nets).map(|n| n.addr()));
        }
    }
    ips
}

fn confirm(host: &str, answers: &mut impl BufRead, out: &mut impl Write) -> anyhow::Result<bool> {
    write!(out, "remove host {host} from the datastore? [y/N] ")?;
    out.flush()?;
    let mut answer = String::new();
    answers.read_line(&mut answer)?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes"))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use calico_model::ipam::AllocationAttribute;

    use super::*;

    fn attribute(node: Option<&str>) -> AllocationAttribute {
        AllocationAttribute {
            primary: Some("h".to_owned()),
            secondary: node.map(|n| BTreeMap::from([("node".to_owned(), n.to_owned())])),
        }
    }

    #[test]
    fn addresses_here_are_this_hosts_not_borrowed_ones() {
        let mut block: AllocationBlock = serde_json::from_str(
            r#"{"cidr": "10.0.0.0/30", "affinity": "host:a", "allocations": [0, 1, 2, null],
                "attributes": []}"#,
        )
        .unwrap();
        block.attributes = vec![attribute(None), attribute(Some("b")), attribute(Some("a"))];
        let mut elsewhere = block.clone();
        elsewhere.cidr = "10.0.1.0/30".parse().unwrap();
        elsewhere.affinity = Some("host:b".to_owned());
        let ips = addresses_to_release("a", &["10.9.9.9".parse().unwrap()], &[block, elsewhere]);
        let expected: Vec<IpAddr> = ["10.0.0.0", "10.0.0.2", "10.0.1.2", "10.9.9.9"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        assert_eq!(ips, expected);
    }
}
