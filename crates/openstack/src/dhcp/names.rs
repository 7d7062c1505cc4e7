//! Pure: the host names Neutron gives this host's ports (its DNS integration: each port's
//! `dns_assignment`, one entry per fixed IP with the `hostname` and the `fqdn`, from the port's
//! `dns_name` or `host-<address>`, in its network's `dns_domain` or Neutron's `dns_domain`), read
//! with one listing per poll (`GET /v2.0/ports?binding:host_id=<host>&fields=id&fields=dns_assignment`).
//!
//! A port Neutron lists without `dns_assignment` (no DNS integration) has no names: its entry
//! is served without a host name, as before Neutron had one.

use std::collections::BTreeMap;
use std::net::IpAddr;

use serde::Deserialize;

use super::NotServed;

/// One of a port's `dns_assignment`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
pub struct Assignment {
    pub hostname: String,
    pub ip_address: String,
    pub fqdn: String,
}

/// A port's names, as listed.
#[derive(Debug, Clone, Deserialize)]
struct Listed {
    id: String,
    #[serde(default)]
    dns_assignment: Option<Vec<Assignment>>,
}

/// Port id → its assignments (ports without any are left out).
pub type Names = BTreeMap<String, Vec<Assignment>>;

/// The names in a listing, and whether Neutron has a DNS integration at all (some port has the
/// field).
pub fn from_listing(items: Vec<serde_json::Value>) -> (Names, bool) {
    let mut names = Names::new();
    let mut integrated = false;
    for item in items {
        let Ok(listed) = serde_json::from_value::<Listed>(item) else {
            continue;
        };
        if let Some(assignments) = listed.dns_assignment {
            integrated = true;
            if !assignments.is_empty() {
                names.insert(listed.id, assignments);
            }
        }
    }
    (names, integrated)
}

/// A port's name for DHCP and DNS: the host name, its domain (without the final dot), and the
/// address records (`address fqdn hostname`) of the addresses it serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortName {
    pub hostname: String,
    pub domain: Option<String>,
    pub records: Vec<(IpAddr, String)>,
}

/// The name of `port` for the addresses in `served`, or why it has none.
pub fn port_name(
    port: &str,
    assignments: &[Assignment],
    served: &[IpAddr],
) -> Result<Option<PortName>, NotServed> {
    let mut name: Option<PortName> = None;
    for assignment in assignments {
        let Ok(address) = assignment.ip_address.parse::<IpAddr>() else {
            continue;
        };
        if !served.contains(&address) {
            continue;
        }
        let hostname = &assignment.hostname;
        check_label(port, hostname)?;
        let fqdn = assignment.fqdn.trim_end_matches('.');
        let domain = fqdn
            .strip_prefix(hostname.as_str())
            .and_then(|rest| rest.strip_prefix('.'))
            .filter(|d| !d.is_empty())
            .map(str::to_owned);
        let entry = name.get_or_insert_with(|| PortName {
            hostname: hostname.clone(),
            domain,
            records: Vec::new(),
        });
        if entry.hostname != *hostname {
            return Err(NotServed::port(
                port,
                format!(
                    "dns_assignment names it both {:?} and {hostname:?}: not served by name",
                    entry.hostname
                ),
            ));
        }
        entry.records.push((address, fqdn.to_owned()));
    }
    Ok(name)
}

/// A DNS label dnsmasq takes as a host name: letters, digits and `-`, 1 to 63 characters.
fn check_label(port: &str, label: &str) -> Result<(), NotServed> {
    let good = !label.is_empty()
        && label.len() <= 63
        && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
    match good {
        true => Ok(()),
        false => Err(NotServed::port(
            port,
            format!("dns_assignment hostname {label:?}: not a DNS label; not served by name"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assignment(hostname: &str, ip: &str, fqdn: &str) -> Assignment {
        Assignment {
            hostname: hostname.into(),
            ip_address: ip.into(),
            fqdn: fqdn.into(),
        }
    }

    #[test]
    fn a_listing_gives_each_port_s_assignments() {
        let items = vec![
            serde_json::json!({"id": "p1", "dns_assignment": [
                {"hostname": "web-1", "ip_address": "10.65.0.5", "fqdn": "web-1.cloud.example."}]}),
            serde_json::json!({"id": "p2", "dns_assignment": []}),
        ];
        let (names, integrated) = from_listing(items);
        assert!(integrated);
        assert_eq!(names.keys().collect::<Vec<_>>(), ["p1"]);
        let (names, integrated) = from_listing(vec![serde_json::json!({"id": "p1"})]);
        assert!(!integrated && names.is_empty());
    }

    #[test]
    fn a_port_s_name_covers_the_addresses_served() {
        let served: Vec<IpAddr> =
            vec!["10.65.0.5".parse().unwrap(), "2001:db8::5".parse().unwrap()];
        let assignments = [
            assignment("web-1", "10.65.0.5", "web-1.cloud.example."),
            assignment("web-1", "2001:db8::5", "web-1.cloud.example."),
            assignment("web-1", "10.66.0.5", "web-1.cloud.example."),
        ];
        let name = port_name("p1", &assignments, &served).unwrap().unwrap();
        assert_eq!(name.hostname, "web-1");
        assert_eq!(name.domain.as_deref(), Some("cloud.example"));
        assert_eq!(name.records.len(), 2, "{name:?}");
        assert_eq!(
            name.records[1],
            (served[1], "web-1.cloud.example".to_owned())
        );
        assert_eq!(port_name("p1", &assignments, &[]).unwrap(), None);
    }

    #[test]
    fn a_name_dnsmasq_cannot_take_is_named() {
        let served: Vec<IpAddr> = vec!["10.65.0.5".parse().unwrap()];
        let bad = [assignment("web_1", "10.65.0.5", "web_1.x.")];
        let error = port_name("p1", &bad, &served).unwrap_err().to_string();
        assert!(
            error.starts_with("port p1: dns_assignment hostname \"web_1\""),
            "{error}"
        );
    }
}
