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

/// Neutron's client as `auth` says, authenticated (Keystone) before anything else happens:
/// each setting is logged with its source (the password only as set), what is given but not
/// used is warned about by name, a refused setting ends the program with one line naming it,
/// and while Keystone cannot be reached it is asked again with backoff, one warning each time.
pub async fn neutron_client(
    url: &str,
    auth: &crate::config::AuthArgs,
) -> anyhow::Result<crate::client::Client> {
    use anyhow::Context;

    let resolved = auth.resolve()?;
    for unused in &resolved.unused {
        tracing::warn!("{unused}");
    }
    log_settings(&resolved);
    let client = crate::client::Client::from_settings(url, &resolved)
        .map_err(anyhow::Error::msg)
        .context("--neutron-url")?;
    let mut backoff = calico_datastore::Backoff::default();
    loop {
        match client.authenticate().await {
            Ok(()) => return Ok(client),
            Err(crate::NeutronError::Auth(e)) if e.is_transient() => {
                let delay = backoff.next_delay();
                tracing::warn!("{e}; nothing done yet, retrying in {delay:?}");
                tokio::time::sleep(delay).await;
            }
            Err(e) => return Err(e.into()),
        }
    }
}

fn log_settings(resolved: &crate::credentials::Resolved) {
    let ca_file = resolved.ca_file.as_ref().map_or_else(
        || format!("the system's bundle {}", crate::http::SYSTEM_CA_BUNDLE),
        |s| format!("{} ({})", s.value.display(), s.source),
    );
    let Some(c) = &resolved.credentials else {
        tracing::info!(
            auth_strategy = "noauth",
            %ca_file,
            "requests to neutron carry no token: neutron-server must run with auth_strategy = noauth"
        );
        return;
    };
    tracing::info!(
        auth_strategy = "keystone",
        auth_url = format!("{} ({})", c.auth_url.value.base(), c.auth_url.source),
        username = format!("{} ({})", c.username.value, c.username.source),
        password = format!("set ({})", c.password.source),
        user_domain = format!("{} ({})", c.user_domain.value, c.user_domain.source),
        project = format!("{} ({})", c.project.value, c.project.source),
        project_domain = format!("{} ({})", c.project_domain.value, c.project_domain.source),
        %ca_file,
        "authenticating to neutron with keystone"
    );
}
