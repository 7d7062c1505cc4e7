//! A neutron-server without Keystone, RabbitMQ or systemd, with Calico's ML2 driver, and its
//! MariaDB: the configuration (rendered from `etc/neutron-noauth.conf.in`) and the commands that
//! make the database, its schema and start both, all in one state directory. Used by the tests'
//! harness and by `calico-lab up --openstack`; starting, waiting and stopping are theirs.
//!
//! | file in the state directory | what |
//! | --- | --- |
//! | `mariadb/`, `mariadb.sock` | the database's data (made by `mariadb-install-db`) and its unix socket (no TCP) |
//! | `neutron.conf`, `policy.yaml`, `lock/` | neutron-server's configuration, an empty policy, oslo's locks |
//! | `neutron-server.log` | neutron-server's own log (`log_file`) |
//!
//! MariaDB rather than SQLite: SQLite's schema cannot be made by the migrations, and it has one
//! writer at a time (parallel writes fail with "database is locked").

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

/// neutron-server's configuration template (`@BIND@`, `@PORT@`, `@STATE@`, `@CONNECTION@`).
const TEMPLATE: &str = include_str!("../etc/neutron-noauth.conf.in");

/// What is run, and the package that provides it.
pub const PREREQUISITES: [(&str, &str); 5] = [
    ("/usr/bin/neutron-server", "neutron-server"),
    ("/usr/bin/neutron-db-manage", "python3-neutron"),
    ("/usr/sbin/mariadbd", "mariadb-server"),
    ("/usr/bin/mariadb-install-db", "mariadb-server"),
    ("/usr/bin/mariadb", "mariadb-client-core"),
];

/// Neutron's usual API port.
pub const PORT: u16 = 9696;

/// The first missing prerequisite, as one line naming its package and the setup script.
pub fn check_installed() -> Result<(), String> {
    match PREREQUISITES
        .iter()
        .find(|(path, _)| !Path::new(path).exists())
    {
        None => Ok(()),
        Some((path, package)) => Err(format!(
            "{path} is missing: neutron-server is not installed (package {package}); \
             run scripts/setup-neutron.sh as root"
        )),
    }
}

/// One neutron-server and its database, living in `dir`.
#[derive(Debug, Clone)]
pub struct Server {
    dir: PathBuf,
    bind: IpAddr,
    port: u16,
}

impl Server {
    /// A server listening on `bind:port`, its state in `dir` (which must exist).
    pub fn new(dir: &Path, bind: IpAddr, port: u16) -> Server {
        Server {
            dir: dir.to_owned(),
            bind,
            port,
        }
    }

    /// Its API, as a client on the same network reaches it.
    pub fn url(&self) -> String {
        match self.bind {
            IpAddr::V4(ip) => format!("http://{ip}:{}", self.port),
            IpAddr::V6(ip) => format!("http://[{ip}]:{}", self.port),
        }
    }

    /// The state directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// MariaDB's unix socket.
    pub fn socket(&self) -> PathBuf {
        self.path("mariadb.sock")
    }

    /// neutron-server's configuration for this directory, address and port.
    pub fn config(&self) -> String {
        let connection = format!(
            "mysql+pymysql://root@localhost/neutron?unix_socket={}&charset=utf8",
            self.socket().display()
        );
        TEMPLATE
            .replace("@BIND@", &self.bind.to_string())
            .replace("@PORT@", &self.port.to_string())
            .replace("@STATE@", &self.dir.display().to_string())
            .replace("@CONNECTION@", &connection)
    }

    /// Writes `neutron.conf`, an empty `policy.yaml` and the lock directory.
    pub fn write_config(&self) -> std::io::Result<()> {
        std::fs::write(self.path("neutron.conf"), self.config())?;
        std::fs::write(self.path("policy.yaml"), "{}\n")?;
        std::fs::create_dir_all(self.path("lock"))
    }

    /// Makes MariaDB's data directory (run once, to completion).
    pub fn install_db(&self) -> Command {
        let mut command = Command::new("/usr/bin/mariadb-install-db");
        command
            .arg("--no-defaults")
            .arg(format!("--datadir={}", self.path("mariadb").display()))
            .args(["--user=root", "--auth-root-authentication-method=normal"])
            .arg("--skip-test-db");
        command
    }

    /// The database server: the unix socket only, no TCP.
    pub fn mariadbd(&self) -> Command {
        let mut command = Command::new("/usr/sbin/mariadbd");
        command
            .arg("--no-defaults")
            .arg(format!("--datadir={}", self.path("mariadb").display()))
            .arg(format!("--socket={}", self.socket().display()))
            .args(["--skip-networking", "--user=root", "--skip-log-bin"])
            // A throwaway database: durability traded for speed (the schema takes ~100 DDLs).
            .args([
                "--innodb-flush-log-at-trx-commit=0",
                "--innodb-doublewrite=0",
            ])
            .arg("--innodb-flush-method=nosync");
        command
    }

    /// Creates the `neutron` database; fails until mariadbd accepts connections.
    pub fn create_db(&self) -> Command {
        let mut command = Command::new("/usr/bin/mariadb");
        command
            .arg("--no-defaults")
            .arg(format!("--socket={}", self.socket().display()))
            .args(["-uroot", "-e", "CREATE DATABASE IF NOT EXISTS neutron"]);
        command
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

/// `openstack/` of this source tree, where the driver package and its entry point live.
pub fn driver_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../openstack")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_has_every_field_filled_in() {
        let server = Server::new(Path::new("/run/x"), "10.99.0.1".parse().unwrap(), 9696);
        let config = server.config();
        for field in ["@BIND@", "@PORT@", "@STATE@", "@CONNECTION@"] {
            assert!(!config.contains(field), "{field} left in:\n{config}");
        }
        assert!(config.contains("bind_host = 10.99.0.1\n"), "{config}");
        assert!(config.contains("bind_port = 9696\n"), "{config}");
        assert!(
            config.contains("unix_socket=/run/x/mariadb.sock&"),
            "{config}"
        );
        assert_eq!(server.url(), "http://10.99.0.1:9696");
    }

    #[test]
    fn the_driver_is_in_the_tree() {
        assert!(driver_dir().join("networking_calico_rs").is_dir());
    }
}
