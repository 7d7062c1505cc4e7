//! What the driver derives from dockerd's ids: the veth pair's names, the workload segment of
//! the endpoint key, the IPAM handle of an address and the endpoint key itself. Pure.

use std::sync::atomic::{AtomicU64, Ordering};

use calico_model::key::{Key, Prefix, WorkloadEndpointId};
use calico_model::names;

use crate::error::DriverError;

/// The orchestrator segment of every endpoint key this driver writes (seed 003).
pub const ORCHESTRATOR: &str = "docker";

/// How many characters of the endpoint id name the veth: `cali` + 11 = 15, the kernel's limit.
const ID_CHARS: usize = 11;

/// The veth pair of an endpoint: `host` stays in the driver's namespace (Felix's `cali`
/// prefix), `temp` is the end libnetwork moves into the container and renames `eth<n>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VethNames {
    pub host: String,
    pub temp: String,
}

/// The veth names of an endpoint id: its first 11 characters after `cali` and `tmp`. dockerd's
/// endpoint ids are 64 random hex digits, so 11 of them (44 bits) do not collide on one host.
pub fn veth_names(endpoint_id: &str) -> Result<VethNames, DriverError> {
    if endpoint_id.len() < ID_CHARS || !endpoint_id.chars().all(|c| c.is_ascii_alphanumeric()) {
        return Err(DriverError::invalid(
            "EndpointID",
            endpoint_id,
            format!("expected at least {ID_CHARS} letters or digits (dockerd sends 64 hex digits)"),
        ));
    }
    let id = &endpoint_id[..ID_CHARS];
    Ok(VethNames {
        host: format!("cali{id}"),
        temp: format!("tmp{id}"),
    })
}

/// The workload segment of an endpoint key: the sandbox's id, the last component of the
/// `SandboxKey` path (`<exec-root>/netns/<sandbox id, 12 hex digits>`). dockerd names the
/// container in none of the calls it makes to a driver (checked on 20.10.24), and one sandbox
/// is one container; `docker inspect -f '{{.NetworkSettings.SandboxID}}'` maps it back.
pub fn workload_of(sandbox_key: &str) -> Result<String, DriverError> {
    let id = sandbox_key.rsplit('/').next().unwrap_or_default();
    if id.is_empty() {
        return Err(DriverError::invalid(
            "SandboxKey",
            sandbox_key,
            "expected a path ending in the sandbox id",
        ));
    }
    names::validate_workload_id(id)
        .map_err(|e| DriverError::invalid("SandboxKey", sandbox_key, e.reason))?;
    Ok(id.to_owned())
}

/// The endpoint's key: `/calico/v1/host/<host>/workload/docker/<sandbox>/endpoint/<endpoint>`.
pub fn endpoint_key(hostname: &str, workload: &str, endpoint_id: &str) -> Result<Key, DriverError> {
    names::validate_endpoint_id(endpoint_id)
        .map_err(|e| DriverError::invalid("EndpointID", endpoint_id, e.reason))?;
    Ok(Key::WorkloadEndpoint(WorkloadEndpointId {
        hostname: hostname.to_owned(),
        orchestrator: ORCHESTRATOR.to_owned(),
        workload: workload.to_owned(),
        endpoint: endpoint_id.to_owned(),
    }))
}

/// The prefix of this host's Docker endpoint keys.
pub fn host_endpoints_prefix(hostname: &str) -> String {
    Prefix::Workloads {
        hostname: hostname.to_owned(),
        orchestrator: ORCHESTRATOR.to_owned(),
    }
    .to_string()
}

/// The prefix of every IPAM handle this driver creates.
pub const HANDLE_PREFIX: &str = "libnetwork.";

/// A fresh handle for one address: `libnetwork.<host>.<time>-<n>`. `RequestAddress` names no
/// endpoint or container, so an address is its own handle (unique per process and time).
pub fn new_handle(hostname: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("{HANDLE_PREFIX}{hostname}.{nanos:x}-{n}")
}

/// When a handle of this host was made, from its `<time>` part; `None` for any other handle.
pub fn handle_time(hostname: &str, handle: &str) -> Option<std::time::SystemTime> {
    let rest = handle.strip_prefix(HANDLE_PREFIX)?.strip_prefix(hostname)?;
    let (nanos, _) = rest.strip_prefix('.')?.split_once('-')?;
    let nanos = u64::try_from(u128::from_str_radix(nanos, 16).ok()?).ok()?;
    Some(std::time::UNIX_EPOCH + std::time::Duration::from_nanos(nanos))
}

#[cfg(test)]
mod tests {
    use super::*;

    const EP: &str = "d594538e6c7555095dd637dff4235631d8f2f4370e020b727f5f899696519a93";

    #[test]
    fn veth_names_fit_the_kernel_limit() {
        let names = veth_names(EP).unwrap();
        assert_eq!(names.host, "calid594538e6c7");
        assert_eq!(names.temp, "tmpd594538e6c7");
        assert!(names.host.len() <= 15 && names.temp.len() <= 15);
    }

    #[test]
    fn short_or_odd_endpoint_ids_are_refused_by_name() {
        let err = veth_names("abc").unwrap_err().to_string();
        assert!(err.starts_with("EndpointID \"abc\""), "{err}");
        assert!(veth_names("d594538e6c7/../x").is_err());
    }

    #[test]
    fn the_workload_is_the_sandbox_id() {
        let key = "/tmp/lnx/d/exec/netns/e4da01fbfec8";
        assert_eq!(workload_of(key).unwrap(), "e4da01fbfec8");
        assert!(workload_of("/var/run/docker/netns/").is_err());
        assert_eq!(
            endpoint_key("h1", "e4da01fbfec8", EP).unwrap().to_string(),
            format!("/calico/v1/host/h1/workload/docker/e4da01fbfec8/endpoint/{EP}")
        );
    }

    #[test]
    fn handles_are_unique_and_valid() {
        let (a, b) = (new_handle("h1"), new_handle("h1"));
        assert_ne!(a, b);
        assert!(a.starts_with("libnetwork.h1."));
        names::validate_handle_id(&a).unwrap();
        let made = handle_time("h1", &a).expect("a time");
        assert!(made.elapsed().unwrap() < std::time::Duration::from_secs(60));
        assert_eq!(handle_time("h", &a), None, "another host's handle");
        assert_eq!(handle_time("h1", "cni.h1.abc-1"), None);
    }
}
