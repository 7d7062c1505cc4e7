//! `calicoctl`, the operator's tool for the Calico datastore.
//!
//! | module | owns |
//! | --- | --- |
//! | `cli` | the command line (clap), the text of `--help` |
//! | `help` | the examples at the end of each command's `--help` |
//! | `diags` | what `calicoctl diags` collects, and its archive |
//! | `connect` | datastore connection from flags and `ETCD_*` variables |
//! | `commands` | one file per subcommand; each takes a datastore and a writer |
//! | `v2`, `migrate` | reading etcd v2 (Calico 1.4) and the pure plan of `datastore migrate` |
//! | `resource` | resource documents (`apply -f`, `get KIND`): kinds, their keys, parsing, tables |
//! | `yaml` | YAML written so that YAML 1.1 readers read it the same; the nesting scan of input |

pub mod cli;
pub mod commands;
pub mod connect;
pub mod diags;
pub mod help;
pub mod migrate;
pub mod resource;
pub mod v2;
pub mod yaml;

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
        Command::Completion { shell } => {
            let mut command = <Cli as clap::CommandFactory>::command();
            // Into a buffer first: clap_complete panics on a write error (a closed pipe).
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut command, "calicoctl", &mut script);
            std::io::Write::write_all(&mut out, &script)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Diags(args) => commands::diags::run(&cli.etcd, &args, &mut out).await,
        Command::Flows(args) => commands::flows::run(&cli.etcd, &args, &mut out).await,
        Command::Status(args) => match connect::connect(&cli.etcd).await {
            Ok(store) => commands::status::run(Some(store.as_ref()), None, &args, &mut out).await,
            Err(error) => {
                commands::status::run(None, Some(format!("{error:#}")), &args, &mut out).await
            }
        },
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
                Command::Policy {
                    command: PolicyCommand::Impact(args),
                } => commands::impact::run(store.as_ref(), &args, &mut out).await,
                Command::Node {
                    command: cli::NodeCommand::List(output),
                } => commands::node::list(store.as_ref(), output.output, &mut out).await,
                Command::Node {
                    command: cli::NodeCommand::Remove(args),
                } => {
                    let mut stdin = std::io::stdin().lock();
                    commands::node_remove::run(store.into(), &args, &mut stdin, &mut out).await
                }
                Command::Node { .. } => unreachable!("handled above"),
                Command::Datastore {
                    command: cli::DatastoreCommand::Migrate(args),
                } => commands::datastore::migrate(store.as_ref(), &args, &mut out).await,
                Command::Ipam { command } => {
                    commands::ipam::run(store.into(), command, &mut out).await
                }
                Command::Selector { .. }
                | Command::Validate(_)
                | Command::Status(_)
                | Command::Diags(_)
                | Command::Flows(_)
                | Command::Completion { .. } => {
                    unreachable!("handled above")
                }
            }
        }
    }
}
