//! A small HTTP/1.1 client of Neutron's API (hyper, one connection per request, as calicoctl's
//! `http.rs`), plain http only.
//!
//! Authentication: none yet. The client speaks to a server run with `auth_strategy = noauth`,
//! where every request runs as admin: no auth headers are sent, and request bodies carry
//! `project_id` (see docs/openstack.md).
//!
//! A [`Snapshot`] is read in dependency order, ports first: anything a port refers to (its
//! subnets, its security groups) existed before the port did, so it is in the lists read after.

use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use tokio::net::TcpStream;

use crate::error::{NeutronError, TranslateError};
use crate::neutron::{Revisions, Snapshot};

/// How long one request may take before it counts as Neutron being unreachable.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Deserialize)]
struct Revision {
    id: String,
    #[serde(default)]
    revision_number: u64,
}

/// The collections read, with the JSON name of each list.
const COLLECTIONS: [(&str, &str); 4] = [
    ("ports", "ports"),
    ("subnets", "subnets"),
    ("security-groups", "security_groups"),
    ("security-group-rules", "security_group_rules"),
];

/// A Neutron API server at `http://HOST:PORT`.
#[derive(Debug, Clone)]
pub struct Client {
    authority: String,
}

impl Client {
    /// A client for `url` (`http://HOST:PORT`, a trailing `/` allowed).
    pub fn new(url: &str) -> Result<Client, NeutronError> {
        let bad = |reason: &str| NeutronError::Url {
            url: url.to_owned(),
            reason: reason.to_owned(),
        };
        let rest = match url.split_once("://") {
            Some(("http", rest)) => rest.trim_end_matches('/'),
            Some(("https", _)) => return Err(bad("https is not supported yet: use http")),
            _ => return Err(bad("expected http://HOST:PORT")),
        };
        if rest.is_empty() || rest.contains('/') {
            return Err(bad("expected http://HOST:PORT (no path)"));
        }
        Ok(Client {
            authority: rest.to_owned(),
        })
    }

    /// The ids and revision numbers of ports, subnets, security groups and rules.
    pub async fn revisions(&self) -> Result<Revisions, NeutronError> {
        let mut all = Vec::new();
        for (path, list) in COLLECTIONS {
            let query = format!("/v2.0/{path}?fields=id&fields=revision_number");
            // An object without a readable id and revision is left out here; the snapshot
            // names it (it is left out there too, until it is fixed and shows up here).
            let items = self.list(&query, list).await?;
            let items: Vec<Revision> = decode_each(items, "object", &mut Vec::new());
            all.extend(items.into_iter().map(|r| (list, r.id, r.revision_number)));
        }
        all.sort();
        Ok(Revisions(all))
    }

    /// Ports, then subnets, then security groups with their rules.
    /// An object that does not decode is left out, named in `left_out` (one bad object does not
    /// stop the sync of the others).
    pub async fn snapshot(&self) -> Result<Snapshot, NeutronError> {
        let mut left_out = Vec::new();
        let ports = self.list_each("/v2.0/ports", "ports", "port", &mut left_out);
        let ports = ports.await?;
        let subnets = self.list_each("/v2.0/subnets", "subnets", "subnet", &mut left_out);
        let subnets = subnets.await?;
        let groups = "/v2.0/security-groups";
        let security_groups =
            self.list_each(groups, "security_groups", "security group", &mut left_out);
        let security_groups = security_groups.await?;
        Ok(Snapshot {
            ports,
            subnets,
            security_groups,
            left_out,
        })
    }

    /// [`Client::list`], decoding each object alone: one that does not decode goes to
    /// `left_out` as a `kind` with its id (when it has one) and the reason.
    async fn list_each<T: DeserializeOwned>(
        &self,
        path: &str,
        name: &str,
        kind: &'static str,
        left_out: &mut Vec<TranslateError>,
    ) -> Result<Vec<T>, NeutronError> {
        let items: Vec<serde_json::Value> = self.list(path, name).await?;
        Ok(decode_each(items, kind, left_out))
    }

    /// GET `path` and decode the list `name` of its body.
    pub async fn list<T: DeserializeOwned>(
        &self,
        path: &str,
        name: &str,
    ) -> Result<Vec<T>, NeutronError> {
        let body = self.call("GET", path, None).await?;
        let mut object = body;
        let list = object
            .get_mut(name)
            .map(serde_json::Value::take)
            .ok_or_else(|| NeutronError::Decode {
                path: path.to_owned(),
                reason: format!("no list {name:?} in the answer"),
            })?;
        serde_json::from_value(list).map_err(|e| NeutronError::Decode {
            path: path.to_owned(),
            reason: e.to_string(),
        })
    }

    /// One request; the decoded JSON body of a 2xx answer (`null` for an empty one), else an
    /// error with the status and Neutron's message.
    pub async fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<serde_json::Value, NeutronError> {
        let exchange = self.exchange(method, path, body);
        let (status, text) = tokio::time::timeout(REQUEST_TIMEOUT, exchange)
            .await
            .map_err(|_| self.unreachable(path, format!("no answer in {REQUEST_TIMEOUT:?}")))??;
        if !(200..300).contains(&status) {
            return Err(NeutronError::Status {
                method: method.to_owned(),
                path: path.to_owned(),
                status,
                body: text.chars().take(500).collect(),
            });
        }
        if text.trim().is_empty() {
            return Ok(serde_json::Value::Null);
        }
        serde_json::from_str(&text).map_err(|e| NeutronError::Decode {
            path: path.to_owned(),
            reason: e.to_string(),
        })
    }

    fn unreachable(&self, path: &str, reason: String) -> NeutronError {
        NeutronError::Unreachable {
            url: format!("http://{}{path}", self.authority),
            reason,
        }
    }

    /// One request on a fresh connection: the status and the body as text.
    async fn exchange(
        &self,
        method: &str,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<(u16, String), NeutronError> {
        let fail = |e: &dyn std::fmt::Display| self.unreachable(path, e.to_string());
        let stream = TcpStream::connect(&self.authority)
            .await
            .map_err(|e| fail(&e))?;
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| fail(&e))?;
        // The connection task ends with the response; it is aborted once the body is read.
        let driver = tokio::spawn(connection);
        let payload = body.map(|b| b.to_string()).unwrap_or_default();
        let request = hyper::Request::builder()
            .method(method)
            .uri(path)
            .header(hyper::header::HOST, &self.authority)
            .header(hyper::header::ACCEPT, "application/json")
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(payload)))
            .map_err(|e| fail(&e))?;
        let response = sender.send_request(request).await.map_err(|e| fail(&e))?;
        let status = response.status().as_u16();
        let bytes = response.into_body().collect().await;
        drop(sender);
        driver.abort();
        let bytes = bytes.map_err(|e| fail(&e))?.to_bytes();
        Ok((status, String::from_utf8_lossy(&bytes).into_owned()))
    }
}

/// Decodes each of `items` alone: one that does not decode goes to `left_out` as a `kind` with
/// its id (when it has one) and the reason.
pub(crate) fn decode_each<T: DeserializeOwned>(
    items: Vec<serde_json::Value>,
    kind: &'static str,
    left_out: &mut Vec<TranslateError>,
) -> Vec<T> {
    let mut decoded = Vec::with_capacity(items.len());
    for item in items {
        let id = match item.get("id").and_then(serde_json::Value::as_str) {
            Some(id) => id.to_owned(),
            None => "(no id)".to_owned(),
        };
        match serde_json::from_value(item) {
            Ok(object) => decoded.push(object),
            Err(e) => left_out.push(TranslateError::new(
                kind,
                &id,
                format!("not understood: {e}"),
            )),
        }
    }
    decoded
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_checked() {
        assert!(Client::new("http://127.0.0.1:9696/").is_ok());
        let err = Client::new("127.0.0.1:9696").unwrap_err().to_string();
        assert!(err.contains("expected http://HOST:PORT"), "{err}");
        let err = Client::new("https://a:1").unwrap_err().to_string();
        assert!(err.contains("https is not supported yet"), "{err}");
        let err = Client::new("http://a:1/v2.0").unwrap_err().to_string();
        assert!(err.contains("no path"), "{err}");
    }

    #[test]
    fn an_object_that_does_not_decode_is_left_out_by_id_and_the_others_kept() {
        let items = vec![
            serde_json::json!({"id": "good", "revision_number": 3}),
            serde_json::json!({"id": "bad", "revision_number": "three"}),
            serde_json::json!({"revision_number": 1}),
        ];
        let mut left_out = Vec::new();
        let decoded: Vec<Revision> = decode_each(items, "port", &mut left_out);
        assert_eq!(decoded.len(), 1);
        assert_eq!(decoded[0].id, "good");
        assert_eq!(left_out.len(), 2, "{left_out:?}");
        assert_eq!((left_out[0].kind, left_out[0].id.as_str()), ("port", "bad"));
        assert!(
            left_out[0].reason.contains("not understood"),
            "{}",
            left_out[0]
        );
        assert_eq!(left_out[1].id, "(no id)");
    }
}
