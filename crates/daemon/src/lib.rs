//! The scaffold of a daemon's `main()`: logs to stderr through a filter (tracing's env-filter
//! syntax, an invalid one refused by name before anything runs), a tokio runtime, the work,
//! and its outcome as the exit code (an error logged once with its causes). `calico-felix`,
//! `calico-node`, `calico-libnetwork`, `calico-fanout`, `calico-flows`, `calico-neutron` and
//! `calico-dhcp-agent` start this way; a daemon whose log has rules of its own (Felix: the
//! screen and a file, their levels set once its configuration is read) brings its own
//! subscriber instead of a filter (`Daemon::subscriber`).
//!
//! ```text
//! main() ─► Daemon::new(name).log_variable("CALICO_X_LOG") ─► run(work)
//!              (or .subscriber(its own): installed as it is)
//!              filter refused? ─► "name: CALICO_X_LOG=…: reason", exit 1
//!              logging ─► runtime ─► work ─► Ok: exit 0 / Err(e): error "{e:#}", exit 1
//! work: … select { served, Shutdown::listen()?.wait() } …   (SIGTERM or SIGINT)
//! ```

use std::fmt::Display;
use std::future::Future;
use std::io::IsTerminal;
use std::process::ExitCode;

use tokio::signal::unix::{Signal, SignalKind, signal};
use tracing::Dispatch;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::util::SubscriberInitExt;

/// The level when no filter is given.
pub const DEFAULT_LOG: &str = "info";

/// Where a daemon's log goes.
#[derive(Debug)]
enum Log {
    /// To stderr through this filter, or why the one given was refused (boxed: a filter is
    /// large beside a `Dispatch`, and a daemon has one).
    Filter(Box<Result<EnvFilter, String>>),
    /// The caller's own subscriber.
    Subscriber(Dispatch),
}

/// A daemon about to start.
#[derive(Debug)]
pub struct Daemon {
    name: String,
    log: Log,
    worker_threads: Option<usize>,
    blocking_threads: Option<usize>,
}

impl Daemon {
    /// Logging at [`DEFAULT_LOG`] until told otherwise; the runtime's default threads.
    pub fn new(name: &str) -> Daemon {
        Daemon {
            name: name.to_owned(),
            log: Log::Filter(Box::new(Ok(EnvFilter::new(DEFAULT_LOG)))),
            worker_threads: None,
            blocking_threads: None,
        }
    }

    /// The filter from the environment variable `variable` ([`DEFAULT_LOG`] when unset or
    /// empty); one that does not parse stops the daemon, naming the variable.
    pub fn log_variable(self, variable: &str) -> Daemon {
        let value = std::env::var(variable).unwrap_or_default();
        let value = if value.trim().is_empty() {
            DEFAULT_LOG
        } else {
            value.as_str()
        };
        let filter =
            parse_filter(value).map_err(|reason| format!("{variable}={value:?}: {reason}"));
        Daemon {
            log: Log::Filter(Box::new(filter)),
            ..self
        }
    }

    /// The filter `directives` (a flag's value), refused by name as `what` if it does not
    /// parse.
    pub fn log(self, what: &str, directives: &str) -> Daemon {
        let filter =
            parse_filter(directives).map_err(|reason| format!("{what} {directives:?}: {reason}"));
        Daemon {
            log: Log::Filter(Box::new(filter)),
            ..self
        }
    }

    /// A filter made by the caller (a daemon with rules of its own), or why it was refused.
    pub fn log_filter(self, filter: Result<EnvFilter, impl Display>) -> Daemon {
        let filter = filter.map_err(|e| e.to_string());
        Daemon {
            log: Log::Filter(Box::new(filter)),
            ..self
        }
    }

    /// The caller's own subscriber, installed instead of the stderr one and as it is (its
    /// outputs, filters and reload handles are the caller's): a daemon whose log has rules of
    /// its own. The last of this and the filters above wins.
    pub fn subscriber(self, subscriber: impl Into<Dispatch>) -> Daemon {
        Daemon {
            log: Log::Subscriber(subscriber.into()),
            ..self
        }
    }

    /// A runtime with `threads` worker threads.
    pub fn worker_threads(self, threads: usize) -> Daemon {
        Daemon {
            worker_threads: Some(threads),
            ..self
        }
    }

    /// A runtime whose blocking pool (`spawn_blocking`) has at most `threads` threads (at
    /// least 1; 0 stops the daemon before its work, naming it).
    pub fn blocking_threads(self, threads: usize) -> Daemon {
        Daemon {
            blocking_threads: Some(threads),
            ..self
        }
    }

    /// Logs, starts the runtime and runs `work` to its end: success exits 0, an error is
    /// logged with its causes (`{e:#}`) and exits 1. A refused filter or a runtime that cannot
    /// start exits 1 before `work` runs.
    pub fn run<E: Display>(self, work: impl Future<Output = Result<(), E>>) -> ExitCode {
        let subscriber = match self.log {
            Log::Filter(filter) => match *filter {
                Ok(filter) => Dispatch::new(
                    tracing_subscriber::fmt()
                        .with_env_filter(filter)
                        .with_writer(std::io::stderr)
                        // Colours only on a terminal: a service's stderr usually goes to a file.
                        .with_ansi(std::io::stderr().is_terminal())
                        .finish(),
                ),
                Err(reason) => {
                    eprintln!("{}: {reason}", self.name);
                    return ExitCode::FAILURE;
                }
            },
            Log::Subscriber(subscriber) => subscriber,
        };
        // A second subscriber (a test running several daemons) keeps the first.
        let _ = subscriber.try_init();
        let mut builder = tokio::runtime::Builder::new_multi_thread();
        if let Some(threads) = self.worker_threads {
            builder.worker_threads(threads);
        }
        match self.blocking_threads {
            Some(0) => {
                eprintln!(
                    "{}: blocking threads 0: the runtime needs at least 1",
                    self.name
                );
                return ExitCode::FAILURE;
            }
            Some(threads) => {
                builder.max_blocking_threads(threads);
            }
            None => {}
        }
        let runtime = match builder.enable_all().build() {
            Ok(runtime) => runtime,
            Err(e) => {
                eprintln!("{}: cannot start the runtime: {e}", self.name);
                return ExitCode::FAILURE;
            }
        };
        match runtime.block_on(work) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                tracing::error!("{e:#}");
                ExitCode::FAILURE
            }
        }
    }
}

/// A filter in tracing's env-filter syntax, or why not.
fn parse_filter(directives: &str) -> Result<EnvFilter, String> {
    EnvFilter::builder()
        .parse(directives)
        .map_err(|e| format!("{e}; give a level (trace, debug, info, warn, error, off) and/or target=level, separated by commas"))
}

/// The signals that stop a daemon, SIGTERM and SIGINT, listened for from the moment it is made.
#[derive(Debug)]
pub struct Shutdown {
    term: Signal,
    int: Signal,
}

impl Shutdown {
    /// Listens for SIGTERM and SIGINT (inside a runtime).
    pub fn listen() -> std::io::Result<Shutdown> {
        Ok(Shutdown {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
        })
    }

    /// Resolves at the first of them.
    pub async fn wait(mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
    }
}

/// Resolves on SIGTERM or SIGINT; never, if the handlers cannot be installed (said once in the
/// log).
pub async fn shutdown() {
    match Shutdown::listen() {
        Ok(shutdown) => shutdown.wait().await,
        Err(e) => {
            tracing::warn!(
                "cannot listen for SIGTERM and SIGINT ({e}): stop the daemon with SIGKILL"
            );
            std::future::pending().await
        }
    }
}

/// A spawned task that is aborted when this is dropped: a daemon's helper task lives exactly
/// as long as what owns it.
#[derive(Debug)]
pub struct Task(tokio::task::JoinHandle<()>);

impl Task {
    pub fn spawn(work: impl Future<Output = ()> + Send + 'static) -> Task {
        Task(tokio::spawn(work))
    }
}

impl Drop for Task {
    fn drop(&mut self) {
        self.0.abort();
    }
}
