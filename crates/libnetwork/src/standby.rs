//! A container's second network (`docker network connect net2 c`): dockerd moves the new
//! interface into the sandbox and gives it its address, but the sandbox's default route is the
//! first network's, and `Join`'s static routes can carry neither a table nor a rule. Replies
//! from the second address would leave by `eth0`, where the host's strict reverse-path check
//! and Felix's anti-spoofing rules drop them. So, once dockerd has moved the interface in,
//! the driver gives it the CNI plugin's standby routing, planned by the same code
//! (`calico_plumbing::routes_plan`): its gateway routes at the next metric in the main table
//! and in a table of their own, and `from <address> lookup <table>`.
//!
//! ```text
//! Join ──spawn──► the interface with the endpoint's MAC, up, with its address, in the sandbox
//!                 (SandboxKey) ──► placement read there ──► routes_plan ──► execute
//! EndpointOperInfo (dockerd asks once Join has returned and the interface is in): waits for it
//! Leave ──► the rules go (they do not go with the link)
//! ```
//!
//! What is being attached lives in memory only: after a driver restart, `Leave` cannot reach
//! the sandbox, and a rule of the old address stays in it until the sandbox goes (a later
//! attachment of the same address removes it first).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use calico_linux::{Family, Link, Netlink, Netns};
use calico_plumbing::{Attachment, PlumbingError, execute, routes, routes_plan};
use tokio::sync::watch;

use crate::error::DriverError;
use crate::names::VethNames;

/// How long dockerd may take to move the interface in after `Join`.
const MOVE_TIMEOUT: Duration = Duration::from_secs(30);

/// How long `EndpointOperInfo` waits for the routing.
const INFO_WAIT: Duration = Duration::from_secs(10);

/// One attachment to route as a standby.
#[derive(Debug, Clone)]
pub struct Standby {
    pub endpoint_id: String,
    pub veth: VethNames,
    /// The sandbox (`SandboxKey`).
    pub sandbox: Netns,
    /// The container end's MAC: how the interface is found after dockerd renamed it.
    pub mac: [u8; 6],
    pub addresses: Vec<IpAddr>,
    pub families: Vec<Family>,
}

/// An attachment being routed, or routed.
#[derive(Debug)]
struct Entry {
    sandbox: Netns,
    addresses: Vec<IpAddr>,
    done: watch::Receiver<bool>,
    task: tokio::task::AbortHandle,
}

/// The driver's standby attachments, by endpoint id.
#[derive(Debug, Default)]
pub struct Standbys(Mutex<HashMap<String, Entry>>);

impl Standbys {
    /// Routes `standby` in the background, once dockerd has moved its interface in.
    pub fn start(&self, standby: Standby) {
        let (done_tx, done) = watch::channel(false);
        let (sandbox, addresses) = (standby.sandbox.clone(), standby.addresses.clone());
        let endpoint_id = standby.endpoint_id.clone();
        let task = tokio::spawn(async move {
            let name = standby.veth.host.clone();
            match route(&standby).await {
                Ok(dev) => tracing::info!(
                    veth = name,
                    dev,
                    addresses = ?standby.addresses,
                    "a second network's interface routes its replies through itself"
                ),
                Err(e) => e.log(&format!("routing the standby attachment of {name}")),
            }
            let _ = done_tx.send(true);
        });
        let entry = Entry {
            sandbox,
            addresses,
            done,
            task: task.abort_handle(),
        };
        let previous = self.lock().insert(endpoint_id, entry);
        if let Some(previous) = previous {
            previous.task.abort();
        }
    }

    /// Waits (a while) until the endpoint's routing, if any, is done.
    pub async fn wait(&self, endpoint_id: &str) {
        let done = self.lock().get(endpoint_id).map(|e| e.done.clone());
        if let Some(mut done) = done {
            let _ = tokio::time::timeout(INFO_WAIT, done.wait_for(|d| *d)).await;
        }
    }

    /// Forgets the endpoint: stops its routing if still under way and removes its source rules
    /// from the sandbox (best effort: the sandbox may be gone already).
    pub async fn forget(&self, endpoint_id: &str) {
        let Some(entry) = self.lock().remove(endpoint_id) else {
            return;
        };
        entry.task.abort();
        let removed = async {
            let container = Netlink::connect(&entry.sandbox)?;
            routes::delete_rules_from(&container, &entry.addresses).await
        };
        if let Err(e) = removed.await {
            tracing::debug!(sandbox = %entry.sandbox, "the standby's rules did not go: {e}");
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.0.lock().expect("standbys lock")
    }
}

/// Waits for the interface, reads where its routes go, and runs the plan; the interface's name.
async fn route(standby: &Standby) -> Result<String, DriverError> {
    let link = moved_in(standby).await?;
    let placement = routes::placement_in(&standby.sandbox, &standby.addresses).await?;
    let attachment = Attachment {
        host: standby.veth.host.clone(),
        container: link.name.clone(),
        netns: standby.sandbox.clone(),
        addresses: standby.addresses.clone(),
        mtu: None,
        mac: None,
        routes: placement,
    };
    execute(&routes_plan(&attachment, &standby.families)).await?;
    Ok(link.name)
}

/// The interface once dockerd has moved it in, set it up and given it its first address.
async fn moved_in(standby: &Standby) -> Result<Link, DriverError> {
    let sandbox = Netlink::connect(&standby.sandbox)?;
    let address = standby.addresses.first().copied();
    let deadline = Instant::now() + MOVE_TIMEOUT;
    loop {
        let links = sandbox.links().await?;
        if let Some(link) = links
            .into_iter()
            .find(|l| l.mac == Some(standby.mac) && l.up)
        {
            let has = sandbox.addresses(link.index).await?;
            if address.is_none_or(|a| has.iter().any(|net| net.addr() == a)) {
                return Ok(link);
            }
        }
        if Instant::now() >= deadline {
            return Err(PlumbingError::Missing(format!(
                "{}: dockerd did not move it into {} (up, with {address:?}) within {}s",
                standby.veth.temp,
                standby.sandbox,
                MOVE_TIMEOUT.as_secs()
            ))
            .into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
