//! `calico-dhcp-agent`: serves this compute host's OpenStack VMs by DHCP through dnsmasq.

use std::process::ExitCode;

use calico_daemon::Daemon;
use calico_datastore::connect_retrying;
use calico_openstack::dhcp::agent::{self, Options};
use calico_openstack::dhcp::config::DhcpArgs;
use clap::Parser;

fn main() -> ExitCode {
    let args = DhcpArgs::parse();
    let log = args.log.clone();
    Daemon::new("calico-dhcp-agent")
        .log("--log (CALICO_DHCP_LOG)", &log)
        .run(run(args))
}

async fn run(args: DhcpArgs) -> anyhow::Result<()> {
    // Keystone first: a refused setting ends the program before etcd is touched.
    let neutron = calico_neutron::neutron_client(&args.neutron_url, &args.auth).await?;
    let (host, host_source) = match &args.host {
        Some(host) => (host.clone(), "--host"),
        None => (calico_linux::hostname(), "the kernel's hostname"),
    };
    let options = Options {
        host,
        interface: args.interface.clone(),
        tap_prefix: args.tap_prefix.clone(),
        state_dir: args.state_dir.clone(),
        dnsmasq: args.dnsmasq.clone(),
        lease_time: args.lease_time,
        neutron_poll_interval: args.neutron_poll_interval,
        dns_port: args.dns_port,
    };
    anyhow::ensure!(
        options.dnsmasq.exists(),
        "--dnsmasq {}: no such file (install dnsmasq-base)",
        options.dnsmasq.display()
    );
    tracing::info!(
        host = options.host,
        host_source,
        neutron = args.neutron_url,
        etcd = args.etcd.etcd_endpoints,
        interface = options.interface,
        taps = format!("{}*", options.tap_prefix),
        state_dir = %options.state_dir.display(),
        dnsmasq = %options.dnsmasq.display(),
        lease_time = ?options.lease_time,
        dns_port = options.dns_port,
        "starting"
    );
    // A daemon: wait for etcd as long as it takes (one warning per attempt).
    let store = connect_retrying(&args.etcd.config(), "calico-dhcp-agent", None).await?;
    agent::run(&options, neutron, &store, calico_daemon::shutdown()).await?;
    tracing::info!("stopped");
    Ok(())
}
