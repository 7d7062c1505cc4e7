//! What the agent's core is fed: events translated by the loop, and the results of the effects
//! it asked for.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::time::{Duration, SystemTime};

use calico_dataplane::{
    BackendKind, BackendSnapshot, DataplaneError, RoutingChanges, RoutingError,
};
use calico_datastore::{DatastoreError, WatchEvent};
use calico_linux::{LinkEvent, NetlinkError};

use crate::encap::EncapChanges;
use crate::firewall::Outcome;

/// One input of the core.
#[derive(Debug)]
pub enum Input {
    /// Events of the watch of `/calico/v1/` that were waiting together: one batch, one
    /// programming pass.
    Datastore(Vec<WatchEvent>),
    /// Events of the watch of `/calico/bgp/v1/host/`: the hosts' registered addresses (where
    /// IPIP sends to).
    HostAddresses(Vec<WatchEvent>),
    /// A burst of link and address events (a veth pair comes with several).
    Links(Vec<LinkEvent>),
    Tick(Tick),
    /// Someone else changed Felix's nf_tables table, or a kernel table iptables-nft writes
    /// (`filter`, `nat`, `raw`, `mangle`), or the monitor lost notifications: a burst of such
    /// changes, seen as they happen (`FirewallEvents`). The drift check runs now.
    FirewallChanged,
    /// [`Effect::ReadConfig`](super::Effect::ReadConfig): the configuration in etcd.
    ConfigRead(Result<ConfigValues, DatastoreError>),
    /// [`Effect::ReplaceBackend`](super::Effect::ReplaceBackend): the backend now running, or
    /// why none could be built (the old one stays).
    BackendReplaced(Result<BackendKind, String>),
    /// [`Effect::ReadInterfaceAddresses`](super::Effect::ReadInterfaceAddresses): each
    /// interface (by name) with its addresses.
    InterfaceAddresses(Result<BTreeMap<String, BTreeSet<IpAddr>>, RoutingError>),
    /// [`Effect::ProgramFirewall`](super::Effect::ProgramFirewall).
    Firewall(Outcome),
    /// [`Effect::ReadDrift`](super::Effect::ReadDrift): the kernel's firewall as read off the
    /// update path.
    DriftRead(Result<BackendSnapshot, DriftReadError>),
    /// [`Effect::SyncRoutes`](super::Effect::SyncRoutes).
    Routes(Result<RoutesSynced, RoutingError>),
    /// [`Effect::SyncEncap`](super::Effect::SyncEncap).
    Encap(Result<EncapChanges, NetlinkError>),
    /// [`Effect::WriteEndpointStatuses`](super::Effect::WriteEndpointStatuses): whether every
    /// write succeeded.
    StatusesWritten(bool),
    /// [`Effect::WriteFelixStatus`](super::Effect::WriteFelixStatus).
    FelixStatusWritten(Result<(), DatastoreError>),
}

/// The timers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tick {
    /// `IptablesRefreshInterval`: the drift check.
    Refresh,
    /// `RouteRefreshInterval`: compare routes, interfaces and encapsulation with the kernel.
    RouteRefresh,
    /// Every second: the loop is alive; what failed is retried.
    Heartbeat,
    /// `ReportingIntervalSecs`: Felix's status key; the time and uptime it reports.
    Report { time: SystemTime, uptime: Duration },
}

/// Felix's configuration values in etcd, by parameter name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigValues {
    /// `/calico/v1/config/<name>`.
    pub global: BTreeMap<String, String>,
    /// `/calico/v1/host/<host>/config/<name>`.
    pub host: BTreeMap<String, String>,
}

/// A routing sync that went through.
#[derive(Debug, Clone, Default)]
pub struct RoutesSynced {
    pub changes: RoutingChanges,
    /// The local endpoints' interfaces that are up, with a carrier (what statuses report).
    pub up: BTreeSet<String>,
}

/// Why the drift check has no snapshot.
#[derive(Debug, thiserror::Error)]
pub enum DriftReadError {
    #[error("reading the firewall for the drift check failed: {0}")]
    Kernel(#[from] DataplaneError),
    #[error("the drift check's reader stopped: {0}")]
    Stopped(String),
}
