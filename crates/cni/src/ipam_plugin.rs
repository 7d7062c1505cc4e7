//! The `calico-ipam` plugin: addresses from Calico IPAM, under the handle
//! `<network>.<container id>`. The `calico-ipam` binary calls [`run`]; the `calico` plugin calls
//! [`add`], [`del`] and [`check`] itself, on its own etcd connection, when its `ipam.type` is
//! `calico-ipam`: one code path, the same results and errors.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

use calico_datastore::{Datastore, EtcdDatastore};
use calico_ipam::{AssignRequest, HostLock, HostLockGuard, Ipam, IpamError};
use calico_model::IpVersion;
use ipnet::IpNet;
use serde_json::Value;

use crate::config::{NetConf, flags_to_fields};
use crate::spec::{CniError, CniResult, Command, Env, IpConfig, code};
use crate::workload::{Workload, handle_id};

/// Connects to the datastore the config names (code 100 when it cannot).
pub async fn connect(conf: &NetConf) -> Result<Arc<dyn Datastore>, CniError> {
    let store = EtcdDatastore::connect(conf.etcd()?)
        .await
        .map_err(|e| conf.etcd_error(e))?;
    Ok(Arc::new(store))
}

/// One call of the plugin; returns what to print (nothing for DEL and CHECK).
pub async fn run(env: &Env, conf: &NetConf) -> Result<Option<Value>, CniError> {
    conf.ipam()?;
    Workload::from_env(env, &conf.nodename())?;
    let ipam = Ipam::new(connect(conf).await?);
    match env.command {
        Command::Add => {
            let result = add(&ipam, env, conf).await?;
            Ok(Some(result.to_json(&conf.cni_version)))
        }
        Command::Del => del(&ipam, env, conf).await.map(|()| None),
        Command::Check => check(&ipam, env, conf).await.map(|()| None),
        Command::Version => unreachable!("VERSION is answered before any plugin runs"),
    }
}

/// ADD: the addresses of the call's handle (assigned under the per-host lock), as the
/// plugin's result.
pub async fn add(ipam: &Ipam, env: &Env, conf: &NetConf) -> Result<CniResult, CniError> {
    let ipam_conf = conf.ipam()?;
    let nodename = conf.nodename();
    let workload = Workload::from_env(env, &nodename)?;
    let handle = handle_id(&conf.name, &env.container_id, &env.ifname);
    let mut attributes = BTreeMap::from([
        ("container_id".to_owned(), env.container_id.clone()),
        ("node".to_owned(), nodename.clone()),
    ]);
    if let Some((namespace, pod)) = &workload.pod {
        attributes.insert("namespace".to_owned(), namespace.clone());
        attributes.insert("pod".to_owned(), pod.clone());
    }
    // Static addresses (runtimeConfig.ips or CNI_ARGS IP=) go through the explicit
    // assignment; otherwise IPAM picks.
    let requested = conf.requested(env)?;
    let lock = conf.host_lock()?;
    let ips = if requested.ips.is_empty() {
        let request = AssignRequest {
            host: nodename.clone(),
            handle: handle.clone(),
            attributes,
            ipv4: usize::from(ipam_conf.ipv4()),
            ipv6: usize::from(ipam_conf.ipv6()),
            ipv4_pools: ipam_conf.ipv4_pools.clone(),
            ipv6_pools: ipam_conf.ipv6_pools.clone(),
        };
        assign(ipam, &request, &lock).await?
    } else {
        let _held = lock.acquire().await.map_err(ipam_error)?;
        assign_static(ipam, &requested.ips, &handle, &attributes, &nodename).await?
    };
    Ok(CniResult {
        ips: ips
            .into_iter()
            .map(|ip| IpConfig {
                address: IpNet::from(ip),
                gateway: None,
                interface: None,
            })
            .collect(),
        ..CniResult::default()
    })
}

/// DEL: releases every address of the call's handle (under the per-host lock).
pub async fn del(ipam: &Ipam, env: &Env, conf: &NetConf) -> Result<(), CniError> {
    let handle = handle_id(&conf.name, &env.container_id, &env.ifname);
    let _held = host_lock(conf).await?;
    let freed = ipam.release_by_handle(&handle).await.map_err(ipam_error)?;
    tracing::info!(%handle, ?freed, "released");
    Ok(())
}

/// CHECK: every address of `prevResult` is still assigned to the call's handle.
pub async fn check(ipam: &Ipam, env: &Env, conf: &NetConf) -> Result<(), CniError> {
    let handle = handle_id(&conf.name, &env.container_id, &env.ifname);
    let prev = conf.prev_result()?.ok_or_else(|| {
        CniError::new(
            code::INVALID_CONFIG,
            "prevResult: CHECK needs the ADD result",
        )
    })?;
    let mine = ipam.addresses_of(&handle).await.map_err(ipam_error)?;
    for ip in &prev.ips {
        if !mine.contains(&ip.address.addr()) {
            return Err(CniError::new(
                code::CHECK_FAILED,
                format!("{} is not assigned to handle {handle}", ip.address.addr()),
            ));
        }
    }
    Ok(())
}

/// Takes the per-host IPAM lock of the config (`ipam_lock_file`): the IPAM calls of one host
/// run in turn instead of racing for its block.
pub async fn host_lock(conf: &NetConf) -> Result<HostLockGuard, CniError> {
    conf.host_lock()?.acquire().await.map_err(ipam_error)
}

/// Assigns automatically; a repeated ADD for the same container gets the addresses it already
/// has instead of new ones.
async fn assign(
    ipam: &Ipam,
    request: &AssignRequest,
    lock: &HostLock,
) -> Result<Vec<IpAddr>, CniError> {
    // What the assignment reads before the host's blocks is read with the handle: one round
    // trip instead of two. None of it is what the other runs of this host write (that is the
    // blocks), so it is read before the lock, which is then held for the blocks' read and the
    // transaction only; a stale read costs a lost transaction, never an address.
    let versions: Vec<IpVersion> = [(IpVersion::V4, request.ipv4), (IpVersion::V6, request.ipv6)]
        .into_iter()
        .filter(|(_, count)| *count > 0)
        .map(|(version, _)| version)
        .collect();
    let (held, ()) = tokio::try_join!(
        ipam.addresses_of(&request.handle),
        ipam.prefetch(&request.host, &versions)
    )
    .map_err(ipam_error)?;
    let _held = lock.acquire().await.map_err(ipam_error)?;
    let v4 = held.iter().filter(|ip| ip.is_ipv4()).count();
    let v6 = held.len() - v4;
    if !held.is_empty() && v4 == request.ipv4 && v6 == request.ipv6 {
        return Ok(held);
    }
    if !held.is_empty() {
        ipam.release_by_handle(&request.handle)
            .await
            .map_err(ipam_error)?;
    }
    let assigned = ipam.auto_assign(request).await.map_err(ipam_error)?;
    Ok(assigned.ipv4.into_iter().chain(assigned.ipv6).collect())
}

/// Exactly these addresses (all or none); those the handle already holds (a repeated ADD)
/// are kept.
async fn assign_static(
    ipam: &Ipam,
    ips: &[IpAddr],
    handle: &str,
    attributes: &BTreeMap<String, String>,
    host: &str,
) -> Result<Vec<IpAddr>, CniError> {
    let held = ipam.addresses_of(handle).await.map_err(ipam_error)?;
    let mut done = Vec::new();
    for ip in ips {
        if held.contains(ip) {
            continue;
        }
        if let Err(e) = ipam.assign_ip(*ip, handle, attributes, host).await {
            let _ = ipam.release_ips(&done).await;
            return Err(ipam_error(e));
        }
        done.push(*ip);
    }
    Ok(ips.to_vec())
}

/// IPAM's error as a CNI error with a fitting code; errors about a config field name it as the
/// config spells it (`ipam.ipv4_pools`).
pub fn ipam_error(error: IpamError) -> CniError {
    match &error {
        IpamError::UnknownPool { field, .. } | IpamError::DisabledPool { field, .. }
            if field.ends_with("_pools") =>
        {
            CniError::new(code::INVALID_CONFIG, format!("ipam.{error}"))
        }
        IpamError::UnknownPool { .. }
        | IpamError::DisabledPool { .. }
        | IpamError::InvalidHandle { .. } => CniError::new(code::INVALID_CONFIG, error.to_string()),
        IpamError::Datastore(_) | IpamError::Corrupt { .. } => {
            CniError::new(code::DATASTORE, flags_to_fields(&error.to_string()))
        }
        IpamError::Contention { .. } => CniError::new(code::TRY_AGAIN_LATER, error.to_string()),
        // Named as the config field that sets the file.
        IpamError::Lock { busy: true, .. } => {
            CniError::new(code::TRY_AGAIN_LATER, format!("ipam_lock_file: {error}"))
        }
        IpamError::Lock { busy: false, .. } => {
            CniError::new(code::IO_FAILURE, format!("ipam_lock_file: {error}"))
        }
        IpamError::Exhausted { .. }
        | IpamError::NoPool { .. }
        | IpamError::NotInPool { .. }
        | IpamError::InUse { .. } => CniError::new(code::IPAM, error.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_errors_name_the_config_field_and_say_whether_to_retry() {
        let lock = |busy: bool| IpamError::Lock {
            path: "/run/x.lock".into(),
            reason: "why".to_owned(),
            busy,
        };
        let e = ipam_error(lock(true));
        assert_eq!(
            (e.code, e.msg.as_str()),
            (
                code::TRY_AGAIN_LATER,
                "ipam_lock_file: the per-host IPAM lock /run/x.lock: why"
            )
        );
        assert_eq!(ipam_error(lock(false)).code, code::IO_FAILURE);
    }
}
