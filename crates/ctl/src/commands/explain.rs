//! `calicoctl policy explain`: loads the endpoints and policy of the live datastore into the
//! reference evaluator and prints how it judges one packet at one endpoint.

use std::io::Write;
use std::net::IpAddr;
use std::process::ExitCode;

use anyhow::{Context, bail};
use calico_calc::{Applied, Cluster, Direction, EndpointKey, Packet, explain};
use calico_datastore::Datastore;
use calico_model::key::Prefix;
use calico_model::rule::Protocol;
use calico_model::{Key, invalid_warning};

use crate::cli::{DirectionArg, ExplainArgs};

/// Where endpoints and policy live.
const PREFIXES: [Prefix; 2] = [Prefix::Hosts, Prefix::Policy];

pub async fn run(
    store: &dyn Datastore,
    args: &ExplainArgs,
    out: &mut impl Write,
) -> anyhow::Result<ExitCode> {
    let endpoint = endpoint_key(&args.endpoint)?;
    let cluster = load(store).await?;
    let Some(found) = cluster.endpoints.get(&endpoint) else {
        bail!(
            "no valid endpoint at {}: check the key with `calicoctl get {}`",
            args.endpoint,
            args.endpoint
        );
    };
    let direction = match args.direction {
        DirectionArg::Inbound => Direction::Inbound,
        DirectionArg::Outbound => Direction::Outbound,
    };
    let own = found.addresses.first().copied();
    let packet = packet(args, direction, own)?;
    let explanation = explain(&cluster, &endpoint, direction, &packet);
    writeln!(out, "{endpoint} {direction}: {}", describe(&packet))?;
    writeln!(out, "{explanation}")?;
    Ok(ExitCode::SUCCESS)
}

fn endpoint_key(text: &str) -> anyhow::Result<EndpointKey> {
    match Key::parse(text)? {
        Key::WorkloadEndpoint(id) => Ok(EndpointKey::Workload(id)),
        Key::HostEndpoint(id) => Ok(EndpointKey::Host(id)),
        other => bail!("{text} is a {} key, not an endpoint", other.kind()),
    }
}

/// Every endpoint, profile, tier and policy; invalid ones are reported and left out, as Felix
/// treats them.
pub(crate) async fn load(store: &dyn Datastore) -> anyhow::Result<Cluster> {
    let mut cluster = Cluster::default();
    for prefix in PREFIXES {
        for pair in store.list(&prefix.to_string()).await? {
            if let Applied::Invalid { reason } = cluster.apply(&pair.key, Some(&pair.value)) {
                eprintln!("warning: {}", invalid_warning(&pair.key, &reason));
            }
        }
    }
    Ok(cluster)
}

fn packet(args: &ExplainArgs, direction: Direction, own: Option<IpAddr>) -> anyhow::Result<Packet> {
    let protocol = Protocol::parse(&args.protocol)
        .map_err(|reason| anyhow::anyhow!("--protocol: {reason}"))?;
    let address = |given: Option<IpAddr>, flag: &str, defaults: bool| match given {
        Some(address) => Ok(address),
        None if defaults => {
            own.with_context(|| format!("the endpoint has no address: give {flag} explicitly"))
        }
        None => bail!("give {flag}: the address at the other end"),
    };
    let src = address(args.src, "--src", direction == Direction::Outbound)?;
    let dst = address(args.dst, "--dst", direction == Direction::Inbound)?;
    Ok(Packet {
        src,
        dst,
        protocol,
        src_port: args.src_port,
        dst_port: args.dst_port,
        icmp_type: args.icmp_type,
        icmp_code: args.icmp_code,
    })
}

fn describe(packet: &Packet) -> String {
    let port = |p: Option<u16>| p.map(|p| format!(":{p}")).unwrap_or_default();
    let mut text = format!(
        "{} {}{} -> {}{}",
        packet.protocol,
        packet.src,
        port(packet.src_port),
        packet.dst,
        port(packet.dst_port)
    );
    if let Some(t) = packet.icmp_type {
        text += &format!(" type {t}");
    }
    if let Some(c) = packet.icmp_code {
        text += &format!(" code {c}");
    }
    text
}
