//! The `calico` plugin: IPAM (`calico-ipam` in this process, any other IPAM plugin as a child
//! process), a veth into the container, and the workload endpoint (with its network's profile)
//! in the datastore for Felix.
//!
//! ADD undoes everything it did when a later step fails, so a failed ADD leaves no address,
//! veth or endpoint behind. DEL succeeds whatever is already gone.

use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;

use calico_datastore::Datastore;
use calico_ipam::Ipam;
use calico_linux::{Link, Netlink, Netns};
use calico_model::endpoint::WorkloadEndpoint;
use calico_model::profile::network_default;
use calico_model::{Key, MacAddr, Validate, from_json, to_json};
use ipnet::IpNet;
use serde_json::{Value, json};

use crate::config::NetConf;
use crate::delegate::{self, IpamPlugin};
use crate::fault::{Step, crash_point};
use crate::ipam_plugin::{self, connect, ipam_error};
use crate::runtime_config::{self, Requested};
use crate::spec::{CniError, CniResult, Command, Env, Interface, IpConfig, RouteConfig, code};
use crate::workload::{Workload, handle_id};
pub use calico_plumbing::IPV4_GATEWAY;
use calico_plumbing::{self as plumbing, Attachment, Undo, routes};

/// One call of the plugin; returns what to print.
pub async fn run(env: &Env, conf: &NetConf, stdin: &[u8]) -> Result<Option<Value>, CniError> {
    runtime_config::refuse_unimplemented(&conf.capabilities)?;
    let workload = Workload::from_env(env, &conf.nodename())?;
    calico_model::names::validate_profile_id(&conf.name).map_err(|e| {
        CniError::new(
            code::INVALID_CONFIG,
            format!(
                "name {:?}: it names the network's profile: {}",
                conf.name, e.reason
            ),
        )
    })?;
    let call = Call {
        env,
        conf,
        stdin,
        workload,
        ipam: IpamPlugin::of(conf)?,
    };
    match env.command {
        Command::Add => add(&call).await.map(Some),
        Command::Del => del(&call).await.map(|()| None),
        Command::Check => crate::check::check(env, conf, stdin, &call.workload, &call.ipam)
            .await
            .map(|()| None),
        Command::Version => unreachable!("VERSION is answered before any plugin runs"),
    }
}

/// One call: what the runtime passed, the workload it is about and where its IPAM runs.
struct Call<'a> {
    env: &'a Env,
    conf: &'a NetConf,
    stdin: &'a [u8],
    workload: Workload,
    ipam: IpamPlugin,
}

impl<'a> Call<'a> {
    fn parts(&self) -> (&'a Env, &'a NetConf, &'a [u8], &Workload) {
        (self.env, self.conf, self.stdin, &self.workload)
    }

    /// IPAM ADD once `ready` says the container may be plugged, and the datastore connection
    /// the rest of ADD uses. In this process IPAM uses that connection, made while `ready`
    /// runs; a child process makes its own while ours is made.
    async fn ipam_add(
        &self,
        ready: impl Future<Output = Result<(), CniError>>,
    ) -> Result<(Arc<dyn Datastore>, Result<CniResult, CniError>), CniError> {
        let (env, conf, stdin, _) = self.parts();
        let plugin = match &self.ipam {
            IpamPlugin::InProcess => {
                let (ready, store) = tokio::join!(ready, connect(conf));
                ready?;
                let store = store?;
                let assigned = ipam_plugin::add(&Ipam::new(store.clone()), env, conf).await;
                return Ok((store, assigned));
            }
            IpamPlugin::Exec(plugin) => plugin,
        };
        ready.await?;
        let exec = {
            let (plugin, path, stdin) = (plugin.clone(), env.path.clone(), stdin.to_vec());
            tokio::task::spawn_blocking(move || delegate::ipam_add(&plugin, &path, &stdin))
        };
        let (store, assigned) = tokio::join!(connect(conf), exec);
        let assigned = assigned
            .map_err(|e| CniError::new(code::IO_FAILURE, format!("the IPAM call failed: {e}")))?;
        match store {
            Ok(store) => Ok((store, assigned)),
            Err(error) => {
                if assigned.is_ok()
                    && let Err(e) = delegate::call(plugin, &env.path, "DEL", stdin)
                {
                    tracing::error!("undo: IPAM DEL failed: {e}");
                }
                Err(error)
            }
        }
    }

    /// IPAM DEL: in this process through `ipam`, or by the IPAM plugin.
    async fn ipam_del(&self, ipam: &Ipam) -> Result<(), CniError> {
        let (env, conf, stdin, _) = self.parts();
        let plugin = match &self.ipam {
            IpamPlugin::InProcess => return ipam_plugin::del(ipam, env, conf).await,
            IpamPlugin::Exec(plugin) => plugin.clone(),
        };
        let (path, stdin) = (env.path.clone(), stdin.to_vec());
        tokio::task::spawn_blocking(move || delegate::call(&plugin, &path, "DEL", &stdin))
            .await
            .map_err(|e| CniError::new(code::IO_FAILURE, format!("the IPAM call failed: {e}")))?
            .map(|_| ())
    }
}

/// What ADD has done so far, to undo on failure.
#[derive(Default)]
struct Done {
    ipam: bool,
    /// The undo of the plumbing (the veth), once all of it is done.
    plumbing: Vec<Undo>,
    endpoint: Option<String>,
}

async fn add(call: &Call<'_>) -> Result<Value, CniError> {
    let (env, conf, _, workload) = call.parts();
    let requested = conf.requested(env)?;
    if !Path::new(&env.netns).exists() {
        return Err(CniError::new(
            code::UNKNOWN_CONTAINER,
            format!("CNI_NETNS {}: no such namespace", env.netns),
        ));
    }
    let (store, assigned) = call.ipam_add(not_added_yet(env)).await?;
    let mut done = Done {
        ipam: assigned.is_ok(),
        ..Done::default()
    };
    let outcome = match assigned {
        Ok(assigned) => {
            let store = store.as_ref();
            add_steps(env, conf, workload, &requested, assigned, store, &mut done).await
        }
        Err(error) => Err(error),
    };
    match outcome {
        Ok(result) => Ok(result.to_json(&conf.cni_version)),
        Err(error) => {
            tracing::warn!("ADD failed, undoing it: {error}");
            undo(&done, call, &store).await;
            Err(error)
        }
    }
}

/// A repeated ADD must not touch the interface (and addresses) the first one made.
async fn not_added_yet(env: &Env) -> Result<(), CniError> {
    let container = Netlink::connect(&Netns::at_path(&env.netns))?;
    if container.link_by_name(&env.ifname).await?.is_some() {
        return Err(CniError::new(
            code::KERNEL,
            format!(
                "{} already exists in {}: a repeated ADD? DEL the container first",
                env.ifname, env.netns
            ),
        ));
    }
    Ok(())
}

async fn add_steps(
    env: &Env,
    conf: &NetConf,
    workload: &Workload,
    requested: &Requested,
    assigned: CniResult,
    store: &dyn Datastore,
    done: &mut Done,
) -> Result<CniResult, CniError> {
    crash_point(env.abort_after, Step::Ipam);
    let addresses: Vec<IpAddr> = assigned.ips.iter().map(|ip| ip.address.addr()).collect();
    honoured(conf, requested, &addresses)?;
    let veth = workload.veth_name();
    let netns = Netns::at_path(&env.netns);
    let attachment = Attachment {
        host: veth.clone(),
        container: env.ifname.clone(),
        // Where the new attachment's routes go: after every default route already in the
        // container (`routes::placement`), read for the families it will have.
        routes: routes::placement_in(&netns, &addresses).await?,
        netns,
        mtu: conf.mtu,
        mac: requested.mac,
        addresses,
    };
    let addresses = attachment.addresses.clone();
    let (host_link, container_link) = plumb(&attachment, done).await?;
    crash_point(env.abort_after, Step::Veth);

    let key = workload.key();
    let endpoint = value_of(
        &key,
        &endpoint(&veth, &container_link, &conf.name, &addresses),
    )?;
    let key = key.to_string();
    // The key is recorded first: a failed write may still have landed, and undo is harmless.
    done.endpoint = Some(key.clone());
    tokio::try_join!(ensure_profile(conf, store), async {
        store
            .put(&key, &endpoint)
            .await
            .map_err(|e| conf.etcd_error(e))
    },)?;
    crash_point(env.abort_after, Step::Endpoint);

    let mut routes = Vec::new();
    if addresses.iter().any(IpAddr::is_ipv4) {
        routes.push(RouteConfig {
            dst: "0.0.0.0/0".parse().expect("valid"),
            gw: None,
        });
    }
    if addresses.iter().any(IpAddr::is_ipv6) {
        routes.push(RouteConfig {
            dst: "::/0".parse().expect("valid"),
            gw: None,
        });
    }
    Ok(CniResult {
        interfaces: vec![
            Interface {
                name: veth,
                mac: host_link.mac.map(|m| MacAddr(m).to_string()),
                sandbox: None,
            },
            Interface {
                name: env.ifname.clone(),
                mac: container_link.mac.map(|m| MacAddr(m).to_string()),
                sandbox: Some(env.netns.clone()),
            },
        ],
        ips: addresses
            .iter()
            .map(|ip| IpConfig {
                address: IpNet::from(*ip),
                gateway: None,
                interface: Some(1),
            })
            .collect(),
        routes,
        dns: conf.dns.clone().unwrap_or_else(|| json!({})),
    })
}

/// Whether the IPAM plugin assigned exactly the static addresses asked for (`calico-ipam`
/// does; another IPAM plugin might not read `runtimeConfig.ips` or `CNI_ARGS` `IP=`).
fn honoured(conf: &NetConf, requested: &Requested, assigned: &[IpAddr]) -> Result<(), CniError> {
    let same = requested.ips.len() == assigned.len()
        && requested.ips.iter().all(|ip| assigned.contains(ip));
    if requested.ips.is_empty() || same {
        return Ok(());
    }
    let list = |ips: &[IpAddr]| {
        ips.iter()
            .map(IpAddr::to_string)
            .collect::<Vec<_>>()
            .join(",")
    };
    Err(CniError::new(
        code::IPAM,
        format!(
            "IPAM plugin {} assigned {} but the runtime asked for {} (runtimeConfig.ips or \
             CNI_ARGS IP=): it does not take static addresses",
            conf.ipam()?.plugin_type,
            list(assigned),
            list(&requested.ips)
        ),
    ))
}

/// The veth pair, host-side settings, and the container's addresses and routes: a plan, run
/// by its executor (which undoes its own steps if one fails; the rest is ADD's undo).
async fn plumb(attachment: &Attachment, done: &mut Done) -> Result<(Link, Link), CniError> {
    let plan = plumbing::plan(attachment);
    let plumbed = plumbing::execute(&plan).await?;
    done.plumbing = plumbed.undo;
    Ok((plumbed.host, plumbed.container))
}

/// The workload endpoint ADD writes (seed 004): active, the host side's name, the container
/// side's MAC, the addresses, the network's profile.
fn endpoint(veth: &str, container: &Link, profile: &str, addresses: &[IpAddr]) -> WorkloadEndpoint {
    WorkloadEndpoint {
        mac: container.mac.map(MacAddr),
        ..WorkloadEndpoint::active(veth, &[profile], addresses)
    }
}

/// A value for `key`, as the model writes it; a value the model refuses is the plugin's bug or
/// bad configuration, named with the key and field.
fn value_of<T: serde::Serialize + Validate + Clone>(
    key: &Key,
    value: &T,
) -> Result<String, CniError> {
    to_json(value).map_err(|e| CniError::new(code::INVALID_CONFIG, format!("{key}: {e}")))
}

/// The network's profile, created if absent with Calico's classic default: tagged with the
/// network name, inbound allowed from that tag, outbound allowed. An existing profile is the
/// operator's and is left alone.
async fn ensure_profile(conf: &NetConf, store: &dyn Datastore) -> Result<(), CniError> {
    let name = conf.name.as_str();
    let (tags_value, rules_value) = network_default(name);
    let tags = Key::ProfileTags {
        profile: name.to_owned(),
    };
    let rules = Key::ProfileRules {
        profile: name.to_owned(),
    };
    let (tags_value, rules_value) = (
        value_of(&tags, &tags_value)?,
        value_of(&rules, &rules_value)?,
    );
    let (tags, rules) = (tags.to_string(), rules.to_string());
    tokio::try_join!(
        store.put_if_absent(&tags, &tags_value),
        store.put_if_absent(&rules, &rules_value),
    )
    .map_err(|e| conf.etcd_error(e))?;
    Ok(())
}

/// Undoes a partial ADD, best effort, in reverse order.
async fn undo(done: &Done, call: &Call<'_>, store: &Arc<dyn Datastore>) {
    if let Some(key) = &done.endpoint
        && let Err(e) = store.delete(key).await
    {
        tracing::error!("undo: cannot delete {key}: {e}");
    }
    plumbing::undo(&done.plumbing).await;
    if done.ipam
        && let Err(e) = call.ipam_del(&Ipam::new(store.clone())).await
    {
        tracing::error!("undo: IPAM DEL failed: {e}");
    }
}

async fn del(call: &Call<'_>) -> Result<(), CniError> {
    let (env, conf, _, workload) = call.parts();
    // DEL tries everything: the container side goes whoever owns the endpoint, and whether
    // etcd answers or not. The kernel tears a veth down inside the netlink request (tens of
    // milliseconds), which would stall this thread's runtime: it runs on a thread of its own
    // from the start, while etcd is reached and read and IPAM releases.
    let container_side = async {
        if env.netns.is_empty() || !Path::new(&env.netns).exists() {
            return Ok(());
        }
        remove_container_side_apart(env.netns.clone(), env.ifname.clone())
            .await
            .map_err(|e| {
                CniError::new(
                    code::IO_FAILURE,
                    format!("the interface removal failed: {e}"),
                )
            })?
    };
    let (removed, datastore) = tokio::join!(container_side, del_in_datastore(call));
    let (ipam, owner) = datastore?;
    removed?;
    if owner.newer {
        return Ok(());
    }
    let host = Netlink::connect(&Netns::current())?;
    host.delete_link(&workload.veth_name()).await?;
    if !owner.legacy.is_empty() {
        let _held = ipam_plugin::host_lock(conf).await?;
        let freed = ipam.release_ips(&owner.legacy).await.map_err(ipam_error)?;
        let legacy = handle_id(&conf.name, &env.container_id, "eth0");
        tracing::info!(?freed, %legacy, "released this interface's addresses of the old handle");
    }
    Ok(())
}

/// DEL in etcd: IPAM releases the call's handle while the endpoint's owner is read, and the
/// endpoint goes when its addresses are this container's. Returns the IPAM (on this call's
/// connection) and the owner.
async fn del_in_datastore(call: &Call<'_>) -> Result<(Ipam, Ownership), CniError> {
    let (env, conf, _, workload) = call.parts();
    let store = connect(conf).await?;
    let ipam = Ipam::new(store.clone());
    let key = workload.key().to_string();
    // Kubernetes reuses a pod's name (and so its endpoint and veth) for the next container:
    // only remove what belongs to this container's addresses.
    let handle = handle_id(&conf.name, &env.container_id, &env.ifname);
    // Before `.<ifname>` was part of the handle, every interface used the eth0 one.
    let legacy = handle_id(&conf.name, &env.container_id, "eth0");
    let ownership = async {
        let current = store.get(&key).await.map_err(|e| conf.etcd_error(e))?;
        let owner = match &current {
            None => Ownership::default(),
            Some(pair) => owned_by(&ipam, &pair.value, &handle, &legacy).await?,
        };
        Ok::<_, CniError>((current, owner))
    };
    // Releasing this handle changes no answer of `owned_by`: the addresses it frees were this
    // handle's, which counts as ours either way.
    let (ownership, released) = tokio::join!(ownership, call.ipam_del(&ipam));
    let (current, owner) = ownership?;
    match current {
        _ if owner.newer => {
            tracing::info!(%key, "the endpoint belongs to a newer container; leaving it");
        }
        Some(pair) => {
            store
                .compare_and_delete(&key, pair.mod_revision)
                .await
                .map_err(|e| conf.etcd_error(e))?;
        }
        None => {}
    }
    released?;
    Ok((ipam, owner))
}

/// [`remove_container_side`] on a thread and runtime of its own.
fn remove_container_side_apart(
    netns: String,
    ifname: String,
) -> tokio::task::JoinHandle<Result<(), CniError>> {
    tokio::task::spawn_blocking(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| CniError::new(code::IO_FAILURE, format!("cannot start: {e}")))?;
        runtime.block_on(remove_container_side(&netns, &ifname))
    })
}

/// The container side of an attachment: its source rules (a standby's; they do not go with
/// the link), then the interface, which takes its addresses and routes along.
async fn remove_container_side(netns: &str, ifname: &str) -> Result<(), CniError> {
    let netns = Netns::at_path(netns);
    let container = Netlink::connect(&netns)?;
    let Some(link) = container.link_by_name(ifname).await? else {
        return Ok(());
    };
    let addresses: Vec<IpAddr> = container
        .addresses(link.index)
        .await?
        .iter()
        .map(IpNet::addr)
        .collect();
    routes::delete_rules_from(&container, &addresses).await?;
    container.delete_link(ifname).await?;
    Ok(())
}

/// Whose an endpoint's addresses are.
#[derive(Debug, Default)]
struct Ownership {
    /// Some address is held by another handle: a newer container of the same workload.
    newer: bool,
    /// The addresses held by the legacy handle (an interface other than eth0, added before
    /// handles named the interface): DEL releases them one by one.
    legacy: Vec<IpAddr>,
}

/// Whose the endpoint's addresses are: this handle's (or nobody's), the legacy handle's for an
/// interface other than eth0, or another container's.
async fn owned_by(
    ipam: &Ipam,
    value: &str,
    handle: &str,
    legacy: &str,
) -> Result<Ownership, CniError> {
    let mut owner = Ownership::default();
    let Ok(endpoint) = from_json::<WorkloadEndpoint>(value) else {
        return Ok(owner);
    };
    for net in endpoint.ipv4_nets.iter().chain(&endpoint.ipv6_nets) {
        let holder = ipam.ip_info(net.addr()).await.map_err(ipam_error)?;
        match holder.and_then(|a| a.primary) {
            Some(h) if h == handle => {}
            Some(h) if h == legacy && handle != legacy => owner.legacy.push(net.addr()),
            Some(_) => owner.newer = true,
            None => {}
        }
    }
    Ok(owner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_addresses_the_ipam_plugin_did_not_honour_fail_the_add() {
        let conf =
            NetConf::parse(br#"{"name": "n", "ipam": {"type": "host-local"}}"#).expect("config");
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let asked = Requested {
            ips: vec![ip("10.0.0.5"), ip("fd00::5")],
            mac: None,
        };
        assert!(honoured(&conf, &asked, &[ip("fd00::5"), ip("10.0.0.5")]).is_ok());
        assert!(honoured(&conf, &Requested::default(), &[ip("10.0.0.9")]).is_ok());
        let e = honoured(&conf, &asked, &[ip("10.0.0.9")]).unwrap_err();
        assert_eq!(e.code, code::IPAM);
        assert_eq!(
            e.msg,
            "IPAM plugin host-local assigned 10.0.0.9 but the runtime asked for 10.0.0.5,fd00::5 \
             (runtimeConfig.ips or CNI_ARGS IP=): it does not take static addresses"
        );
    }
}
