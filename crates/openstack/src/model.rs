//! Pure: what calico-neutron knows of Neutron between resyncs, and the keys one change of it
//! touches. A [`Model`] holds the ports, subnets and security groups of the last resync, kept
//! up to date object by object as notifications arrive; [`Model::touched`] gives the keys and
//! values a set of changed objects wants now and [`Written::of`] the ones they had, so that the
//! sync plans and writes only those: a rule added costs its group's two keys, not a pass over
//! the cloud.
//!
//! | change | keys touched |
//! | --- | --- |
//! | port | its endpoint (the old key too, when its host or device moved) and the open profile |
//! | security group (a rule added or deleted, the group renamed) | its profile's `rules` and `tags`, its left-out key |
//! | subnet | the endpoints of the ports with an address in it (their gateway) |

use std::collections::{BTreeMap, BTreeSet};

use calico_model::Key;

use crate::desired::{Desired, open_profile_keys};
use crate::error::TranslateError;
use crate::neutron::{Port, SecurityGroup, Snapshot, Subnet};
use crate::translate::profile_id;

/// One object a notification names.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Change {
    Port(String),
    Subnet(String),
    SecurityGroup(String),
}

impl Change {
    /// `(kind, id)` as the driver sends them.
    pub fn parts(&self) -> (&'static str, &str) {
        match self {
            Change::Port(id) => ("port", id),
            Change::Subnet(id) => ("subnet", id),
            Change::SecurityGroup(id) => ("security_group", id),
        }
    }
}

/// The objects whose keys a set of changes touches.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Touched {
    pub ports: BTreeSet<String>,
    pub groups: BTreeSet<String>,
}

/// Neutron as last read.
#[derive(Debug, Clone, Default)]
pub struct Model {
    ports: BTreeMap<String, Port>,
    subnets: BTreeMap<String, Subnet>,
    groups: BTreeMap<String, SecurityGroup>,
}

impl Model {
    pub fn from_snapshot(snapshot: Snapshot) -> Model {
        Model {
            ports: snapshot
                .ports
                .into_iter()
                .map(|p| (p.id.clone(), p))
                .collect(),
            subnets: snapshot
                .subnets
                .into_iter()
                .map(|s| (s.id.clone(), s))
                .collect(),
            groups: snapshot
                .security_groups
                .into_iter()
                .map(|g| (g.id.clone(), g))
                .collect(),
        }
    }

    pub fn ports(&self) -> usize {
        self.ports.len()
    }

    /// Every port and group: what a full write touches.
    pub fn everything(&self) -> Touched {
        Touched {
            ports: self.ports.keys().cloned().collect(),
            groups: self.groups.keys().cloned().collect(),
        }
    }

    /// Records a port as Neutron has it now (`None`: gone).
    pub fn set_port(&mut self, id: &str, port: Option<Port>) {
        match port {
            Some(port) => self.ports.insert(id.to_owned(), port),
            None => self.ports.remove(id),
        };
    }

    pub fn set_subnet(&mut self, id: &str, subnet: Option<Subnet>) {
        match subnet {
            Some(subnet) => self.subnets.insert(id.to_owned(), subnet),
            None => self.subnets.remove(id),
        };
    }

    pub fn set_group(&mut self, id: &str, group: Option<SecurityGroup>) {
        match group {
            Some(group) => self.groups.insert(id.to_owned(), group),
            None => self.groups.remove(id),
        };
    }

    /// The subnets `port` has addresses in that the model does not know (made since the last
    /// read, their notification not handled yet): to be read before the port is translated.
    pub fn unknown_subnets(&self, port: &Port) -> Vec<String> {
        let ids: BTreeSet<&str> = port
            .fixed_ips
            .iter()
            .map(|f| f.subnet_id.as_str())
            .filter(|id| !self.subnets.contains_key(*id))
            .collect();
        ids.into_iter().map(str::to_owned).collect()
    }

    /// The ports with an address in subnet `id`.
    pub fn ports_in_subnet(&self, id: &str) -> Vec<String> {
        self.ports
            .values()
            .filter(|p| p.fixed_ips.iter().any(|f| f.subnet_id == id))
            .map(|p| p.id.clone())
            .collect()
    }

    /// The keys the `touched` objects want now (and whether some port, touched or not, needs
    /// the open profile: `open_ports` is the set of those ports, updated here).
    pub fn desired(&self, touched: &Touched, open_ports: &mut BTreeSet<String>) -> Desired {
        let subnets = self
            .subnets
            .iter()
            .map(|(id, s)| (id.as_str(), s))
            .collect();
        let mut desired = Desired::default();
        for id in &touched.ports {
            let open = match self.ports.get(id) {
                Some(port) => desired.add_port(port, &subnets),
                None => false,
            };
            match open {
                true => open_ports.insert(id.clone()),
                false => open_ports.remove(id),
            };
        }
        for id in &touched.groups {
            if let Some(group) = self.groups.get(id) {
                desired.add_group(group);
            }
        }
        if !open_ports.is_empty() {
            desired.keys.extend(open_profile_keys());
        }
        desired
    }
}

/// The owned keys in etcd as the sync wrote them, with the endpoint key of each port.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Written {
    pub keys: BTreeMap<String, String>,
    endpoints: BTreeMap<String, String>,
}

impl Written {
    pub fn new(keys: BTreeMap<String, String>) -> Written {
        let endpoints = keys
            .keys()
            .filter_map(|key| match Key::parse(key) {
                Ok(Key::WorkloadEndpoint(id)) => Some((id.endpoint, key.clone())),
                _ => None,
            })
            .collect();
        Written { keys, endpoints }
    }

    /// What the `touched` objects (and the open profile) have in etcd.
    pub fn of(&self, touched: &Touched) -> BTreeMap<String, String> {
        let mut keys: Vec<String> = touched
            .ports
            .iter()
            .filter_map(|id| self.endpoints.get(id).cloned())
            .collect();
        for group in &touched.groups {
            let profile = profile_id(group);
            keys.push(
                Key::ProfileRules {
                    profile: profile.clone(),
                }
                .to_string(),
            );
            keys.push(Key::ProfileTags { profile }.to_string());
            keys.push(
                Key::LeftOut {
                    group: group.clone(),
                }
                .to_string(),
            );
        }
        keys.extend(open_profile_keys().into_keys());
        keys.into_iter()
            .filter_map(|k| self.keys.get(&k).map(|v| (k, v.clone())))
            .collect()
    }

    /// Records `desired` for the touched keys `before` had: those in `desired` put, the rest
    /// deleted.
    pub fn update(
        &mut self,
        before: &BTreeMap<String, String>,
        desired: &BTreeMap<String, String>,
    ) {
        for key in before.keys().filter(|k| !desired.contains_key(*k)) {
            self.keys.remove(key);
        }
        self.endpoints
            .retain(|_, key| !before.contains_key(key) || desired.contains_key(key));
        for (key, value) in desired {
            self.keys.insert(key.clone(), value.clone());
            if let Ok(Key::WorkloadEndpoint(id)) = Key::parse(key) {
                self.endpoints.insert(id.endpoint, key.clone());
            }
        }
    }
}

/// Logs what a change left out or wrote with a caveat (each time the object changes).
pub fn report(desired: &Desired) {
    for error in &desired.left_out {
        error.log();
    }
    for caveat in &desired.caveats {
        TranslateError::log_caveat(caveat);
    }
}

#[cfg(test)]
mod tests;
