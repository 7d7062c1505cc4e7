//! A real neutron-server for one test: its own MariaDB (a throwaway data directory, a unix
//! socket, no TCP), the schema made by the real `neutron-db-manage upgrade heads`, the server on
//! a free loopback port with Calico's ML2 driver (`openstack/`) on `PYTHONPATH`, configured and
//! run as `calico_openstack::server` says (shared with `calico-lab up --openstack`). Both run in
//! their own process groups and are killed with all their workers, and the directory removed,
//! on `Drop`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use calico_openstack::client::Client;
use calico_openstack::server::{self, Server};
use serde_json::{Value, json};

/// The project every object is created in (noauth: it must be in each request body).
pub const PROJECT: &str = "8d5dec25a6aa4e188706a51637a428c2";

/// A running neutron-server and its database.
pub struct Neutron {
    dir: tempfile::TempDir,
    config: Server,
    pub url: String,
    client: Client,
    runtime: tokio::runtime::Runtime,
    server: Option<Child>,
    mariadb: Option<Child>,
}

impl Neutron {
    /// Starts MariaDB, makes the schema, starts neutron-server and waits until it answers.
    pub fn start() -> Neutron {
        if let Err(missing) = server::check_installed() {
            panic!("{missing}");
        }
        let dir = tempfile::Builder::new()
            .prefix("calico-neutron-test-")
            .tempdir()
            .expect("temporary directory");
        let port = calico_testkit::free_port();
        let config = Server::new(dir.path(), "127.0.0.1".parse().expect("address"), port);
        let url = config.url();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("tokio runtime");
        let mut neutron = Neutron {
            client: Client::new(&url).expect("neutron url"),
            url,
            config,
            runtime,
            server: None,
            mariadb: None,
            dir,
        };
        neutron.start_mariadb();
        neutron.config.write_config().expect("write neutron.conf");
        run(&mut neutron.config.migrate());
        neutron.start_server();
        neutron
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn start_mariadb(&mut self) {
        run(&mut self.config.install_db());
        let log = self.path("mariadb.log");
        self.mariadb = Some(spawn_in_group(&mut self.config.mariadbd(), &log));
        let create = || {
            self.config
                .create_db()
                .output()
                .map_err(|e| e.to_string())
                .and_then(|out| match out.status.success() {
                    true => Ok(()),
                    false => Err(String::from_utf8_lossy(&out.stderr).into_owned()),
                })
        };
        calico_testkit::eventually(
            "mariadbd to accept connections",
            Duration::from_secs(30),
            create,
        );
    }

    fn start_server(&mut self) {
        let log = self.path("neutron-server.out");
        self.server = Some(spawn_in_group(&mut self.config.neutron_server(), &log));
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            if let Some(status) = self
                .server
                .as_mut()
                .and_then(|c| c.try_wait().ok())
                .flatten()
            {
                panic!(
                    "neutron-server exited ({status}) while starting:\n{}",
                    self.log_tail()
                );
            }
            if self.try_call("GET", "/v2.0/networks", None).is_ok() {
                return;
            }
            if Instant::now() > deadline {
                panic!(
                    "neutron-server did not answer within 90 s:\n{}",
                    self.log_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Stops neutron-server (its database keeps running): Neutron unreachable.
    pub fn stop_server(&mut self) {
        if let Some(server) = self.server.take() {
            stop_group(server);
        }
    }

    /// The end of neutron-server's log, for failure messages.
    pub fn log_tail(&self) -> String {
        let mut tail = String::new();
        for name in ["neutron-server.out", "neutron-server.log"] {
            let text = std::fs::read_to_string(self.path(name)).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            tail += &format!(
                "--- {name}\n{}\n",
                lines[lines.len().saturating_sub(30)..].join("\n")
            );
        }
        tail
    }

    /// One API call, or Neutron's error.
    pub fn try_call(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value, String> {
        self.runtime
            .block_on(self.client.call(method, path, body.as_ref()))
            .map_err(|e| e.to_string())
    }

    /// One API call that must succeed.
    pub fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        self.try_call(method, path, body.clone())
            .unwrap_or_else(|e| panic!("neutron {method} {path} {body:?}: {e}"))
    }

    /// Creates an object in `collection` (e.g. `ports`) from `fields` plus the project; returns
    /// the object Neutron answered with.
    pub fn create(&self, collection: &str, fields: Value) -> Value {
        let singular = singular(collection);
        let mut fields = fields;
        fields["project_id"] = json!(PROJECT);
        let answer = self.call(
            "POST",
            &format!("/v2.0/{collection}"),
            Some(json!({ singular.clone(): fields })),
        );
        answer[&singular].clone()
    }

    /// Updates an object's `fields`.
    pub fn update(&self, collection: &str, id: &str, fields: Value) -> Value {
        let singular = singular(collection);
        let path = format!("/v2.0/{collection}/{id}");
        self.call("PUT", &path, Some(json!({ singular.clone(): fields })))[&singular].clone()
    }

    /// Deletes an object.
    pub fn delete(&self, collection: &str, id: &str) {
        self.call("DELETE", &format!("/v2.0/{collection}/{id}"), None);
    }
}

fn singular(collection: &str) -> String {
    collection.trim_end_matches('s').replace('-', "_")
}

impl Drop for Neutron {
    fn drop(&mut self) {
        for child in [self.server.take(), self.mariadb.take()]
            .into_iter()
            .flatten()
        {
            stop_group(child);
        }
    }
}

/// Runs a setup command that must succeed.
fn run(command: &mut Command) {
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("cannot run {command:?}: {e}"));
    assert!(
        out.status.success(),
        "{command:?} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Starts `command` as the leader of a new process group (so its workers can be stopped with
/// it), output appended to `log`.
fn spawn_in_group(command: &mut Command, log: &Path) -> Child {
    use std::os::unix::process::CommandExt;
    let file = std::fs::File::create(log).expect("log file");
    command
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(file.try_clone().expect("log file"))
        .stderr(file)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {command:?}: {e}"))
}

/// SIGTERM to the whole group, SIGKILL after 10 s if the leader has not exited, then reaped.
fn stop_group(mut child: Child) {
    let group = format!("-{}", child.id());
    let signal = |name: &str| {
        let _ = Command::new("kill")
            .args([name, "--", &group])
            .stderr(Stdio::null())
            .status();
    };
    signal("-TERM");
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if matches!(child.try_wait(), Ok(Some(_))) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // Workers that outlive their leader go too.
    signal("-KILL");
    let _ = child.wait();
}
