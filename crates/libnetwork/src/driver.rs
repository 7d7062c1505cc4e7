//! The driver: the network and IPAM calls' effects on etcd, IPAM and the kernel. The decisions
//! are in `pool` and `endpoint` (pure); this file reads what they need and applies what they
//! decide, undoing its own writes when a later step fails.
//!
//! State kept in memory, between calls of one endpoint's life: the addresses `CreateEndpoint`
//! was given (until `Join` writes them to etcd), and which endpoints joined which sandbox (to
//! give a sandbox the routes once). Everything else is read from etcd or derived from ids, so a
//! restarted driver can still remove what an earlier one created.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use calico_datastore::Datastore;
use calico_ipam::Ipam;
use calico_linux::Netlink;
use calico_model::pool::IpPool;
use calico_model::{Key, from_json, names as model_names};

use crate::docker::DockerApi;
use crate::endpoint::{EndpointSpec, Sandboxes};
use crate::error::DriverError;
use crate::names::{self, VethNames};

/// An endpoint between `CreateEndpoint` and `Join`.
#[derive(Debug, Clone)]
struct Pending {
    profile: String,
    spec: EndpointSpec,
}

#[derive(Debug, Default)]
struct State {
    pending: HashMap<String, Pending>,
    /// Endpoint id → its key, once joined.
    joined: HashMap<String, String>,
    sandboxes: Sandboxes,
}

/// One host's driver.
#[derive(Debug)]
pub struct Driver {
    pub(crate) hostname: String,
    pub(crate) ipam: Ipam,
    netlink: Netlink,
    docker: DockerApi,
    state: Mutex<State>,
}

impl Driver {
    pub fn new(
        hostname: String,
        store: Arc<dyn Datastore>,
        netlink: Netlink,
        docker: DockerApi,
    ) -> Driver {
        Driver {
            hostname,
            ipam: Ipam::new(store),
            netlink,
            docker,
            state: Mutex::new(State::default()),
        }
    }

    /// The enabled and disabled pools of both families; a pool value that does not read is
    /// left out with a warning (Felix and IPAM do the same).
    pub(crate) async fn pools(&self) -> Result<Vec<IpPool>, DriverError> {
        let mut pools = Vec::new();
        for version in ["v4", "v6"] {
            for pair in self
                .store()
                .list(&format!("/calico/v1/ipam/{version}/pool/"))
                .await?
            {
                match from_json::<IpPool>(&pair.value) {
                    Ok(pool) => pools.push(pool),
                    Err(e) => tracing::warn!("ignoring invalid pool {}: {e}", pair.key),
                }
            }
        }
        Ok(pools)
    }

    /// `CreateEndpoint`: looks the network's name up, creates its profile if missing, and
    /// keeps the addresses for `Join`.
    pub(crate) async fn create_endpoint(
        &self,
        network_id: &str,
        endpoint_id: &str,
        spec: EndpointSpec,
    ) -> Result<(), DriverError> {
        names::veth_names(endpoint_id)?;
        let profile = self.docker.network_name(network_id).await?;
        model_names::validate_profile_id(&profile)
            .map_err(|e| DriverError::invalid("network name", &profile, e.reason))?;
        self.ensure_profile(&profile).await?;
        let pending = Pending { profile, spec };
        self.state().pending.insert(endpoint_id.to_owned(), pending);
        Ok(())
    }

    /// The network's profile, created if absent; an existing one is the operator's and stays.
    async fn ensure_profile(&self, profile: &str) -> Result<(), DriverError> {
        for (key, value) in crate::endpoint::default_profile(profile) {
            self.store().put_if_absent(&key, &value).await?;
        }
        Ok(())
    }

    /// `Join`: the veth, then the endpoint key; the veth goes again if the key cannot be
    /// written. Returns whether the endpoint is its sandbox's first.
    pub(crate) async fn join(
        &self,
        endpoint_id: &str,
        sandbox_key: &str,
    ) -> Result<(VethNames, bool), DriverError> {
        let pending = self
            .state()
            .pending
            .get(endpoint_id)
            .cloned()
            .ok_or_else(|| DriverError::UnknownEndpoint {
                endpoint: endpoint_id.to_owned(),
                reason: "no CreateEndpoint seen (the driver restarted in between?): remove \
                         the container and start it again"
                    .to_owned(),
            })?;
        let workload = names::workload_of(sandbox_key)?;
        let key = names::endpoint_key(&self.hostname, &workload, endpoint_id)?.to_string();
        let veth = names::veth_names(endpoint_id)?;
        let spec = &pending.spec;
        let mac = crate::plumb::create(&self.netlink, &veth, spec.mac, &spec.families()).await?;
        let value =
            crate::endpoint::endpoint_json(&veth.host, mac, &pending.profile, &spec.addresses);
        if let Err(e) = self.store().put(&key, &value).await {
            if let Err(undo) = crate::plumb::delete(&self.netlink, &veth).await {
                tracing::error!("undo: cannot delete veth {}: {undo}", veth.host);
            }
            return Err(e.into());
        }
        let mut state = self.state();
        state.joined.insert(endpoint_id.to_owned(), key);
        let first = state.sandboxes.join(sandbox_key, endpoint_id);
        Ok((veth, first))
    }

    /// `Leave` and `DeleteEndpoint`: the endpoint key first (so Felix stops routing to it),
    /// then the veth. Both are idempotent, and work from ids alone after a restart.
    pub(crate) async fn remove_endpoint(
        &self,
        endpoint_id: &str,
        forget: bool,
    ) -> Result<(), DriverError> {
        let veth = names::veth_names(endpoint_id)?;
        let known = self.state().joined.get(endpoint_id).cloned();
        let keys = match known {
            Some(key) => vec![key],
            None => self.endpoint_keys(endpoint_id).await?,
        };
        for key in &keys {
            self.store().delete(key).await?;
        }
        crate::plumb::delete(&self.netlink, &veth).await?;
        let mut state = self.state();
        state.joined.remove(endpoint_id);
        state.sandboxes.leave(endpoint_id);
        if forget {
            state.pending.remove(endpoint_id);
        }
        Ok(())
    }

    /// This host's Docker endpoint keys of an endpoint id, whatever sandbox they name.
    async fn endpoint_keys(&self, endpoint_id: &str) -> Result<Vec<String>, DriverError> {
        let prefix = names::host_endpoints_prefix(&self.hostname);
        let pairs = self.store().list(&prefix).await?;
        Ok(pairs
            .into_iter()
            .map(|p| p.key)
            .filter(|key| {
                matches!(Key::parse(key), Ok(Key::WorkloadEndpoint(id)) if id.endpoint == endpoint_id)
            })
            .collect())
    }

    /// `DeleteNetwork`: forgets the cached name; the profile stays (the operator's policy, and
    /// other hosts' networks of the same name use it).
    pub(crate) fn delete_network(&self, network_id: &str) {
        self.docker.forget(network_id);
    }

    fn store(&self) -> &dyn Datastore {
        self.ipam.store()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("driver state lock")
    }
}
