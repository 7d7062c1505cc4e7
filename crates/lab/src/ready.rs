//! Waiting until the lab does what was asked of it, by polling (never a fixed sleep): every
//! Felix has programmed what was written, every host's BGP sessions are established, every
//! other host routes to a workload, a workload's echo server listens. A timeout says which host
//! and what it was waiting for, with the last state seen and the log to read.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::bail;
use calico_bgp::{Session, parse_protocols};
use calico_datastore::{Datastore, EtcdDatastore};
use calico_model::key::Prefix;

use crate::check::applied_revision;
use crate::etcd::connect;
use crate::processes::pid_alive;
use crate::sh;
use crate::state::{FABRIC_IP, FABRIC_IP6, Host, Lab, Workload};

/// How long `up` waits, by default, for Felix and BGP on every host.
pub const UP_LIMIT: Duration = Duration::from_secs(120);
/// How long `workload add` waits, by default, until the workload is programmed and routed.
pub const ADD_LIMIT: Duration = Duration::from_secs(60);
/// The name below `/calico/v1/` whose revision marks "everything written so far": no key of
/// the data model (Felix sees it on its watch and ignores it).
const MARKER: &str = "lab-sync";
/// Felix's VXLAN device: a route through it is encapsulated to the workload's host.
pub const VXLAN_DEVICE: &str = "vxlan.calico";
pub use crate::poll::{Deadline, Progress, poll, until};
pub use crate::probe::SERVING;

/// Writes the marker key; its revision stands for everything written to etcd so far.
pub async fn mark(store: &EtcdDatastore) -> anyhow::Result<i64> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let marker = format!("{}{MARKER}", Prefix::V1);
    Ok(store.put(&marker, &now.as_nanos().to_string()).await?)
}

/// Waits until every host's Felix has programmed `revision` (its `felix_applied_revision`
/// metric: in sync with etcd, chains, ipsets and routes written).
pub async fn felix_applied(lab: &Lab, revision: i64, deadline: Deadline) -> anyhow::Result<()> {
    for host in &lab.hosts {
        felix_applied_on(lab, host, revision, deadline).await?;
    }
    Ok(())
}

/// Waits until `host`'s Felix has programmed `revision`; fails at once if it is not running.
pub async fn felix_applied_on(
    lab: &Lab,
    host: &Host,
    revision: i64,
    deadline: Deadline,
) -> anyhow::Result<()> {
    let what = format!("Felix on {} to program revision {revision}", host.name);
    let log = lab.log_path(&format!("felix-{}", host.name));
    until(deadline, &what, &log, async || {
        if !host.felix_pid.is_some_and(pid_alive) {
            bail!(
                "Felix on {} has exited (see {}); on a lab that is up, `calico-lab \
                 restart-felix {}` starts it again",
                host.name,
                log.display(),
                host.name
            );
        }
        Ok(match applied_revision(&host.netns).await {
            Ok(applied) if applied >= revision => Progress::Done,
            Ok(applied) => Progress::Waiting(format!("it is at revision {applied}")),
            Err(error) => Progress::Waiting(format!("{error:#}")),
        })
    })
    .await
}

/// Waits until BIRD on `host` has an established BGP session with each of `peers`, over IPv4
/// and IPv6.
pub async fn bgp_established(
    lab: &Lab,
    host: &Host,
    peers: &[&Host],
    deadline: Deadline,
) -> anyhow::Result<()> {
    let socket = bird_socket(lab, host);
    let log = lab.log_path(&format!("node-{}", host.name));
    let what = format!("the BGP sessions of {}", host.name);
    until(deadline, &what, &log, async || {
        node_running(lab, host)?;
        Ok(bgp_progress(&socket, peers))
    })
    .await
}

/// Fails if `host`'s calico-node (which runs BIRD) has exited.
fn node_running(lab: &Lab, host: &Host) -> anyhow::Result<()> {
    if !host.node_pid.is_some_and(pid_alive) {
        bail!(
            "calico-node on {} has exited, so BGP is down there; see {}",
            host.name,
            lab.log_path(&format!("node-{}", host.name)).display()
        );
    }
    Ok(())
}

/// BIRD's control socket on a host (calico-node runs BIRD in `<lab dir>/<host>/`).
pub fn bird_socket(lab: &Lab, host: &Host) -> PathBuf {
    lab.dir.join(&host.name).join("bird.ctl")
}

/// Whether every session to `peers` is established, from `birdc show protocols all`.
fn bgp_progress(socket: &Path, peers: &[&Host]) -> Progress {
    let Some(socket) = socket.to_str() else {
        return Progress::Waiting(format!("{} is not UTF-8", socket.display()));
    };
    let text = match sh::run("birdc", &["-s", socket, "show", "protocols", "all"]) {
        Ok(text) => text,
        Err(error) => return Progress::Waiting(format!("BIRD does not answer: {error:#}")),
    };
    let sessions = parse_protocols(&text);
    for peer in peers {
        for address in [IpAddr::V4(peer.ip), IpAddr::V6(peer.ip6)] {
            let session = sessions.iter().find(|s| s.neighbor == Some(address));
            match session {
                Some(s) if established(s) => {}
                Some(s) => {
                    return Progress::Waiting(format!(
                        "the BGP session to {} ({address}) is not Established; birdc: {} {} {}",
                        peer.name, s.name, s.state, s.info
                    ));
                }
                None => {
                    return Progress::Waiting(format!(
                        "BIRD has no BGP session to {} ({address}) yet",
                        peer.name
                    ));
                }
            }
        }
    }
    Progress::Done
}

/// Whether BIRD reports a session as Established (state `up`, info `Established`).
fn established(session: &Session) -> bool {
    session.state == "up" && session.info.starts_with("Established")
}

/// Waits until every other host routes each of `workload`'s addresses to the workload's host.
///
/// A host on the workload's host's subnet must route it there directly (over the routes BGP
/// spreads: its block, or a /32 for a borrowed address) or encapsulate it (a route through
/// `vxlan.calico`, Felix's, for a pool with `vxlan_mode`). A host on another subnet (`up
/// --subnets`) cannot route it directly: either it encapsulates, or it sends the address to its gateway, the fabric's router, which has no route to any pool and
/// drops it. Both are the network doing what it was configured to do, so either counts: the
/// wait then means "programmed", not "reachable" (see docs/lab.md).
pub async fn routed_to(lab: &Lab, workload: &Workload, deadline: Deadline) -> anyhow::Result<()> {
    let owner = lab.host(&workload.host)?;
    for host in lab.hosts.iter().filter(|h| h.name != owner.name) {
        for &address in &workload.ips {
            let (expected, gateway) = match address {
                IpAddr::V4(_) => (IpAddr::V4(owner.ip), IpAddr::V4(host.gateway())),
                IpAddr::V6(_) => (IpAddr::V6(owner.ip6), IpAddr::V6(host.gateway6())),
            };
            let same_subnet = host.subnet == owner.subnet;
            let what = if same_subnet {
                format!(
                    "{} to route {address} (workload {} on {}) via {expected}",
                    host.name, workload.name, owner.name
                )
            } else {
                format!(
                    "{} to route {address} (workload {} on {}, another subnet) through {} or                      via its gateway {gateway}",
                    host.name, workload.name, owner.name, VXLAN_DEVICE
                )
            };
            let log = lab.log_path(&format!("node-{}", host.name));
            until(deadline, &what, &log, async || {
                node_running(lab, host)?;
                let route = match route_of(&host.netns, address) {
                    Ok(route) => route,
                    Err(error) => return Ok(Progress::Waiting(format!("{error:#}"))),
                };
                Ok(route_progress(&route, expected, gateway, same_subnet))
            })
            .await?;
        }
    }
    Ok(())
}

/// How a namespace routes an address (`ip route get`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Route {
    gateway: Option<IpAddr>,
    device: String,
}

/// Whether `route` is the one wanted: via `expected` (the workload's host), or, from another
/// subnet, through the VXLAN device or via the host's `gateway` (the fabric's router).
fn route_progress(route: &Route, expected: IpAddr, gateway: IpAddr, same_subnet: bool) -> Progress {
    match route.gateway {
        Some(via) if via == expected => Progress::Done,
        _ if route.device == VXLAN_DEVICE => Progress::Done,
        Some(via) if !same_subnet && via == gateway => Progress::Done,
        Some(via) if via == FABRIC_IP || via == FABRIC_IP6 || via == gateway => Progress::Waiting(
            format!("it has no route to it but its default route (via {via})"),
        ),
        Some(via) => Progress::Waiting(format!("it routes it via {via} dev {}", route.device)),
        None => Progress::Waiting(format!(
            "it has no route through a gateway (dev {})",
            route.device
        )),
    }
}

fn route_of(netns: &str, address: IpAddr) -> anyhow::Result<Route> {
    let out = sh::ip(&["-n", netns, "-j", "route", "get", &address.to_string()])?;
    let routes: serde_json::Value = serde_json::from_str(&out)?;
    Ok(Route {
        gateway: routes[0]["gateway"].as_str().and_then(|g| g.parse().ok()),
        device: routes[0]["dev"].as_str().unwrap_or_default().to_owned(),
    })
}

/// Waits until the echo server started as `pid` says it listens (in `log`).
pub async fn serving(pid: i32, log: &Path, deadline: Deadline) -> anyhow::Result<()> {
    until(deadline, "the echo server to listen", log, async || {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if text.contains(SERVING) {
            return Ok(Progress::Done);
        }
        if !pid_alive(pid) {
            bail!("the echo server exited: {}", text.trim());
        }
        Ok(Progress::Waiting("it has not said so yet".to_owned()))
    })
    .await
}

/// Writes a marker and waits until every host's Felix has programmed it (everything written
/// before is programmed), and until every host routes every other host's workloads to that
/// host over BGP or through the tunnel (see [`routed_to`]). Returns the marker's revision.
pub async fn wait_programmed(lab: &Lab, limit: Duration) -> anyhow::Result<i64> {
    let deadline = Deadline::after(limit);
    let store = connect(lab).await?;
    let revision = mark(&store).await?;
    felix_applied(lab, revision, deadline).await?;
    for workload in &lab.workloads {
        routed_to(lab, workload, deadline).await?;
    }
    Ok(revision)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROTOCOLS: &str = "BIRD 2.0.12 ready.
Name       Proto      Table      State  Since         Info
device1    Device     ---        up     07:47:56.079
kernel_v4  Kernel     master4    up     07:47:56.079
  Channel ipv4
    Routes:         1 imported, 3 exported, 1 preferred
Mesh_10_99_0_12 BGP        ---        up     07:47:59.911  Established
  BGP state:          Established
    Neighbor address: 10.99.0.12
  Channel ipv4
    State:          UP
Mesh_fd00_99__12 BGP        ---        start  07:48:01.000  Active        Socket: Connection refused
  BGP state:          Active
    Neighbor address: fd00:99::12
";

    #[test]
    fn bgp_sessions_with_neighbour_and_state() {
        let sessions = parse_protocols(PROTOCOLS);
        assert_eq!(sessions.len(), 2, "{sessions:?}");
        assert!(established(&sessions[0]));
        assert_eq!(sessions[0].neighbor, Some("10.99.0.12".parse().unwrap()));
        let v6 = &sessions[1];
        assert!(!established(v6));
        assert_eq!(v6.neighbor, Some("fd00:99::12".parse().unwrap()));
        assert_eq!(
            format!("{} {}", v6.state, v6.info),
            "start Active Socket: Connection refused"
        );
    }

    #[test]
    fn across_subnets_the_router_or_the_tunnel_will_do() {
        let owner: IpAddr = "10.99.1.12".parse().unwrap();
        let router: IpAddr = "10.99.0.1".parse().unwrap();
        let via = |gateway: &str, device: &str| Route {
            gateway: Some(gateway.parse().unwrap()),
            device: device.to_owned(),
        };
        let eth0 = via("10.99.0.1", "eth0");
        let tunnel = via("10.65.2.0", "vxlan.calico");
        assert_eq!(route_progress(&eth0, owner, router, false), Progress::Done);
        assert_eq!(
            route_progress(&tunnel, owner, router, false),
            Progress::Done
        );
        let direct = via("10.99.1.12", "eth0");
        assert_eq!(route_progress(&direct, owner, router, true), Progress::Done);
        // On one subnet, only the owner will do.
        assert!(matches!(
            route_progress(&eth0, owner, router, true),
            Progress::Waiting(_)
        ));
        // Encapsulated (a pool with `vxlan_mode: always`) is routed on one subnet too.
        assert_eq!(route_progress(&tunnel, owner, router, true), Progress::Done);
    }

    #[tokio::test]
    async fn a_timeout_names_what_and_the_last_reason() {
        let deadline = Deadline::after(Duration::from_millis(60));
        let mut tries = 0;
        let error = until(deadline, "the thing", Path::new("/x.log"), async || {
            tries += 1;
            Ok(Progress::Waiting(format!("try {tries}")))
        })
        .await
        .unwrap_err()
        .to_string();
        assert!(error.contains("waiting for the thing: try "), "{error}");
        assert!(error.ends_with("see /x.log"), "{error}");
    }
}
