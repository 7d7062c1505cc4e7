//! Validation and normalisation of one rule.
//!
//! | check | why |
//! | --- | --- |
//! | ports (either sign) need a positive protocol tcp, udp, sctp or udplite | iptables only matches ports with a protocol that has them (the seeds name tcp and udp; sctp and udplite are accepted as Felix 1.x did) |
//! | `icmp_type` / `icmp_code` (either sign) need a positive protocol icmp or icmpv6 | same, for ICMP |
//! | `icmp_code` needs `icmp_type`, `!icmp_code` needs `!icmp_type` | the kernel's ICMP match cannot match a code alone |
//! | ICMP type 0-254 | 255 is iptables' "any type" marker |
//! | all nets of a rule are one IP version; icmp is IPv4-only, icmpv6 IPv6-only | a rule renders into one of the iptables / ip6tables tables |
//! | `ip_version`, when given, is the version of every net and of an ICMP protocol | same: a rule of ip_version 6 with an IPv4 net could match nothing |
//! | tags are valid tag names | they are looked up by name |
//!
//! Normalised: protocol numbers with a name become the name, nets lose their host bits (what
//! iptables does with them anyway), `log_prefix` is sanitised (see [`sanitise_log_prefix`]).

use super::{IpVersion, Protocol, Rule};
use crate::error::{Validate, ValidationError};
use crate::names::validate_tag;

/// iptables allows 29 characters of prefix; Calico appends ": " when rendering.
pub const LOG_PREFIX_MAX_LEN: usize = 27;

/// The characters kept in a log prefix: letters, digits, space and `_-.:/()[]`. Nothing that a
/// shell, `iptables-restore` quoting or syslog parsing treats specially (no quotes, `\`, `$`,
/// `#`, `%`, control characters). A space is kept; renderers quote the prefix.
pub fn is_log_prefix_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || " _-.:/()[]".contains(c)
}

/// Replaces every character outside [`is_log_prefix_char`] by `_`, then keeps the first
/// [`LOG_PREFIX_MAX_LEN`] characters.
pub fn sanitise_log_prefix(prefix: &str) -> String {
    prefix
        .chars()
        .map(|c| if is_log_prefix_char(c) { c } else { '_' })
        .take(LOG_PREFIX_MAX_LEN)
        .collect()
}

impl Validate for Rule {
    fn validate(&mut self) -> Result<(), ValidationError> {
        check(self)
    }
}

fn check(rule: &mut Rule) -> Result<(), ValidationError> {
    normalise(rule);
    check_protocol_numbers(rule)?;
    check_tags(rule)?;
    check_ports(rule)?;
    check_icmp(rule)?;
    check_nets(rule)?;
    check_ip_version(rule)
}

fn normalise(rule: &mut Rule) {
    for protocol in [&mut rule.protocol, &mut rule.not_protocol] {
        *protocol = protocol.map(|p| Protocol::from_number(p.number()));
    }
    let nets = [
        &mut rule.src_net,
        &mut rule.not_src_net,
        &mut rule.dst_net,
        &mut rule.not_dst_net,
    ];
    for net in nets {
        *net = net.map(|n| n.trunc());
    }
    rule.log_prefix = rule.log_prefix.as_deref().map(sanitise_log_prefix);
}

/// Only reachable from Rust: JSON never yields protocol 0.
fn check_protocol_numbers(rule: &Rule) -> Result<(), ValidationError> {
    for (field, protocol) in [
        ("protocol", rule.protocol),
        ("!protocol", rule.not_protocol),
    ] {
        if protocol == Some(Protocol::Number(0)) {
            let reason = "invalid protocol 0: expected a protocol number 1-255";
            return Err(ValidationError::new(field, reason));
        }
    }
    Ok(())
}

fn check_tags(rule: &Rule) -> Result<(), ValidationError> {
    let tags = [
        ("src_tag", &rule.src_tag),
        ("!src_tag", &rule.not_src_tag),
        ("dst_tag", &rule.dst_tag),
        ("!dst_tag", &rule.not_dst_tag),
    ];
    for (field, tag) in tags {
        if let Some(tag) = tag {
            validate_tag(tag).map_err(|e| e.within(field))?;
        }
    }
    Ok(())
}

fn check_ports(rule: &Rule) -> Result<(), ValidationError> {
    let lists = [
        ("src_ports", &rule.src_ports),
        ("!src_ports", &rule.not_src_ports),
        ("dst_ports", &rule.dst_ports),
        ("!dst_ports", &rule.not_dst_ports),
    ];
    for (field, ports) in lists {
        let reason = match rule.protocol {
            _ if ports.is_empty() => continue,
            Some(p) if p.has_ports() => continue,
            Some(p) => format!("ports need protocol tcp, udp, sctp or udplite, not {p}"),
            None => "ports need a positive protocol match of tcp, udp, sctp or udplite".to_owned(),
        };
        return Err(ValidationError::new(field, reason));
    }
    Ok(())
}

fn check_icmp(rule: &Rule) -> Result<(), ValidationError> {
    let pairs = [
        ("icmp_type", rule.icmp_type, "icmp_code", rule.icmp_code),
        (
            "!icmp_type",
            rule.not_icmp_type,
            "!icmp_code",
            rule.not_icmp_code,
        ),
    ];
    for (type_field, icmp_type, code_field, icmp_code) in pairs {
        if let Some((field, _)) = [(type_field, icmp_type), (code_field, icmp_code)]
            .into_iter()
            .find(|(_, value)| value.is_some())
        {
            check_icmp_protocol(field, rule.protocol)?;
        }
        if icmp_code.is_some() && icmp_type.is_none() {
            let reason =
                format!("needs {type_field} as well: the kernel cannot match a code alone");
            return Err(ValidationError::new(code_field, reason));
        }
        if let Some(255) = icmp_type {
            let reason = "icmp type 255 is out of range 0-254";
            return Err(ValidationError::new(type_field, reason));
        }
    }
    Ok(())
}

fn check_icmp_protocol(field: &str, protocol: Option<Protocol>) -> Result<(), ValidationError> {
    let reason = match protocol {
        Some(p) if p.is_icmp() => return Ok(()),
        Some(p) => format!("needs protocol icmp or icmpv6, not {p}"),
        None => "needs a positive protocol match of icmp or icmpv6".to_owned(),
    };
    Err(ValidationError::new(field, reason))
}

fn check_nets(rule: &Rule) -> Result<(), ValidationError> {
    let mut nets = rule.nets();
    let Some((first_field, first)) = nets.next() else {
        return Ok(());
    };
    let version = IpVersion::of_net(first);
    if let Some((field, net)) = nets.find(|(_, net)| IpVersion::of_net(net) != version) {
        let reason = format!(
            "{} network {net} mixes IP versions with {first_field} {first}",
            IpVersion::of_net(net)
        );
        return Err(ValidationError::new(field, reason));
    }
    let pinned_elsewhere = |p: &Protocol| p.ip_version().is_some_and(|v| v != version);
    match rule.protocol.filter(pinned_elsewhere) {
        Some(p) => Err(ValidationError::new(
            "protocol",
            format!("protocol {p} cannot match the {version} network {first} of {first_field}"),
        )),
        None => Ok(()),
    }
}

/// The `ip_version` field against the rule's nets and positive protocol.
fn check_ip_version(rule: &Rule) -> Result<(), ValidationError> {
    let Some(version) = rule.ip_version else {
        return Ok(());
    };
    let number = version.number();
    if let Some((field, net)) = rule.nets().find(|(_, n)| IpVersion::of_net(n) != version) {
        let other = IpVersion::of_net(net);
        let reason = format!("{other} network {net} in a rule of ip_version {number}");
        return Err(ValidationError::new(field, reason));
    }
    let pinned_elsewhere = |p: &Protocol| p.ip_version().is_some_and(|v| v != version);
    match rule.protocol.filter(pinned_elsewhere) {
        Some(p) => Err(ValidationError::new(
            "protocol",
            format!("protocol {p} cannot match in a rule of ip_version {number}"),
        )),
        None => Ok(()),
    }
}
