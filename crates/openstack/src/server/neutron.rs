//! neutron-server with Calico's ML2 driver: its configuration (rendered from
//! `etc/neutron.conf.in`, plus a `[keystone_authtoken]` section for Keystone, `[ssl]` for https
//! and `[calico_rs]` for the driver's notifications) and its commands.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::{Database, Tls, driver_dir, url_host};

/// neutron-server's configuration template (`@BIND@`, `@PORT@`, `@STATE@`, `@CONNECTION@`,
/// `@AUTH_STRATEGY@`, `@USE_SSL@`, `@DNS_DOMAIN@`).
const TEMPLATE: &str = include_str!("../../etc/neutron.conf.in");

/// Neutron's usual API port.
pub const PORT: u16 = 9696;
/// The Keystone user neutron-server validates tokens as (keystonemiddleware's own).
pub const SERVICE_USER: &str = "neutron";
/// The domain the ports' host names end in when their network has none.
pub const DNS_DOMAIN: &str = "openstack.example.";

/// How neutron-server checks requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerAuth {
    /// `auth_strategy = noauth`: every request runs as admin.
    Noauth,
    /// `auth_strategy = keystone` with keystonemiddleware.
    Keystone {
        /// Keystone's base URL (`http://HOST:PORT`, no `/v3`).
        url: String,
        /// The password of [`SERVICE_USER`].
        password: String,
        /// The CA that signed Keystone's certificate (https).
        cafile: Option<PathBuf>,
        /// `token_cache_time`: how long a validated token is believed (default 300 s; -1: no
        /// cache, every request validated by Keystone, so a revoked token fails at once).
        token_cache_time: Option<i32>,
    },
}

/// One neutron-server, its state in `dir`.
#[derive(Debug, Clone)]
pub struct Neutron {
    dir: PathBuf,
    bind: IpAddr,
    port: u16,
    auth: ServerAuth,
    tls: Option<Tls>,
    notify_socket: Option<PathBuf>,
    refuse_inexpressible_rules: bool,
}

impl Neutron {
    /// A server listening on `bind:port`, its state in `dir` (which must exist), checking
    /// requests as `auth` says.
    pub fn new(dir: &Path, bind: IpAddr, port: u16, auth: ServerAuth) -> Neutron {
        Neutron {
            dir: dir.to_owned(),
            bind,
            port,
            auth,
            tls: None,
            notify_socket: None,
            refuse_inexpressible_rules: true,
        }
    }

    /// https with this certificate.
    pub fn with_tls(mut self, tls: Tls) -> Neutron {
        self.tls = Some(tls);
        self
    }

    /// The unix socket the driver sends its change notifications to (`calico-neutron
    /// --notify-socket`).
    pub fn with_notify_socket(mut self, socket: &Path) -> Neutron {
        self.notify_socket = Some(socket.to_owned());
        self
    }

    /// The driver accepts security group rules Calico cannot express (`[calico_rs]
    /// refuse_inexpressible_rules = false`), as a Neutron whose rules predate the driver has
    /// them: calico-neutron leaves them out, naming them.
    pub fn with_inexpressible_rules_accepted(mut self) -> Neutron {
        self.refuse_inexpressible_rules = false;
        self
    }

    /// Its API, as a client on the same network reaches it.
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{}:{}", url_host(self.bind), self.port)
    }

    pub fn auth(&self) -> &ServerAuth {
        &self.auth
    }

    /// The state directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// The configuration for this directory, address, port, authentication and database.
    pub fn config(&self, database: &Database) -> String {
        let strategy = match self.auth {
            ServerAuth::Noauth => "noauth",
            ServerAuth::Keystone { .. } => "keystone",
        };
        let mut text = TEMPLATE
            .replace("@BIND@", &self.bind.to_string())
            .replace("@PORT@", &self.port.to_string())
            .replace("@STATE@", &self.dir.display().to_string())
            .replace("@CONNECTION@", &database.connection("neutron"))
            .replace("@AUTH_STRATEGY@", strategy)
            .replace(
                "@USE_SSL@",
                if self.tls.is_some() { "True" } else { "False" },
            )
            .replace("@DNS_DOMAIN@", DNS_DOMAIN);
        if let ServerAuth::Keystone {
            url,
            password,
            cafile,
            token_cache_time,
        } = &self.auth
        {
            text += &keystone_section(url, password, cafile.as_deref(), *token_cache_time);
        }
        if let Some(tls) = &self.tls {
            text += &format!(
                "\n[ssl]\ncert_file = {}\nkey_file = {}\n",
                tls.cert.display(),
                tls.key.display()
            );
        }
        if self.notify_socket.is_some() || !self.refuse_inexpressible_rules {
            text += "\n[calico_rs]\n";
        }
        if let Some(socket) = &self.notify_socket {
            text += &format!("notify_socket = {}\n", socket.display());
        }
        if !self.refuse_inexpressible_rules {
            text += "refuse_inexpressible_rules = false\n";
        }
        text
    }

    /// Writes `neutron.conf`, an empty `policy.yaml` and the lock directory.
    pub fn write_config(&self, database: &Database) -> std::io::Result<()> {
        std::fs::write(self.path("neutron.conf"), self.config(database))?;
        std::fs::write(self.path("policy.yaml"), "{}\n")?;
        std::fs::create_dir_all(self.path("lock"))
    }

    /// Makes the schema with Neutron's own migrations (run once, to completion).
    pub fn migrate(&self) -> Command {
        let mut command = Command::new("/usr/bin/python3");
        command
            .arg("/usr/bin/neutron-db-manage")
            .arg("--config-file")
            .arg(self.path("neutron.conf"))
            .args(["upgrade", "heads"]);
        command
    }

    /// neutron-server itself, with Calico's driver on `PYTHONPATH`.
    pub fn neutron_server(&self) -> Command {
        let mut command = Command::new("/usr/bin/python3");
        command
            .arg("/usr/bin/neutron-server")
            .arg("--config-file")
            .arg(self.path("neutron.conf"))
            .env("PYTHONPATH", driver_dir())
            .env("PYTHONDONTWRITEBYTECODE", "1");
        command
    }
}

fn keystone_section(
    url: &str,
    password: &str,
    cafile: Option<&Path>,
    token_cache_time: Option<i32>,
) -> String {
    let mut text = format!(
        "\n[keystone_authtoken]\nwww_authenticate_uri = {url}\nauth_url = {url}\n\
         auth_type = password\nproject_domain_name = Default\nuser_domain_name = Default\n\
         project_name = service\nusername = {SERVICE_USER}\npassword = {password}\n\
         service_token_roles_required = true\n"
    );
    if let Some(cafile) = cafile {
        text += &format!("cafile = {}\n", cafile.display());
    }
    if let Some(seconds) = token_cache_time {
        text += &format!("token_cache_time = {seconds}\n");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn database() -> Database {
        Database::new(Path::new("/run/x"))
    }

    #[test]
    fn the_config_has_every_field_filled_in() {
        let server = Neutron::new(
            Path::new("/run/x"),
            "10.99.0.1".parse().unwrap(),
            9696,
            ServerAuth::Noauth,
        );
        let config = server.config(&database());
        for field in [
            "@BIND@",
            "@PORT@",
            "@STATE@",
            "@CONNECTION@",
            "@AUTH_STRATEGY@",
        ] {
            assert!(!config.contains(field), "{field} left in:\n{config}");
        }
        for field in ["@USE_SSL@", "@DNS_DOMAIN@"] {
            assert!(!config.contains(field), "{field} left in:\n{config}");
        }
        assert!(config.contains("bind_host = 10.99.0.1\n"), "{config}");
        assert!(config.contains("auth_strategy = noauth\n"), "{config}");
        assert!(
            config.contains("unix_socket=/run/x/mariadb.sock&"),
            "{config}"
        );
        assert!(!config.contains("keystone_authtoken"), "{config}");
        assert_eq!(server.url(), "http://10.99.0.1:9696");
    }

    #[test]
    fn keystone_tls_and_notifications_add_their_sections() {
        let auth = ServerAuth::Keystone {
            url: "https://127.0.0.1:5000".into(),
            password: "pw".into(),
            cafile: Some("/pki/ca.pem".into()),
            token_cache_time: Some(-1),
        };
        let tls = Tls {
            cert: "/pki/server.pem".into(),
            key: "/pki/server.key".into(),
        };
        let server = Neutron::new(Path::new("/run/x"), "127.0.0.1".parse().unwrap(), 9, auth)
            .with_tls(tls)
            .with_notify_socket(Path::new("/run/x/notify.sock"))
            .with_inexpressible_rules_accepted();
        let config = server.config(&database());
        for line in [
            "auth_strategy = keystone\n",
            "[keystone_authtoken]\nwww_authenticate_uri = https://127.0.0.1:5000\n",
            "username = neutron\npassword = pw\n",
            "cafile = /pki/ca.pem\ntoken_cache_time = -1\n",
            "use_ssl = True\n",
            "[ssl]\ncert_file = /pki/server.pem\nkey_file = /pki/server.key\n",
            "[calico_rs]\nnotify_socket = /run/x/notify.sock\nrefuse_inexpressible_rules = false\n",
        ] {
            assert!(config.contains(line), "{line:?} not in:\n{config}");
        }
        assert_eq!(server.url(), "https://127.0.0.1:9");
    }
}
