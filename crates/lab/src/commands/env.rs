//! `calico-lab env`: `export` lines for calicoctl and etcdctl (and `calicoctl flows`).

use calico_lab::Lab;

pub fn run(name: &str) -> anyhow::Result<()> {
    let lab = Lab::load(name)?;
    println!("export ETCD_ENDPOINTS={}", lab.client_endpoint);
    println!("export ETCDCTL_API=3");
    println!("export ETCDCTL_ENDPOINTS={}", lab.client_endpoint);
    if let Some(url) = &lab.flows_url {
        println!("export CALICO_FLOWS_URL={url}");
    }
    Ok(())
}
