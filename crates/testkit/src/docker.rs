//! A real dockerd for one test, in a network namespace, with all its state in one directory.
//!
//! | piece | what it owns | on `Drop` |
//! | --- | --- | --- |
//! | [`NsProcess`] | a daemon started with `nsenter --net=`, its log file | SIGTERM, SIGKILL after 10 s |
//! | [`Dockerd`] | data-root, exec-root, socket, pidfile under `dir`; `--cgroup-parent=/<netns>` | containers and custom networks removed, daemon stopped, cgroup parent removed |
//! | [`PluginSocket`] | `/run/docker/plugins/<name>.sock` | removed |
//!
//! dockerd runs with `--iptables=false --ip-forward=false --ip-masq=false --bridge=none`: it
//! leaves the namespace's firewall and forwarding to the test. Debug a run from another shell
//! with `nsenter --net=/run/netns/<ns> docker -H <socket> ...`.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::Duration;

use crate::eventually;

/// The image [`Dockerd::import_busybox`] imports and [`Dockerd::run_container`] runs.
pub const BUSYBOX_IMAGE: &str = "bb:local";

/// The busybox applets in the image's `/bin`.
const APPLETS: &[&str] = &["sh", "sleep", "true", "cat", "ip", "ping", "ping6"];

/// A long-running process in a network namespace, its output in a log file; stopped with
/// SIGTERM (then SIGKILL) on drop.
#[derive(Debug)]
pub struct NsProcess {
    child: Child,
    log: PathBuf,
}

impl NsProcess {
    /// Starts `program args` in the named namespace, stdout and stderr to `log`.
    pub fn start(
        netns: &str,
        log: PathBuf,
        program: &Path,
        args: &[impl AsRef<OsStr>],
    ) -> NsProcess {
        NsProcess::start_with_env(netns, log, program, args, &[])
    }

    /// [`NsProcess::start`] with extra environment variables.
    pub fn start_with_env(
        netns: &str,
        log: PathBuf,
        program: &Path,
        args: &[impl AsRef<OsStr>],
        env: &[(&str, &str)],
    ) -> NsProcess {
        let out = std::fs::File::create(&log)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", log.display()));
        // nsenter execs the program in place: the child's pid is the program's.
        let child = Command::new("nsenter")
            .arg(format!("--net=/run/netns/{netns}"))
            .arg(program)
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("log file"))
            .stderr(out)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", program.display()));
        NsProcess { child, log }
    }

    /// Everything the process wrote so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Its exit status, if it has exited.
    pub fn try_wait(&mut self) -> std::io::Result<Option<ExitStatus>> {
        self.child.try_wait()
    }

    /// SIGKILLs it (a crash, for tests of what survives one) and reaps it.
    pub fn kill(&mut self) {
        self.child.kill().expect("kill the process");
        self.child.wait().expect("the process exits");
    }
}

impl Drop for NsProcess {
    fn drop(&mut self) {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).output();
        for _ in 0..100 {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        eprintln!("{} did not stop on SIGTERM: killing it", self.log.display());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// dockerd in a namespace with all its state in `dir`. Drop removes its containers and
/// custom networks (through their drivers, which must still run), stops the daemon and removes
/// the cgroup parent it leaves behind.
#[derive(Debug)]
pub struct Dockerd {
    socket: String,
    dir: PathBuf,
    /// The `--cgroup-parent`, removed from every hierarchy once dockerd has stopped.
    cgroup: String,
    daemon: Option<NsProcess>,
}

impl Dockerd {
    /// Starts dockerd in the named namespace (log in `dir/dockerd.log`) and waits until it
    /// answers. A `dir` an earlier dockerd used keeps its images and containers.
    pub fn start(netns: &str, dir: &Path) -> Dockerd {
        let d = dir.display();
        let config = format!(r#"{{"deprecated-key-path": "{d}/key.json"}}"#);
        std::fs::write(dir.join("daemon.json"), config).expect("daemon.json");
        let args = [
            format!("--config-file={d}/daemon.json"),
            format!("--data-root={d}/data"),
            format!("--exec-root={d}/exec"),
            format!("--host=unix://{d}/docker.sock"),
            format!("--pidfile={d}/docker.pid"),
            format!("--cgroup-parent=/{netns}"),
            "--iptables=false".into(),
            "--ip-forward=false".into(),
            "--ip-masq=false".into(),
            "--bridge=none".into(),
        ];
        let daemon = NsProcess::start(netns, dir.join("dockerd.log"), "dockerd".as_ref(), &args);
        let dockerd = Dockerd {
            socket: format!("unix://{d}/docker.sock"),
            dir: dir.to_owned(),
            cgroup: netns.to_owned(),
            daemon: Some(daemon),
        };
        eprintln!(
            "dockerd: nsenter --net=/run/netns/{netns} docker -H {}",
            dockerd.socket
        );
        eventually("dockerd answers", Duration::from_secs(30), || {
            let out = dockerd.run(&["version", "--format", "{{.Server.Version}}"]);
            out.status
                .success()
                .then_some(())
                .ok_or_else(|| String::from_utf8_lossy(&out.stderr).into_owned())
        });
        dockerd
    }

    /// `unix://<dir>/docker.sock`, for `docker -H`.
    pub fn socket(&self) -> &str {
        &self.socket
    }

    /// Stops dockerd (SIGTERM: it stops its containers), leaving them to the next one.
    pub fn stop(mut self) {
        self.daemon.take();
    }

    /// `docker -H <socket> args`.
    pub fn run(&self, args: &[&str]) -> Output {
        Command::new("docker")
            .args(["-H", &self.socket])
            .args(args)
            .output()
            .expect("docker runs")
    }

    /// [`Dockerd::run`] that must succeed; its trimmed stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "docker {} failed: {}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// Imports a busybox-static root file system as [`BUSYBOX_IMAGE`] (applets: sh, sleep,
    /// true, cat, ip, ping, ping6).
    pub fn import_busybox(&self) {
        let root = self.dir.join("rootfs");
        busybox_rootfs(&root);
        let import = format!(
            "tar -C {} -c . | docker -H {} import - {BUSYBOX_IMAGE}",
            root.display(),
            self.socket
        );
        let out = Command::new("sh")
            .args(["-c", &import])
            .output()
            .expect("sh runs");
        assert!(
            out.status.success(),
            "docker import: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// `docker run -d --name <name> --net <network> [extra] bb:local sleep 600`, unchecked.
    pub fn run_container(&self, name: &str, network: &str, extra: &[&str]) -> Output {
        let mut args = vec!["run", "-d", "--name", name, "--net", network];
        args.extend_from_slice(extra);
        args.extend_from_slice(&[BUSYBOX_IMAGE, "sleep", "600"]);
        self.run(&args)
    }

    /// The container's IPv4 address.
    pub fn ip_of(&self, container: &str) -> String {
        self.ok(&[
            "inspect",
            "-f",
            "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
            container,
        ])
    }

    /// Whether one ping from the container `from` to `to` is answered within a second.
    pub fn pings(&self, from: &str, to: &str) -> bool {
        self.run(&["exec", from, "ping", "-c", "1", "-W", "1", to])
            .status
            .success()
    }

    /// Waits up to `within` for [`Dockerd::pings`].
    pub fn wait_for_ping(&self, from: &str, to: &str, within: Duration) {
        let what = format!("{from} pings {to} (docker -H {})", self.socket);
        eventually(&what, within, || {
            self.pings(from, to)
                .then_some(())
                .ok_or_else(|| "no answer".to_owned())
        });
    }
}

impl Drop for Dockerd {
    fn drop(&mut self) {
        if self.daemon.is_none() {
            return; // stopped on purpose: the containers are the next dockerd's
        }
        let ids = self.run(&["ps", "-aq"]);
        for id in String::from_utf8_lossy(&ids.stdout).split_whitespace() {
            let _ = self.run(&["rm", "-f", id]);
        }
        let networks = self.run(&["network", "ls", "-q", "--filter", "type=custom"]);
        for id in String::from_utf8_lossy(&networks.stdout).split_whitespace() {
            let _ = self.run(&["network", "rm", id]);
        }
        self.daemon.take();
        // dockerd leaves its (empty) cgroup parent in each hierarchy (cgroup v1), or at the
        // root (v2).
        let _ = std::fs::remove_dir(Path::new("/sys/fs/cgroup").join(&self.cgroup));
        for hierarchy in std::fs::read_dir("/sys/fs/cgroup")
            .into_iter()
            .flatten()
            .flatten()
        {
            let _ = std::fs::remove_dir(hierarchy.path().join(&self.cgroup));
        }
    }
}

/// A busybox-static root file system at `root`, built once.
fn busybox_rootfs(root: &Path) {
    if root.join("bin/busybox").is_file() {
        return;
    }
    std::fs::create_dir_all(root.join("bin")).expect("rootfs");
    let busybox = ["/bin/busybox", "/usr/bin/busybox"]
        .into_iter()
        .find(|p| Path::new(p).is_file())
        .expect("busybox is installed (busybox-static)");
    std::fs::copy(busybox, root.join("bin/busybox")).expect("copy busybox");
    for applet in APPLETS {
        std::os::unix::fs::symlink("busybox", root.join("bin").join(applet)).expect("applet");
    }
}

/// A Docker plugin's socket, `/run/docker/plugins/<name>.sock`, removed on drop whatever state
/// the plugin died in: a stale socket makes every dockerd on the machine retry its calls for
/// 15 s.
#[derive(Debug)]
pub struct PluginSocket {
    path: PathBuf,
}

impl PluginSocket {
    pub fn new(plugin: &str) -> PluginSocket {
        let path = PathBuf::from(format!("/run/docker/plugins/{plugin}.sock"));
        PluginSocket { path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Removes a dead plugin's socket, so that [`PluginSocket::wait`] waits for the next one.
    pub fn remove(&self) {
        let _ = std::fs::remove_file(&self.path);
    }

    /// Waits up to 10 s for `plugin` to create the socket; fails with its log.
    pub fn wait(&self, plugin: &NsProcess) {
        eventually("the plugin's socket", Duration::from_secs(10), || {
            self.path.exists().then_some(()).ok_or_else(|| plugin.log())
        });
    }
}

impl Drop for PluginSocket {
    fn drop(&mut self) {
        self.remove();
    }
}
