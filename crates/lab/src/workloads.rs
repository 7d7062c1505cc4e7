//! Plugging workloads in and out through the `calico` CNI plugin, with the profiles and labels an
//! orchestrator would give their endpoints, and an echo server inside each.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;

use anyhow::{Context, bail};
use calico_datastore::{Datastore, EtcdDatastore};
use calico_model::endpoint::WorkloadEndpoint;
use calico_model::key::{Key, WorkloadEndpointId};
use calico_model::{from_json, to_json};

use crate::cni;
use crate::etcd::connect;
use crate::processes::{self, stop_pids};
use crate::ready::{self, Deadline};
use crate::sh;
use crate::state::{Lab, Workload, check_name};
use crate::topology::{add_netns, delete_netns, netns_pids};

/// A workload to plug in.
#[derive(Debug, Clone, Default)]
pub struct WorkloadSpec {
    pub host: String,
    pub name: String,
    pub ips: Vec<IpAddr>,
    pub profiles: Vec<String>,
    pub labels: BTreeMap<String, String>,
}

/// Plugs a workload in with the `calico` CNI plugin: a namespace, CNI ADD (veth, addresses,
/// routes, endpoint), then the endpoint's labels and profiles as an orchestrator would set
/// them, and an echo server inside. Without addresses, IPAM picks an IPv4 and an IPv6 one.
/// Returns when it is reachable: every Felix has programmed it, every other host routes to it
/// (over BGP) and its echo server listens. If anything fails (or `limit` passes), it is
/// unplugged again.
pub async fn add_workload(
    lab: &mut Lab,
    spec: &WorkloadSpec,
    limit: Duration,
) -> anyhow::Result<Workload> {
    let deadline = Deadline::after(limit);
    let (workload, server) = plug_workload(lab, spec).await?;
    let reachable = async {
        let store = connect(lab).await?;
        let revision = ready::mark(&store).await?;
        ready::felix_applied(lab, revision, deadline).await?;
        ready::routed_to(lab, &workload, deadline).await?;
        ready::serving(server, &lab.log_path(&workload.name), deadline).await
    };
    if let Err(error) = reachable.await {
        let _ = unplug(lab, &workload);
        return Err(error);
    }
    lab.workloads.push(workload.clone());
    lab.save()?;
    Ok(workload)
}

/// What [`add_workload`] does before it waits: the namespace, CNI ADD, labels and profiles,
/// the echo server (its pid is returned). The workload is not in `lab` yet; if anything fails,
/// it is unplugged again.
pub async fn plug_workload(lab: &Lab, spec: &WorkloadSpec) -> anyhow::Result<(Workload, i32)> {
    check_name("workload name", &spec.name)?;
    let host = lab.host(&spec.host)?.clone();
    if lab.workloads.iter().any(|w| w.name == spec.name) {
        bail!(
            "workload {:?} already exists in lab {:?}",
            spec.name,
            lab.name
        );
    }
    for address in &spec.ips {
        if let Some(w) = lab.workloads.iter().find(|w| w.ips.contains(address)) {
            bail!("address {address} is already used by workload {:?}", w.name);
        }
    }
    let netns = format!("{}.{}.{}", lab.name, host.name, spec.name);
    add_netns(&netns)?;
    let mut workload = Workload {
        name: spec.name.clone(),
        host: host.name.clone(),
        netns,
        interface: String::new(),
        ips: spec.ips.clone(),
        key: Key::WorkloadEndpoint(WorkloadEndpointId {
            hostname: host.name.clone(),
            orchestrator: "cni".to_owned(),
            workload: spec.name.clone(),
            endpoint: "eth0".to_owned(),
        })
        .to_string(),
    };
    let plugged = async {
        let result = cni::call(lab, &host, "ADD", &spec.name, &workload.netns, &spec.ips)?;
        workload.ips = cni::addresses(&result)?;
        workload.interface = result["interfaces"][0]["name"]
            .as_str()
            .context("the CNI result names no host interface")?
            .to_owned();
        let store = connect(lab).await?;
        label(&store, &workload, spec).await?;
        processes::start_echo_server(lab, &workload)
    };
    match plugged.await {
        Ok(server) => Ok((workload, server)),
        Err(error) => {
            let _ = unplug(lab, &workload);
            Err(error)
        }
    }
}

/// Writes the profiles and labels given, as an orchestrator would: given profiles replace the
/// network's profile the CNI plugin gave the endpoint, given labels are set; what was not given
/// stays as the plugin wrote it.
async fn label(
    store: &EtcdDatastore,
    workload: &Workload,
    spec: &WorkloadSpec,
) -> anyhow::Result<()> {
    if spec.profiles.is_empty() && spec.labels.is_empty() {
        return Ok(());
    }
    let pair = store
        .get(&workload.key)
        .await?
        .with_context(|| format!("CNI ADD wrote no endpoint at {}", workload.key))?;
    let mut endpoint: WorkloadEndpoint = from_json(&pair.value)
        .with_context(|| format!("the endpoint at {} does not read", workload.key))?;
    with_profiles_and_labels(&mut endpoint, spec);
    let value = to_json(&endpoint).with_context(|| workload.key.to_string())?;
    store.put(&workload.key, &value).await?;
    Ok(())
}

fn with_profiles_and_labels(endpoint: &mut WorkloadEndpoint, spec: &WorkloadSpec) {
    if !spec.profiles.is_empty() {
        endpoint.profile_ids = spec.profiles.clone();
    }
    endpoint.labels.extend(spec.labels.clone());
}

/// Unplugs a workload with CNI DEL (endpoint, veth, addresses), then its processes and its
/// namespace.
pub async fn delete_workload(lab: &mut Lab, name: &str) -> anyhow::Result<()> {
    let workload = lab.workload(name)?.clone();
    unplug(lab, &workload)?;
    lab.workloads.retain(|w| w.name != name);
    lab.save()
}

fn unplug(lab: &Lab, w: &Workload) -> anyhow::Result<()> {
    let host = lab.host(&w.host)?;
    let deleted = cni::call(lab, host, "DEL", &w.name, &w.netns, &[]);
    if sh::namespaces()?.contains(&w.netns) {
        stop_pids(&netns_pids(&w.netns));
        delete_netns(&w.netns)?;
    }
    deleted.map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cni_endpoint() -> WorkloadEndpoint {
        WorkloadEndpoint::active("cali0", &["lab"], &[])
    }

    #[test]
    fn without_profiles_the_endpoint_keeps_the_network_profile() {
        let mut endpoint = cni_endpoint();
        with_profiles_and_labels(&mut endpoint, &WorkloadSpec::default());
        assert_eq!(endpoint, cni_endpoint());
    }

    #[test]
    fn given_profiles_replace_it_and_given_labels_are_set() {
        let mut endpoint = cni_endpoint();
        let spec = WorkloadSpec {
            profiles: vec!["a".into(), "b".into()],
            labels: [("role".to_owned(), "web".to_owned())].into(),
            ..WorkloadSpec::default()
        };
        with_profiles_and_labels(&mut endpoint, &spec);
        assert_eq!(endpoint.profile_ids, ["a", "b"]);
        assert_eq!(endpoint.labels, spec.labels);
        assert!(
            to_json(&endpoint)
                .unwrap()
                .contains(r#""labels":{"role":"web"}"#)
        );
    }
}
