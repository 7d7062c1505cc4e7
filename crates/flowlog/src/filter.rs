//! Which flows a query, a stream or a hint wants: the same filter for all three, as URL query
//! parameters. Values of one parameter are alternatives (OR); different parameters must all
//! hold (AND), as upstream Goldmane's `Filter`.
//!
//! | parameter | matches a flow when |
//! | --- | --- |
//! | `endpoint` | the source's or destination's key (or net) contains the text |
//! | `address` | the source's or destination's address is this IP, or in this CIDR (a record without addresses: its `net` is inside it) |
//! | `profile` | the source or destination has the profile |
//! | `tier` | a step of either trail is in the tier |
//! | `policy` | a step of either trail names the policy (or profile) |
//! | `action` | its verdict is `allow` or `deny` |
//! | `reporter` | the reporting host is this one |
//! | `direction` | `ingress` or `egress` |
//! | `start_gte`, `start_lt` | its start time is in `[start_gte, start_lt)`: unix seconds, or negative for seconds before now; 0 is no bound |

use std::net::IpAddr;

use calico_model::flow::{FlowDirection, FlowEndpoint, FlowRecord, Verdict};
use ipnet::IpNet;
use percent_encoding::{NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};

use crate::error::FilterError;

/// The parameters [`FlowFilter::set`] knows.
pub const PARAMETERS: [&str; 10] = [
    "endpoint",
    "address",
    "profile",
    "tier",
    "policy",
    "action",
    "reporter",
    "direction",
    "start_gte",
    "start_lt",
];

/// A filter; the default matches every flow.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FlowFilter {
    pub endpoints: Vec<String>,
    /// IPs (as `/32` or `/128`) and CIDRs.
    pub addresses: Vec<IpNet>,
    pub profiles: Vec<String>,
    pub tiers: Vec<String>,
    pub policies: Vec<String>,
    pub actions: Vec<Verdict>,
    pub reporters: Vec<String>,
    pub directions: Vec<FlowDirection>,
    pub start_gte: i64,
    pub start_lt: i64,
}

impl FlowFilter {
    /// Sets one parameter; `Ok(false)` for a parameter that is not a filter's (for the caller
    /// to handle or refuse).
    pub fn set(&mut self, name: &str, value: &str) -> Result<bool, FilterError> {
        let bad = |reason: String| FilterError::new(name, value, reason);
        match name {
            "endpoint" => self.endpoints.push(nonempty(name, value)?),
            "address" => self.addresses.push(address(value).map_err(bad)?),
            "profile" => self.profiles.push(nonempty(name, value)?),
            "tier" => self.tiers.push(nonempty(name, value)?),
            "policy" => self.policies.push(nonempty(name, value)?),
            "reporter" => self.reporters.push(nonempty(name, value)?),
            "action" => self.actions.push(Verdict::parse(value).map_err(bad)?),
            "direction" => self.directions.push(match value {
                "ingress" => FlowDirection::Ingress,
                "egress" => FlowDirection::Egress,
                _ => return Err(bad("expected ingress or egress".into())),
            }),
            "start_gte" | "start_lt" => {
                let time = value.parse::<i64>().map_err(|_| {
                    bad("expected unix seconds, or negative seconds before now".into())
                })?;
                match name {
                    "start_gte" => self.start_gte = time,
                    _ => self.start_lt = time,
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Reads a URL query string; every parameter must be a filter's.
    pub fn from_query(query: &str) -> Result<FlowFilter, FilterError> {
        let mut filter = FlowFilter::default();
        for (name, value) in parse_query(query)? {
            if !filter.set(&name, &value)? {
                return Err(unknown_parameter(&name, &value));
            }
        }
        Ok(filter)
    }

    /// The filter as a URL query string (without `?`), the inverse of [`from_query`](Self::from_query).
    pub fn to_query(&self) -> String {
        let mut pairs: Vec<(&str, String)> = Vec::new();
        let lists: [(&str, &Vec<String>); 5] = [
            ("endpoint", &self.endpoints),
            ("profile", &self.profiles),
            ("tier", &self.tiers),
            ("policy", &self.policies),
            ("reporter", &self.reporters),
        ];
        for (name, values) in lists {
            pairs.extend(values.iter().map(|v| (name, v.clone())));
        }
        pairs.extend(self.addresses.iter().map(|a| ("address", shown(a))));
        pairs.extend(
            self.actions
                .iter()
                .map(|a| ("action", a.as_str().to_owned())),
        );
        pairs.extend(
            self.directions
                .iter()
                .map(|d| ("direction", d.as_str().to_owned())),
        );
        for (name, time) in [("start_gte", self.start_gte), ("start_lt", self.start_lt)] {
            if time != 0 {
                pairs.push((name, time.to_string()));
            }
        }
        let encode = |text: &str| utf8_percent_encode(text, NON_ALPHANUMERIC).to_string();
        let encoded: Vec<String> = pairs
            .iter()
            .map(|(name, value)| format!("{name}={}", encode(value)))
            .collect();
        encoded.join("&")
    }

    /// The time bounds `[from, until)` in unix seconds at `now`.
    pub fn bounds(&self, now: u64) -> (u64, u64) {
        let at = |time: i64, unset: u64| match time {
            0 => unset,
            t if t > 0 => t as u64,
            t => now.saturating_sub(t.unsigned_abs()),
        };
        (at(self.start_gte, 0), at(self.start_lt, u64::MAX))
    }

    /// Whether `flow` passes, at `now` (for relative times).
    pub fn matches(&self, flow: &FlowRecord, now: u64) -> bool {
        let (from, until) = self.bounds(now);
        let any = |values: &[String], test: &dyn Fn(&str) -> bool| {
            values.is_empty() || values.iter().any(|v| test(v))
        };
        let sides = [&flow.source, &flow.destination];
        (from..until).contains(&flow.start_time)
            && (self.actions.is_empty() || self.actions.contains(&flow.action))
            && (self.directions.is_empty() || self.directions.contains(&flow.direction))
            && any(&self.reporters, &|r| flow.reporter == r)
            && any(&self.endpoints, &|e| {
                sides.iter().any(|s| side_contains(s, e))
            })
            && (self.addresses.is_empty()
                || self
                    .addresses
                    .iter()
                    .any(|a| sides.iter().any(|s| side_within(s, a))))
            && any(&self.profiles, &|p| {
                sides.iter().any(|s| s.profiles.iter().any(|q| q == p))
            })
            && any(&self.tiers, &|t| {
                flow.policies.steps().any(|s| s.tier.as_deref() == Some(t))
            })
            && any(&self.policies, &|p| {
                flow.policies.steps().any(|s| s.name.as_deref() == Some(p))
            })
    }
}

fn side_contains(side: &FlowEndpoint, text: &str) -> bool {
    match (&side.key, &side.net) {
        (Some(key), _) => key.contains(text),
        (None, Some(net)) => net.to_string().contains(text),
        (None, None) => false,
    }
}

/// Whether the side's address (or, from a Felix that sends none, its net) is in `range`.
fn side_within(side: &FlowEndpoint, range: &IpNet) -> bool {
    match (side.address, &side.net) {
        (Some(address), _) => range.contains(&address),
        (None, Some(net)) => range.contains(net),
        (None, None) => false,
    }
}

/// An IP (read as `/32` or `/128`) or a CIDR.
fn address(value: &str) -> Result<IpNet, String> {
    if let Ok(ip) = value.parse::<IpAddr>() {
        return Ok(IpNet::from(ip));
    }
    value.parse::<IpNet>().map(|net| net.trunc()).map_err(|_| {
        "expected an IP address (10.65.0.10, fd00::10) or a CIDR (10.65.0.0/16)".to_owned()
    })
}

/// An address range as written: a single address without its prefix length.
fn shown(range: &IpNet) -> String {
    if range.prefix_len() == range.max_prefix_len() {
        range.addr().to_string()
    } else {
        range.to_string()
    }
}

fn nonempty(name: &str, value: &str) -> Result<String, FilterError> {
    if value.is_empty() {
        return Err(FilterError::new(name, value, "must not be empty".into()));
    }
    Ok(value.to_owned())
}

/// A parameter nobody knows, refused by name.
pub fn unknown_parameter(name: &str, value: &str) -> FilterError {
    let known = PARAMETERS.join(", ");
    FilterError::new(
        name,
        value,
        format!("unknown parameter (known: {known}, limit)"),
    )
}

/// Splits and decodes a URL query string (`+` is a space).
pub fn parse_query(query: &str) -> Result<Vec<(String, String)>, FilterError> {
    let decode = |text: &str| {
        let spaced = text.replace('+', " ");
        percent_decode_str(&spaced)
            .decode_utf8()
            .map(|s| s.into_owned())
            .map_err(|_| FilterError::new(text, text, "not UTF-8 once decoded".into()))
    };
    let mut pairs = Vec::new();
    for part in query.split('&').filter(|p| !p.is_empty()) {
        let (name, value) = part.split_once('=').unwrap_or((part, ""));
        pairs.push((decode(name)?, decode(value)?));
    }
    Ok(pairs)
}

#[cfg(test)]
mod tests;
