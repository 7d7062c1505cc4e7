//! Neutron's REST API over [`crate::http`]: one call, paginated listings, the revisions and the
//! snapshot the sync reads, and one object by id.
//!
//! Authentication ([`Auth`]): with Keystone every request carries the service user's token
//! (`X-Auth-Token`); a 401 drops the token, a new one is issued and the request is sent once
//! more. With `noauth` no header is sent, and Neutron runs every request as admin (request
//! bodies must then carry `project_id`, see docs/openstack.md).
//!
//! Listings are read in pages of [`PAGE_SIZE`] (`limit` and `marker`, the last id of the
//! previous page), following Neutron's `<collection>_links` `next`, so a large cloud is never
//! one huge answer. A [`Snapshot`] is read in dependency order, ports first: anything a port
//! refers to (its subnets, its security groups) existed before the port did, so it is in the
//! lists read after.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::credentials::{Resolved, Strategy};
use crate::error::{NeutronError, TranslateError};
use crate::http::{Endpoint, Http};
use crate::keystone::Keystone;
use crate::neutron::{Port, Revisions, SecurityGroup, Snapshot, Subnet};

/// Objects per page of a listing.
pub const PAGE_SIZE: usize = 500;

#[derive(Deserialize)]
struct Revision {
    id: String,
    #[serde(default)]
    revision_number: u64,
}

/// The collections the sync reads, with the JSON name of each list.
const COLLECTIONS: [(&str, &str); 4] = [
    ("ports", "ports"),
    ("subnets", "subnets"),
    ("security-groups", "security_groups"),
    ("security-group-rules", "security_group_rules"),
];

/// How requests are authenticated.
#[derive(Debug, Clone)]
pub enum Auth {
    /// No token (neutron-server with `auth_strategy = noauth`).
    Noauth,
    Keystone(Arc<Keystone>),
}

/// A Neutron API server. Clones share connections, the token and the request count.
#[derive(Debug, Clone)]
pub struct Client {
    http: Http,
    endpoint: Endpoint,
    auth: Auth,
    requests: Arc<AtomicU64>,
}

impl Client {
    /// A client for `url` (`http(s)://HOST:PORT`, optionally a path prefix) with `auth`.
    pub fn new(url: &str, http: Http, auth: Auth) -> Result<Client, NeutronError> {
        let endpoint = Endpoint::parse(url).map_err(|reason| NeutronError::Url {
            url: url.to_owned(),
            reason,
        })?;
        Ok(Client {
            http,
            endpoint,
            auth,
            requests: Arc::default(),
        })
    }

    /// A client without a token, trusting the system's CA bundle (tests, the lab).
    pub fn noauth(url: &str) -> Result<Client, NeutronError> {
        let http = Http::new(None).map_err(|reason| NeutronError::Url {
            url: url.to_owned(),
            reason,
        })?;
        Client::new(url, http, Auth::Noauth)
    }

    /// A client as `resolved` settings say (CA file, strategy, credentials).
    pub fn from_settings(url: &str, resolved: &Resolved) -> Result<Client, String> {
        let ca = resolved.ca_file.as_ref();
        let http = Http::new(ca.map(|s| s.value.as_path())).map_err(|e| match ca {
            Some(setting) => format!("{}: {e}", setting.source),
            None => e,
        })?;
        let auth = match (&resolved.strategy, &resolved.credentials) {
            (Strategy::Keystone, Some(credentials)) => {
                Auth::Keystone(Arc::new(Keystone::new(http.clone(), credentials.clone())))
            }
            _ => Auth::Noauth,
        };
        Client::new(url, http, auth).map_err(|e| e.to_string())
    }

    /// With another deadline per request (bulk creations of many ports take longer than one).
    pub fn with_timeout(mut self, timeout: std::time::Duration) -> Client {
        self.http = self.http.with_timeout(timeout);
        self
    }

    /// The API's base URL.
    pub fn url(&self) -> String {
        self.endpoint.base()
    }

    pub fn auth(&self) -> &Auth {
        &self.auth
    }

    /// Requests sent to Neutron so far (a retry after a 401 counts too).
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// Authenticates now (Keystone), so that a bad setting is found before anything else.
    pub async fn authenticate(&self) -> Result<(), NeutronError> {
        if let Auth::Keystone(keystone) = &self.auth {
            keystone.token().await?;
        }
        Ok(())
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
        let ports = self.list("/v2.0/ports", "ports").await?;
        check_bindings_visible(&ports)?;
        let ports = decode_each(ports, "port", &mut left_out);
        let subnets = self.list("/v2.0/subnets", "subnets").await?;
        let subnets = decode_each(subnets, "subnet", &mut left_out);
        let groups = self
            .list("/v2.0/security-groups", "security_groups")
            .await?;
        let security_groups = decode_each(groups, "security group", &mut left_out);
        Ok(Snapshot {
            ports,
            subnets,
            security_groups,
            left_out,
        })
    }

    /// One port, `None` when Neutron has none of that id.
    pub async fn port(&self, id: &str) -> Result<Option<Port>, NeutronError> {
        let value = self.object("ports", "port", id).await?;
        if let Some(value) = &value {
            check_bindings_visible(std::slice::from_ref(value))?;
        }
        value.map(|v| decode(v, "port", id)).transpose()
    }

    /// One subnet, `None` when Neutron has none of that id.
    pub async fn subnet(&self, id: &str) -> Result<Option<Subnet>, NeutronError> {
        let value = self.object("subnets", "subnet", id).await?;
        value.map(|v| decode(v, "subnet", id)).transpose()
    }

    /// One security group with its rules, `None` when Neutron has none of that id.
    pub async fn security_group(&self, id: &str) -> Result<Option<SecurityGroup>, NeutronError> {
        let value = self.object("security-groups", "security_group", id).await?;
        value.map(|v| decode(v, "security group", id)).transpose()
    }

    /// `GET /v2.0/<collection>/<id>`: the object, or `None` on 404.
    async fn object(
        &self,
        collection: &str,
        name: &str,
        id: &str,
    ) -> Result<Option<serde_json::Value>, NeutronError> {
        let path = format!("/v2.0/{collection}/{id}");
        match self.call("GET", &path, None).await {
            Ok(mut body) => match body.get_mut(name).map(serde_json::Value::take) {
                Some(object) => Ok(Some(object)),
                None => Err(NeutronError::Decode {
                    path,
                    reason: format!("no {name:?} in the answer"),
                }),
            },
            Err(NeutronError::Status { status: 404, .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Every object of the listing at `path` (which may have a query), page by page, from the
    /// list `name` of each answer.
    pub async fn list(
        &self,
        path: &str,
        name: &str,
    ) -> Result<Vec<serde_json::Value>, NeutronError> {
        let separator = if path.contains('?') { '&' } else { '?' };
        let mut all: Vec<serde_json::Value> = Vec::new();
        let mut marker: Option<String> = None;
        loop {
            let mut page_path = format!("{path}{separator}limit={PAGE_SIZE}");
            if let Some(marker) = &marker {
                page_path += &format!("&marker={marker}");
            }
            let mut body = self.call("GET", &page_path, None).await?;
            let decode_error = |reason: String| NeutronError::Decode {
                path: page_path.clone(),
                reason,
            };
            let page: Vec<serde_json::Value> = match body.get_mut(name).map(serde_json::Value::take)
            {
                Some(list) => {
                    serde_json::from_value(list).map_err(|e| decode_error(e.to_string()))?
                }
                None => return Err(decode_error(format!("no list {name:?} in the answer"))),
            };
            let more = has_next(&body, name);
            let last = page
                .last()
                .and_then(|o| o.get("id"))
                .and_then(|id| id.as_str());
            marker = last.map(str::to_owned);
            all.extend(page);
            if !more || marker.is_none() {
                return Ok(all);
            }
        }
    }

    /// One request; the decoded JSON body of a 2xx answer (`null` for an empty one), else an
    /// error with the status and Neutron's message.
    pub async fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<serde_json::Value, NeutronError> {
        let payload = body.map(|b| b.to_string());
        let (mut status, mut text) = self.send(method, path, payload.clone()).await?;
        if status == 401 && matches!(self.auth, Auth::Keystone(_)) {
            tracing::info!(
                method,
                path,
                "neutron refused the token (HTTP 401); authenticating again"
            );
            (status, text) = self.send(method, path, payload).await?;
        }
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

    /// One request with the current token (a 401 drops it): the status and the body.
    async fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<String>,
    ) -> Result<(u16, String), NeutronError> {
        let token = match &self.auth {
            Auth::Keystone(keystone) => Some(keystone.token().await?),
            Auth::Noauth => None,
        };
        let headers: Vec<(&str, &str)> =
            token.iter().map(|t| ("x-auth-token", t.as_str())).collect();
        self.requests.fetch_add(1, Ordering::Relaxed);
        let answer = self
            .http
            .send(method, &self.endpoint, path, &headers, body)
            .await
            .map_err(|e| NeutronError::Unreachable {
                url: self.endpoint.url(path),
                reason: e.reason,
            })?;
        if let (401, Auth::Keystone(keystone), Some(token)) = (answer.status, &self.auth, &token) {
            keystone.refused(token).await;
        }
        Ok((answer.status, answer.body))
    }
}

/// Whether a listing's `<name>_links` has a `next` page.
fn has_next(body: &serde_json::Value, name: &str) -> bool {
    body.get(format!("{name}_links"))
        .and_then(serde_json::Value::as_array)
        .is_some_and(|links| links.iter().any(|l| l["rel"] == "next"))
}

/// Neutron shows `binding:host_id` only to whom its policy allows (admins, by default). Without
/// it every port would look unbound and its endpoint be deleted: refused instead.
fn check_bindings_visible(ports: &[serde_json::Value]) -> Result<(), NeutronError> {
    match ports.iter().find(|p| p.get("binding:host_id").is_none()) {
        None => Ok(()),
        Some(port) => Err(NeutronError::Policy {
            id: port["id"].as_str().unwrap_or("(no id)").to_owned(),
        }),
    }
}

fn decode<T: DeserializeOwned>(
    value: serde_json::Value,
    kind: &'static str,
    id: &str,
) -> Result<T, NeutronError> {
    serde_json::from_value(value).map_err(|e| NeutronError::Decode {
        path: format!("{kind} {id}"),
        reason: e.to_string(),
    })
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
        assert!(Client::noauth("http://127.0.0.1:9696/").is_ok());
        let err = Client::noauth("127.0.0.1:9696").unwrap_err().to_string();
        assert!(err.contains("expected http://HOST:PORT"), "{err}");
        assert!(Client::noauth("https://neutron.example:9696").is_ok());
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

    #[test]
    fn hidden_bindings_are_refused_by_port() {
        let visible = serde_json::json!({"id": "p1", "binding:host_id": ""});
        assert!(check_bindings_visible(std::slice::from_ref(&visible)).is_ok());
        let hidden = serde_json::json!({"id": "p2"});
        let error = check_bindings_visible(&[visible, hidden])
            .unwrap_err()
            .to_string();
        assert!(error.contains("port p2"), "{error}");
        assert!(error.contains("binding:host_id"), "{error}");
    }

    #[test]
    fn a_next_link_means_another_page() {
        let body = serde_json::json!({"ports": [], "ports_links": [{"rel": "next", "href": "x"}]});
        assert!(has_next(&body, "ports"));
        let body =
            serde_json::json!({"ports": [], "ports_links": [{"rel": "previous", "href": "x"}]});
        assert!(!has_next(&body, "ports"));
        assert!(!has_next(&serde_json::json!({"ports": []}), "ports"));
    }
}
