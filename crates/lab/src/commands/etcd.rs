//! `calico-lab etcd`: the lab's etcd members: which leads, and stopping or starting one (to
//! see what losing a member, the leader or the quorum does).

use std::time::Duration;

use calico_lab::{Lab, members, processes};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Every member: its client URL on the fabric, whether it runs, and which one leads.
    Status,
    /// SIGKILLs members (their data stays): `stop etcd1 etcd2` loses the quorum at once.
    Stop {
        #[arg(required = true)]
        members: Vec<String>,
    },
    /// Starts stopped members again with their data: they rejoin the cluster (give every
    /// stopped member in one command to bring a stopped cluster back: a lone member has no
    /// quorum to elect a leader with).
    Start {
        #[arg(required = true)]
        members: Vec<String>,
    },
}

pub async fn run(name: &str, args: Args) -> anyhow::Result<()> {
    let mut lab = Lab::load(name)?;
    match args.command {
        Command::Status => {
            let leader = members::leader(&lab).unwrap_or_default();
            for member in &lab.etcd {
                let running = member.pid.is_some_and(processes::pid_alive);
                let role = match (running, member.name == leader) {
                    (false, _) => "stopped",
                    (true, true) => "leader",
                    (true, false) => "follower",
                };
                println!("{} {} {role}", member.name, member.url());
            }
        }
        Command::Stop { members: names } => {
            for name in &names {
                members::stop(&mut lab, name)?;
            }
        }
        Command::Start { members: names } => {
            for name in &names {
                members::restart(&mut lab, name)?;
            }
            members::wait_for_leader(&lab, Duration::from_secs(30)).await?;
        }
    }
    Ok(())
}
