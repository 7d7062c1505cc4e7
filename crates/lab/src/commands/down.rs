//! `calico-lab down`: removes every namespace, process and file of the lab.

use calico_lab::cluster;

pub fn run(name: &str) -> anyhow::Result<()> {
    let removed = cluster::down(name)?;
    println!(
        "lab {name:?} is down ({} namespaces removed)",
        removed.len()
    );
    Ok(())
}
