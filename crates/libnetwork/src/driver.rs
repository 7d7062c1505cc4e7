//! The driver: the network and IPAM calls' effects on etcd, IPAM and the kernel. The decisions
//! are in `pool` and `endpoint` (pure); this file reads what they need and applies what they
//! decide, undoing its own writes when a later step fails.
//!
//! No state in memory but dockerd's network names and the second networks' source routing
//! under way (`standby`): what `CreateEndpoint` learns waits for `Join` in etcd (`pending`),
//! which endpoints share a sandbox is read from the endpoint keys, and everything else is
//! derived from ids, so a restarted driver finishes and removes what an earlier one started.
//! `reconcile` collects what a crash in between leaves.

use std::net::Ipv6Addr;
use std::sync::Arc;

use calico_datastore::Datastore;
use calico_ipam::Ipam;
use calico_linux::{Netlink, Netns};
use calico_model::endpoint::WorkloadEndpoint;
use calico_model::key::Prefix;
use calico_model::pool::IpPool;
use calico_model::{IpVersion, Key, MacAddr, from_json, names as model_names};
use calico_plumbing::Plumbed;

use crate::docker::DockerApi;
use crate::endpoint::{EndpointSpec, SandboxRoutes};
use crate::error::DriverError;
use crate::names::{self, VethNames};
use crate::pending::{self, PENDING_TTL, Pending};
use crate::standby::{Standby, Standbys};

/// What `Join` did: the veth, and the routes the sandbox lacked.
#[derive(Debug, Clone)]
pub struct Joined {
    pub veth: VethNames,
    pub routes: SandboxRoutes,
    pub v6_gateway: Option<Ipv6Addr>,
}

/// One host's driver.
#[derive(Debug)]
pub struct Driver {
    pub(crate) hostname: String,
    pub(crate) ipam: Ipam,
    pub(crate) netlink: Netlink,
    docker: DockerApi,
    pub(crate) standbys: Standbys,
    /// What `reconcile` saw of endpoints whose veth is back in this namespace.
    pub(crate) suspects: Suspects,
}

/// Endpoint keys whose veth was back in this namespace at the last reconcile pass, and since
/// when (`reconcile` reads and updates it).
#[derive(Debug, Default)]
pub struct Suspects(
    pub(crate) std::sync::Mutex<std::collections::BTreeMap<String, std::time::Instant>>,
);

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
            standbys: Standbys::default(),
            suspects: Default::default(),
        }
    }

    /// The enabled and disabled pools of both families; a pool value that does not read is
    /// left out with a warning (Felix and IPAM do the same).
    pub(crate) async fn pools(&self) -> Result<Vec<IpPool>, DriverError> {
        let mut pools = Vec::new();
        for version in [IpVersion::V4, IpVersion::V6] {
            for pair in self
                .store()
                .list(&Prefix::PoolsOf(version).to_string())
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
    /// records the endpoint for `Join` in etcd (a driver restarted in between finds it there).
    /// A profile created here stays if the record cannot be written: it is the network's, and
    /// the next container on the network uses it.
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
        let record = Pending::new(network_id, &profile, &spec);
        let key = pending::key(&self.hostname, endpoint_id);
        self.store()
            .put_with_ttl(&key, &record.to_json(), PENDING_TTL)
            .await?;
        Ok(())
    }

    /// The network's profile, created if absent; an existing one is the operator's and stays.
    async fn ensure_profile(&self, profile: &str) -> Result<(), DriverError> {
        let (tags, rules) = calico_model::profile::network_default(profile);
        let name = profile.to_owned();
        let tags_key = Key::ProfileTags {
            profile: name.clone(),
        };
        let rules_key = Key::ProfileRules { profile: name };
        for (key, value) in [
            (&tags_key, DriverError::value_of(&tags_key, &tags)?),
            (&rules_key, DriverError::value_of(&rules_key, &rules)?),
        ] {
            self.store().put_if_absent(&key.to_string(), &value).await?;
        }
        Ok(())
    }

    /// `Join`: the veth, then the endpoint key, then the pending record goes; the veth goes
    /// again if the key cannot be written. A second network's endpoint (one whose routes the
    /// sandbox has from another) is routed as a standby once dockerd has moved it in.
    pub(crate) async fn join(
        &self,
        endpoint_id: &str,
        sandbox_key: &str,
    ) -> Result<Joined, DriverError> {
        let record = self.pending(endpoint_id).await?;
        let spec = record.spec()?;
        let workload = names::workload_of(sandbox_key)?;
        let key = names::endpoint_key(&self.hostname, &workload, endpoint_id)?.to_string();
        let veth = names::veth_names(endpoint_id)?;
        let others = self.sandbox_endpoints(&workload, endpoint_id).await?;
        let routes = SandboxRoutes::needed(&spec, &others);
        let plumbed = crate::plumb::create(&veth, spec.mac, &spec.addresses).await?;
        let v6_gateway = match self.finish_join(&plumbed, &record, routes, &key).await {
            Ok(gateway) => gateway,
            Err(e) => {
                if let Err(undo) = crate::plumb::delete(&self.netlink, &veth).await {
                    tracing::error!("undo: cannot delete veth {}: {undo}", veth.host);
                }
                return Err(e);
            }
        };
        let pending_key = pending::key(&self.hostname, endpoint_id);
        if let Err(e) = self.store().delete(&pending_key).await {
            // Harmless: the record expires, and the endpoint key now holds the addresses.
            tracing::warn!("cannot delete {pending_key}: {e}");
        }
        let families = routes.standby_families(&spec);
        if let (false, Some(mac)) = (families.is_empty(), plumbed.container.mac) {
            self.standbys.start(Standby {
                endpoint_id: endpoint_id.to_owned(),
                veth: veth.clone(),
                sandbox: Netns::at_path(sandbox_key),
                mac,
                addresses: spec.addresses,
                families,
            });
        }
        Ok(Joined {
            veth,
            routes,
            v6_gateway,
        })
    }

    /// `Join`'s steps after the veth: the IPv6 gateway if the sandbox needs the route, then
    /// the endpoint key (with the container end's MAC). The caller deletes the veth if this
    /// fails.
    async fn finish_join(
        &self,
        plumbed: &Plumbed,
        record: &Pending,
        routes: SandboxRoutes,
        key: &str,
    ) -> Result<Option<Ipv6Addr>, DriverError> {
        let (host, container) = (&plumbed.host, &plumbed.container);
        let mac = container.mac.ok_or_else(|| DriverError::UnknownEndpoint {
            endpoint: container.name.clone(),
            reason: "the new veth end has no MAC address".to_owned(),
        })?;
        let endpoint =
            crate::endpoint::endpoint(&host.name, MacAddr(mac), &record.profile, &record.addresses);
        let value = DriverError::value_of(key, &endpoint)?;
        let v6_gateway = match routes.v6 {
            true => Some(crate::plumb::host_link_local(&self.netlink, host).await?),
            false => None,
        };
        self.store().put(key, &value).await?;
        Ok(v6_gateway)
    }

    /// The pending record of an endpoint.
    async fn pending(&self, endpoint_id: &str) -> Result<Pending, DriverError> {
        names::veth_names(endpoint_id)?;
        let key = pending::key(&self.hostname, endpoint_id);
        match self.store().get(&key).await? {
            Some(pair) => Pending::parse(&key, &pair.value),
            None => Err(DriverError::UnknownEndpoint {
                endpoint: endpoint_id.to_owned(),
                reason: format!(
                    "no CreateEndpoint recorded at {key} (none seen, or older than {}s): remove \
                     the container and start it again",
                    PENDING_TTL.as_secs()
                ),
            }),
        }
    }

    /// The other endpoints of a sandbox on this host, as etcd has them.
    async fn sandbox_endpoints(
        &self,
        workload: &str,
        endpoint_id: &str,
    ) -> Result<Vec<WorkloadEndpoint>, DriverError> {
        let prefix = format!(
            "{}{workload}/endpoint/",
            names::host_endpoints_prefix(&self.hostname)
        );
        let pairs = self.store().list(&prefix).await?;
        Ok(pairs
            .iter()
            .filter(|p| !p.key.ends_with(&format!("/{endpoint_id}")))
            .filter_map(|p| from_json::<WorkloadEndpoint>(&p.value).ok())
            .collect())
    }

    /// `Leave` and `DeleteEndpoint`: a standby's source rules in the sandbox (known while
    /// this driver runs), the endpoint key (so Felix stops routing to it), then the veth, and
    /// for `DeleteEndpoint` the pending record. Idempotent, from ids alone.
    pub(crate) async fn remove_endpoint(
        &self,
        endpoint_id: &str,
        forget: bool,
    ) -> Result<(), DriverError> {
        let veth = names::veth_names(endpoint_id)?;
        self.standbys.forget(endpoint_id).await;
        for key in self.endpoint_keys(endpoint_id).await? {
            self.store().delete(&key).await?;
        }
        crate::plumb::delete(&self.netlink, &veth).await?;
        if forget {
            let key = pending::key(&self.hostname, endpoint_id);
            self.store().delete(&key).await?;
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

    pub(crate) fn store(&self) -> &dyn Datastore {
        self.ipam.store()
    }
}
