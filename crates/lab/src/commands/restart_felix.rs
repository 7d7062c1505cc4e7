//! `calico-lab restart-felix HOST`: SIGKILL a host's Felix and start it again.

use calico_lab::{Lab, processes};

use super::felix_env;

#[derive(Debug, clap::Args)]
pub struct Args {
    host: String,
    #[arg(long = "felix-config", value_name = "NAME=VALUE")]
    felix_config: Vec<String>,
}

pub fn run(name: &str, args: Args) -> anyhow::Result<()> {
    let mut lab = Lab::load(name)?;
    let extra = felix_env(&args.felix_config)?;
    let pid = processes::restart_felix(&mut lab, &args.host, &extra)?;
    println!("Felix on {} restarted (pid {pid})", args.host);
    Ok(())
}
