//! The lab's processes: spawning them (the relays to etcd's members, Felix under its supervisor,
//! calico-node, echo servers), finding them (by pid, by namespace, by command line), stopping
//! them, and restarting a host's Felix.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::logs::log_hint;
use crate::poll::poll;
use crate::sh;
use crate::state::{ETCD_PORT, EtcdMember, Host, Lab, SERVED_PORTS, Workload};

/// The relay that lets the caller reach etcd: its pid and the port it listens on (on
/// 127.0.0.1 in the caller's namespace).
#[derive(Debug, Clone)]
pub struct Relay {
    pub pid: i32,
    pub port: String,
}

/// Starts the relay (`calico-lab relay`) to one etcd member and waits until it listens.
pub async fn start_relay(lab: &Lab, member: &EtcdMember) -> anyhow::Result<Relay> {
    let to = format!("{}:{ETCD_PORT}", member.ip);
    start_relay_to(lab, &to, &member.relay_name()).await
}

/// Starts a relay to `to` (an address on the fabric), its log and port file named `name`, and
/// waits until it listens.
pub async fn start_relay_to(lab: &Lab, to: &str, name: &str) -> anyhow::Result<Relay> {
    let fabric = Lab::fabric_netns(&lab.name);
    let port_file = lab.dir.join(format!("{name}.port"));
    let me = std::env::current_exe().context("cannot find the calico-lab binary")?;
    let relay_args = ["relay", "--netns", &fabric, "--to", to, "--port-file"];
    let mut args: Vec<&str> = relay_args.to_vec();
    args.push(port_file.to_str().context("state dir is not UTF-8")?);
    let log = lab.log_path(name);
    let pid = spawn(None, &me, &args, &[], &log)?;
    let port = poll("the relay to listen", Duration::from_secs(10), || {
        Ok(std::fs::read_to_string(&port_file)
            .ok()
            .filter(|p| !p.is_empty()))
    })
    .await
    .with_context(|| log_hint(lab, name))?;
    Ok(Relay { pid, port })
}

/// The calico-node binary: beside calico-lab, else on PATH.
pub fn node_binary() -> anyhow::Result<PathBuf> {
    sibling_binary("calico-node", "calico-node")
}

/// Starts a host's Felix under `calico-lab supervise`, with the lab's settings plus `extra`.
pub fn start_felix(
    lab: &Lab,
    host: &Host,
    extra: &[(String, String)],
    felix: &Path,
) -> anyhow::Result<i32> {
    let mut env = vec![
        ("FELIX_ETCDENDPOINTS".to_owned(), lab.etcd_endpoints()),
        ("FELIX_FELIXHOSTNAME".to_owned(), host.name.clone()),
        (
            "FELIX_PROMETHEUSMETRICSENABLED".to_owned(),
            "true".to_owned(),
        ),
        ("FELIX_LOGFILEPATH".to_owned(), "none".to_owned()),
    ];
    env.extend(lab.felix_env.iter().cloned());
    env.extend(extra.iter().cloned());
    // Under `calico-lab supervise`, which starts Felix again when it exits to restart.
    let me = std::env::current_exe().context("cannot find calico-lab itself")?;
    let felix = felix
        .to_str()
        .context("the calico-felix path is not UTF-8")?;
    spawn(
        Some(&host.netns),
        &me,
        &["supervise", "--", felix],
        &env,
        &lab.log_path(&format!("felix-{}", host.name)),
    )
}

/// calico-node for BGP (the lab runs Felix itself, so that tests can kill and restart it):
/// it registers the host's fabric addresses and runs BIRD with the configuration it renders.
pub fn start_node(lab: &Lab, host: &Host, node: &Path) -> anyhow::Result<i32> {
    let run_dir = lab.dir.join(&host.name);
    let run_dir = run_dir.to_str().context("state dir is not UTF-8")?;
    let (ip, ip6) = (host.ip.to_string(), host.ip6.to_string());
    let endpoint = lab.etcd_endpoints();
    let args = [
        "--hostname",
        &host.name,
        "--ip",
        &ip,
        "--ip6",
        &ip6,
        "--felix",
        "none",
        "--etcd-endpoints",
        &endpoint,
        "--run-dir",
        run_dir,
    ];
    spawn(
        Some(&host.netns),
        node,
        &args,
        &[],
        &lab.log_path(&format!("node-{}", host.name)),
    )
}

/// A binary beside calico-lab, else on PATH.
pub(crate) fn sibling_binary(name: &str, package: &str) -> anyhow::Result<PathBuf> {
    let beside = std::env::current_exe()?.with_file_name(name);
    if beside.is_file() {
        return Ok(beside);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
        .with_context(|| format!("{name} not found beside calico-lab or on PATH; build it with `cargo build -p {package}`"))
}

/// Kills a host's Felix (SIGKILL) and starts it again (the binary `up` started), with the
/// lab's settings plus `extra`.
pub fn restart_felix(lab: &mut Lab, host: &str, extra: &[(String, String)]) -> anyhow::Result<i32> {
    // The binary `up` started, as the lab remembers it; else as `up` would find one.
    let felix = match &lab.felix {
        Some(felix) => felix.clone(),
        None => felix_binary(None)?,
    };
    lab.host(host)?;
    let index = lab
        .hosts
        .iter()
        .position(|h| h.name == host)
        .expect("checked");
    kill_felix(lab, index);
    let pid = start_felix(lab, &lab.hosts[index], extra, &felix)?;
    lab.hosts[index].felix_pid = Some(pid);
    lab.save()?;
    Ok(pid)
}

/// SIGKILLs the Felix of the `index`th host and its supervisor (their process group); the
/// state forgets its pid (saving it is the caller's).
pub fn kill_felix(lab: &mut Lab, index: usize) {
    if let Some(pid) = lab.hosts[index].felix_pid.take() {
        let _ = nix::sys::signal::killpg(Pid::from_raw(pid), Signal::SIGKILL);
        stop_pids(&[pid]);
    }
}

/// Whether a process runs (a zombie does not).
pub fn pid_alive(pid: i32) -> bool {
    // A zombie is dead too.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit(')')
            .next()
            .is_some_and(|rest| !rest.trim_start().starts_with('Z'))
    })
}

/// The calico-felix binary: `given`, `$CALICO_FELIX`, beside calico-lab, else on PATH.
pub fn felix_binary(given: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(path) = given {
        return Ok(path.to_owned());
    }
    if let Some(path) = std::env::var_os("CALICO_FELIX") {
        return Ok(PathBuf::from(path));
    }
    sibling_binary("calico-felix", "calico-felix")
}

/// The relays serving the lab whose fabric namespace is `fabric`.
pub fn relay_pids(fabric: &str) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
                return false;
            };
            let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
            args.iter().any(|a| *a == b"relay")
                && args
                    .windows(2)
                    .any(|w| w[0] == b"--netns" && w[1] == fabric.as_bytes())
        })
        .collect()
}

/// SIGKILLs the processes and waits (briefly) until they are gone.
pub fn stop_pids(pids: &[i32]) {
    for &pid in pids {
        let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while pids.iter().any(|&p| pid_alive(p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Starts the workload's echo server; its pid.
pub fn start_echo_server(lab: &Lab, w: &Workload) -> anyhow::Result<i32> {
    let me = std::env::current_exe()?;
    // A fresh log: `ready::serving` looks in it for the server's word.
    let _ = std::fs::remove_file(lab.log_path(&w.name));
    let ports: Vec<String> = SERVED_PORTS.iter().map(u16::to_string).collect();
    let ports = ports.join(",");
    spawn(
        Some(&w.netns),
        &me,
        &["serve", "--ports", &ports],
        &[],
        &lab.log_path(&w.name),
    )
}

/// Starts a process that outlives the lab command: in its own process group, output to `log`.
pub fn spawn(
    netns: Option<&str>,
    program: &Path,
    args: &[&str],
    env: &[(String, String)],
    log: &Path,
) -> anyhow::Result<i32> {
    let mut command = match netns {
        Some(ns) => sh::command_in(ns, program),
        None => Command::new(program),
    };
    command.args(args).envs(env.iter().map(|(k, v)| (k, v)));
    launch(command, program, log)
}

/// [`spawn`] of a command built elsewhere (its program, arguments and environment).
pub fn spawn_command(netns: Option<&str>, template: &Command, log: &Path) -> anyhow::Result<i32> {
    let mut command = match netns {
        Some(ns) => sh::command_in(ns, template.get_program()),
        None => Command::new(template.get_program()),
    };
    command.args(template.get_args());
    for (key, value) in template.get_envs() {
        match value {
            Some(value) => command.env(key, value),
            None => command.env_remove(key),
        };
    }
    launch(command, Path::new(template.get_program()), log)
}

fn launch(mut command: Command, program: &Path, log: &Path) -> anyhow::Result<i32> {
    // Appended to: the log of a process started again keeps what the one before said.
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .with_context(|| format!("cannot create {}", log.display()))?;
    let child = command
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .process_group(0)
        .spawn()
        .with_context(|| format!("cannot start {}", program.display()))?;
    Ok(child.id() as i32)
}
