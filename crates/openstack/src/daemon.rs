//! What `calico-neutron` and `calico-dhcp-agent` share around their work: logging to stderr
//! and a runtime, one error line and a failure exit when the work fails, and the signals that
//! stop them.

use std::io::IsTerminal;
use std::process::ExitCode;

/// Logs to stderr with `log` (tracing's env-filter syntax), runs `work` on a new runtime, and
/// turns its outcome into the exit code (an error logged with its causes).
pub fn main_of(name: &str, log: &str, work: impl Future<Output = anyhow::Result<()>>) -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(log))
        .with_writer(std::io::stderr)
        // Colours only on a terminal: a service's stderr usually goes to a log file.
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("{name}: cannot start the runtime: {e}");
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

/// Resolves on SIGTERM or SIGINT (never, if the handlers cannot be installed).
pub async fn shutdown() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}
