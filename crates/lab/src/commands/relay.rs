//! `calico-lab relay` (hidden): forwards 127.0.0.1 here to etcd on the fabric. It binds before
//! it enters the fabric, on a runtime of its own, so it runs before the main runtime starts.

use std::net::SocketAddr;
use std::path::PathBuf;

use calico_lab::relay;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[arg(long)]
    netns: String,
    #[arg(long)]
    to: SocketAddr,
    #[arg(long)]
    port_file: PathBuf,
}

pub fn run(args: &Args) -> anyhow::Result<()> {
    relay::run(&args.netns, args.to, &args.port_file)
}
