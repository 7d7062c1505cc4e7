//! `calicoctl diags`: one `.tar.gz` with what support needs from this host (see `crate::diags`
//! for the contents). Works with etcd down: what could not be collected is listed, with why.

use std::collections::BTreeMap;
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use calico_datastore::Datastore;
use calico_model::bundle;
use calico_model::key::{Key, Prefix};

use super::kernel_hostname;
use crate::cli::{DiagsArgs, EtcdArgs};
use crate::connect;
use crate::diags::{COMMANDS, Collection, VERSIONS, felix_config_from_log, run as run_tool};

/// How long etcd may take to answer before it counts as down.
const ETCD_TIMEOUT: Duration = Duration::from_secs(10);

pub async fn run(
    etcd: &EtcdArgs,
    args: &DiagsArgs,
    out: &mut impl Write,
) -> anyhow::Result<ExitCode> {
    let host = args.hostname.clone().unwrap_or_else(kernel_hostname);
    let mut c = Collection::default();
    c.text("versions.txt", versions().await);
    c.log("logs/felix.log", &args.felix_log);
    c.log("logs/calico-node.log", &args.node_log);
    for (name, argv) in COMMANDS {
        c.command(name, argv).await;
    }
    let socket = args.bird.bird_socket.to_string_lossy().into_owned();
    let birdc = args.bird.birdc.to_string_lossy().into_owned();
    c.command(
        "bird-protocols.txt",
        &[&birdc, "-s", &socket, "show", "protocols", "all"],
    )
    .await;
    c.command("bird-routes.txt", &[&birdc, "-s", &socket, "show", "route"])
        .await;
    let logged = std::fs::read_to_string(&args.felix_log)
        .map(|log| felix_config_from_log(&log))
        .unwrap_or_default();
    let datastore = match tokio::time::timeout(ETCD_TIMEOUT, datastore_part(etcd, &host)).await {
        Ok(Ok(found)) => Ok(found),
        Ok(Err(why)) => Err(format!("{why:#}")),
        Err(_) => Err(format!("etcd did not answer within {ETCD_TIMEOUT:?}")),
    };
    match &datastore {
        Ok((keys, _)) => c.text("etcd-keys.json", keys.clone()),
        Err(why) => c.missing("etcd-keys.json", format!("datastore not reachable: {why}")),
    }
    let layer = datastore.as_ref().ok().map(|(_, layer)| layer);
    c.text(
        "felix-config.txt",
        felix_config(&logged, layer, &args.felix_log),
    );
    if logged.is_empty() {
        c.missing(
            "felix-config.txt (effective configuration)",
            format!(
                "no `config NAME = ...` lines of a Felix start in {}",
                args.felix_log.display()
            ),
        );
    }
    if layer.is_none() {
        c.missing(
            "felix-config.txt (datastore layer)",
            "datastore not reachable",
        );
    }
    let base = format!("calico-diags-{host}-{}", timestamp());
    let path = c.write(&args.output_dir, &base)?;
    if !c.missing.is_empty() {
        writeln!(out, "{} item(s) could not be collected:", c.missing.len())?;
        for (what, why) in &c.missing {
            writeln!(out, "  {what}: {why}")?;
        }
    }
    writeln!(out, "diagnostics written to {}", path.display())?;
    Ok(ExitCode::SUCCESS)
}

/// One line per program: its version, or why not.
async fn versions() -> String {
    let mut text = format!("calicoctl {}\n", env!("CARGO_PKG_VERSION"));
    for argv in VERSIONS {
        let answer = run_tool(argv).await.unwrap_or_else(|why| why);
        text.push_str(&format!("{}: {}\n", argv.join(" "), answer.trim()));
    }
    text
}

/// This host's keys as a bundle, and the datastore's layer of Felix's configuration
/// (name → (value, source)), the host's value winning over the global one.
async fn datastore_part(
    etcd: &EtcdArgs,
    host: &str,
) -> anyhow::Result<(String, BTreeMap<String, (String, &'static str)>)> {
    let store = connect::connect(etcd).await?;
    let mut prefixes: Vec<String> = Prefix::of_host(host)
        .iter()
        .map(Prefix::to_string)
        .collect();
    prefixes.push(Prefix::GlobalConfig.to_string());
    prefixes.push(Key::Ready.to_string());
    let mut pairs = Vec::new();
    for prefix in &prefixes {
        pairs.extend(store.list(prefix).await?);
    }
    let keys = bundle::render(pairs.iter().map(|p| (p.key.as_str(), p.value.as_str())));
    Ok((keys, config_layer(store.as_ref(), host).await?))
}

async fn config_layer(
    store: &dyn Datastore,
    host: &str,
) -> anyhow::Result<BTreeMap<String, (String, &'static str)>> {
    let mut layer = BTreeMap::new();
    let host_config = Prefix::HostConfig {
        hostname: host.to_owned(),
    };
    let sources = [
        (Prefix::GlobalConfig.to_string(), "etcd /calico/v1/config"),
        (host_config.to_string(), "etcd host config"),
    ];
    for (prefix, source) in sources {
        for pair in store.list(&prefix).await? {
            let name = pair.key[prefix.len()..].to_owned();
            layer.insert(name, (pair.value, source));
        }
    }
    Ok(layer)
}

fn felix_config(
    logged: &[String],
    layer: Option<&BTreeMap<String, (String, &'static str)>>,
    log: &std::path::Path,
) -> String {
    let mut text = format!(
        "# effective configuration, as Felix logged it at its last start in {}\n",
        log.display()
    );
    for line in logged {
        text.push_str(line);
        text.push('\n');
    }
    if logged.is_empty() {
        text.push_str("(not found in the log)\n");
    }
    text.push_str(
        "\n# the datastore's layer (Felix's environment variables and config file win over it)\n",
    );
    match layer {
        Some(layer) => {
            for (name, (value, source)) in layer {
                text.push_str(&format!("{name} = {value:?} ({source})\n"));
            }
        }
        None => text.push_str("(datastore not reachable)\n"),
    }
    text
}

/// UTC `YYYYMMDDTHHMMSSZ`, for the archive's name.
fn timestamp() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now())
        .to_string()
        .replace(['-', ':'], "")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_archive_is_named_by_the_utc_time() {
        let stamp = timestamp();
        assert_eq!(stamp.len(), "20261123T201500Z".len(), "{stamp}");
        assert!(stamp.starts_with("20") && stamp.ends_with('Z') && stamp.as_bytes()[8] == b'T');
    }
}
