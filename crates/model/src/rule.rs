//! Rules: the match criteria and action shared by profiles (`.../profile/<id>/rules`) and tiered
//! policies, and the `rules` object of a profile.
//!
//! Every positive match has a negated twin, named `"!<match>"` in JSON and `not_<match>` here.
//! All matches of a rule must hold for the rule to match. A missing `action` means `allow`, as
//! the calico-containers data model says ("defaults to allow, if missing"); the later documents
//! are silent. Validation (see [`check`]) refuses combinations iptables cannot express and
//! normalises what the seeds say is normalised (`log_prefix`) plus protocol numbers and nets.

mod check;
pub mod net;
mod ports;
mod protocol;

use std::fmt;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use crate::error::{Validate, ValidationError};
use crate::selector::Selector;

pub use check::{LOG_PREFIX_MAX_LEN, is_log_prefix_char, sanitise_log_prefix};
pub use ports::PortRange;
pub use protocol::{IpVersion, Protocol};

/// What happens to a packet that matches a rule.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    /// Accept the packet; the default when `action` is missing.
    #[default]
    Allow,
    /// Drop the packet.
    Deny,
    /// In a tiered policy, skip to the next tier; in a profile, a synonym for `allow`.
    NextTier,
    /// Log the packet and carry on with the next rule.
    Log,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Allow => "allow",
            Action::Deny => "deny",
            Action::NextTier => "next-tier",
            Action::Log => "log",
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One rule. Absent matches are `None` / empty; an empty port list is the same as none.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Rule {
    /// `4` or `6`: the rule applies to that IP version only, as Calico 1.x's Felix read it and
    /// networking-calico writes it from a security group rule's `ethertype`. Not in the seeds'
    /// rule table; a net or an ICMP protocol of the other version is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_version: Option<IpVersion>,

    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<Protocol>,
    #[serde(default, rename = "!protocol", skip_serializing_if = "Option::is_none")]
    pub not_protocol: Option<Protocol>,

    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src_tag: Option<String>,
    #[serde(default, rename = "!src_tag", skip_serializing_if = "Option::is_none")]
    pub not_src_tag: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src_selector: Option<Selector>,
    #[serde(
        default,
        rename = "!src_selector",
        skip_serializing_if = "Option::is_none"
    )]
    pub not_src_selector: Option<Selector>,
    #[serde(default, deserialize_with = "net::deserialize_opt")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub src_net: Option<IpNet>,
    #[serde(
        default,
        rename = "!src_net",
        deserialize_with = "net::deserialize_opt"
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_src_net: Option<IpNet>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub src_ports: Vec<PortRange>,
    #[serde(default, rename = "!src_ports", skip_serializing_if = "Vec::is_empty")]
    pub not_src_ports: Vec<PortRange>,

    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst_tag: Option<String>,
    #[serde(default, rename = "!dst_tag", skip_serializing_if = "Option::is_none")]
    pub not_dst_tag: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst_selector: Option<Selector>,
    #[serde(
        default,
        rename = "!dst_selector",
        skip_serializing_if = "Option::is_none"
    )]
    pub not_dst_selector: Option<Selector>,
    #[serde(default, deserialize_with = "net::deserialize_opt")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dst_net: Option<IpNet>,
    #[serde(
        default,
        rename = "!dst_net",
        deserialize_with = "net::deserialize_opt"
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_dst_net: Option<IpNet>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dst_ports: Vec<PortRange>,
    #[serde(default, rename = "!dst_ports", skip_serializing_if = "Vec::is_empty")]
    pub not_dst_ports: Vec<PortRange>,

    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icmp_type: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icmp_code: Option<u8>,
    #[serde(
        default,
        rename = "!icmp_type",
        skip_serializing_if = "Option::is_none"
    )]
    pub not_icmp_type: Option<u8>,
    #[serde(
        default,
        rename = "!icmp_code",
        skip_serializing_if = "Option::is_none"
    )]
    pub not_icmp_code: Option<u8>,

    /// Log matching packets with this prefix; normalised by validation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_prefix: Option<String>,
    /// `allow` when missing.
    #[serde(default)]
    pub action: Action,
}

impl Rule {
    /// The nets of the rule with their JSON field names, in field order.
    pub fn nets(&self) -> impl Iterator<Item = (&'static str, &IpNet)> {
        [
            ("src_net", &self.src_net),
            ("!src_net", &self.not_src_net),
            ("dst_net", &self.dst_net),
            ("!dst_net", &self.not_dst_net),
        ]
        .into_iter()
        .filter_map(|(field, net)| net.as_ref().map(|n| (field, n)))
    }

    /// The IP version the rule is pinned to by its `ip_version` field, a net or protocol
    /// `icmp` / `icmpv6`; `None` when it applies to both. On an unvalidated rule with
    /// conflicting pins, the field wins, then the first net.
    pub fn ip_version(&self) -> Option<IpVersion> {
        let from_net = || self.nets().map(|(_, net)| IpVersion::of_net(net)).next();
        self.ip_version
            .or_else(from_net)
            .or_else(|| self.protocol.and_then(Protocol::ip_version))
    }
}

/// Validates each rule of a list, naming the failing one: `inbound_rules[2].dst_ports`.
pub fn validate_rules(rules: &mut [Rule], field: &str) -> Result<(), ValidationError> {
    for (index, rule) in rules.iter_mut().enumerate() {
        rule.validate()
            .map_err(|e| e.within(&format!("{field}[{index}]")))?;
    }
    Ok(())
}

/// The value of `/calico/v1/policy/profile/<profile_id>/rules`. Both lists default to empty.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProfileRules {
    #[serde(default)]
    pub inbound_rules: Vec<Rule>,
    #[serde(default)]
    pub outbound_rules: Vec<Rule>,
}

impl Validate for ProfileRules {
    fn validate(&mut self) -> Result<(), ValidationError> {
        validate_rules(&mut self.inbound_rules, "inbound_rules")?;
        validate_rules(&mut self.outbound_rules, "outbound_rules")
    }
}
