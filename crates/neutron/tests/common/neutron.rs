//! A real OpenStack control plane for one test: its own MariaDB (a throwaway data directory, a
//! unix socket, no TCP), Keystone under uWSGI (unless the test asks for `noauth`), and
//! neutron-server with Calico's ML2 driver (`openstack/`) on `PYTHONPATH`, each on a free
//! loopback port, configured and run as `calico_openstack::server` says (shared with
//! `calico-lab up --openstack`); schemas by the real `keystone-manage db_sync` and
//! `neutron-db-manage upgrade heads`. Every process runs in its own process group and is
//! killed with all its workers, and the directory removed, on `Drop`.
//!
//! Keystone's users: `admin` (the cloud's), `neutron` (keystonemiddleware's, role `service`) and
//! `calico` (the service user of calico-neutron and the DHCP agent, role `admin` in project
//! `service`, as Neutron's policy needs to show ports' bindings).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use calico_openstack::client::{Auth, Client};
use calico_openstack::credentials::{self, Strategy};
use calico_openstack::http::Http;
use calico_openstack::keystone::Keystone as Session;
use calico_openstack::server::keystone::{self, Keystone, Provision, ServiceUser};
use calico_openstack::server::neutron::{Neutron as NeutronServer, ServerAuth};
use calico_openstack::server::{self, Database, Tls};
use serde_json::{Value, json};

/// The project every object is created in with noauth (it must be in each request body).
pub const PROJECT: &str = "8d5dec25a6aa4e188706a51637a428c2";
pub const ADMIN_PASSWORD: &str = "admin-secret-1";
pub const NEUTRON_PASSWORD: &str = "neutron-secret-2";
/// calico's password: the tests look for it in logs, where it must never be.
pub const CALICO_PASSWORD: &str = "calico-Secret-7f3a";
pub const CALICO_USER: &str = "calico";

/// How the control plane is run.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// neutron-server with `auth_strategy = noauth`, no Keystone.
    pub noauth: bool,
    /// Keystone and Neutron over https with this certificate (and its CA).
    pub tls: Option<(Tls, PathBuf)>,
    /// Keystone's token lifetime in seconds (default one hour).
    pub token_expiration: Option<u32>,
    /// keystonemiddleware's `token_cache_time` (-1: every token checked with Keystone).
    pub token_cache_time: Option<i32>,
    /// No change notifications from the driver (calico-neutron then polls).
    pub no_notifications: bool,
    /// The driver accepts rules Calico cannot express (as rules made before it refused them).
    pub accept_inexpressible_rules: bool,
}

/// A running control plane.
pub struct Neutron {
    dir: tempfile::TempDir,
    config: NeutronServer,
    pub url: String,
    /// Keystone's v3 API (none with noauth).
    pub auth_url: Option<String>,
    ca: Option<PathBuf>,
    /// The socket the driver notifies calico-neutron on (none: notifications off).
    notify_socket: Option<PathBuf>,
    client: Client,
    runtime: tokio::runtime::Runtime,
    server: Option<Child>,
    keystone: Option<Child>,
    mariadb: Option<Child>,
}

impl Neutron {
    /// Keystone and neutron-server over http.
    pub fn start() -> Neutron {
        Neutron::start_with(Options::default())
    }

    /// MariaDB, Keystone (provisioned) and neutron-server as `options` say; returns when
    /// neutron-server answers.
    pub fn start_with(options: Options) -> Neutron {
        if let Err(missing) = server::check_installed() {
            panic!("{missing}");
        }
        let dir = tempfile::Builder::new()
            .prefix("calico-neutron-test-")
            .tempdir()
            .expect("temporary directory");
        let loopback = "127.0.0.1".parse().expect("address");
        let database = Database::new(dir.path());
        let mut keystone = Keystone::new(dir.path(), loopback, calico_testkit::free_port());
        if let Some((tls, _)) = &options.tls {
            keystone = keystone.with_tls(tls.clone());
        }
        if let Some(seconds) = options.token_expiration {
            keystone = keystone.with_token_expiration(seconds);
        }
        let ca = options.tls.as_ref().map(|(_, ca)| ca.clone());
        let auth = match options.noauth {
            true => ServerAuth::Noauth,
            false => ServerAuth::Keystone {
                url: keystone.url(),
                password: NEUTRON_PASSWORD.into(),
                cafile: ca.clone(),
                token_cache_time: options.token_cache_time,
            },
        };
        let mut config =
            NeutronServer::new(dir.path(), loopback, calico_testkit::free_port(), auth);
        if let Some((tls, _)) = &options.tls {
            config = config.with_tls(tls.clone());
        }
        if options.accept_inexpressible_rules {
            config = config.with_inexpressible_rules_accepted();
        }
        let notify_socket = (!options.no_notifications).then(|| dir.path().join("notify.sock"));
        if let Some(socket) = &notify_socket {
            config = config.with_notify_socket(socket);
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("tokio runtime");
        let url = config.url();
        let mut neutron = Neutron {
            client: Client::noauth(&url).expect("neutron url"),
            url,
            auth_url: (!options.noauth).then(|| keystone.auth_url()),
            ca,
            notify_socket,
            config,
            runtime,
            server: None,
            keystone: None,
            mariadb: None,
            dir,
        };
        neutron.start_mariadb(&database);
        neutron
            .config
            .write_config(&database)
            .expect("write neutron.conf");
        // Neutron's migrations run while Keystone is made.
        let mut migrate =
            spawn_in_group(&mut neutron.config.migrate(), &neutron.path("migrate.log"));
        if !options.noauth {
            neutron.start_keystone(&keystone, &database);
        }
        let status = migrate.wait().expect("neutron-db-manage");
        let migrated = std::fs::read_to_string(neutron.path("migrate.log")).unwrap_or_default();
        assert!(
            status.success(),
            "neutron-db-manage upgrade heads: {status}\n{migrated}"
        );
        neutron.start_server();
        neutron
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The CA file clients need (https only).
    pub fn ca_file(&self) -> Option<&Path> {
        self.ca.as_deref()
    }

    fn start_mariadb(&mut self, database: &Database) {
        run(&mut database.install());
        let log = self.path("mariadb.log");
        self.mariadb = Some(spawn_in_group(&mut database.mariadbd(), &log));
        let create = || {
            database
                .create()
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

    /// The schema, the admin (bootstrap), uWSGI, then the service users and the catalog.
    fn start_keystone(&mut self, keystone: &Keystone, database: &Database) {
        keystone
            .write_config(database)
            .expect("write keystone.conf");
        run(&mut keystone.db_sync());
        run(&mut keystone.bootstrap(ADMIN_PASSWORD, &keystone.url(), &keystone.url()));
        self.keystone = Some(spawn_in_group(
            &mut keystone.uwsgi(),
            &self.path("uwsgi.log"),
        ));
        let http = Http::new(self.ca.as_deref()).expect("CA file");
        let endpoint = calico_openstack::http::Endpoint::parse(&keystone.auth_url()).unwrap();
        calico_testkit::eventually("keystone to answer", Duration::from_secs(60), || {
            let answer = self
                .runtime
                .block_on(http.send("GET", &endpoint, "", &[], None));
            match answer {
                Ok(a) if a.status == 200 => Ok(()),
                other => Err(format!("{other:?}\n{}", self.tail("uwsgi.log"))),
            }
        });
        let plan = Provision {
            admin_password: ADMIN_PASSWORD.into(),
            users: vec![
                ServiceUser {
                    name: server::neutron::SERVICE_USER.into(),
                    password: NEUTRON_PASSWORD.into(),
                    role: "service".into(),
                },
                ServiceUser {
                    name: CALICO_USER.into(),
                    password: CALICO_PASSWORD.into(),
                    role: "admin".into(),
                },
            ],
            neutron_public: self.url.clone(),
            neutron_internal: self.url.clone(),
        };
        self.runtime
            .block_on(keystone::provision(&http, &keystone.auth_url(), &plan))
            .unwrap_or_else(|e| panic!("provisioning keystone: {e}"));
        // The tests' own client: the cloud's admin.
        self.client = self.client_as(keystone::ADMIN, ADMIN_PASSWORD, keystone::ADMIN);
    }

    /// A Neutron client authenticated as `user` in `project`.
    pub fn client_as(&self, user: &str, password: &str, project: &str) -> Client {
        let env = [
            ("OS_AUTH_URL", self.auth_url.clone().expect("keystone")),
            ("OS_USERNAME", user.to_owned()),
            ("OS_PASSWORD", password.to_owned()),
            ("OS_PROJECT_NAME", project.to_owned()),
        ];
        let env = env.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
        let resolved = credentials::resolve(Strategy::Keystone, None, &env).expect("settings");
        let http = Http::new(self.ca.as_deref()).expect("CA file");
        let keystone = Session::new(http.clone(), resolved.credentials.expect("credentials"));
        Client::new(&self.url, http, Auth::Keystone(Arc::new(keystone))).expect("client")
    }

    /// The `OS_*` variables of calico's service user (an openrc).
    pub fn service_env(&self) -> Vec<(String, String)> {
        let mut env = vec![
            ("OS_AUTH_URL", self.auth_url.clone().expect("keystone")),
            ("OS_USERNAME", CALICO_USER.to_owned()),
            ("OS_PASSWORD", CALICO_PASSWORD.to_owned()),
            ("OS_PROJECT_NAME", keystone::SERVICE_PROJECT.to_owned()),
            ("OS_USER_DOMAIN_NAME", "Default".to_owned()),
            ("OS_PROJECT_DOMAIN_NAME", "Default".to_owned()),
        ];
        if let Some(ca) = &self.ca {
            env.push(("OS_CACERT", ca.display().to_string()));
        }
        env.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
    }

    /// The arguments and environment the DHCP agent needs for this plane (authentication).
    pub fn auth(&self) -> (Vec<String>, Vec<(String, String)>) {
        match self.auth_url {
            Some(_) => (vec![], self.service_env()),
            None => (vec!["--auth-strategy".into(), "noauth".into()], vec![]),
        }
    }

    /// The arguments calico-neutron needs to hear the driver: `--notify-socket`, or polling.
    pub fn change_args(&self) -> Vec<String> {
        match &self.notify_socket {
            Some(socket) => vec!["--notify-socket".into(), socket.display().to_string()],
            None => vec!["--change-source".into(), "polling".into()],
        }
    }

    /// [`Neutron::auth`] and [`Neutron::change_args`]: what calico-neutron needs.
    pub fn sync_args(&self) -> (Vec<String>, Vec<(String, String)>) {
        let (mut args, env) = self.auth();
        args.extend(self.change_args());
        (args, env)
    }

    /// One call to Keystone's v3 API as the admin (e.g. to change a user).
    pub fn keystone_call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let http = Http::new(self.ca.as_deref()).expect("CA file");
        let endpoint =
            calico_openstack::http::Endpoint::parse(self.auth_url.as_deref().expect("keystone"))
                .unwrap();
        let login = json!({"auth": {
            "identity": {"methods": ["password"], "password": {"user": {
                "name": keystone::ADMIN, "domain": {"id": "default"}, "password": ADMIN_PASSWORD}}},
            "scope": {"project": {"name": keystone::ADMIN, "domain": {"id": "default"}}},
        }});
        self.runtime.block_on(async {
            let answer = http
                .send(
                    "POST",
                    &endpoint,
                    "/auth/tokens?nocatalog",
                    &[],
                    Some(login.to_string()),
                )
                .await
                .expect("admin token");
            let token = answer.subject_token.expect("a token");
            let headers = [("x-auth-token", token.as_str())];
            let answer = http
                .send(
                    method,
                    &endpoint,
                    path,
                    &headers,
                    body.map(|b| b.to_string()),
                )
                .await
                .expect("keystone answers");
            assert!(
                (200..300).contains(&answer.status),
                "keystone {method} {path}: {answer:?}"
            );
            serde_json::from_str(&answer.body).unwrap_or(Value::Null)
        })
    }

    /// The id of Keystone user `name`.
    pub fn keystone_user_id(&self, name: &str) -> String {
        let users = self.keystone_call("GET", &format!("/users?name={name}"), None);
        users["users"][0]["id"].as_str().expect("a user").to_owned()
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

    /// Stops neutron-server (its database and Keystone keep running): Neutron unreachable.
    pub fn stop_server(&mut self) {
        if let Some(server) = self.server.take() {
            stop_group(server);
        }
    }

    fn tail(&self, name: &str) -> String {
        let text = std::fs::read_to_string(self.path(name)).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        format!(
            "--- {name}\n{}\n",
            lines[lines.len().saturating_sub(30)..].join("\n")
        )
    }

    /// The end of neutron-server's log, for failure messages.
    pub fn log_tail(&self) -> String {
        self.tail("neutron-server.out") + &self.tail("neutron-server.log")
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
            .unwrap_or_else(|e| {
                panic!(
                    "neutron {method} {path} {body:?}: {e}\n{}{}",
                    self.log_tail(),
                    self.tail("uwsgi.log")
                )
            })
    }

    /// Creates an object in `collection` (e.g. `ports`) from `fields` (plus the project with
    /// noauth); returns the object Neutron answered with.
    pub fn create(&self, collection: &str, fields: Value) -> Value {
        let singular = singular(collection);
        let mut fields = fields;
        if self.auth_url.is_none() {
            fields["project_id"] = json!(PROJECT);
        }
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
        for child in [
            self.server.take(),
            self.keystone.take(),
            self.mariadb.take(),
        ]
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
