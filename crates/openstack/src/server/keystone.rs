//! Keystone served by uWSGI: its configuration (rendered from `etc/keystone.conf.in`), its
//! fernet and credential keys (written directly: `keystone-manage fernet_setup` would only cost
//! two more seconds of Python start-up), the `keystone-manage` and `uwsgi` commands, and
//! [`provision`]: what an installer does once Keystone answers (the `service` project, the
//! service users and their roles, Neutron in the catalog).

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use super::{Database, Tls, url_host};
use crate::http::{Endpoint, Http};

/// Keystone's configuration template (`@STATE@`, `@CONNECTION@`, `@EXPIRATION@`).
const TEMPLATE: &str = include_str!("../../etc/keystone.conf.in");

/// Keystone's usual port.
pub const PORT: u16 = 5000;
/// The cloud's administrator, made by `keystone-manage bootstrap` with project `admin`.
pub const ADMIN: &str = "admin";
/// The project of the services' users.
pub const SERVICE_PROJECT: &str = "service";
pub const REGION: &str = "RegionOne";
/// Keystone's default token lifetime.
pub const DEFAULT_EXPIRATION: u32 = 3600;

/// One Keystone, its state in `dir`.
#[derive(Debug, Clone)]
pub struct Keystone {
    dir: PathBuf,
    bind: IpAddr,
    port: u16,
    tls: Option<Tls>,
    expiration: u32,
    processes: u8,
}

impl Keystone {
    /// Listening on `bind:port`, its state in `dir` (which must exist); tokens live an hour,
    /// uWSGI runs one process.
    pub fn new(dir: &Path, bind: IpAddr, port: u16) -> Keystone {
        Keystone {
            dir: dir.to_owned(),
            bind,
            port,
            tls: None,
            expiration: DEFAULT_EXPIRATION,
            processes: 1,
        }
    }

    /// https with this certificate.
    pub fn with_tls(mut self, tls: Tls) -> Keystone {
        self.tls = Some(tls);
        self
    }

    /// Tokens that live `seconds` (`[token] expiration`).
    pub fn with_token_expiration(mut self, seconds: u32) -> Keystone {
        self.expiration = seconds;
        self
    }

    /// uWSGI worker processes (4 threads each).
    pub fn with_processes(mut self, processes: u8) -> Keystone {
        self.processes = processes.max(1);
        self
    }

    /// Its base URL as clients on the same network reach it (no `/v3`).
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{}:{}", url_host(self.bind), self.port)
    }

    /// The v3 API (what `OS_AUTH_URL` names).
    pub fn auth_url(&self) -> String {
        format!("{}/v3", self.url())
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// uWSGI's pid file (the master's pid).
    pub fn pid_file(&self) -> PathBuf {
        self.path("uwsgi.pid")
    }

    pub fn config(&self, database: &Database) -> String {
        TEMPLATE
            .replace("@STATE@", &self.dir.display().to_string())
            .replace("@CONNECTION@", &database.connection("keystone"))
            .replace("@EXPIRATION@", &self.expiration.to_string())
    }

    /// Writes `keystone.conf` and two fresh keys in each key repository (0700, files 0600).
    pub fn write_config(&self, database: &Database) -> std::io::Result<()> {
        use std::os::unix::fs::PermissionsExt;
        std::fs::write(self.path("keystone.conf"), self.config(database))?;
        for repository in ["fernet-keys", "credential-keys"] {
            let dir = self.path(repository);
            std::fs::create_dir_all(&dir)?;
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
            for index in ["0", "1"] {
                let file = dir.join(index);
                std::fs::write(&file, fernet_key()?)?;
                std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600))?;
            }
        }
        Ok(())
    }

    fn manage(&self) -> Command {
        let mut command = Command::new("/usr/bin/keystone-manage");
        command
            .arg("--config-file")
            .arg(self.path("keystone.conf"))
            .env("PYTHONDONTWRITEBYTECODE", "1");
        command
    }

    /// Makes the schema (run once, to completion).
    pub fn db_sync(&self) -> Command {
        let mut command = self.manage();
        command.arg("db_sync");
        command
    }

    /// Makes the admin user and project, the roles `admin`, `member`, `reader`, the region and
    /// the identity endpoints: `public` as the operator's client reaches Keystone, `internal`
    /// and `admin` as the services do.
    pub fn bootstrap(&self, admin_password: &str, public_url: &str, internal_url: &str) -> Command {
        let mut command = self.manage();
        command
            .arg("bootstrap")
            .args(["--bootstrap-password", admin_password])
            .args([
                "--bootstrap-username",
                ADMIN,
                "--bootstrap-project-name",
                ADMIN,
            ])
            .args(["--bootstrap-role-name", "admin"])
            .args(["--bootstrap-service-name", "keystone"])
            .args(["--bootstrap-region-id", REGION])
            .args(["--bootstrap-public-url", &format!("{public_url}/v3/")])
            .args(["--bootstrap-internal-url", &format!("{internal_url}/v3/")])
            .args(["--bootstrap-admin-url", &format!("{internal_url}/v3/")]);
        command
    }

    /// uWSGI serving Keystone's public WSGI application (HTTP/1.1, parallel requests), safe
    /// for clients that keep connections open (keystoneauth, the `openstack` CLI):
    /// - http: `--http11-socket`, real keep-alive. A plain `--http-socket` answers HTTP/1.1
    ///   without `Connection: close` and then closes, so a client that reuses the connection
    ///   fails now and then with `RemoteDisconnected` or a reset.
    /// - https: uWSGI 2.0 has no keep-alive https socket (only its http router, not in
    ///   Debian's `uwsgi-core`), so `--https-socket` says `Connection: close` on every answer
    ///   and clients open a new connection instead of reusing a closed one.
    pub fn uwsgi(&self) -> Command {
        let listen = format!("{}:{}", url_host(self.bind), self.port);
        let mut command = Command::new("/usr/bin/uwsgi");
        command.args(["--plugin", "python3"]);
        match &self.tls {
            Some(tls) => command
                .arg("--https-socket")
                .arg(format!(
                    "{listen},{},{}",
                    tls.cert.display(),
                    tls.key.display()
                ))
                .args(["--add-header", "Connection: close"]),
            None => command.args(["--http11-socket", &listen]),
        };
        command
            .args(["--wsgi-file", "/usr/bin/keystone-wsgi-public"])
            .arg("--env")
            .arg(format!(
                "OS_KEYSTONE_CONFIG_FILES={}",
                self.path("keystone.conf").display()
            ))
            .args(["--master", "--processes", &self.processes.to_string()])
            .args(["--threads", "4", "--die-on-term", "--need-app"])
            .arg("--pidfile")
            .arg(self.pid_file())
            .env("PYTHONDONTWRITEBYTECODE", "1");
        command
    }
}

/// 32 random bytes in URL-safe base64: a fernet key.
fn fernet_key() -> std::io::Result<String> {
    use std::io::Read;
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(base64_url(&bytes))
}

fn base64_url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A service's Keystone user: a member of [`SERVICE_PROJECT`] with `role`.
#[derive(Debug, Clone)]
pub struct ServiceUser {
    pub name: String,
    pub password: String,
    pub role: String,
}

/// What [`provision`] makes.
#[derive(Debug, Clone)]
pub struct Provision {
    pub admin_password: String,
    pub users: Vec<ServiceUser>,
    /// Neutron's endpoints in the catalog: as the operator's client reaches it, as services do.
    pub neutron_public: String,
    pub neutron_internal: String,
}

/// As the admin: the `service` project, the role `service`, the service users with their
/// roles, and Neutron (`network`) in the catalog. Fails with the call that failed.
pub async fn provision(http: &Http, auth_url: &str, plan: &Provision) -> Result<(), String> {
    let endpoint = crate::credentials::auth_url(auth_url)?;
    let admin = Admin::login(http, endpoint, &plan.admin_password).await?;
    let project = admin
        .create(
            "projects",
            "project",
            json!({"name": SERVICE_PROJECT, "domain_id": "default"}),
        )
        .await?;
    admin
        .create("roles", "role", json!({"name": "service"}))
        .await?;
    for user in &plan.users {
        let id = admin
            .create(
                "users",
                "user",
                json!({"name": user.name, "domain_id": "default", "password": user.password}),
            )
            .await?;
        let role = admin.role(&user.role).await?;
        let path = format!("/projects/{project}/users/{id}/roles/{role}");
        admin.call("PUT", &path, None).await?;
    }
    let service = admin
        .create(
            "services",
            "service",
            json!({"type": "network", "name": "neutron"}),
        )
        .await?;
    let urls = [
        ("public", &plan.neutron_public),
        ("internal", &plan.neutron_internal),
        ("admin", &plan.neutron_internal),
    ];
    for (interface, url) in urls {
        let endpoint = json!({"service_id": service, "interface": interface,
                              "region_id": REGION, "url": url});
        admin.create("endpoints", "endpoint", endpoint).await?;
    }
    Ok(())
}

/// The admin's token and the calls made with it.
struct Admin<'a> {
    http: &'a Http,
    endpoint: Endpoint,
    token: String,
}

impl<'a> Admin<'a> {
    async fn login(
        http: &'a Http,
        endpoint: Endpoint,
        password: &str,
    ) -> Result<Admin<'a>, String> {
        let body = json!({"auth": {
            "identity": {"methods": ["password"], "password": {"user": {
                "name": ADMIN, "domain": {"id": "default"}, "password": password}}},
            "scope": {"project": {"name": ADMIN, "domain": {"id": "default"}}},
        }});
        let answer = http
            .send(
                "POST",
                &endpoint,
                "/auth/tokens?nocatalog",
                &[],
                Some(body.to_string()),
            )
            .await
            .map_err(|e| format!("keystone at {}: {e}", endpoint.base()))?;
        match (answer.status, answer.subject_token) {
            (201, Some(token)) => Ok(Admin {
                http,
                endpoint,
                token,
            }),
            (status, _) => Err(format!(
                "keystone refused the admin: HTTP {status}: {}",
                answer.body
            )),
        }
    }

    async fn call(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value, String> {
        let headers = [("x-auth-token", self.token.as_str())];
        let answer = self
            .http
            .send(
                method,
                &self.endpoint,
                path,
                &headers,
                body.map(|b| b.to_string()),
            )
            .await
            .map_err(|e| format!("keystone {method} {path}: {e}"))?;
        if !(200..300).contains(&answer.status) {
            return Err(format!(
                "keystone {method} {path}: HTTP {}: {}",
                answer.status, answer.body
            ));
        }
        Ok(serde_json::from_str(&answer.body).unwrap_or(Value::Null))
    }

    /// Creates a `singular` in `collection`; its id.
    async fn create(
        &self,
        collection: &str,
        singular: &str,
        fields: Value,
    ) -> Result<String, String> {
        let answer = self
            .call(
                "POST",
                &format!("/{collection}"),
                Some(json!({ singular: fields })),
            )
            .await?;
        answer[singular]["id"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| format!("keystone's new {singular} has no id: {answer}"))
    }

    async fn role(&self, name: &str) -> Result<String, String> {
        let answer = self
            .call("GET", &format!("/roles?name={name}"), None)
            .await?;
        answer["roles"][0]["id"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| format!("keystone has no role {name:?}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fernet_keys_are_44_characters_of_url_safe_base64() {
        let key = fernet_key().unwrap();
        assert_eq!(key.len(), 44, "{key}");
        assert!(key.ends_with('='));
        assert!(!key.contains(['+', '/']), "{key}");
        assert_eq!(base64_url(b"\xfb\xff"), "-_8=");
        assert_eq!(base64_url(b"Man"), "TWFu");
    }

    #[test]
    fn the_config_and_commands_name_the_state_directory() {
        let keystone = Keystone::new(Path::new("/run/k"), "127.0.0.1".parse().unwrap(), 5001)
            .with_token_expiration(20);
        let config = keystone.config(&Database::new(Path::new("/run/k")));
        for field in ["@STATE@", "@CONNECTION@", "@EXPIRATION@"] {
            assert!(!config.contains(field), "{field} left in:\n{config}");
        }
        assert!(config.contains("expiration = 20\n"), "{config}");
        assert!(
            config.contains("key_repository = /run/k/fernet-keys\n"),
            "{config}"
        );
        assert_eq!(keystone.auth_url(), "http://127.0.0.1:5001/v3");
        let uwsgi = format!("{:?}", keystone.uwsgi());
        assert!(
            uwsgi.contains("\"--http11-socket\" \"127.0.0.1:5001\""),
            "{uwsgi}"
        );
        assert!(
            uwsgi.contains("OS_KEYSTONE_CONFIG_FILES=/run/k/keystone.conf"),
            "{uwsgi}"
        );
    }
}
