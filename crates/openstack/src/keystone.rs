//! A Keystone session of the service user: one token at a time, issued with the password
//! (`POST /v3/auth/tokens?nocatalog`), renewed before it expires, dropped when Neutron
//! refuses it (the caller then asks again).
//!
//! Renewal: a token is used until `margin` before its expiry, where the lifetime is Keystone's
//! own `expires_at - issued_at` counted from the moment the answer arrived (so the two clocks
//! need not agree) and `margin` is the smaller of 2 minutes and half the lifetime (so a 1-hour
//! token is renewed at 58 minutes, a 20-second one at 10 seconds).
//!
//! A refused password is told apart from an unknown project: when the scoped request is
//! refused, the same credentials are tried without a scope; if Keystone accepts those, the
//! user and password are right and the project (or the user's role on it) is what is wrong.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use serde::Deserialize;
use serde_json::json;
use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::credentials::{Credentials, Setting};
use crate::http::{Http, Response};

/// The longest margin before expiry at which a token is renewed.
const MAX_MARGIN: Duration = Duration::from_secs(120);

/// What Keystone said no to, or why it could not be asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error(
        "keystone at {url} refused user {user:?} (user domain {domain}): wrong password, or no \
         such user in that domain; check {password}, {username} and {domain_source}"
    )]
    Refused {
        url: String,
        user: String,
        domain: String,
        password: String,
        username: String,
        domain_source: String,
    },
    #[error(
        "keystone at {url} accepted user {user:?} but not project {project} (project domain \
         {domain}): no such project, or the user has no role on it; check {setting}"
    )]
    Scope {
        url: String,
        user: String,
        project: String,
        domain: String,
        setting: String,
    },
    #[error(
        "keystone at {url} ({setting}): {reason}; give the CA that signed its certificate in \
         OS_CACERT or cafile"
    )]
    Certificate {
        url: String,
        setting: String,
        reason: String,
    },
    #[error("keystone at {url} ({setting}) is unreachable: {reason}")]
    Unreachable {
        url: String,
        setting: String,
        reason: String,
    },
    #[error("keystone at {url}: HTTP {status}: {body}")]
    Status {
        url: String,
        status: u16,
        body: String,
    },
    #[error("keystone at {url}: unexpected answer: {reason}")]
    Decode { url: String, reason: String },
}

impl AuthError {
    /// Whether retrying can help (Keystone away or failing), as opposed to a setting that must
    /// be fixed.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            AuthError::Unreachable { .. } | AuthError::Status { .. }
        )
    }
}

/// A token and when to renew it. The value is never logged.
struct Token {
    value: String,
    renew_at: Instant,
    expires_at: String,
}

#[derive(Deserialize)]
struct Issued {
    token: IssuedToken,
}

#[derive(Deserialize)]
struct IssuedToken {
    expires_at: String,
    issued_at: String,
    #[serde(default)]
    roles: Vec<Role>,
}

#[derive(Deserialize)]
struct Role {
    name: String,
}

/// The session.
pub struct Keystone {
    http: Http,
    credentials: Credentials,
    token: Mutex<Option<Token>>,
    issued: AtomicU64,
    /// Whether the missing admin role was said (once).
    warned: AtomicBool,
}

impl std::fmt::Debug for Keystone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keystone")
            .field("auth_url", &self.credentials.auth_url.value.base())
            .field("user", &self.credentials.username.value)
            .finish()
    }
}

impl Keystone {
    pub fn new(http: Http, credentials: Credentials) -> Keystone {
        Keystone {
            http,
            credentials,
            token: Mutex::new(None),
            issued: AtomicU64::new(0),
            warned: AtomicBool::new(false),
        }
    }

    /// How many tokens were issued so far.
    pub fn tokens_issued(&self) -> u64 {
        self.issued.load(Ordering::Relaxed)
    }

    /// A token that is not about to expire: the one held, or a new one.
    pub async fn token(&self) -> Result<String, AuthError> {
        let mut held = self.token.lock().await;
        if let Some(token) = held.as_ref().filter(|t| Instant::now() < t.renew_at) {
            return Ok(token.value.clone());
        }
        let renewing = held.is_some();
        let token = self.issue().await?;
        let user = &self.credentials.username.value;
        let project = &self.credentials.project.value;
        match renewing {
            true => tracing::info!(
                user,
                expires_at = token.expires_at,
                "keystone token renewed before it expired"
            ),
            false => tracing::info!(
                user,
                %project,
                expires_at = token.expires_at,
                "authenticated with keystone"
            ),
        }
        let value = token.value.clone();
        *held = Some(token);
        Ok(value)
    }

    /// Neutron refused `token` (HTTP 401: revoked, or its user changed): the next
    /// [`Keystone::token`] asks Keystone for a new one.
    pub async fn refused(&self, token: &str) {
        let mut held = self.token.lock().await;
        if held.as_ref().is_some_and(|t| t.value == token) {
            *held = None;
        }
    }

    async fn issue(&self) -> Result<Token, AuthError> {
        let c = &self.credentials;
        let scope = json!({ "project": project_json(c) });
        let answer = self.post(Some(scope)).await?;
        match answer.status {
            201 => {}
            401 => return Err(self.diagnose().await),
            status => return Err(self.status(status, &answer.body)),
        }
        self.issued.fetch_add(1, Ordering::Relaxed);
        let url = self.url();
        let decode = |reason: String| AuthError::Decode {
            url: url.clone(),
            reason,
        };
        let value = answer
            .subject_token
            .ok_or_else(|| decode("no X-Subject-Token header".into()))?;
        let issued: Issued =
            serde_json::from_str(&answer.body).map_err(|e| decode(format!("token: {e}")))?;
        let lifetime =
            lifetime(&issued.token.issued_at, &issued.token.expires_at).map_err(decode)?;
        let admin = issued.token.roles.iter().any(|r| r.name == "admin");
        if !admin && !self.warned.swap(true, Ordering::Relaxed) {
            let roles: Vec<&str> = issued.token.roles.iter().map(|r| r.name.as_str()).collect();
            tracing::warn!(
                user = c.username.value,
                ?roles,
                "the service user has no admin role in its project: Neutron's default policy \
                 shows ports' binding:host_id to admins only"
            );
        }
        Ok(Token {
            value,
            renew_at: Instant::now() + lifetime - margin(lifetime),
            expires_at: issued.token.expires_at,
        })
    }

    /// Why a scoped token was refused: the credentials, or the project.
    async fn diagnose(&self) -> AuthError {
        let c = &self.credentials;
        match self.post(None).await {
            Ok(answer) if answer.status == 201 => AuthError::Scope {
                url: self.url(),
                user: c.username.value.clone(),
                project: c.project.value.to_string(),
                domain: c.project_domain.value.to_string(),
                setting: sources(&[&c.project, &c.project_domain]),
            },
            Ok(answer) if answer.status == 401 => AuthError::Refused {
                url: self.url(),
                user: c.username.value.clone(),
                domain: c.user_domain.value.to_string(),
                password: c.password.source.to_string(),
                username: c.username.source.to_string(),
                domain_source: c.user_domain.source.to_string(),
            },
            Ok(answer) => self.status(answer.status, &answer.body),
            Err(error) => error,
        }
    }

    /// `POST /auth/tokens?nocatalog` with the password, scoped or not.
    async fn post(&self, scope: Option<serde_json::Value>) -> Result<Response, AuthError> {
        let c = &self.credentials;
        let mut auth = json!({
            "identity": {
                "methods": ["password"],
                "password": {"user": {
                    "name": c.username.value,
                    "domain": c.user_domain.value.json(),
                    "password": c.password.value.0,
                }},
            },
        });
        if let Some(scope) = scope {
            auth["scope"] = scope;
        }
        let body = json!({ "auth": auth }).to_string();
        let endpoint = &c.auth_url.value;
        self.http
            .send("POST", endpoint, "/auth/tokens?nocatalog", &[], Some(body))
            .await
            .map_err(|e| match e.certificate {
                true => AuthError::Certificate {
                    url: self.url(),
                    setting: c.auth_url.source.to_string(),
                    reason: e.reason,
                },
                false => AuthError::Unreachable {
                    url: self.url(),
                    setting: c.auth_url.source.to_string(),
                    reason: e.reason,
                },
            })
    }

    fn url(&self) -> String {
        self.credentials.auth_url.value.base()
    }

    fn status(&self, status: u16, body: &str) -> AuthError {
        AuthError::Status {
            url: self.url(),
            status,
            body: body.chars().take(300).collect(),
        }
    }
}

fn project_json(c: &Credentials) -> serde_json::Value {
    let mut project = c.project.value.json();
    if let crate::credentials::Named::Name(_) = c.project.value {
        project["domain"] = c.project_domain.value.json();
    }
    project
}

fn sources<T>(settings: &[&Setting<T>]) -> String {
    let names: Vec<String> = settings.iter().map(|s| s.source.to_string()).collect();
    names.join(" and ")
}

/// `expires_at - issued_at`, both as Keystone writes them (`2026-11-27T15:08:21.000000Z`).
fn lifetime(issued_at: &str, expires_at: &str) -> Result<Duration, String> {
    let parse = |field: &str, text: &str| -> Result<SystemTime, String> {
        humantime::parse_rfc3339_weak(text.trim_end_matches('Z'))
            .map_err(|e| format!("{field} {text:?}: {e}"))
    };
    let (issued, expires) = (
        parse("issued_at", issued_at)?,
        parse("expires_at", expires_at)?,
    );
    expires
        .duration_since(issued)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| format!("expires_at {expires_at:?} is not after issued_at {issued_at:?}"))
}

/// How long before expiry a token of `lifetime` is renewed.
fn margin(lifetime: Duration) -> Duration {
    MAX_MARGIN.min(lifetime / 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lifetimes_are_keystone_s_own_and_renewal_leaves_a_margin() {
        let hour = lifetime("2026-11-27T14:00:00.000000Z", "2026-11-27T15:00:00.000000Z");
        assert_eq!(hour, Ok(Duration::from_secs(3600)));
        assert_eq!(margin(Duration::from_secs(3600)), Duration::from_secs(120));
        assert_eq!(margin(Duration::from_secs(20)), Duration::from_secs(10));
        let bad = lifetime("2026-11-27T15:00:00Z", "2026-11-27T15:00:00Z").unwrap_err();
        assert!(bad.contains("is not after"), "{bad}");
        let bad = lifetime("yesterday", "2026-11-27T15:00:00Z").unwrap_err();
        assert!(bad.starts_with("issued_at \"yesterday\""), "{bad}");
    }
}
