//! Encapsulation for Felix: VXLAN ([`calico_dataplane::vxlan`]) from the hosts' tunnel
//! endpoints, and IPIP ([`calico_dataplane::ipip`]) from the hosts' registered addresses, each
//! plan kept applied as pools, endpoints, tunnel endpoints and host addresses change.
//!
//! [`Encapsulation`] is part of the agent's core: it keeps what the plans depend on, hands out
//! the plans when they differ from those applied ([`Encapsulation::due`]), and learns how
//! applying them went ([`Encapsulation::applied`]); [`apply`] is the executor's half.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};

use calico_calc::Cluster;
use calico_dataplane::ipip::{self, Ipip, IpipChanges, IpipPlan};
use calico_dataplane::vxlan::{self, Vxlan, VxlanChanges, VxlanPlan};
use calico_linux::NetlinkError;
use calico_model::tunnel::VxlanTunnel;
use calico_model::{IpVersion, Key, Value, parse_value};
use ipnet::IpNet;

/// The VXLAN and IPIP plans for this host, applied together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncapPlans {
    pub vxlan: VxlanPlan,
    pub ipip: IpipPlan,
}

/// What applying the plans changed.
#[derive(Debug, Clone, Default)]
pub struct EncapChanges {
    pub vxlan: VxlanChanges,
    pub ipip: IpipChanges,
}

/// Applies `plans` through the kernel's devices: VXLAN first, then IPIP.
pub async fn apply(
    plans: &EncapPlans,
    vxlan: &Vxlan,
    ipip: &Ipip,
) -> Result<EncapChanges, NetlinkError> {
    Ok(EncapChanges {
        vxlan: vxlan.sync(&plans.vxlan).await?,
        ipip: ipip.sync(&plans.ipip).await?,
    })
}

/// The encapsulation side of the agent.
#[derive(Debug)]
pub struct Encapsulation {
    hostname: String,
    /// `IpInIpEnabled`.
    ipip_enabled: bool,
    /// Every host's VXLAN tunnel endpoint, by hostname.
    tunnels: BTreeMap<String, VxlanTunnel>,
    /// Every host's registered IPv4 address, by hostname.
    hosts: BTreeMap<String, Ipv4Addr>,
    /// The plans last applied (`None`: apply the next one whatever it is).
    applied: Option<EncapPlans>,
    /// The plans handed out and not yet reported applied.
    sent: Option<EncapPlans>,
    /// The tunnel device IPIP needs and the kernel does not have.
    ipip_missing: Option<String>,
    /// What was last said about each pool asking for IPIP, so it is said once.
    ipip_reported: BTreeMap<IpNet, String>,
    /// Something the plans depend on changed.
    dirty: bool,
}

impl Encapsulation {
    pub fn new(hostname: &str, ipip_enabled: bool) -> Encapsulation {
        Encapsulation {
            hostname: hostname.to_owned(),
            ipip_enabled,
            tunnels: BTreeMap::new(),
            hosts: BTreeMap::new(),
            applied: None,
            sent: None,
            ipip_missing: None,
            ipip_reported: BTreeMap::new(),
            dirty: true,
        }
    }

    /// Notes a datastore update (`None`: deleted): tunnel endpoints and host addresses are
    /// kept here; pools and workload endpoints (which the calculator keeps) make the plans
    /// stale.
    pub fn update(&mut self, key: &str, parsed: &Key, value: Option<&str>) {
        let hostname = match parsed {
            Key::VxlanTunnel { hostname } => hostname.clone(),
            Key::HostIp {
                hostname,
                version: IpVersion::V4,
            } => hostname.clone(),
            Key::Pool { .. } | Key::WorkloadEndpoint(_) => {
                self.dirty = true;
                return;
            }
            _ => return,
        };
        self.dirty = true;
        let value = match value.map(|raw| parse_value(parsed, raw)) {
            Some(Ok(value)) => Some(value),
            Some(Err(reason)) => {
                tracing::warn!("{}", calico_model::invalid_warning(key, &reason));
                None
            }
            None => None,
        };
        match value {
            Some(Value::VxlanTunnel(tunnel)) => {
                self.tunnels.insert(hostname, tunnel);
            }
            Some(Value::HostIp(Some(IpAddr::V4(ip)))) => {
                self.hosts.insert(hostname, ip);
            }
            _ if matches!(parsed, Key::VxlanTunnel { .. }) => {
                self.tunnels.remove(&hostname);
            }
            _ => {
                self.hosts.remove(&hostname);
            }
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

    /// The plans for the cluster as it is, when something they depend on changed and they
    /// differ from those last applied; `None` when there is nothing to apply. Either way the
    /// encapsulation counts as clean until [`applied`](Encapsulation::applied) says otherwise.
    pub fn due(&mut self, cluster: &Cluster) -> Option<EncapPlans> {
        if !self.dirty {
            return None;
        }
        self.dirty = false;
        let plans = self.plans(cluster);
        if self.applied.as_ref() == Some(&plans) {
            self.report_ipip(cluster);
            return None;
        }
        self.sent = Some(plans.clone());
        Some(plans)
    }

    /// The plans [`due`](Encapsulation::due) handed out could not be applied: due again (the
    /// caller logs why).
    pub fn failed(&mut self) {
        self.sent = None;
        self.dirty = true;
    }

    /// The plans [`due`](Encapsulation::due) handed out were applied, with these changes.
    pub fn applied(&mut self, changes: &EncapChanges, cluster: &Cluster) {
        if !changes.vxlan.is_empty() {
            tracing::info!(changes = ?changes.vxlan, "VXLAN programmed");
        }
        let ipip = &changes.ipip;
        if !ipip.routes_added.is_empty() || !ipip.routes_removed.is_empty() {
            tracing::info!(changes = ?ipip, "IPIP programmed");
        }
        self.ipip_missing = ipip.missing_device.clone();
        self.applied = self.sent.take();
        self.report_ipip(cluster);
    }

    fn plans(&self, cluster: &Cluster) -> EncapPlans {
        let endpoints = &cluster.endpoints;
        EncapPlans {
            vxlan: vxlan::plan(&self.hostname, &self.tunnels, &cluster.pools, endpoints),
            ipip: ipip::plan(
                &self.hostname,
                self.ipip_enabled,
                &self.hosts,
                &cluster.pools,
                endpoints,
            ),
        }
    }

    /// Says once per pool (and again when the reason changes) why a pool asking for IPIP is
    /// routed without it: `IpInIpEnabled` is off, or the kernel has no tunnel device.
    fn report_ipip(&mut self, cluster: &Cluster) {
        let missing = self.ipip_missing.as_deref();
        let mut reported = BTreeMap::new();
        for pool in cluster.pools.values() {
            let Some(device) = &pool.ipip else {
                continue;
            };
            let why = if !self.ipip_enabled {
                Some("IpInIpEnabled is false".to_owned())
            } else {
                missing.map(|d| {
                    format!(
                        "this kernel has no IPIP support (module ipip is not loaded; no {d} device)"
                    )
                })
            };
            let Some(why) = why else {
                continue;
            };
            if self.ipip_reported.get(&pool.cidr) != Some(&why) {
                tracing::warn!(
                    "pool {} asks for IPIP through {device:?}, but {why}: traffic to its \
                     workloads is routed without encapsulation (see docs/dataplane.md)",
                    pool.cidr
                );
            }
            reported.insert(pool.cidr, why);
        }
        self.ipip_reported = reported;
    }
}
