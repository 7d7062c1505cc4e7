//! The driver's command line (each flag also an environment variable), named like
//! `calico-node`'s and `calicoctl`'s: `--hostname`/`NODENAME`, `--etcd-*`/`ETCD_*`.

use std::path::PathBuf;
use std::time::Duration;

use calico_datastore::EtcdArgs;
use clap::Parser;

/// Where dockerd looks for plugin sockets (whatever its `--exec-root`).
pub const PLUGIN_DIR: &str = "/run/docker/plugins";

/// Calico's Docker network and IPAM driver (libnetwork remote plugin protocol).
#[derive(Debug, Clone, Parser)]
#[command(name = "calico-libnetwork", version)]
pub struct Args {
    /// The plugin's name: `docker network create --driver NAME --ipam-driver NAME`; the
    /// socket is /run/docker/plugins/NAME.sock unless --socket says otherwise
    #[arg(long, env = "CALICO_LIBNETWORK_NAME", default_value = "calico")]
    pub plugin_name: String,
    /// The unix socket to serve on (default: /run/docker/plugins/<plugin-name>.sock)
    #[arg(long, env = "CALICO_LIBNETWORK_SOCKET")]
    pub socket: Option<PathBuf>,
    /// The IPAM driver's second name, Calico's upstream plugin's `--ipam-driver calico-ipam`
    /// (default: <plugin-name>-ipam); served on its own socket beside the first
    #[arg(long, env = "CALICO_LIBNETWORK_IPAM_NAME")]
    pub ipam_plugin_name: Option<String>,
    /// The unix socket of the IPAM name (default: <ipam-plugin-name>.sock in the directory of
    /// --socket)
    #[arg(long, env = "CALICO_LIBNETWORK_IPAM_SOCKET")]
    pub ipam_socket: Option<PathBuf>,
    /// Seconds between two looks for what containers removed while the driver was down left
    /// behind (endpoint keys, veths, addresses)
    #[arg(long, env = "CALICO_LIBNETWORK_RECONCILE_INTERVAL", default_value = "60",
          value_parser = seconds)]
    pub reconcile_interval: Duration,
    /// This host's name in the datastore (default: the kernel's hostname)
    #[arg(long, env = "NODENAME")]
    pub hostname: Option<String>,
    /// dockerd's API socket, asked for network names (which name their profiles)
    #[arg(long, env = "DOCKER_SOCKET", default_value = "/var/run/docker.sock")]
    pub docker_socket: PathBuf,
    #[command(flatten)]
    pub etcd: EtcdArgs,
}

impl Args {
    /// The socket path.
    pub fn socket(&self) -> PathBuf {
        self.socket
            .clone()
            .unwrap_or_else(|| PathBuf::from(PLUGIN_DIR).join(format!("{}.sock", self.plugin_name)))
    }

    /// The IPAM name: given, or `<plugin-name>-ipam` (`calico-ipam` for the default name).
    pub fn ipam_plugin_name(&self) -> String {
        self.ipam_plugin_name
            .clone()
            .unwrap_or_else(|| format!("{}-ipam", self.plugin_name))
    }

    /// The IPAM name's socket: given, or beside the network driver's.
    pub fn ipam_socket(&self) -> PathBuf {
        self.ipam_socket.clone().unwrap_or_else(|| {
            let socket = self.socket();
            let dir = socket.parent().map(PathBuf::from).unwrap_or_default();
            dir.join(format!("{}.sock", self.ipam_plugin_name()))
        })
    }

    /// The host's name: given, or the kernel's.
    pub fn hostname(&self) -> String {
        self.hostname.clone().unwrap_or_else(calico_linux::hostname)
    }
}

/// A whole number of seconds, at least one.
fn seconds(text: &str) -> Result<Duration, String> {
    match text.parse::<u64>() {
        Ok(n) if n >= 1 => Ok(Duration::from_secs(n)),
        _ => Err(format!(
            "{text:?} is not a whole number of seconds of at least 1"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_socket_follows_the_plugin_name() {
        let args =
            Args::try_parse_from(["calico-libnetwork", "--plugin-name", "calico-7"]).unwrap();
        assert_eq!(
            args.socket(),
            PathBuf::from("/run/docker/plugins/calico-7.sock")
        );
        let args = Args::try_parse_from(["x", "--socket", "/tmp/p.sock"]).unwrap();
        assert_eq!(args.socket(), PathBuf::from("/tmp/p.sock"));
    }

    #[test]
    fn the_ipam_name_is_the_plugin_name_with_ipam_beside_its_socket() {
        let args = Args::try_parse_from(["x"]).unwrap();
        assert_eq!(args.ipam_plugin_name(), "calico-ipam");
        assert_eq!(
            args.ipam_socket(),
            PathBuf::from("/run/docker/plugins/calico-ipam.sock")
        );
        let args =
            Args::try_parse_from(["x", "--plugin-name", "c7", "--socket", "/tmp/p.sock"]).unwrap();
        assert_eq!(args.ipam_plugin_name(), "c7-ipam");
        assert_eq!(args.ipam_socket(), PathBuf::from("/tmp/c7-ipam.sock"));
        let args =
            Args::try_parse_from(["x", "--ipam-plugin-name", "ci", "--ipam-socket", "/s"]).unwrap();
        assert_eq!(
            (args.ipam_plugin_name(), args.ipam_socket()),
            ("ci".to_owned(), PathBuf::from("/s"))
        );
    }

    #[test]
    fn the_reconcile_interval_is_whole_seconds() {
        let args = Args::try_parse_from(["x"]).unwrap();
        assert_eq!(args.reconcile_interval, Duration::from_secs(60));
        let args = Args::try_parse_from(["x", "--reconcile-interval", "2"]).unwrap();
        assert_eq!(args.reconcile_interval, Duration::from_secs(2));
        let err = Args::try_parse_from(["x", "--reconcile-interval", "0"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("--reconcile-interval"), "{err}");
        assert!(
            err.contains("not a whole number of seconds of at least 1"),
            "{err}"
        );
    }

    #[test]
    fn etcd_endpoints_are_split_on_commas() {
        let args = Args::try_parse_from(["x", "--etcd-endpoints", "http://a:2379, http://b:2379,"])
            .unwrap();
        assert_eq!(
            args.etcd.config().endpoints,
            ["http://a:2379", "http://b:2379"]
        );
    }
}
