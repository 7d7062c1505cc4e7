//! `calicoctl`, the operator's tool for the Calico datastore.
//!
//! | module | owns |
//! | --- | --- |
//! | `cli` | the command line (clap), the text of `--help` |
//! | `connect` | datastore connection from flags and `ETCD_*` variables |
//! | `commands` | one file per subcommand; each takes a datastore and a writer |
//! | `resource` | resource documents (`apply -f`, `get KIND`): kinds, their keys, parsing, tables |

pub mod cli;
pub mod commands;
pub mod connect;
pub mod resource;

use std::process::ExitCode;

use cli::{Cli, Command, PolicyCommand, SelectorCommand};
use resource::store::Mode;

/// Runs one parsed command line. Errors are returned for `main` to print; a command that has
/// already explained a failure (e.g. `validate`) returns a failing exit code instead.
pub async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    match cli.command {
        Command::Selector {
            command: SelectorCommand::Eval,
        } => commands::selector::eval(std::io::stdin().lock(), &mut out),
        Command::Validate(args) => commands::validate::run(&args, &mut out),
        Command::Node {
            command: cli::NodeCommand::Status(args),
        } => commands::node::status(&args, &mut out),
        command => {
            let store = connect::connect(&cli.etcd).await?;
            match command {
                Command::Create(args) => {
                    commands::resource::write(store.as_ref(), &args, Mode::Create, &mut out).await
                }
                Command::Apply(args) => {
                    commands::resource::write(store.as_ref(), &args, Mode::Apply, &mut out).await
                }
                Command::Replace(args) => {
                    commands::resource::write(store.as_ref(), &args, Mode::Replace, &mut out).await
                }
                Command::Get(args) => commands::get::run(store.as_ref(), &args, &mut out).await,
                Command::Put(args) => commands::put::run(store.as_ref(), &args, &mut out).await,
                Command::Delete(args) => {
                    commands::delete::run(store.as_ref(), &args, &mut out).await
                }
                Command::Load(args) => commands::load::run(store.as_ref(), &args, &mut out).await,
                Command::Policy {
                    command: PolicyCommand::Explain(args),
                } => commands::explain::run(store.as_ref(), &args, &mut out).await,
                Command::Node {
                    command: cli::NodeCommand::List,
                } => commands::node::list(store.as_ref(), &mut out).await,
                Command::Node { .. } => unreachable!("handled above"),
                Command::Ipam { command } => {
                    commands::ipam::run(store.into(), command, &mut out).await
                }
                Command::Selector { .. } | Command::Validate(_) => unreachable!("handled above"),
            }
        }
    }
}
