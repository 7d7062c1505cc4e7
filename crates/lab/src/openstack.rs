//! `up --openstack`: the lab as an OpenStack cloud, run as operators run one: MariaDB,
//! Keystone (uWSGI) and neutron-server (`auth_strategy = keystone`, Calico's ML2 driver) in the
//! fabric namespace beside etcd (Keystone on the fabric's address, port 5000, neutron-server on
//! port 9696, so that every host reaches them; relays let the caller reach both), one
//! `calico-neutron` in the fabric, and a `calico-dhcp-agent` in each host, both authenticating
//! as the service user `calico` (`<lab dir>/calico-auth.conf`) and both under `calico-lab
//! supervise --restart always` (as the systemd units of docs/openstack.md run them); Felix
//! takes `cali` and `tap` interfaces. `up` writes `<lab dir>/openrc` (the cloud's admin, for the
//! `openstack` CLI through the relays), then makes a dual-stack network (an IPv4 subnet and a
//! DHCPv6-stateful IPv6 subnet, both outside the lab's pools) and a security group through
//! Neutron's API, for VMs to use. [`restart_server`] restarts neutron-server as `up` started it.
//!
//! ```text
//!  caller (openrc) ── relays ──▶ fabric: keystone :5000 ◀── token ── calico-neutron ──▶ etcd
//!                           └──▶ fabric: neutron-server :9696 ◀──────┘      ▲
//!                                  │ (unix socket)   ▲                      │
//!                                mariadbd            └── hostN: calico-dhcp-agent (dnsmasq)
//! ```
//!
//! Everything lives in the lab's namespaces or is a relay: `down` stops it with the rest.
//! VMs on the lab's hosts: [`vm`].

pub mod vm;

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use calico_openstack::client::{Auth, Client};
use calico_openstack::credentials::{self, Strategy};
use calico_openstack::http::{Endpoint, Http};
use calico_openstack::keystone::Keystone as Session;
use calico_openstack::server::keystone::{self, Keystone, Provision, ServiceUser};
use calico_openstack::server::neutron::{self as neutron_server, Neutron, ServerAuth};
use calico_openstack::server::{self, Database};
use serde_json::{Value, json};

use crate::logs::{log_hint, with_log_tail};
use crate::poll::poll;
use crate::processes;
use crate::state::{FABRIC_IP, Host, Lab, OpenStack};

/// The lab's VM network, its subnets (outside the lab's IP pools) and their gateways.
pub const NETWORK: &str = "lab-net";
pub const SUBNET_CIDR: &str = "10.28.0.0/24";
pub const GATEWAY: &str = "10.28.0.1";
/// The network's IPv6 subnet: addresses by DHCPv6, router advertisements from each host's
/// dnsmasq (`dhcpv6-stateful`, the mode Calico's docs ask for).
pub const SUBNET6_NAME: &str = "lab-net-v6";
pub const SUBNET6_CIDR: &str = "fd00:28::/64";
pub const GATEWAY6: &str = "fd00:28::1";
/// The security group VMs are given: everything from its members, everything out.
pub const SECURITY_GROUP: &str = "lab-default";
/// Felix's interface prefixes on an OpenStack lab's hosts: containers and VMs.
pub const INTERFACE_PREFIX: &str = "cali,tap";
/// The service user of calico-neutron and the DHCP agents (role `admin` in project `service`:
/// Neutron's policy shows ports' bindings to admins only).
pub const SERVICE_USER: &str = "calico";
/// What each host's DHCP agent runs.
const DNSMASQ: &str = "/usr/sbin/dnsmasq";
/// The DHCPv6 client run in a dual-stack VM (busybox has none).
pub const DHCLIENT: &str = "/sbin/dhclient";
/// How long neutron-server and Keystone may take to answer after they started.
const SERVER_LIMIT: Duration = Duration::from_secs(120);

// Here, not beside the type in `state/openstack.rs`: the state is data, the cloud's clients
// are this module's.
impl OpenStack {
    /// A Neutron client as the cloud's admin, through the relays.
    pub fn client(&self) -> anyhow::Result<Client> {
        admin_client(
            &self.client_url,
            &self.keystone_client_url,
            &self.admin_password,
        )
    }
}

/// The lab's OpenStack, or an error naming `--openstack`.
pub fn openstack_of(lab: &Lab) -> anyhow::Result<&OpenStack> {
    lab.openstack.as_ref().with_context(|| {
        format!(
            "lab {:?} was brought up without --openstack: VMs need `calico-lab up --openstack`",
            lab.name
        )
    })
}

/// A Neutron client at `url` as the admin of the Keystone at `auth_url`.
fn admin_client(url: &str, auth_url: &str, password: &str) -> anyhow::Result<Client> {
    let env = [
        ("OS_AUTH_URL", auth_url),
        ("OS_USERNAME", keystone::ADMIN),
        ("OS_PASSWORD", password),
        ("OS_PROJECT_NAME", keystone::ADMIN),
    ];
    let env = env
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    let resolved = credentials::resolve(Strategy::Keystone, None, &env)?;
    let http = Http::new(None).map_err(anyhow::Error::msg)?;
    let credentials = resolved.credentials.context("no credentials")?;
    let session = Session::new(http.clone(), credentials);
    Ok(Client::new(url, http, Auth::Keystone(Arc::new(session)))?)
}

/// Fails in one line when something `--openstack` runs is missing.
pub fn require_installed() -> anyhow::Result<()> {
    server::check_installed().map_err(anyhow::Error::msg)?;
    for (path, package) in [(DNSMASQ, "dnsmasq-base"), (DHCLIENT, "isc-dhcp-client")] {
        if !Path::new(path).is_file() {
            bail!(
                "{path} is missing: {package} is not installed; run scripts/setup-neutron.sh as \
                 root"
            );
        }
    }
    for name in ["calico-neutron", "calico-dhcp-agent"] {
        processes::sibling_binary(name, "calico-neutron")?;
    }
    Ok(())
}

/// Where the control plane keeps its state: `<lab dir>/neutron` (the name of earlier labs).
fn state_dir(lab: &Lab) -> PathBuf {
    lab.dir.join("neutron")
}

fn database(lab: &Lab) -> Database {
    Database::new(&state_dir(lab))
}

/// The lab's Keystone, on the fabric's address.
fn keystone(lab: &Lab) -> Keystone {
    Keystone::new(&state_dir(lab), IpAddr::V4(FABRIC_IP), keystone::PORT).with_processes(2)
}

/// The lab's neutron-server, on the fabric's address, checking tokens with Keystone as the
/// user `neutron`; its password is read back from its configuration when it restarts.
fn server(lab: &Lab, neutron_password: &str) -> Neutron {
    let auth = ServerAuth::Keystone {
        url: keystone(lab).url(),
        password: neutron_password.to_owned(),
        cafile: None,
        token_cache_time: None,
    };
    Neutron::new(
        &state_dir(lab),
        IpAddr::V4(FABRIC_IP),
        neutron_server::PORT,
        auth,
    )
    .with_notify_socket(&notify_socket(lab))
}

/// Where the driver notifies calico-neutron (both run in the fabric; a unix socket is a file).
pub fn notify_socket(lab: &Lab) -> PathBuf {
    state_dir(lab).join("notify.sock")
}

/// A password for a user of the lab's Keystone: 24 random hex digits.
fn password() -> anyhow::Result<String> {
    use std::io::Read;
    let mut bytes = [0u8; 12];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .context("cannot read /dev/urandom")?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Starts MariaDB in the fabric, makes Keystone's and Neutron's schemas (in parallel),
/// bootstraps Keystone's admin and starts Keystone and neutron-server (without waiting for
/// them: [`configure`] does); records their relays.
pub async fn start_server(lab: &mut Lab) -> anyhow::Result<()> {
    let dir = state_dir(lab);
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let (database, keystone) = (database(lab), keystone(lab));
    let neutron_password = password()?;
    let server = server(lab, &neutron_password);
    let fabric = Lab::fabric_netns(&lab.name);
    run(&mut database.install(), "mariadb-install-db")?;
    processes::spawn_command(
        Some(&fabric),
        &database.mariadbd(),
        &lab.log_path("mariadb"),
    )?;
    let create = || Ok(database.create().output()?.status.success().then_some(()));
    poll(
        "mariadbd to accept connections",
        Duration::from_secs(30),
        create,
    )
    .await
    .with_context(|| log_hint(lab, "mariadb"))?;
    server.write_config(&database)?;
    keystone.write_config(&database)?;
    // Neutron's migrations run while Keystone's schema and admin are made.
    let migrate = server
        .migrate()
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .context("cannot run neutron-db-manage")?;
    run(&mut keystone.db_sync(), "keystone-manage db_sync")?;
    let admin_password = password()?;
    let keystone_relay = processes::start_relay_to(
        lab,
        &format!("{FABRIC_IP}:{}", keystone::PORT),
        "relay-keystone",
    )
    .await?;
    lab.pids.push(keystone_relay.pid);
    let keystone_client = format!("http://127.0.0.1:{}", keystone_relay.port);
    let bootstrap = keystone.bootstrap(&admin_password, &keystone_client, &keystone.url());
    run(&mut { bootstrap }, "keystone-manage bootstrap")?;
    finish(migrate, "neutron-db-manage upgrade heads")?;
    processes::spawn_command(Some(&fabric), &keystone.uwsgi(), &lab.log_path("keystone"))?;
    let log = lab.log_path("neutron-server");
    let pid = processes::spawn_command(Some(&fabric), &server.neutron_server(), &log)?;
    let to = format!("{FABRIC_IP}:{}", neutron_server::PORT);
    let relay = processes::start_relay_to(lab, &to, "relay-neutron").await?;
    lab.pids.push(relay.pid);
    lab.openstack = Some(OpenStack {
        neutron_url: server.url(),
        client_url: format!("http://127.0.0.1:{}", relay.port),
        keystone_url: keystone.auth_url(),
        keystone_client_url: format!("{keystone_client}/v3"),
        admin_password,
        project: keystone::ADMIN.to_owned(),
        server_pid: Some(pid),
        ..OpenStack::default()
    });
    lab.save()?;
    // Kept for provisioning (`configure`), beside neutron.conf that holds it too.
    write_private(&dir.join("neutron-password"), &neutron_password)
}

/// Waits for Keystone and provisions it (the service users, Neutron in the catalog), writes
/// the services' credentials and the admin's `openrc`, waits for neutron-server, starts
/// calico-neutron and the hosts' DHCP agents, and makes the network, subnets and security
/// group.
pub async fn configure(lab: &mut Lab) -> anyhow::Result<()> {
    let mut openstack = lab
        .openstack
        .clone()
        .context("neutron-server was not started")?;
    let http = Http::new(None).map_err(anyhow::Error::msg)?;
    let waited = wait_for_keystone(&http, &openstack.keystone_client_url).await;
    with_log_tail(waited, lab, "keystone")?;
    let neutron_password = std::fs::read_to_string(state_dir(lab).join("neutron-password"))
        .context("the lab lost neutron's password")?;
    let service_password = password()?;
    let plan = Provision {
        admin_password: openstack.admin_password.clone(),
        users: vec![
            ServiceUser {
                name: neutron_server::SERVICE_USER.into(),
                password: neutron_password,
                role: "service".into(),
            },
            ServiceUser {
                name: SERVICE_USER.into(),
                password: service_password.clone(),
                role: "admin".into(),
            },
        ],
        neutron_public: openstack.client_url.clone(),
        neutron_internal: openstack.neutron_url.clone(),
    };
    keystone::provision(&http, &openstack.keystone_client_url, &plan)
        .await
        .map_err(anyhow::Error::msg)
        .context("cannot provision the lab's keystone")?;
    write_private(
        &auth_config(lab),
        &service_auth(&openstack, &service_password),
    )?;
    write_private(&openrc(lab), &openrc_text(&openstack))?;
    let client = openstack.client()?;
    let waited = wait_for_server(&client, openstack.server_pid).await;
    with_log_tail(waited, lab, "neutron-server")?;
    start_calico_neutron(lab, &openstack)?;
    for host in &lab.hosts {
        start_agent(lab, host, &openstack)?;
    }
    openstack.network = create(&client, "networks", json!({ "name": NETWORK })).await?;
    let subnet = json!({
        "name": NETWORK, "network_id": openstack.network, "ip_version": 4,
        "cidr": SUBNET_CIDR, "gateway_ip": GATEWAY, "enable_dhcp": true,
    });
    openstack.subnet = create(&client, "subnets", subnet).await?;
    let subnet6 = json!({
        "name": SUBNET6_NAME, "network_id": openstack.network, "ip_version": 6,
        "cidr": SUBNET6_CIDR, "gateway_ip": GATEWAY6, "enable_dhcp": true,
        "ipv6_address_mode": "dhcpv6-stateful", "ipv6_ra_mode": "dhcpv6-stateful",
    });
    openstack.subnet6 = create(&client, "subnets", subnet6).await?;
    openstack.security_group = security_group(&client).await?;
    lab.openstack = Some(openstack);
    lab.save()
}

/// The admin's credentials for the `openstack` CLI, through the relays: `<lab dir>/openrc`.
pub fn openrc(lab: &Lab) -> PathBuf {
    lab.dir.join("openrc")
}

/// The services' credentials (`--auth-config`): `<lab dir>/calico-auth.conf`.
pub fn auth_config(lab: &Lab) -> PathBuf {
    lab.dir.join("calico-auth.conf")
}

fn openrc_text(openstack: &OpenStack) -> String {
    format!(
        "# The lab's OpenStack as its admin, for the openstack CLI: source this file.\n\
         export OS_AUTH_URL={}\nexport OS_USERNAME={}\nexport OS_PASSWORD={}\n\
         export OS_PROJECT_NAME={}\nexport OS_USER_DOMAIN_NAME=Default\n\
         export OS_PROJECT_DOMAIN_NAME=Default\nexport OS_IDENTITY_API_VERSION=3\n\
         export OS_REGION_NAME={}\nexport OS_INTERFACE=public\n",
        openstack.keystone_client_url,
        keystone::ADMIN,
        openstack.admin_password,
        keystone::ADMIN,
        keystone::REGION,
    )
}

/// `[keystone_authtoken]` for calico-neutron and the agents, which reach Keystone on the
/// fabric.
fn service_auth(openstack: &OpenStack, password: &str) -> String {
    format!(
        "# calico-neutron's and the DHCP agents' service user (--auth-config)\n\
         [{}]\nauth_url = {}\nauth_type = password\nusername = {SERVICE_USER}\n\
         password = {password}\nproject_name = {}\nuser_domain_name = Default\n\
         project_domain_name = Default\n",
        credentials::SECTION,
        openstack.keystone_url,
        keystone::SERVICE_PROJECT,
    )
}

/// Writes a file only root reads (it holds a password).
fn write_private(path: &Path, text: &str) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("cannot make {} private", path.display()))
}

async fn wait_for_keystone(http: &Http, auth_url: &str) -> anyhow::Result<()> {
    let endpoint = Endpoint::parse(auth_url).map_err(anyhow::Error::msg)?;
    let deadline = Instant::now() + SERVER_LIMIT;
    loop {
        let error = match http.send("GET", &endpoint, "", &[], None).await {
            Ok(answer) if answer.status == 200 => return Ok(()),
            Ok(answer) => format!("HTTP {}", answer.status),
            Err(e) => e.to_string(),
        };
        if Instant::now() >= deadline {
            bail!("keystone did not answer within {SERVER_LIMIT:?}: {error}");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

async fn wait_for_server(client: &Client, pid: Option<i32>) -> anyhow::Result<()> {
    let deadline = Instant::now() + SERVER_LIMIT;
    loop {
        let error = match client.call("GET", "/v2.0/networks", None).await {
            Ok(_) => return Ok(()),
            Err(error) => error,
        };
        if pid.is_some_and(|pid| !processes::pid_alive(pid)) {
            bail!("neutron-server exited while starting (see also neutron/neutron-server.log)");
        }
        if Instant::now() >= deadline {
            bail!("neutron-server did not answer within {SERVER_LIMIT:?}: {error}");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The group VMs get: Neutron adds egress to anywhere; ingress from the group's members.
async fn security_group(client: &Client) -> anyhow::Result<String> {
    let group = create(client, "security-groups", json!({ "name": SECURITY_GROUP })).await?;
    for ethertype in ["IPv4", "IPv6"] {
        let rule = json!({
            "security_group_id": group, "direction": "ingress",
            "ethertype": ethertype, "remote_group_id": group,
        });
        create(client, "security-group-rules", rule).await?;
    }
    Ok(group)
}

/// Creates an object in `collection` (in the admin's project); its id.
async fn create(client: &Client, collection: &str, fields: Value) -> anyhow::Result<String> {
    let singular = collection.trim_end_matches('s').replace('-', "_");
    let body = json!({ singular.clone(): fields });
    let path = format!("/v2.0/{collection}");
    let answer = client
        .call("POST", &path, Some(&body))
        .await
        .with_context(|| format!("cannot create the lab's {singular} through Neutron"))?;
    answer[&singular]["id"]
        .as_str()
        .map(str::to_owned)
        .with_context(|| format!("Neutron's answer to POST {path} has no id: {answer}"))
}

/// calico-neutron in the fabric, under `calico-lab supervise`.
fn start_calico_neutron(lab: &Lab, openstack: &OpenStack) -> anyhow::Result<i32> {
    start_calico_neutron_with(lab, openstack, &[])
}

/// calico-neutron with `extra` arguments (after the lab's own).
fn start_calico_neutron_with(
    lab: &Lab,
    openstack: &OpenStack,
    extra: &[String],
) -> anyhow::Result<i32> {
    let binary = processes::sibling_binary("calico-neutron", "calico-neutron")?;
    let mut args = vec![
        "--neutron-url".to_owned(),
        openstack.neutron_url.clone(),
        "--etcd-endpoints".to_owned(),
        lab.etcd_endpoints(),
        "--notify-socket".to_owned(),
        utf8(&notify_socket(lab))?,
    ];
    args.extend(auth_args(lab)?);
    args.extend(extra.iter().cloned());
    let fabric = Lab::fabric_netns(&lab.name);
    supervised(lab, &fabric, &binary, &args, "calico-neutron")
}

/// Stops calico-neutron (its supervisor, which stops it) and starts it again with `extra`
/// arguments, e.g. `--change-source polling` (the benchmarks compare both modes on one lab).
pub async fn restart_calico_neutron(lab: &Lab, extra: &[String]) -> anyhow::Result<i32> {
    let openstack = openstack_of(lab)?;
    let fabric = Lab::fabric_netns(&lab.name);
    let supervisors: Vec<i32> = crate::topology::netns_pids(&fabric)
        .into_iter()
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            cmdline.contains(" supervise ") && cmdline.contains("/calico-neutron ")
        })
        .collect();
    for &pid in &supervisors {
        // SIGTERM: the supervisor stops calico-neutron and restarts nothing.
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGTERM,
        );
    }
    let gone = || {
        Ok(supervisors
            .iter()
            .all(|&p| !processes::pid_alive(p))
            .then_some(()))
    };
    poll(
        "calico-neutron's supervisor to stop",
        Duration::from_secs(15),
        gone,
    )
    .await?;
    start_calico_neutron_with(lab, openstack, extra)
}

/// `--auth-config <lab dir>/calico-auth.conf`.
fn auth_args(lab: &Lab) -> anyhow::Result<[String; 2]> {
    Ok(["--auth-config".to_owned(), utf8(&auth_config(lab))?])
}

/// A host's DHCP agent (its dnsmasq's files in `<lab dir>/<host>/dhcp`), under `supervise`.
fn start_agent(lab: &Lab, host: &Host, openstack: &OpenStack) -> anyhow::Result<i32> {
    let binary = processes::sibling_binary("calico-dhcp-agent", "calico-neutron")?;
    let state = lab.dir.join(&host.name).join("dhcp");
    std::fs::create_dir_all(&state)
        .with_context(|| format!("cannot create {}", state.display()))?;
    let mut args = vec![
        "--host".to_owned(),
        host.name.clone(),
        "--neutron-url".to_owned(),
        openstack.neutron_url.clone(),
        "--etcd-endpoints".to_owned(),
        lab.etcd_endpoints(),
        "--state-dir".to_owned(),
        utf8(&state)?,
        "--neutron-poll-interval".to_owned(),
        "2s".to_owned(),
        "--dnsmasq".to_owned(),
        DNSMASQ.to_owned(),
    ];
    args.extend(auth_args(lab)?);
    let name = format!("dhcp-agent-{}", host.name);
    supervised(lab, &host.netns, &binary, &args, &name)
}

fn supervised(
    lab: &Lab,
    netns: &str,
    binary: &Path,
    args: &[String],
    name: &str,
) -> anyhow::Result<i32> {
    let me = std::env::current_exe().context("cannot find calico-lab itself")?;
    let binary = utf8(binary)?;
    let mut all = vec!["supervise", "--restart", "always", "--", binary.as_str()];
    all.extend(args.iter().map(String::as_str));
    processes::spawn(Some(netns), &me, &all, &[], &lab.log_path(name))
}

fn utf8(path: &Path) -> anyhow::Result<String> {
    path.to_str()
        .map(str::to_owned)
        .with_context(|| format!("{} is not UTF-8", path.display()))
}

/// Runs a setup command to completion; fails with what it printed.
fn run(command: &mut Command, what: &str) -> anyhow::Result<()> {
    let out = command
        .output()
        .with_context(|| format!("cannot run {what}"))?;
    if !out.status.success() {
        bail!(
            "{what} failed ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// Waits for a setup command started earlier; fails with what it printed.
fn finish(child: std::process::Child, what: &str) -> anyhow::Result<()> {
    let out = child
        .wait_with_output()
        .with_context(|| format!("cannot wait for {what}"))?;
    if !out.status.success() {
        bail!(
            "{what} failed ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// Stops the lab's neutron-server (SIGTERM to its process group, SIGKILL after
/// [`SERVER_STOP_GRACE`]) and starts it again as `up` did: the same configuration, Calico's ML2
/// driver on `PYTHONPATH` (a copy of its command line without it cannot load the driver
/// `calico_rs` its configuration names, and exits while starting); returns its pid once it
/// answers.
pub async fn restart_server(lab: &mut Lab) -> anyhow::Result<i32> {
    let mut openstack = openstack_of(lab)?.clone();
    if let Some(pid) = openstack.server_pid {
        stop_group(pid, SERVER_STOP_GRACE).await;
    }
    // The command only: the configuration `up` wrote (with neutron's password) is kept.
    let server = server(lab, "");
    let fabric = Lab::fabric_netns(&lab.name);
    let log = lab.log_path("neutron-server");
    let pid = processes::spawn_command(Some(&fabric), &server.neutron_server(), &log)?;
    openstack.server_pid = Some(pid);
    lab.openstack = Some(openstack.clone());
    lab.save()?;
    let client = openstack.client()?;
    with_log_tail(
        wait_for_server(&client, Some(pid)).await,
        lab,
        "neutron-server",
    )?;
    Ok(pid)
}

/// How long neutron-server may take to exit after SIGTERM.
const SERVER_STOP_GRACE: Duration = Duration::from_secs(10);

/// SIGTERM to the process group `pgid` leads, SIGKILL to what is left after `grace`; returns
/// when none of it runs (its port is free again).
async fn stop_group(pgid: i32, grace: Duration) {
    let group = nix::unistd::Pid::from_raw(pgid);
    // ESRCH: nothing of the group is left.
    let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGTERM);
    let deadline = Instant::now() + grace;
    while group_runs(pgid) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
    while group_runs(pgid) && Instant::now() < deadline + Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Whether a process of group `pgid` runs (zombies, which hold no port, do not count).
fn group_runs(pgid: i32) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    let pgid = pgid.to_string();
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .any(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let Some((_, rest)) = stat.rsplit_once(')') else {
                return false;
            };
            // After the command name: state, ppid, pgrp.
            let fields: Vec<&str> = rest.split_whitespace().take(3).collect();
            matches!(fields.as_slice(), [state, _, group] if *state != "Z" && *group == pgid)
        })
}

/// neutron-server's own log (beside its stdout, `neutron-server.log` in the lab's directory).
pub fn server_log(lab: &Lab) -> PathBuf {
    state_dir(lab).join("neutron-server.log")
}
