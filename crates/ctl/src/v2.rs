//! Reading a Calico 1.4 datastore through etcd's v2 API: one `GET /v2/keys/calico?recursive=true`
//! over http or https, its JSON tree flattened into leaf keys. v2 directories are implied by the v3
//! keys, so only leaves are returned; a leaf's TTL is kept so the caller can decide about it.

use std::time::Duration;

use serde::Deserialize;

use calico_http::{Client, HttpError};

/// How long one endpoint may take to connect and answer.
const TIMEOUT: Duration = Duration::from_secs(30);

/// One leaf key of the v2 tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct V2Key {
    pub key: String,
    pub value: String,
    /// Seconds left before etcd expires the key, when it was written with a TTL.
    pub ttl: Option<i64>,
}

/// Why the v2 tree could not be read.
#[derive(Debug, thiserror::Error)]
pub enum V2Error {
    #[error("invalid v2 endpoint {endpoint:?}: {reason}")]
    Endpoint { endpoint: String, reason: String },
    #[error("cannot reach etcd v2: {0}")]
    Unreachable(HttpError),
    #[error("etcd v2 at {endpoint} answered {status}: {body} (is etcd started with --enable-v2?)")]
    Status {
        endpoint: String,
        status: u16,
        body: String,
    },
    #[error("etcd v2 at {endpoint} answered JSON that is not a key tree: {reason}")]
    Json { endpoint: String, reason: String },
}

/// A node of etcd v2's JSON answer.
#[derive(Debug, Deserialize)]
struct Node {
    key: String,
    #[serde(default)]
    dir: bool,
    value: Option<String>,
    ttl: Option<i64>,
    #[serde(default)]
    nodes: Vec<Node>,
}

#[derive(Debug, Deserialize)]
struct Answer {
    node: Node,
}

/// Every leaf under `/calico` of the first endpoint that answers, sorted by key.
pub async fn read_calico(client: &Client, endpoints: &[String]) -> Result<Vec<V2Key>, V2Error> {
    let mut last = None;
    for endpoint in endpoints {
        match read_from(client, endpoint).await {
            Ok(keys) => return Ok(keys),
            Err(error @ V2Error::Unreachable(_)) => last = Some(error),
            Err(error) => return Err(error),
        }
    }
    Err(last.unwrap_or_else(|| V2Error::Endpoint {
        endpoint: String::new(),
        reason: "no endpoint given".to_owned(),
    }))
}

async fn read_from(client: &Client, endpoint: &str) -> Result<Vec<V2Key>, V2Error> {
    check_endpoint(endpoint)?;
    let path = "/v2/keys/calico?recursive=true&sorted=true";
    let client = client.clone().with_timeout(TIMEOUT);
    let answer = client
        .get(endpoint, path)
        .await
        .map_err(V2Error::Unreachable)?;
    let (status, body) = (answer.status, answer.body);
    // 404 with errorCode 100: no /calico directory, an empty Calico datastore.
    if status == 404 && body.contains("\"errorCode\":100") {
        return Ok(Vec::new());
    }
    if status != 200 {
        return Err(V2Error::Status {
            endpoint: endpoint.to_owned(),
            status,
            body: body.trim().to_owned(),
        });
    }
    let answer: Answer = serde_json::from_str(&body).map_err(|e| V2Error::Json {
        endpoint: endpoint.to_owned(),
        reason: e.to_string(),
    })?;
    let mut keys = Vec::new();
    flatten(answer.node, &mut keys);
    keys.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(keys)
}

/// An endpoint is `http://HOST:PORT` or `https://HOST:PORT`.
fn check_endpoint(endpoint: &str) -> Result<(), V2Error> {
    let authority = endpoint
        .strip_prefix("http://")
        .or_else(|| endpoint.strip_prefix("https://"))
        .map(|rest| rest.trim_end_matches('/'));
    match authority {
        Some(a) if !a.is_empty() && !a.contains('/') => Ok(()),
        _ => Err(V2Error::Endpoint {
            endpoint: endpoint.to_owned(),
            reason: "expected http://HOST:PORT or https://HOST:PORT".to_owned(),
        }),
    }
}

/// The leaves of the tree, depth first.
fn flatten(node: Node, into: &mut Vec<V2Key>) {
    if node.dir {
        for child in node.nodes {
            flatten(child, into);
        }
        return;
    }
    into.push(V2Key {
        key: node.key,
        value: node.value.unwrap_or_default(),
        ttl: node.ttl,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tree_flattens_to_its_leaves_with_their_ttls() {
        let text = r#"{"action":"get","node":{"key":"/calico","dir":true,"nodes":[
            {"key":"/calico/v1","dir":true,"nodes":[
                {"key":"/calico/v1/Ready","value":"true","modifiedIndex":4,"createdIndex":4}]},
            {"key":"/calico/felix","dir":true,"nodes":[
                {"key":"/calico/felix/v1/host/h1/status","value":"{}","ttl":57,"expiration":"x"}]},
            {"key":"/calico/empty","dir":true}]}}"#;
        let answer: Answer = serde_json::from_str(text).unwrap();
        let mut keys = Vec::new();
        flatten(answer.node, &mut keys);
        assert_eq!(
            keys,
            vec![
                V2Key {
                    key: "/calico/v1/Ready".into(),
                    value: "true".into(),
                    ttl: None
                },
                V2Key {
                    key: "/calico/felix/v1/host/h1/status".into(),
                    value: "{}".into(),
                    ttl: Some(57)
                },
            ]
        );
    }

    #[test]
    fn endpoints_are_a_scheme_host_and_port() {
        assert!(check_endpoint("http://127.0.0.1:2379/").is_ok());
        assert!(check_endpoint("https://10.0.0.1:2379").is_ok());
        assert!(check_endpoint("10.0.0.1:2379").is_err());
        assert!(check_endpoint("http://10.0.0.1:2379/v2").is_err());
    }
}
