//! Who a CNI call is about: the workload endpoint's identity in the datastore, the host-side
//! veth name and the IPAM handle, all derived from the call's environment.

use calico_model::key::{Key, WorkloadEndpointId};
use calico_model::names;
use sha1::{Digest, Sha1};

use crate::spec::{CniError, Env, code};

/// A workload endpoint as this call names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workload {
    pub id: WorkloadEndpointId,
    pub container_id: String,
    /// Kubernetes namespace and pod, when the runtime is Kubernetes.
    pub pod: Option<(String, String)>,
}

impl Workload {
    /// `k8s` and `<namespace>.<pod>` when `K8S_POD_NAMESPACE` and `K8S_POD_NAME` are both in
    /// `CNI_ARGS`; otherwise `cni` and the container id. The endpoint is the interface name.
    pub fn from_env(env: &Env, nodename: &str) -> Result<Workload, CniError> {
        let arg = |name: &str| env.args.get(name).filter(|v| !v.is_empty()).cloned();
        let pod = arg("K8S_POD_NAMESPACE").zip(arg("K8S_POD_NAME"));
        let (orchestrator, workload) = match &pod {
            Some((namespace, name)) => ("k8s", format!("{namespace}.{name}")),
            None => ("cni", env.container_id.clone()),
        };
        names::validate_hostname(nodename).map_err(|e| {
            CniError::new(
                code::INVALID_CONFIG,
                format!("nodename {nodename:?}: {}", e.reason),
            )
        })?;
        names::validate_workload_id(&workload).map_err(|e| {
            CniError::new(
                code::INVALID_ENVIRONMENT,
                format!(
                    "workload id {workload:?} (from CNI_ARGS or CNI_CONTAINERID): {}",
                    e.reason
                ),
            )
        })?;
        names::validate_endpoint_id(&env.ifname).map_err(|e| {
            CniError::new(
                code::INVALID_ENVIRONMENT,
                format!("CNI_IFNAME {:?}: {}", env.ifname, e.reason),
            )
        })?;
        Ok(Workload {
            id: WorkloadEndpointId {
                hostname: nodename.to_owned(),
                orchestrator: orchestrator.to_owned(),
                workload,
                endpoint: env.ifname.clone(),
            },
            container_id: env.container_id.clone(),
            pod,
        })
    }

    /// The endpoint's key.
    pub fn key(&self) -> Key {
        Key::WorkloadEndpoint(self.id.clone())
    }

    /// `cali` + the first 11 hex digits of the SHA-1 of the workload id (and the interface,
    /// when it is not `eth0`): stable for the workload, 15 characters, the kernel's limit.
    pub fn veth_name(&self) -> String {
        let mut identity = self.id.workload.clone();
        if self.id.endpoint != "eth0" {
            identity = format!("{identity}.{}", self.id.endpoint);
        }
        let digest = Sha1::digest(identity.as_bytes());
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        format!("cali{}", &hex[..11])
    }
}

/// The IPAM handle of a container's interface on a network: `<network>.<container id>`, plus
/// `.<ifname>` when the interface is not `eth0` (so two attachments of one network to one
/// container hold an address each, and DEL of one releases only its own), with characters a
/// handle id cannot hold replaced by `_`.
pub fn handle_id(network: &str, container_id: &str, ifname: &str) -> String {
    let clean = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    };
    let handle = format!("{}.{}", clean(network), clean(container_id));
    match ifname {
        "eth0" => handle,
        other => format!("{handle}.{}", clean(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn env(args: &str) -> Env {
        let vars: BTreeMap<String, String> = [
            ("CNI_COMMAND", "ADD"),
            ("CNI_CONTAINERID", "df3c4ad4098f"),
            ("CNI_NETNS", "/proc/1/ns/net"),
            ("CNI_IFNAME", "eth0"),
            ("CNI_ARGS", args),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        Env::parse(&vars).unwrap()
    }

    #[test]
    fn kubernetes_pods_are_named_by_namespace_and_pod() {
        let w = Workload::from_env(
            &env("IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=nginx1-137666357-jdgyu"),
            "node1",
        )
        .unwrap();
        assert_eq!(
            w.key().to_string(),
            "/calico/v1/host/node1/workload/k8s/default.nginx1-137666357-jdgyu/endpoint/eth0"
        );
        let veth = w.veth_name();
        assert_eq!(veth.len(), 15);
        assert!(veth.starts_with("cali") && veth[4..].chars().all(|c| c.is_ascii_hexdigit()));
    }

    #[test]
    fn other_runtimes_are_named_by_container_id() {
        // podman passes K8S_POD_NAME without a namespace.
        let w = Workload::from_env(&env("IgnoreUnknown=1;K8S_POD_NAME=web"), "node1").unwrap();
        assert_eq!(w.id.orchestrator, "cni");
        assert_eq!(w.id.workload, "df3c4ad4098f");
        assert_ne!(
            w.veth_name(),
            Workload::from_env(&env(""), "node2")
                .map(|mut w| {
                    w.id.workload = "other".into();
                    w.veth_name()
                })
                .unwrap()
        );
        assert_eq!(handle_id("my net", "abc", "eth0"), "my_net.abc");
        assert_eq!(handle_id("net", "abc", "eth1"), "net.abc.eth1");
    }
}
