//! `calicoctl ipam assign|release|show|check|block|config`: the operator's view of IPAM, over
//! the same [`Ipam`] the CNI plugin uses.

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::process::ExitCode;
use std::sync::Arc;

use calico_datastore::Datastore;
use calico_ipam::{AffinityOutcome, AssignRequest, Ipam, IpamSettings, Report, block};
use calico_model::ipam::AllocationBlock;
use calico_model::{IpVersion, Key};
use ipnet::IpNet;
use serde_json::json;

use crate::cli::{
    IpamAssignArgs, IpamBlockArgs, IpamBlockCommand, IpamCheckArgs, IpamCommand, IpamConfigArgs,
    IpamReleaseArgs, IpamShowArgs, Output,
};

pub async fn run(
    store: Arc<dyn Datastore>,
    command: IpamCommand,
    out: &mut impl Write,
) -> anyhow::Result<ExitCode> {
    let ipam = Ipam::new(store);
    match command {
        IpamCommand::Assign(args) => assign(&ipam, &args, out).await,
        IpamCommand::Release(args) => release(&ipam, &args, out).await,
        IpamCommand::Show(args) => show(&ipam, &args, out).await,
        IpamCommand::Check(args) => {
            let mut stdin = std::io::stdin().lock();
            check(&ipam, &args, &mut stdin, out).await
        }
        IpamCommand::Block { command } => block_affinity(&ipam, command, out).await,
        IpamCommand::Config(args) => config(&ipam, &args, out).await,
    }
}

async fn block_affinity(
    ipam: &Ipam,
    command: IpamBlockCommand,
    out: &mut impl Write,
) -> anyhow::Result<ExitCode> {
    let (outcome, IpamBlockArgs { cidr, host }) = match command {
        IpamBlockCommand::Claim(args) => (ipam.claim_affinity(args.cidr, &args.host).await?, args),
        IpamBlockCommand::Release(args) => {
            (ipam.release_affinity(args.cidr, &args.host).await?, args)
        }
    };
    if let AffinityOutcome::Refused(why) = &outcome {
        anyhow::bail!("nothing changed: {why}");
    }
    writeln!(out, "{}", describe_outcome(cidr, &host, &outcome))?;
    Ok(ExitCode::SUCCESS)
}

/// One line per affinity change, naming the block and the host.
pub(crate) fn describe_outcome(cidr: IpNet, host: &str, outcome: &AffinityOutcome) -> String {
    match outcome {
        AffinityOutcome::Claimed => format!("block {cidr} is affine to host {host}"),
        AffinityOutcome::AlreadyClaimed => {
            format!("block {cidr} was already affine to host {host}")
        }
        AffinityOutcome::Released => format!(
            "released block {cidr} of host {host}: it keeps its addresses, affine to no host"
        ),
        AffinityOutcome::Deleted => {
            format!("released block {cidr} of host {host}: deleted (empty)")
        }
        AffinityOutcome::StaleKeyRemoved => {
            format!("removed host {host}'s stale affinity key for block {cidr}")
        }
        AffinityOutcome::Refused(why) => format!("kept block {cidr} of host {host}: {why}"),
    }
}

async fn config(
    ipam: &Ipam,
    args: &IpamConfigArgs,
    out: &mut impl Write,
) -> anyhow::Result<ExitCode> {
    let setting = args.strict_affinity.is_some() || args.auto_allocate_blocks.is_some();
    let mut settings = match ipam.settings().await {
        Ok(settings) => settings,
        // Setting replaces a stored config that does not read; showing it reports the error.
        Err(calico_ipam::IpamError::Corrupt { .. }) if setting => IpamSettings::default(),
        Err(e) => return Err(e.into()),
    };
    if let Some(strict) = args.strict_affinity {
        settings.strict_affinity = strict;
    }
    if let Some(auto) = args.auto_allocate_blocks {
        settings.auto_allocate_blocks = auto;
    }
    if setting {
        settings
            .check()
            .map_err(|e| anyhow::anyhow!("{}: {e}", Key::IpamConfig))?;
        ipam.set_settings(&settings).await?;
    }
    let IpamSettings {
        strict_affinity,
        auto_allocate_blocks,
    } = settings;
    writeln!(out, "strict_affinity: {strict_affinity}")?;
    writeln!(out, "auto_allocate_blocks: {auto_allocate_blocks}")?;
    Ok(ExitCode::SUCCESS)
}

async fn assign(
    ipam: &Ipam,
    args: &IpamAssignArgs,
    out: &mut impl Write,
) -> anyhow::Result<ExitCode> {
    let host = args.host.clone();
    if let Some(ip) = args.ip {
        ipam.assign_ip(ip, &args.handle, &BTreeMap::new(), &host)
            .await?;
        writeln!(out, "{ip}")?;
        return Ok(ExitCode::SUCCESS);
    }
    if args.ipv4 == 0 && args.ipv6 == 0 {
        anyhow::bail!("nothing to assign: give --ip ADDRESS, or --ipv4 N and/or --ipv6 N");
    }
    let request = AssignRequest {
        host,
        handle: args.handle.clone(),
        ipv4: args.ipv4,
        ipv6: args.ipv6,
        ..AssignRequest::default()
    };
    let assigned = ipam.auto_assign(&request).await?;
    for ip in assigned.ipv4.iter().chain(&assigned.ipv6) {
        writeln!(out, "{ip}")?;
    }
    Ok(ExitCode::SUCCESS)
}

async fn release(
    ipam: &Ipam,
    args: &IpamReleaseArgs,
    out: &mut impl Write,
) -> anyhow::Result<ExitCode> {
    let mut released = 0;
    if let Some(handle) = &args.handle {
        let freed = ipam.release_by_handle(handle).await?;
        for ip in &freed {
            writeln!(out, "released {ip} (handle {handle})")?;
        }
        released += freed.len();
    }
    let freed = ipam.release_ips(&args.ip).await?;
    for (ip, handle) in &freed {
        let handle = handle.as_deref().unwrap_or("none");
        writeln!(out, "released {ip} (handle {handle})")?;
    }
    released += freed.len();
    for ip in args
        .ip
        .iter()
        .filter(|ip| !freed.iter().any(|(f, _)| f == *ip))
    {
        writeln!(out, "{ip} was not assigned")?;
    }
    writeln!(out, "{released} address(es) released")?;
    if let Some(host) = &args.empty_blocks_of {
        let blocks = ipam.release_empty_affinities(host).await?;
        for block in &blocks {
            writeln!(out, "released block {block} of host {host}")?;
        }
        writeln!(out, "{} empty block(s) of {host} released", blocks.len())?;
    }
    if let Some(host) = &args.host_gone {
        let outcomes = ipam.release_host_affinities(host, true).await?;
        for (cidr, outcome) in &outcomes {
            writeln!(out, "{}", describe_outcome(*cidr, host, outcome))?;
        }
        writeln!(out, "{} affinity(ies) of {host} released", outcomes.len())?;
    }
    Ok(ExitCode::SUCCESS)
}

async fn show(ipam: &Ipam, args: &IpamShowArgs, out: &mut impl Write) -> anyhow::Result<ExitCode> {
    let format = args.output.output;
    if format != Output::Table {
        let report = match args.ip {
            Some(ip) => show_ip_json(ipam, ip).await?,
            None => show_json(ipam).await?,
        };
        super::print_report(format, &report, out)?;
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(ip) = args.ip {
        show_ip(ipam, ip, out).await?;
        return Ok(ExitCode::SUCCESS);
    }
    let blocks = ipam.all_blocks().await?;
    writeln!(
        out,
        "{:<28} {:>10} {:>7} {:>10} {:>6}  STATE",
        "POOL", "ADDRESSES", "BLOCKS", "ASSIGNED", "USED"
    )?;
    for version in [IpVersion::V4, IpVersion::V6] {
        for pool in ipam.pools(version).await? {
            let mine: Vec<&AllocationBlock> = blocks
                .iter()
                .filter(|b| pool.cidr.contains(&b.cidr))
                .collect();
            let assigned: usize = mine.iter().map(|b| used(b)).sum();
            let size = pool_size(&pool.cidr);
            let state = if pool.assigns_addresses() {
                "enabled"
            } else {
                "disabled"
            };
            writeln!(
                out,
                "{:<28} {:>10} {:>7} {:>10} {:>6}  {state}",
                pool.cidr.to_string(),
                size,
                mine.len(),
                assigned,
                percent(assigned as f64, &size),
            )?;
        }
    }
    if args.blocks {
        writeln!(out)?;
        writeln!(
            out,
            "{:<28} {:<24} {:>10} {:>10}",
            "BLOCK", "HOST", "ADDRESSES", "ASSIGNED"
        )?;
        for b in &blocks {
            let strict = if b.strict_affinity { "  strict" } else { "" };
            writeln!(
                out,
                "{:<28} {:<24} {:>10} {:>10}{strict}",
                b.cidr.to_string(),
                b.host().unwrap_or("(none)"),
                b.allocations.len(),
                used(b),
            )?;
        }
    }
    for invalid in ipam.invalid_blocks().await? {
        writeln!(
            out,
            "unreadable block {} ({}): {}; see calicoctl ipam check",
            invalid.cidr, invalid.key, invalid.reason
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Usage as `-o json|yaml` prints it: every pool, every block, every unreadable block.
async fn show_json(ipam: &Ipam) -> anyhow::Result<serde_json::Value> {
    let blocks = ipam.all_blocks().await?;
    let mut pools = Vec::new();
    for version in [IpVersion::V4, IpVersion::V6] {
        for pool in ipam.pools(version).await? {
            let mine: Vec<&AllocationBlock> = blocks
                .iter()
                .filter(|b| pool.cidr.contains(&b.cidr))
                .collect();
            let host_bits = u32::from(pool.cidr.max_prefix_len() - pool.cidr.prefix_len());
            pools.push(json!({
                "cidr": pool.cidr.to_string(),
                "addresses": (host_bits < 64).then(|| 1u64 << host_bits),
                "hostBits": host_bits,
                "blocks": mine.len(),
                "assigned": mine.iter().map(|b| used(b)).sum::<usize>(),
                "enabled": pool.assigns_addresses(),
            }));
        }
    }
    let block_rows: Vec<serde_json::Value> = blocks
        .iter()
        .map(|b| {
            json!({
                "cidr": b.cidr.to_string(),
                "host": b.host(),
                "addresses": b.allocations.len(),
                "assigned": used(b),
                "strictAffinity": b.strict_affinity,
            })
        })
        .collect();
    let unreadable: Vec<serde_json::Value> = ipam
        .invalid_blocks()
        .await?
        .iter()
        .map(
            |i| json!({ "cidr": i.cidr.to_string(), "key": i.key, "reason": i.reason.to_string() }),
        )
        .collect();
    Ok(json!({ "pools": pools, "blocks": block_rows, "unreadableBlocks": unreadable }))
}

/// One address as `-o json|yaml` prints it.
async fn show_ip_json(ipam: &Ipam, ip: std::net::IpAddr) -> anyhow::Result<serde_json::Value> {
    let found = ipam.ip_assignment(ip).await?;
    let block = found.as_ref();
    let attribute = block.and_then(|f| f.attribute.clone());
    Ok(json!({
        "ip": ip.to_string(),
        "assigned": attribute.is_some(),
        "block": block.map(|f| f.block.to_string()),
        "host": block.and_then(|f| f.host.clone()),
        "strictAffinity": block.is_some_and(|f| f.strict_affinity),
        "handle": attribute.as_ref().and_then(|a| a.primary.clone()),
        "attributes": attribute.and_then(|a| a.secondary).unwrap_or_default(),
    }))
}

/// One address: assigned or not, to which handle with which attributes, in which block.
async fn show_ip(ipam: &Ipam, ip: std::net::IpAddr, out: &mut impl Write) -> anyhow::Result<()> {
    let Some(found) = ipam.ip_assignment(ip).await? else {
        writeln!(out, "{ip} is not assigned (no block holds it)")?;
        return Ok(());
    };
    let host = found.host.as_deref().unwrap_or("(none)");
    let strict = if found.strict_affinity {
        ", strict affinity"
    } else {
        ""
    };
    let place = format!("block {} (host {host}{strict})", found.block);
    let Some(attribute) = found.attribute else {
        writeln!(out, "{ip} is not assigned; {place}")?;
        return Ok(());
    };
    let handle = attribute.primary.as_deref().unwrap_or("(none)");
    writeln!(out, "{ip} is assigned to handle {handle} in {place}")?;
    let details = attribute.secondary.unwrap_or_default();
    if details.is_empty() {
        writeln!(out, "  attributes: (none)")?;
    }
    for (name, value) in details {
        writeln!(out, "  {name}: {value}")?;
    }
    Ok(())
}

fn used(block: &AllocationBlock) -> usize {
    block.allocations.len() - block::free_count(block)
}

/// The number of addresses in a pool, as text (IPv6 pools are too big to count in a u64).
fn pool_size(cidr: &IpNet) -> String {
    let bits = u32::from(cidr.max_prefix_len() - cidr.prefix_len());
    match 1u128.checked_shl(bits) {
        Some(n) if bits < 64 => n.to_string(),
        _ => format!("2^{bits}"),
    }
}

fn percent(assigned: f64, size: &str) -> String {
    match size.parse::<f64>() {
        Ok(size) if size > 0.0 => format!("{:.0}%", 100.0 * assigned / size),
        _ => "0%".to_owned(),
    }
}

async fn check(
    ipam: &Ipam,
    args: &IpamCheckArgs,
    answers: &mut impl BufRead,
    out: &mut impl Write,
) -> anyhow::Result<ExitCode> {
    let report = ipam.check().await?;
    if report.is_clean() {
        let blocks = ipam.all_blocks().await?;
        let assigned: usize = blocks.iter().map(used).sum();
        writeln!(
            out,
            "IPAM is consistent: {} block(s), {assigned} address(es) assigned, all in use by workload endpoints",
            blocks.len()
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    print_report(&report, out)?;
    if !args.fix {
        writeln!(out, "run `calicoctl ipam check --fix` to repair")?;
        return Ok(ExitCode::FAILURE);
    }
    if !args.yes {
        write!(
            out,
            "release {} address(es), rewrite {} handle record(s), remove {} affinity(ies)? [y/N] ",
            report.leaks.len(),
            report.handle_mismatches.len(),
            report.stale_affinities.len()
        )?;
        out.flush()?;
        let mut answer = String::new();
        answers.read_line(&mut answer)?;
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            writeln!(out, "nothing changed")?;
            return Ok(ExitCode::FAILURE);
        }
    }
    let fixed = ipam.fix(&report).await?;
    writeln!(
        out,
        "released {} address(es), rewrote {} handle record(s), removed {} affinity(ies)",
        fixed.released, fixed.handles_rewritten, fixed.affinities_removed
    )?;
    let left = ipam.check().await?;
    if left.is_clean() {
        writeln!(out, "IPAM is consistent now")?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(out, "still to look at:")?;
    print_report(&left, out)?;
    Ok(ExitCode::FAILURE)
}

fn print_report(report: &Report, out: &mut impl Write) -> std::io::Result<()> {
    for invalid in &report.invalid {
        writeln!(
            out,
            "invalid: {}: {}; fix: {}",
            invalid.key, invalid.reason, invalid.fix
        )?;
    }
    for leak in &report.leaks {
        let handle = leak.handle.as_deref().unwrap_or("none");
        writeln!(
            out,
            "leaked: {} (handle {handle}, block {}) is assigned but no workload endpoint uses it",
            leak.ip, leak.block
        )?;
    }
    for m in &report.handle_mismatches {
        writeln!(
            out,
            "handle {}: its record counts {} but the blocks hold {}",
            m.handle,
            counts(&m.recorded),
            counts(&m.actual)
        )?;
    }
    for (host, cidr) in &report.stale_affinities {
        writeln!(
            out,
            "stale affinity: host {host} claims block {cidr}, which does not exist or belongs to another host"
        )?;
    }
    for (ip, endpoint) in &report.unassigned_in_use {
        writeln!(
            out,
            "unassigned: {ip} is used by {endpoint} but free in its block (assign it: calicoctl ipam assign --ip {ip} --handle <id>)"
        )?;
    }
    for stale in &report.stale_endpoints {
        let addresses: Vec<String> = stale.addresses.iter().map(ToString::to_string).collect();
        writeln!(
            out,
            "stale endpoint: {} holds {} but Felix on {} reports it {} (its interface is gone, down or without carrier: its workload is probably gone); if so, delete it (calicoctl delete {}) and run calicoctl ipam check --fix to release its addresses",
            stale.key,
            addresses.join(", "),
            stale.host,
            format!("{:?}", stale.status).to_lowercase(),
            stale.key
        )?;
    }
    Ok(())
}

fn counts(map: &BTreeMap<IpNet, u64>) -> String {
    if map.is_empty() {
        return "nothing".to_owned();
    }
    let parts: Vec<String> = map.iter().map(|(b, n)| format!("{n} in {b}")).collect();
    parts.join(", ")
}
