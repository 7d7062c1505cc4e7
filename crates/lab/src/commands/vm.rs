//! `calico-lab vm boot|delete`: VMs on an `up --openstack` lab, plugged as Nova plugs them.

use calico_lab::Lab;
use calico_lab::openstack::vm::{self, VmSpec};
use clap::Subcommand;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: VmCmd,
}

#[derive(Debug, Subcommand)]
enum VmCmd {
    /// Creates a port through Neutron's API (bound to the host), a VM namespace plugged by a
    /// TAP-named veth, and DHCP clients in it; returns when the VM has the port's addresses
    /// (dual-stack when the network has an IPv6 subnet: DHCPv6 and router advertisements).
    Boot {
        #[arg(long)]
        host: String,
        /// Network id or name (default: the lab's network `lab-net`).
        #[arg(long)]
        network: Option<String>,
        /// Security group id or name (repeatable; default: the lab's group `lab-default`).
        #[arg(long = "security-group")]
        security_groups: Vec<String>,
        /// The VM's name (default: `vm` and the next free number).
        #[arg(long)]
        name: Option<String>,
        /// A port made beforehand (`openstack port create`), by id or name: bound to --host and
        /// plugged instead of a new port; `vm delete` unbinds it and keeps it, as Nova does.
        #[arg(long, conflicts_with_all = ["network", "security_groups"])]
        port: Option<String>,
    },
    /// Deletes a VM: its port in Neutron (unbound and kept if it was given with --port), its
    /// namespace, TAP and DHCP client.
    Delete { name: String },
}

pub async fn run(name: &str, args: Args) -> anyhow::Result<()> {
    let mut lab = Lab::load(name)?;
    match args.command {
        VmCmd::Boot {
            host,
            network,
            security_groups,
            name: vm_name,
            port,
        } => {
            let name = vm_name.unwrap_or_else(|| vm::next_name(&lab));
            let spec = VmSpec {
                host,
                name,
                network,
                security_groups,
                port,
            };
            let vm = vm::boot(&mut lab, &spec).await?;
            let ip6 = vm.ip6.map(|ip6| format!(" and {ip6}")).unwrap_or_default();
            println!(
                "vm {} on {}: port {}, address {}{ip6} ({}, {})",
                vm.name, vm.host, vm.port, vm.ip, vm.tap, vm.mac
            );
        }
        VmCmd::Delete { name: vm_name } => {
            vm::delete(&mut lab, &vm_name).await?;
            println!("vm {vm_name} deleted");
        }
    }
    Ok(())
}
