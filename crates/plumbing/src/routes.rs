//! The container's routes: which ones an attachment owns, the metric that keeps a second
//! attachment (`CNI_IFNAME=eth1`) from replacing the first one's, and reading them back.
//!
//! Every attachment installs its own gateway routes on its own interface: for IPv4
//! `169.254.1.1 dev <if> scope link` and `default via 169.254.1.1 dev <if>`, for IPv6
//! `default via <host side's link-local> dev <if>`, all with one metric per family. The first
//! attachment gets [`FIRST_METRIC`]; a later one gets one more than the highest metric of any
//! default or `169.254.1.1` route already in the container. So routes are only ever added,
//! never replaced: the interface attached first carries the default route, the others keep
//! theirs as standbys, and deleting any interface (its routes go with it) leaves the others'
//! routes as they were — the next-lowest metric takes over when the owner goes.
//!
//! A standby attachment (one that finds a default route already there) also gets source
//! routing, so that what the container sends *from* its addresses leaves through its own
//! interface (where the host's strict reverse-path check expects it), not the owner's: its
//! gateway routes again in table `<metric>`, and `from <address> lookup <metric>` rules at
//! priority [`RULE_PRIORITY`]. Rules do not go with the link: CNI's DEL and ADD's undo, and
//! the Docker driver's `Leave`, remove them.
//!
//! The kernel is reached over rtnetlink in the container's namespace (`calico_linux::Netlink`:
//! `table_routes`, `add_table_route`, `policy_rules`, …); no tool runs.

use std::net::{IpAddr, Ipv4Addr};

use calico_linux::{Family, Link, Netlink, NetlinkError, Netns, PolicyRule, TableRoute};
use ipnet::IpNet;

use crate::error::PlumbingError;

/// The gateway every IPv4 workload routes through: answered by proxy ARP on the host side.
pub const IPV4_GATEWAY: Ipv4Addr = Ipv4Addr::new(169, 254, 1, 1);

/// The metric of the first attachment's routes: the kernel's default for IPv6 routes, so
/// both families read the same.
pub const FIRST_METRIC: u32 = 1024;

/// The kernel's main routing table.
pub const MAIN_TABLE: u32 = 254;

/// The priority of the source rules of standby attachments: before the main table (32766).
pub const RULE_PRIORITY: u32 = 1000;

/// A route in the container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerRoute {
    pub destination: IpNet,
    /// `None` for an on-link route (scope link).
    pub gateway: Option<IpAddr>,
    pub dev: String,
    pub metric: u32,
    /// [`MAIN_TABLE`], or a standby attachment's own table.
    pub table: u32,
}

/// `from <address> lookup <table>`: a standby attachment's source routing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourceRule {
    pub from: IpAddr,
    pub table: u32,
}

impl std::fmt::Display for SourceRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "from {} lookup {}", self.from, self.table)
    }
}

/// Where a new attachment's routes of one family go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    pub metric: u32,
    /// Another interface already has a default route of this family: this attachment gets
    /// source routing too.
    pub standby: bool,
}

impl Placement {
    /// The first (or only) attachment.
    pub const FIRST: Placement = Placement {
        metric: FIRST_METRIC,
        standby: false,
    };
}

impl std::fmt::Display for ContainerRoute {
    /// As `ip route` writes it, without the metric.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.destination.prefix_len() == 0 {
            f.write_str("default")?;
        } else if self.destination.prefix_len() == self.destination.max_prefix_len() {
            write!(f, "{}", self.destination.addr())?;
        } else {
            write!(f, "{}", self.destination)?;
        }
        match self.gateway {
            Some(gateway) => write!(f, " via {gateway} dev {}", self.dev)?,
            None => write!(f, " dev {} scope link", self.dev)?,
        }
        if self.table != MAIN_TABLE {
            write!(f, " table {}", self.table)?;
        }
        Ok(())
    }
}

/// Where a new attachment's routes of one family go, given the container's routes of that
/// family (any table; only the main table's count): a metric one more than any default or
/// gateway route there, at least [`FIRST_METRIC`], and standby when a default route exists.
pub fn placement(existing: &[ContainerRoute]) -> Placement {
    let main = || existing.iter().filter(|r| r.table == MAIN_TABLE);
    let metric = main()
        .filter(|r| {
            r.destination.prefix_len() == 0
                || r.destination == IpNet::from(IpAddr::V4(IPV4_GATEWAY))
        })
        .map(|r| r.metric.saturating_add(1))
        .max()
        .map_or(FIRST_METRIC, |m| m.max(FIRST_METRIC));
    let standby = main().any(|r| r.destination.prefix_len() == 0);
    Placement { metric, standby }
}

/// Where a new attachment with these addresses goes in the container at `netns`: after every
/// default route already there ([`placement`]), read for the families it has.
pub async fn placement_in(
    netns: &Netns,
    addresses: &[IpAddr],
) -> Result<RoutePlacement, PlumbingError> {
    let container = Netlink::connect(netns)?;
    let place = async |family: Family| -> Result<Placement, PlumbingError> {
        let wanted = addresses
            .iter()
            .any(|ip| ip.is_ipv4() == (family == Family::V4));
        if !wanted {
            return Ok(Placement::FIRST);
        }
        Ok(placement(&read(&container, family).await?))
    };
    Ok(RoutePlacement {
        v4: place(Family::V4).await?,
        v6: place(Family::V6).await?,
    })
}

/// The routes an attachment with these addresses owns on `dev` in `table` (any metric): what
/// CHECK looks for. `host_link_local` is the IPv6 gateway.
pub fn owned(
    dev: &str,
    addresses: &[IpAddr],
    host_link_local: Option<IpAddr>,
    table: u32,
) -> Vec<ContainerRoute> {
    let route = |destination: &str, gateway| ContainerRoute {
        destination: destination.parse().expect("valid"),
        gateway,
        dev: dev.to_owned(),
        metric: 0,
        table,
    };
    let mut routes = Vec::new();
    if addresses.iter().any(IpAddr::is_ipv4) {
        routes.push(route("169.254.1.1/32", None));
        routes.push(route("0.0.0.0/0", Some(IpAddr::V4(IPV4_GATEWAY))));
    }
    if addresses.iter().any(IpAddr::is_ipv6) {
        routes.push(route("::/0", host_link_local));
    }
    routes
}

/// The first of `wanted` that `present` lacks (metrics are not compared; a wanted route
/// without a gateway also matches one through any gateway when it is a default route whose
/// gateway could not be known).
pub fn first_missing<'a>(
    wanted: &'a [ContainerRoute],
    present: &[ContainerRoute],
) -> Option<&'a ContainerRoute> {
    wanted.iter().find(|w| {
        !present.iter().any(|p| {
            p.destination == w.destination
                && p.dev == w.dev
                && p.table == w.table
                && (p.gateway == w.gateway
                    || (w.gateway.is_none() && w.destination.prefix_len() == 0))
        })
    })
}

/// The tables the kernel names (`unspec`, `default`, `local`): not an attachment's.
fn named_table(table: u32) -> bool {
    matches!(table, 0 | 253 | 255)
}

/// The container's routes as the kernel lists them (`calico_linux::Netlink::table_routes`),
/// with the interfaces' names: those of the main table and numbered tables.
pub fn container_routes(routes: &[TableRoute], links: &[Link]) -> Vec<ContainerRoute> {
    routes
        .iter()
        .filter(|r| !named_table(r.table))
        .filter_map(|r| {
            let link = links.iter().find(|l| l.index == r.ifindex)?;
            Some(ContainerRoute {
                destination: r.destination,
                gateway: r.gateway,
                dev: link.name.clone(),
                metric: r.metric,
                table: r.table,
            })
        })
        .collect()
}

/// The source rules among the kernel's: from one address, to a numbered table.
pub fn source_rules(rules: &[PolicyRule]) -> Vec<SourceRule> {
    rules
        .iter()
        .filter(|r| r.from.prefix_len() == r.from.max_prefix_len())
        .filter(|r| !named_table(r.table) && r.table != MAIN_TABLE)
        .map(|r| SourceRule {
            from: r.from.addr(),
            table: r.table,
        })
        .collect()
}

impl ContainerRoute {
    /// The route for the kernel, on the interface with this index.
    fn for_kernel(&self, ifindex: u32) -> TableRoute {
        TableRoute {
            destination: self.destination,
            gateway: self.gateway,
            ifindex,
            metric: self.metric,
            table: self.table,
        }
    }

    /// As `ip` would be told to add it: what an error names.
    pub fn add_command(&self) -> String {
        let next_hop = match self.gateway {
            Some(gateway) => format!("via {gateway} dev {}", self.dev),
            None => format!("dev {} scope link", self.dev),
        };
        format!(
            "route add {} {next_hop} metric {} table {}",
            self.destination, self.metric, self.table
        )
    }
}

impl SourceRule {
    /// The rule for the kernel, at [`RULE_PRIORITY`].
    fn for_kernel(&self) -> PolicyRule {
        PolicyRule {
            from: IpNet::from(self.from),
            table: self.table,
            priority: RULE_PRIORITY,
        }
    }

    /// As `ip` would be told to add it: what an error names.
    pub fn add_command(&self) -> String {
        format!("rule add {self} priority {RULE_PRIORITY}")
    }
}

/// The container's routes of one family, in every table.
pub async fn read(
    container: &Netlink,
    family: Family,
) -> Result<Vec<ContainerRoute>, PlumbingError> {
    // One dump at a time: a netlink socket refuses a second one while the first runs (EBUSY).
    let routes = container.table_routes(family).await?;
    let links = container.links().await?;
    Ok(container_routes(&routes, &links))
}

/// The container's source rules of one family.
pub async fn read_rules(
    container: &Netlink,
    family: Family,
) -> Result<Vec<SourceRule>, PlumbingError> {
    let rules = container.policy_rules(family).await?;
    Ok(source_rules(&rules))
}

/// Adds an attachment's routes (on the interface `ifindex`) and then its source rules, in
/// order: added, never replaced, so an equal route of another attachment is an error rather
/// than taken over. It stops at the first that fails; what came before stays.
pub async fn add(
    container: &Netlink,
    ifindex: u32,
    routes: &[ContainerRoute],
    rules: &[SourceRule],
) -> Result<(), PlumbingError> {
    let failed = |command: String| {
        move |e: NetlinkError| {
            let reason = match e {
                NetlinkError::Request { reason, .. } => reason,
                other => other.to_string(),
            };
            PlumbingError::Refused { command, reason }
        }
    };
    for route in routes {
        container
            .add_table_route(&route.for_kernel(ifindex))
            .await
            .map_err(failed(route.add_command()))?;
    }
    for rule in rules {
        container
            .add_policy_rule(&rule.for_kernel())
            .await
            .map_err(failed(rule.add_command()))?;
    }
    Ok(())
}

/// Deletes a source rule; one already gone is fine.
pub async fn delete_rule(container: &Netlink, rule: &SourceRule) -> Result<(), PlumbingError> {
    Ok(container.delete_policy_rule(&rule.for_kernel()).await?)
}

/// Deletes the source rules of these addresses (an attachment's, before DEL removes its
/// interface): rules are not removed with the link.
pub async fn delete_rules_from(
    container: &Netlink,
    addresses: &[IpAddr],
) -> Result<(), PlumbingError> {
    for family in [Family::V4, Family::V6] {
        let wanted = |ip: &IpAddr| ip.is_ipv4() == (family == Family::V4);
        if !addresses.iter().any(wanted) {
            continue;
        }
        for rule in read_rules(container, family).await? {
            if addresses.contains(&rule.from) {
                delete_rule(container, &rule).await?;
            }
        }
    }
    Ok(())
}

/// Where an attachment's routes go, per family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoutePlacement {
    pub v4: Placement,
    pub v6: Placement,
}

impl RoutePlacement {
    /// The first (or only) attachment of a container.
    pub const FIRST: RoutePlacement = RoutePlacement {
        v4: Placement::FIRST,
        v6: Placement::FIRST,
    };

    pub(crate) fn of(&self, family: Family) -> Placement {
        match family {
            Family::V4 => self.v4,
            Family::V6 => self.v6,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(dst: &str, gw: Option<&str>, dev: &str, metric: u32) -> ContainerRoute {
        ContainerRoute {
            destination: dst.parse().unwrap(),
            gateway: gw.map(|g| g.parse().unwrap()),
            dev: dev.into(),
            metric,
            table: MAIN_TABLE,
        }
    }

    fn link(index: u32, name: &str) -> Link {
        Link {
            index,
            name: name.into(),
            mac: None,
            up: true,
            mtu: 1500,
            running: true,
        }
    }

    fn kernel_route(
        dst: &str,
        gw: Option<&str>,
        ifindex: u32,
        metric: u32,
        table: u32,
    ) -> TableRoute {
        TableRoute {
            destination: dst.parse().unwrap(),
            gateway: gw.map(|g| g.parse().unwrap()),
            ifindex,
            metric,
            table,
        }
    }

    #[test]
    fn kernel_routes_are_read_with_interface_names_main_and_numbered_tables_only() {
        let links = [link(1, "lo"), link(5, "eth0"), link(6, "eth1")];
        let kernel = [
            kernel_route("0.0.0.0/0", Some("169.254.1.1"), 5, 1024, 254),
            kernel_route("169.254.1.1/32", None, 5, 0, 254),
            kernel_route("10.0.0.5/32", None, 5, 0, 255),
            kernel_route("10.0.0.0/8", None, 5, 0, 253),
            kernel_route("0.0.0.0/0", Some("169.254.1.1"), 6, 1025, 1025),
            // An interface gone between the two dumps.
            kernel_route("10.9.0.0/16", None, 9, 0, 254),
        ];
        let routes = container_routes(&kernel, &links);
        let in_table = ContainerRoute {
            table: 1025,
            ..route("0.0.0.0/0", Some("169.254.1.1"), "eth1", 1025)
        };
        assert_eq!(
            routes,
            [
                route("0.0.0.0/0", Some("169.254.1.1"), "eth0", 1024),
                route("169.254.1.1/32", None, "eth0", 0),
                in_table.clone(),
            ]
        );
        assert_eq!(
            in_table.to_string(),
            "default via 169.254.1.1 dev eth1 table 1025"
        );
        assert_eq!(routes[0].to_string(), "default via 169.254.1.1 dev eth0");
        assert_eq!(routes[1].to_string(), "169.254.1.1 dev eth0 scope link");
        let v6 = [kernel_route("::/0", Some("fe80::1"), 6, 1025, 254)];
        assert_eq!(
            container_routes(&v6, &links),
            [route("::/0", Some("fe80::1"), "eth1", 1025)]
        );
    }

    #[test]
    fn a_later_attachment_never_outranks_the_routes_already_there() {
        let next_metric = |routes: &[ContainerRoute]| placement(routes).metric;
        assert_eq!(placement(&[]), Placement::FIRST);
        // Only default and gateway routes count, not the container's other routes.
        let first = [
            route("0.0.0.0/0", Some("169.254.1.1"), "eth0", 1024),
            route("169.254.1.1/32", None, "eth0", 1024),
            route("10.0.0.0/8", None, "eth0", 5000),
        ];
        assert_eq!(
            placement(&first),
            Placement {
                metric: 1025,
                standby: true
            }
        );
        // Another plugin's default route (metric 0) stays the default.
        assert_eq!(
            next_metric(&[route("0.0.0.0/0", Some("10.1.0.1"), "net0", 0)]),
            FIRST_METRIC
        );
        assert_eq!(
            next_metric(&[route("::/0", Some("fe80::1"), "eth1", 1030)]),
            1031
        );
    }

    #[test]
    fn check_finds_the_first_owned_route_that_is_gone() {
        let ips: Vec<IpAddr> = vec!["10.0.0.5".parse().unwrap(), "fd00::5".parse().unwrap()];
        let ll: IpAddr = "fe80::1".parse().unwrap();
        let wanted = owned("eth1", &ips, Some(ll), MAIN_TABLE);
        assert_eq!(wanted.len(), 3);
        let mut present = vec![
            route("169.254.1.1/32", None, "eth1", 1025),
            route("0.0.0.0/0", Some("169.254.1.1"), "eth1", 1025),
            route("::/0", Some("fe80::1"), "eth1", 1025),
        ];
        assert_eq!(first_missing(&wanted, &present), None);
        // The same routes on another interface are another attachment's.
        present[1].dev = "eth0".into();
        assert_eq!(
            first_missing(&wanted, &present).map(ToString::to_string),
            Some("default via 169.254.1.1 dev eth1".into())
        );
        // And those of another table are the standby's source routing, not the main routes.
        present[1].dev = "eth1".into();
        present[1].table = 1025;
        assert!(first_missing(&wanted, &present).is_some());
    }

    #[test]
    fn errors_name_the_route_or_rule_as_ip_would_be_told_to_add_it() {
        let mut in_table = route("0.0.0.0/0", Some("169.254.1.1"), "eth1", 1025);
        in_table.table = 1025;
        let on_link = route("169.254.1.1/32", None, "eth1", 1025);
        let rule = SourceRule {
            from: "10.0.0.6".parse().unwrap(),
            table: 1025,
        };
        assert_eq!(
            on_link.add_command(),
            "route add 169.254.1.1/32 dev eth1 scope link metric 1025 table 254"
        );
        assert_eq!(
            in_table.add_command(),
            "route add 0.0.0.0/0 via 169.254.1.1 dev eth1 metric 1025 table 1025"
        );
        assert_eq!(
            rule.add_command(),
            "rule add from 10.0.0.6 lookup 1025 priority 1000"
        );
        assert_eq!(
            in_table.for_kernel(6),
            TableRoute {
                destination: "0.0.0.0/0".parse().unwrap(),
                gateway: Some("169.254.1.1".parse().unwrap()),
                ifindex: 6,
                metric: 1025,
                table: 1025,
            }
        );
        assert_eq!(
            rule.for_kernel(),
            PolicyRule {
                from: "10.0.0.6/32".parse().unwrap(),
                table: 1025,
                priority: RULE_PRIORITY,
            }
        );
    }

    #[test]
    fn source_rules_are_those_from_one_address_to_a_numbered_table() {
        let kernel = |from: &str, table: u32, priority: u32| PolicyRule {
            from: from.parse().unwrap(),
            table,
            priority,
        };
        let rules = source_rules(&[
            kernel("0.0.0.0/0", 255, 0),
            kernel("10.0.0.5/32", 1025, 1000),
            kernel("fd00::5/128", 1025, 1000),
            kernel("10.0.0.0/24", 1026, 1000),
            kernel("10.0.0.7/32", 254, 1000),
            kernel("0.0.0.0/0", 254, 32766),
        ]);
        assert_eq!(
            rules,
            [
                SourceRule {
                    from: "10.0.0.5".parse().unwrap(),
                    table: 1025
                },
                SourceRule {
                    from: "fd00::5".parse().unwrap(),
                    table: 1025
                }
            ]
        );
        assert_eq!(rules[0].to_string(), "from 10.0.0.5 lookup 1025");
    }
}
