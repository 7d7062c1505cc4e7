//! `calico-lab restart-neutron`: stops the lab's neutron-server and starts it again as `up
//! --openstack` did (Calico's driver on its `PYTHONPATH`); returns when it answers.

use calico_lab::{Lab, openstack};

pub async fn run(name: &str) -> anyhow::Result<()> {
    let mut lab = Lab::load(name)?;
    let pid = openstack::restart_server(&mut lab).await?;
    println!("neutron-server restarted (pid {pid}) and answering");
    Ok(())
}
