//! `calico-felix --dry-run`: what Felix would program on this host, printed instead of applied.
//! It reads the datastore snapshot (`/calico/v1/`) into a [`Calculator`], reads this host's
//! interfaces, Calico routes and neighbours, and prints what a full sync would load into the
//! firewall backend `NFTablesMode` chooses (the `ipset restore` and `iptables-restore` input,
//! or the `nft -f` script of the table `inet calico`) and the routing plan
//! ([`calico_dataplane::RoutingPlan`]). Nothing in the kernel or the datastore is changed.

use std::fmt::Write;

use anyhow::Context;
use calico_calc::{Applied, Calculator, DesiredState};
use calico_dataplane::nft::{NftRenderer, plan};
use calico_dataplane::{
    BackendKind, FilterTable, IpVersion, RenderConfig, Routing, calico_table, kernel_jumps,
    render_ipsets, render_nat, render_pool_ipsets, render_raw,
};
use calico_datastore::Datastore;
use calico_linux::Netns;

use crate::config::Config;

/// Reads the datastore and the kernel of `netns`, and returns the report: the firewall text,
/// then the routing plan, one change a line.
pub async fn report(
    store: &dyn Datastore,
    config: &Config,
    netns: Netns,
) -> anyhow::Result<String> {
    let mut out = String::new();
    let ready = store
        .get("/calico/v1/Ready")
        .await?
        .is_some_and(|p| p.value.trim() == "true");
    if !ready {
        out.push_str(
            "# /calico/v1/Ready is not true: Felix would wait for it before programming this\n",
        );
    }
    let mut calc = Calculator::new(&config.bootstrap.hostname);
    for pair in store
        .list("/calico/v1/")
        .await
        .context("reading /calico/v1/")?
    {
        if let Applied::Invalid { reason } = calc.apply(&pair.key, Some(&pair.value)) {
            tracing::warn!("{}", calico_model::invalid_warning(&pair.key, &reason));
        }
    }
    let backend = crate::backend::choose(config.nftables_mode, || {
        calico_linux::nft::probe(&netns).map_err(|e| e.to_string())
    })
    .map_err(anyhow::Error::msg)?;
    let routing = Routing::new(netns, &config.interface_prefixes).context("opening netlink")?;
    // Host endpoints given by their addresses apply to the interfaces holding them.
    calc.set_interface_addresses(
        routing
            .interface_addresses()
            .await
            .context("reading interface addresses")?,
    );
    let _ = writeln!(
        out,
        "# firewall backend: {} ({})",
        backend.kind, backend.reason
    );
    out.push_str(&match backend.kind {
        BackendKind::Iptables => firewall(calc.state(), &config.render()),
        BackendKind::Nftables => nft_script(calc.state(), &config.render()),
    });
    let (kernel, plan) = routing
        .dry_run(calc.state())
        .await
        .context("reading routes and neighbours")?;
    out.push_str("# routing\n");
    let lines = plan.lines(&kernel);
    if lines.is_empty() {
        out.push_str("# nothing to do\n");
    }
    for line in lines {
        let _ = writeln!(out, "{line}");
    }
    Ok(out)
}

/// What a full sync writes into an empty nf_tables: the table `inet calico`, as `nft -f` reads
/// it.
pub fn nft_script(state: &DesiredState, config: &RenderConfig) -> String {
    let mut renderer = NftRenderer::new(config.clone());
    let (batch, _) = plan::reconcile(None, renderer.render_all(state), |_| false);
    format!(
        "# nft -f (one transaction)\n{}",
        batch.script(&calico_table())
    )
}

/// What a full sync loads, per IP version: the IP sets, then the filter, nat and raw tables.
pub fn firewall(state: &DesiredState, config: &RenderConfig) -> String {
    let mut out = String::new();
    for (version, name) in [(IpVersion::V4, "IPv4"), (IpVersion::V6, "IPv6")] {
        let _ = writeln!(out, "# ipset restore ({name})");
        out.push_str(&render_ipsets(state, version));
        out.push_str(&render_pool_ipsets(state, version));
        let tables = [
            (
                "filter",
                FilterTable::new(config.clone(), version).render_all(state),
            ),
            ("nat", render_nat(state, config, version)),
            ("raw", render_raw(state, config, version)),
        ];
        for (table, text) in tables {
            let _ = writeln!(out, "# iptables-restore --noflush ({name} {table})");
            out.push_str(&text);
        }
    }
    out.push_str("# and in each IP version, a jump from each kernel chain (added if missing)\n");
    for (table, chain, target) in kernel_jumps() {
        let _ = writeln!(out, "# {table}: -A {chain} -j {target}");
    }
    out
}
