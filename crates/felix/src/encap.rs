//! VXLAN for Felix: the hosts' tunnel endpoints from the datastore, and the plan of
//! [`calico_dataplane::vxlan`] kept applied as pools, endpoints and tunnel endpoints change.

use std::collections::BTreeMap;

use calico_calc::Cluster;
use calico_dataplane::vxlan::{self, Vxlan, VxlanPlan};
use calico_linux::NetlinkError;
use calico_model::tunnel::VxlanTunnel;
use calico_model::{Key, Value, parse_value};

/// The VXLAN side of the agent.
#[derive(Debug)]
pub struct Encapsulation {
    hostname: String,
    /// Every host's tunnel endpoint, by hostname.
    tunnels: BTreeMap<String, VxlanTunnel>,
    vxlan: Vxlan,
    /// The plan last applied (`None`: apply the next one whatever it is).
    applied: Option<VxlanPlan>,
    /// Something the plan depends on changed.
    dirty: bool,
}

impl Encapsulation {
    pub fn new(hostname: &str, vxlan: Vxlan) -> Encapsulation {
        Encapsulation {
            hostname: hostname.to_owned(),
            tunnels: BTreeMap::new(),
            vxlan,
            applied: None,
            dirty: true,
        }
    }

    /// Notes a datastore update (`None`: deleted): tunnel endpoints are kept here; pools and
    /// workload endpoints (which the calculator keeps) make the plan stale.
    pub fn update(&mut self, key: &str, value: Option<&str>) {
        match Key::parse(key) {
            Ok(Key::VxlanTunnel { hostname }) => {
                self.dirty = true;
                let parsed = value.map(|raw| {
                    parse_value(
                        &Key::VxlanTunnel {
                            hostname: hostname.clone(),
                        },
                        raw,
                    )
                });
                match parsed {
                    Some(Ok(Value::VxlanTunnel(tunnel))) => {
                        self.tunnels.insert(hostname, tunnel);
                    }
                    Some(Err(reason)) => {
                        tracing::warn!(
                            "Validation failed for {key}, treating as missing: {reason}"
                        );
                        self.tunnels.remove(&hostname);
                    }
                    _ => {
                        self.tunnels.remove(&hostname);
                    }
                }
            }
            Ok(Key::Pool { .. } | Key::WorkloadEndpoint(_)) => self.dirty = true,
            _ => {}
        }
    }

    /// Whether the kernel may lag behind the datastore.
    pub fn dirty(&self) -> bool {
        self.dirty
    }

    /// The periodic check: compare with the kernel again even if nothing changed.
    pub fn refresh(&mut self) {
        self.applied = None;
        self.dirty = true;
    }

    /// Applies the plan for the cluster as it is, if it differs from the last one applied.
    pub async fn sync(&mut self, cluster: &Cluster) -> Result<(), NetlinkError> {
        if !self.dirty {
            return Ok(());
        }
        let plan = vxlan::plan(
            &self.hostname,
            &self.tunnels,
            &cluster.pools,
            &cluster.endpoints,
        );
        if self.applied.as_ref() != Some(&plan) {
            let changes = self.vxlan.sync(&plan).await?;
            if !changes.is_empty() {
                tracing::info!(?changes, "VXLAN programmed");
            }
            if plan.local.is_none() && self.tunnels.contains_key(&self.hostname) {
                tracing::debug!("no pool has VXLAN: no tunnel device");
            }
            self.applied = Some(plan);
        }
        self.dirty = false;
        Ok(())
    }
}
