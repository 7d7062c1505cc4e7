//! `calico-lab restart-neutron`: stops the lab's neutron-server and starts it again as `up
//! --openstack` did (Calico's driver on its `PYTHONPATH`); returns when it answers. With
//! `--calico-neutron`, restarts calico-neutron instead (under its supervisor), with the
//! arguments after `--` added to the lab's own, e.g. `-- --change-source polling`.

use calico_lab::{Lab, openstack};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Restart calico-neutron (not neutron-server), with the arguments after `--` added
    #[arg(long)]
    calico_neutron: bool,
    /// calico-neutron's extra arguments (with --calico-neutron only)
    #[arg(last = true)]
    extra: Vec<String>,
}

pub async fn run(name: &str, args: Args) -> anyhow::Result<()> {
    let mut lab = Lab::load(name)?;
    if args.calico_neutron {
        let pid = openstack::restart_calico_neutron(&lab, &args.extra).await?;
        println!("calico-neutron restarted under its supervisor (pid {pid})");
        return Ok(());
    }
    anyhow::ensure!(
        args.extra.is_empty(),
        "arguments after `--` ({}) are calico-neutron's: give --calico-neutron",
        args.extra.join(" ")
    );
    let pid = openstack::restart_server(&mut lab).await?;
    println!("neutron-server restarted (pid {pid}) and answering");
    Ok(())
}
