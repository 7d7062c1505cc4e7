//! Policy routing rules that choose a table by source address (`ip rule … from <prefix> lookup
//! <table> priority <n>`): how a workload's second interface answers from its own addresses.
//! Building and reading the messages is pure; [`Netlink`] sends them.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use futures::TryStreamExt;
use ipnet::IpNet;
use rtnetlink::IpVersion;
use rtnetlink::packet_route::AddressFamily;
use rtnetlink::packet_route::rule::{RuleAction, RuleAttribute, RuleFlags, RuleMessage};

use super::{Netlink, NetlinkError, deleted, request_error};
use crate::Family;

/// `from <from> lookup <table> priority <priority>`; a `/0` source is `from all`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PolicyRule {
    pub from: IpNet,
    pub table: u32,
    pub priority: u32,
}

impl std::fmt::Display for PolicyRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "from {} lookup {} priority {}",
            self.from, self.table, self.priority
        )
    }
}

/// The request for `rule`, as `ip rule add` makes it (the table in the header when it fits,
/// else in an attribute).
pub(crate) fn rule_message(rule: &PolicyRule) -> RuleMessage {
    let mut message = RuleMessage::default();
    message.header.family = match rule.from {
        IpNet::V4(_) => AddressFamily::Inet,
        IpNet::V6(_) => AddressFamily::Inet6,
    };
    message.header.action = RuleAction::ToTable;
    message.header.src_len = rule.from.prefix_len();
    if rule.from.prefix_len() > 0 {
        message
            .attributes
            .push(RuleAttribute::Source(rule.from.addr()));
    }
    match u8::try_from(rule.table) {
        Ok(table) => message.header.table = table,
        Err(_) => message.attributes.push(RuleAttribute::Table(rule.table)),
    }
    message
        .attributes
        .push(RuleAttribute::Priority(rule.priority));
    message
}

/// A rule of a dump, if it is a lookup that selects by source alone: rules that also match
/// a destination, an interface, a mark, a port, … (or negate their match) are not listed.
pub(crate) fn policy_rule_of(message: &RuleMessage) -> Option<PolicyRule> {
    let header = &message.header;
    if header.action != RuleAction::ToTable
        || header.dst_len != 0
        || header.tos != 0
        || header.flags.contains(RuleFlags::Invert)
    {
        return None;
    }
    let mut from = match header.family {
        AddressFamily::Inet => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        AddressFamily::Inet6 => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        _ => return None,
    };
    let (mut table, mut priority) = (u32::from(header.table), 0);
    for attribute in &message.attributes {
        match attribute {
            RuleAttribute::Source(ip) => from = *ip,
            RuleAttribute::Table(t) => table = *t,
            RuleAttribute::Priority(p) => priority = *p,
            RuleAttribute::FwMark(0) => {}
            RuleAttribute::Destination(_)
            | RuleAttribute::Iifname(_)
            | RuleAttribute::Oifname(_)
            | RuleAttribute::FwMark(_)
            | RuleAttribute::Goto(_)
            | RuleAttribute::TunId(_)
            | RuleAttribute::UidRange(_)
            | RuleAttribute::IpProtocol(_)
            | RuleAttribute::SourcePortRange(_)
            | RuleAttribute::DestinationPortRange(_) => return None,
            _ => {}
        }
    }
    Some(PolicyRule {
        from: IpNet::new(from, header.src_len).ok()?,
        table,
        priority,
    })
}

impl Netlink {
    /// The rules of one family that look a table up by source alone (`ip rule show`, less
    /// the rules that select on anything else).
    pub async fn policy_rules(&self, family: Family) -> Result<Vec<PolicyRule>, NetlinkError> {
        let version = match family {
            Family::V4 => IpVersion::V4,
            Family::V6 => IpVersion::V6,
        };
        let messages: Vec<RuleMessage> = self
            .handle
            .rule()
            .get(version)
            .execute()
            .try_collect()
            .await
            .map_err(request_error(format!("list {family:?} rules")))?;
        Ok(messages.iter().filter_map(policy_rule_of).collect())
    }

    /// Adds a rule (`ip rule add`): an equal rule already there is an error (EEXIST).
    pub async fn add_policy_rule(&self, rule: &PolicyRule) -> Result<(), NetlinkError> {
        let mut request = self.handle.rule().add();
        *request.message_mut() = rule_message(rule);
        request
            .execute()
            .await
            .map_err(request_error(format!("add rule {rule}")))
    }

    /// Deletes a rule; one already gone is fine.
    pub async fn delete_policy_rule(&self, rule: &PolicyRule) -> Result<(), NetlinkError> {
        let result = self.handle.rule().del(rule_message(rule)).execute().await;
        deleted(result, || format!("delete rule {rule}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(from: &str, table: u32, priority: u32) -> PolicyRule {
        PolicyRule {
            from: from.parse().unwrap(),
            table,
            priority,
        }
    }

    #[test]
    fn a_rule_reads_back_as_it_was_built() {
        for r in [
            rule("10.0.0.5/32", 1025, 1000),
            rule("fd00::5/128", 1025, 1000),
            rule("10.0.0.0/8", 100, 5),
            rule("0.0.0.0/0", 254, 32766),
        ] {
            assert_eq!(policy_rule_of(&rule_message(&r)), Some(r), "{r}");
        }
    }

    #[test]
    fn small_tables_go_in_the_header_large_ones_in_an_attribute() {
        let small = rule_message(&rule("10.0.0.5/32", 100, 1000));
        assert_eq!(small.header.table, 100);
        assert!(
            !small
                .attributes
                .iter()
                .any(|a| matches!(a, RuleAttribute::Table(_)))
        );
        let large = rule_message(&rule("10.0.0.5/32", 1025, 1000));
        assert_eq!(large.header.table, 0);
        assert!(large.attributes.contains(&RuleAttribute::Table(1025)));
        // `from all` carries no source.
        let all = rule_message(&rule("0.0.0.0/0", 254, 32766));
        assert!(
            !all.attributes
                .iter()
                .any(|a| matches!(a, RuleAttribute::Source(_)))
        );
    }

    #[test]
    fn rules_that_select_on_more_than_the_source_are_not_listed() {
        let base = || rule_message(&rule("10.0.0.5/32", 1025, 1000));
        let mut iif = base();
        iif.attributes.push(RuleAttribute::Iifname("eth0".into()));
        let mut not = base();
        not.header.flags = RuleFlags::Invert;
        let mut blackhole = base();
        blackhole.header.action = RuleAction::Blackhole;
        let mut unmarked = base();
        unmarked.attributes.push(RuleAttribute::FwMark(0));
        for message in [iif, not, blackhole] {
            assert_eq!(policy_rule_of(&message), None, "{message:?}");
        }
        assert!(policy_rule_of(&unmarked).is_some());
    }
}
