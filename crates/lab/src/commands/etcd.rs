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
    /// SIGKILLs a member (its data stays).
    Stop { member: String },
    /// Starts a stopped member again with its data: it rejoins the cluster.
    Start { member: String },
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
        Command::Stop { member } => members::stop(&mut lab, &member)?,
        Command::Start { member } => {
            members::restart(&mut lab, &member)?;
            members::wait_for_leader(&lab, Duration::from_secs(30)).await?;
        }
    }
    Ok(())
}
