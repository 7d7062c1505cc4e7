//! A throwaway OpenStack control plane without systemd, Apache, RabbitMQ or memcached: one
//! MariaDB ([`Database`]) holding Keystone's and Neutron's databases, Keystone served by uWSGI
//! ([`keystone::Keystone`]) and neutron-server with Calico's ML2 driver
//! ([`neutron::Neutron`]), each in one state directory. This module renders their
//! configurations and builds their commands; the tests' harness and `calico-lab up
//! --openstack` start, wait for and stop them, so both run OpenStack one way.
//!
//! | file in the state directory | what |
//! | --- | --- |
//! | `mariadb/`, `mariadb.sock` | the database's data (made by `mariadb-install-db`) and its unix socket (no TCP) |
//! | `keystone.conf`, `fernet-keys/`, `credential-keys/`, `keystone.log`, `uwsgi.pid` | Keystone |
//! | `neutron.conf`, `policy.yaml`, `lock/`, `neutron-server.log` | neutron-server |
//!
//! MariaDB rather than SQLite: Neutron's schema cannot be made on SQLite by its migrations, and
//! SQLite has one writer at a time (parallel writes fail with "database is locked").

pub mod keystone;
pub mod neutron;

use std::path::{Path, PathBuf};
use std::process::Command;

/// What is run, and the package that provides it.
pub const PREREQUISITES: [(&str, &str); 9] = [
    ("/usr/bin/neutron-server", "neutron-server"),
    ("/usr/bin/neutron-db-manage", "python3-neutron"),
    ("/usr/sbin/mariadbd", "mariadb-server"),
    ("/usr/bin/mariadb-install-db", "mariadb-server"),
    ("/usr/bin/mariadb", "mariadb-client-core"),
    ("/usr/bin/keystone-manage", "keystone"),
    ("/usr/bin/keystone-wsgi-public", "keystone"),
    ("/usr/bin/uwsgi", "uwsgi-core"),
    (
        "/usr/lib/uwsgi/plugins/python3_plugin.so",
        "uwsgi-plugin-python3",
    ),
];

/// The first missing prerequisite, as one line naming its package and the setup scripts.
pub fn check_installed() -> Result<(), String> {
    match PREREQUISITES
        .iter()
        .find(|(path, _)| !Path::new(path).exists())
    {
        None => Ok(()),
        Some((path, package)) => Err(format!(
            "{path} is missing (package {package}); run scripts/setup-neutron.sh as root"
        )),
    }
}

/// A certificate and its key (PEM files) a server presents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tls {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// The MariaDB server of a control plane: data and socket in `dir`, no TCP.
#[derive(Debug, Clone)]
pub struct Database {
    dir: PathBuf,
}

impl Database {
    pub fn new(dir: &Path) -> Database {
        Database {
            dir: dir.to_owned(),
        }
    }

    /// The unix socket.
    pub fn socket(&self) -> PathBuf {
        self.dir.join("mariadb.sock")
    }

    /// SQLAlchemy's URL of database `name` over the socket.
    pub fn connection(&self, name: &str) -> String {
        format!(
            "mysql+pymysql://root@localhost/{name}?unix_socket={}&charset=utf8",
            self.socket().display()
        )
    }

    /// Makes the data directory (run once, to completion).
    pub fn install(&self) -> Command {
        let mut command = Command::new("/usr/bin/mariadb-install-db");
        command
            .arg("--no-defaults")
            .arg(format!("--datadir={}", self.dir.join("mariadb").display()))
            .args(["--user=root", "--auth-root-authentication-method=normal"])
            .arg("--skip-test-db");
        command
    }

    /// The server: the unix socket only, no TCP.
    pub fn mariadbd(&self) -> Command {
        let mut command = Command::new("/usr/sbin/mariadbd");
        command
            .arg("--no-defaults")
            .arg(format!("--datadir={}", self.dir.join("mariadb").display()))
            .arg(format!("--socket={}", self.socket().display()))
            .args(["--skip-networking", "--user=root", "--skip-log-bin"])
            // A throwaway database: durability traded for speed (the schemas take ~200 DDLs).
            .args([
                "--innodb-flush-log-at-trx-commit=0",
                "--innodb-doublewrite=0",
            ])
            .arg("--innodb-flush-method=nosync");
        command
    }

    /// Creates the databases `keystone` and `neutron`; fails until mariadbd accepts
    /// connections.
    pub fn create(&self) -> Command {
        let mut command = Command::new("/usr/bin/mariadb");
        command
            .arg("--no-defaults")
            .arg(format!("--socket={}", self.socket().display()))
            .args([
                "-uroot",
                "-e",
                "CREATE DATABASE IF NOT EXISTS keystone; CREATE DATABASE IF NOT EXISTS neutron",
            ]);
        command
    }
}

/// `openstack/` of this source tree, where the driver package and its entry point live.
pub fn driver_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../openstack")
}

/// The host part of a URL for `ip` (IPv6 in brackets).
pub(crate) fn url_host(ip: std::net::IpAddr) -> String {
    match ip {
        std::net::IpAddr::V4(ip) => ip.to_string(),
        std::net::IpAddr::V6(ip) => format!("[{ip}]"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_driver_is_in_the_tree() {
        assert!(driver_dir().join("networking_calico_rs").is_dir());
    }

    #[test]
    fn connections_use_the_socket() {
        let db = Database::new(Path::new("/run/x"));
        assert_eq!(
            db.connection("neutron"),
            "mysql+pymysql://root@localhost/neutron?unix_socket=/run/x/mariadb.sock&charset=utf8"
        );
    }
}
