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
//! priority [`RULE_PRIORITY`]. Rules do not go with the link: DEL and ADD's undo remove them.
//!
//! The kernel tool is `ip` (`-j` for reading), run in the container's namespace through
//! `calico_linux::Netns`: `calico_linux::Netlink` has no route metric, table, rule or MAC yet.

use std::net::{IpAddr, Ipv4Addr};

use calico_linux::{Family, Netns};
use ipnet::IpNet;
use serde_json::Value;

use crate::spec::{CniError, code};

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

/// Parses `ip -j route show table all` (one family): unicast routes with a device, of the
/// main table and numbered tables (not `local`).
pub fn parse(text: &str, family: Family) -> Result<Vec<ContainerRoute>, String> {
    let list: Vec<Value> = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let mut routes = Vec::new();
    for entry in &list {
        let unicast = entry
            .get("type")
            .and_then(Value::as_str)
            .is_none_or(|t| t == "unicast");
        let table = match entry.get("table").and_then(Value::as_str) {
            None | Some("main") => MAIN_TABLE,
            Some(name) => match name.parse() {
                Ok(number) => number,
                Err(_) => continue, // local, default: not ours
            },
        };
        if !unicast {
            continue;
        }
        let (Some(dst), Some(dev)) = (
            entry.get("dst").and_then(Value::as_str),
            entry.get("dev").and_then(Value::as_str),
        ) else {
            continue;
        };
        let destination = match (dst, family) {
            ("default", Family::V4) => "0.0.0.0/0".parse().expect("valid"),
            ("default", Family::V6) => "::/0".parse().expect("valid"),
            (text, _) => text
                .parse::<IpNet>()
                .or_else(|_| text.parse::<IpAddr>().map(IpNet::from))
                .map_err(|_| format!("dst {text:?} is not a network"))?,
        };
        let gateway = match entry.get("gateway").and_then(Value::as_str) {
            Some(text) => Some(
                text.parse()
                    .map_err(|_| format!("gateway {text:?} is not an address"))?,
            ),
            None => None,
        };
        let metric = entry.get("metric").and_then(Value::as_u64).unwrap_or(0);
        routes.push(ContainerRoute {
            destination,
            gateway,
            dev: dev.to_owned(),
            metric: u32::try_from(metric).unwrap_or(u32::MAX),
            table,
        });
    }
    Ok(routes)
}

/// Parses `ip -j rule show` (one family): the rules `from <one address> lookup <number>`.
pub fn parse_rules(text: &str) -> Result<Vec<SourceRule>, String> {
    let list: Vec<Value> = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    Ok(list
        .iter()
        .filter_map(|entry| {
            let from = entry.get("src")?.as_str()?.parse().ok()?;
            let table = entry.get("table")?.as_str()?.parse().ok()?;
            Some(SourceRule { from, table })
        })
        .collect())
}

fn family_flag(family: Family) -> &'static str {
    match family {
        Family::V4 => "-4",
        Family::V6 => "-6",
    }
}

fn ip(netns: &Netns, args: &[&str]) -> Result<String, CniError> {
    netns
        .run("ip", args, "")
        .map_err(|e| CniError::new(code::KERNEL, e.to_string()))
}

/// The container's routes of one family, in every table.
pub fn read(netns: &Netns, family: Family) -> Result<Vec<ContainerRoute>, CniError> {
    let flag = family_flag(family);
    let out = ip(netns, &["-j", flag, "route", "show", "table", "all"])?;
    parse(&out, family).map_err(|e| {
        CniError::new(
            code::KERNEL,
            format!("ip -j {flag} route show in {netns}: {e}"),
        )
    })
}

/// The container's source rules of one family.
pub fn read_rules(netns: &Netns, family: Family) -> Result<Vec<SourceRule>, CniError> {
    let flag = family_flag(family);
    let out = ip(netns, &["-j", flag, "rule", "show"])?;
    parse_rules(&out).map_err(|e| {
        CniError::new(
            code::KERNEL,
            format!("ip -j {flag} rule show in {netns}: {e}"),
        )
    })
}

/// The `ip -batch` input that adds these routes and rules (of one family): `route add`, never
/// `replace`, so an equal route of another attachment is an error rather than taken over.
pub fn batch(routes: &[ContainerRoute], rules: &[SourceRule]) -> String {
    let mut text = String::new();
    for route in routes {
        text.push_str(&format!("route add {}", route.destination));
        match route.gateway {
            Some(gateway) => text.push_str(&format!(" via {gateway} dev {}", route.dev)),
            None => text.push_str(&format!(" dev {} scope link", route.dev)),
        }
        text.push_str(&format!(" metric {} table {}\n", route.metric, route.table));
    }
    for rule in rules {
        text.push_str(&format!(
            "rule add from {} lookup {} priority {RULE_PRIORITY}\n",
            rule.from, rule.table
        ));
    }
    text
}

/// Runs `ip -batch` input of one family in the container: one process for all of an
/// attachment's routes and rules. It stops at the first line that fails.
pub fn apply_batch(netns: &Netns, family: Family, text: &str) -> Result<(), CniError> {
    netns
        .run("ip", &[family_flag(family), "-batch", "-"], text)
        .map(drop)
        .map_err(|e| CniError::new(code::KERNEL, format!("{e}; input:\n{text}")))
}

fn rule_family(rule: &SourceRule) -> &'static str {
    match rule.from {
        IpAddr::V4(_) => "-4",
        IpAddr::V6(_) => "-6",
    }
}

/// Deletes a source rule; one already gone is fine (`ip` says "No such file or directory").
pub fn delete_rule(netns: &Netns, rule: &SourceRule) -> Result<(), CniError> {
    let (from, table) = (rule.from.to_string(), rule.table.to_string());
    let priority = RULE_PRIORITY.to_string();
    let args = [
        rule_family(rule),
        "rule",
        "del",
        "from",
        &from,
        "lookup",
        &table,
        "priority",
        &priority,
    ];
    match netns.run("ip", &args, "") {
        Ok(_) => Ok(()),
        Err(e) if e.reason.contains("No such file or directory") => Ok(()),
        Err(e) => Err(CniError::new(code::KERNEL, e.to_string())),
    }
}

/// Deletes the source rules of these addresses (an attachment's, before DEL removes its
/// interface): rules are not removed with the link.
pub fn delete_rules_from(netns: &Netns, addresses: &[IpAddr]) -> Result<(), CniError> {
    for family in [Family::V4, Family::V6] {
        let wanted = |ip: &IpAddr| ip.is_ipv4() == (family == Family::V4);
        if !addresses.iter().any(wanted) {
            continue;
        }
        for rule in read_rules(netns, family)? {
            if addresses.contains(&rule.from) {
                delete_rule(netns, &rule)?;
            }
        }
    }
    Ok(())
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

    #[test]
    fn ip_json_is_read_with_defaults_host_routes_and_missing_metrics() {
        let text = r#"[{"dst":"default","gateway":"169.254.1.1","dev":"eth0","metric":1024,"flags":[]},
            {"dst":"169.254.1.1","dev":"eth0","scope":"link","flags":[]},
            {"type":"blackhole","dst":"10.0.0.0/8","flags":[]},
            {"type":"local","dst":"10.0.0.5","dev":"eth0","table":"local"},
            {"dst":"default","gateway":"169.254.1.1","dev":"eth1","table":"1025","metric":1025}]"#;
        let routes = parse(text, Family::V4).unwrap();
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
        let v6 = parse(
            r#"[{"dst":"default","gateway":"fe80::1","dev":"eth1","metric":1025}]"#,
            Family::V6,
        );
        assert_eq!(v6.unwrap(), [route("::/0", Some("fe80::1"), "eth1", 1025)]);
        assert!(
            parse(r#"[{"dst":"x","dev":"eth0"}]"#, Family::V4)
                .unwrap_err()
                .contains("dst \"x\"")
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
    fn routes_and_rules_are_added_in_one_batch_never_replaced() {
        let mut in_table = route("0.0.0.0/0", Some("169.254.1.1"), "eth1", 1025);
        in_table.table = 1025;
        let routes = [route("169.254.1.1/32", None, "eth1", 1025), in_table];
        let rules = [SourceRule {
            from: "10.0.0.6".parse().unwrap(),
            table: 1025,
        }];
        assert_eq!(
            batch(&routes, &rules),
            "route add 169.254.1.1/32 dev eth1 scope link metric 1025 table 254\n\
             route add 0.0.0.0/0 via 169.254.1.1 dev eth1 metric 1025 table 1025\n\
             rule add from 10.0.0.6 lookup 1025 priority 1000\n"
        );
    }

    #[test]
    fn source_rules_are_read_from_ip_json() {
        let text = r#"[{"priority":0,"src":"all","table":"local"},
            {"priority":1000,"src":"10.0.0.5","table":"1025"},
            {"priority":32766,"src":"all","table":"main"}]"#;
        let rules = parse_rules(text).unwrap();
        assert_eq!(
            rules,
            [SourceRule {
                from: "10.0.0.5".parse().unwrap(),
                table: 1025
            }]
        );
        assert_eq!(rules[0].to_string(), "from 10.0.0.5 lookup 1025");
    }
}
