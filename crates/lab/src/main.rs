//! The `calico-lab` command line: its definition and the dispatch to `commands/` (one module
//! per command).

mod commands;

use clap::{Parser, Subcommand};

/// A Calico cluster on one machine, in network namespaces: a fabric with etcd, hosts running
/// calico-felix, and workloads plugged in as the CNI plugin would. Needs root.
#[derive(Debug, Parser)]
#[command(name = "calico-lab", version)]
struct Cli {
    /// Which lab (several can run side by side); namespaces are named `<lab>.<host>[.<workload>]`.
    #[arg(long, global = true, env = "CALICO_LAB", default_value = "calico-lab")]
    lab: String,
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Brings a lab up: fabric bridge and etcd, N hosts each running calico-felix and
    /// calico-node, Ready set; returns when every Felix is in sync and has programmed everything,
    /// and every BGP session is established (with --subnets: every session within a subnet).
    Up(commands::up::Args),
    /// Prints `export` lines so calicoctl and etcdctl reach the lab's etcd.
    Env,
    /// The etcd members: `status` (which leads), `stop MEMBER`, `start MEMBER`.
    Etcd(commands::etcd::Args),
    /// Adds or removes workloads.
    Workload(commands::workload::Args),
    /// VMs on an `up --openstack` lab: `boot` (a Neutron port, a namespace plugged by a TAP,
    /// DHCP), `delete`.
    Vm(commands::vm::Args),
    /// Runs a command inside a workload's namespace.
    Exec(commands::exec::Args),
    /// Prints a connectivity matrix (ping and TCP) between all workloads.
    Check(commands::check::Args),
    /// Waits until every Felix has programmed everything written to etcd so far.
    Wait(commands::wait::Args),
    /// Kills a host's Felix with SIGKILL and starts it again, from the binary `up` started
    /// (its `--felix`, remembered in the lab's state).
    RestartFelix(commands::restart_felix::Args),
    /// Stops the neutron-server of an `up --openstack` lab and starts it again as `up` did
    /// (Calico's ML2 driver on its PYTHONPATH); returns when it answers. With --calico-neutron,
    /// restarts calico-neutron instead, with the arguments after `--` added.
    RestartNeutron(commands::restart_neutron::Args),
    /// Removes every namespace, process and file of the lab (also after a crash).
    Down,
    /// Brings up a two-host cluster and walks through the seed examples, showing the matrix.
    Demo,
    /// Probes from inside a workload (run through `exec`): prints `<target> ok|refused|blocked`.
    Probe(commands::probe::Args),
    /// Keeps a TCP connection to an echo server busy (run through `exec`); prints
    /// `sent N echoed M max_gap_ms G` and fails if an echo did not come back.
    Flow(commands::flow::Args),
    /// Run inside a workload: connects to IP:PORT again and again until it works, then prints
    /// the time (ns since the Unix epoch); used to measure how fast policy is enforced.
    WaitOpen(commands::wait_open::Args),
    /// Run inside a workload: new TCP connections per second to IP:PORT (each exchanges one
    /// byte with the echo server), printed as a number; used to measure connection setup rate.
    ConnectRate(commands::connect_rate::Args),
    /// Chaos, measured, on a lab that is up (best `up --hosts 3 --etcd-members 3`): with a
    /// TCP flow from each host to the next running throughout, kills Felix, calico-node and
    /// BIRD with SIGKILL, cuts hosts off from etcd, restarts etcd members, plugs workloads in
    /// and out and edits policy; then brings everything back and checks the flows' echoes,
    /// routes, sampled flows against `calicoctl policy explain`, `calicoctl ipam check` and
    /// leftovers. Fails if any check does.
    Soak(commands::soak::Args),
    /// The echo server every workload runs (TCP and UDP).
    #[command(hide = true)]
    Serve(commands::serve::Args),
    /// Runs one of the lab's services, starting it again when it ends (Felix: only after a
    /// clean exit, a restart it asked for; `--restart always`: after any end).
    #[command(hide = true)]
    Supervise(commands::supervise::Args),
    /// Forwards 127.0.0.1 here to etcd on the fabric.
    #[command(hide = true)]
    Relay(commands::relay::Args),
}

fn main() {
    let cli = Cli::parse();
    // These two run before (and without) this runtime: the relay binds before it enters the
    // fabric, and each runs on a runtime of its own.
    match &cli.command {
        Cmd::Relay(args) => {
            exit_on_error(commands::relay::run(args));
            return;
        }
        Cmd::Supervise(args) => match commands::supervise::run(args) {
            Ok(code) => std::process::exit(code),
            Err(error) => exit_on_error(Err(error)),
        },
        _ => {}
    }
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    exit_on_error(runtime.block_on(run(cli)));
}

fn exit_on_error(result: anyhow::Result<()>) {
    if let Err(error) = result {
        eprintln!("calico-lab: {error:#}");
        std::process::exit(1);
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let name = cli.lab.as_str();
    match cli.command {
        Cmd::Up(args) => commands::up::run(name, args).await,
        Cmd::Env => commands::env::run(name),
        Cmd::Etcd(args) => commands::etcd::run(name, args).await,
        Cmd::Workload(args) => commands::workload::run(name, args).await,
        Cmd::Vm(args) => commands::vm::run(name, args).await,
        Cmd::Exec(args) => commands::exec::run(name, args),
        Cmd::Check(args) => commands::check::run(name, args).await,
        Cmd::Wait(args) => commands::wait::run(name, args).await,
        Cmd::RestartFelix(args) => commands::restart_felix::run(name, args),
        Cmd::RestartNeutron(args) => commands::restart_neutron::run(name, args).await,
        Cmd::Down => commands::down::run(name),
        Cmd::Demo => commands::demo::run(name).await,
        Cmd::Probe(args) => commands::probe::run(args).await,
        Cmd::Flow(args) => commands::flow::run(args).await,
        Cmd::WaitOpen(args) => commands::wait_open::run(args).await,
        Cmd::ConnectRate(args) => commands::connect_rate::run(args).await,
        Cmd::Soak(args) => commands::soak::run(name, args).await,
        Cmd::Serve(args) => commands::serve::run(args).await,
        Cmd::Relay(_) | Cmd::Supervise(_) => unreachable!("handled before the runtime starts"),
    }
}
