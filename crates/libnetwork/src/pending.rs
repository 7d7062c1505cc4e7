//! An endpoint between `CreateEndpoint` and `Join`, kept in etcd so that a driver restarted in
//! between can finish it: `Join` names neither the addresses nor the profile, only ids.
//!
//! The record lives under a key of the driver's own (`/calico/libnetwork/v1/host/<host>/pending/
//! <endpoint id>`, outside `/calico/v1`, which Felix reads) with a lease: dockerd calls `Join`
//! within seconds of `CreateEndpoint`, so a record older than [`PENDING_TTL`] belongs to a
//! container that never started, and its expiry hands the addresses to the reconciler
//! (`reconcile`). Pure: the key and the value.

use std::net::IpAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use calico_model::MacAddr;
use calico_model::key::Prefix;

use crate::endpoint::EndpointSpec;
use crate::error::DriverError;

/// How long a pending endpoint waits for its `Join`.
pub const PENDING_TTL: Duration = Duration::from_secs(600);

/// The prefix of this host's pending endpoints.
pub fn host_prefix(hostname: &str) -> String {
    Prefix::DockerPending {
        hostname: hostname.to_owned(),
    }
    .to_string()
}

/// The key of one pending endpoint.
pub fn key(hostname: &str, endpoint_id: &str) -> String {
    format!("{}{endpoint_id}", host_prefix(hostname))
}

/// What `Join` needs of its `CreateEndpoint`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pending {
    pub network_id: String,
    pub profile: String,
    pub addresses: Vec<IpAddr>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<MacAddr>,
}

impl Pending {
    pub fn new(network_id: &str, profile: &str, spec: &EndpointSpec) -> Pending {
        Pending {
            network_id: network_id.to_owned(),
            profile: profile.to_owned(),
            addresses: spec.addresses.clone(),
            mac: spec.mac,
        }
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a pending record serializes")
    }

    /// Reads a stored record; `key` names it in the error.
    pub fn parse(key: &str, value: &str) -> Result<Pending, DriverError> {
        serde_json::from_str(value).map_err(|e| {
            DriverError::invalid("pending endpoint", key, format!("unreadable record: {e}"))
        })
    }

    pub fn spec(&self) -> Result<EndpointSpec, DriverError> {
        Ok(EndpointSpec {
            addresses: self.addresses.clone(),
            mac: self.mac,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pending_endpoint_round_trips() {
        let spec = EndpointSpec {
            addresses: vec!["10.65.0.5".parse().unwrap(), "fd80::5".parse().unwrap()],
            mac: Some(MacAddr([0xee, 0, 0, 0, 0, 1])),
        };
        let pending = Pending::new("42dd", "net1", &spec);
        let json = pending.to_json();
        assert_eq!(
            json,
            r#"{"network_id":"42dd","profile":"net1","addresses":["10.65.0.5","fd80::5"],"mac":"ee:00:00:00:00:01"}"#
        );
        let back = Pending::parse("k", &json).unwrap();
        assert_eq!(back.spec().unwrap(), spec);
        let err = Pending::parse("/k", "{").unwrap_err().to_string();
        assert!(
            err.contains("pending endpoint \"/k\": unreadable record"),
            "{err}"
        );
        assert_eq!(
            key("h1", "d594538e6c7"),
            "/calico/libnetwork/v1/host/h1/pending/d594538e6c7"
        );
    }
}
