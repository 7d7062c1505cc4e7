//! The driver's command line (each flag also an environment variable), named like
//! `calico-node`'s and `calicoctl`'s: `--hostname`/`NODENAME`, `--etcd-*`/`ETCD_*`.

use std::path::PathBuf;

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

    /// The host's name: given, or the kernel's.
    pub fn hostname(&self) -> String {
        self.hostname.clone().unwrap_or_else(calico_linux::hostname)
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
    fn etcd_endpoints_are_split_on_commas() {
        let args = Args::try_parse_from(["x", "--etcd-endpoints", "http://a:2379, http://b:2379,"])
            .unwrap();
        assert_eq!(
            args.etcd.config().endpoints,
            ["http://a:2379", "http://b:2379"]
        );
    }
}
