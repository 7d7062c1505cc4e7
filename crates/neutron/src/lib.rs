//! The OpenStack binaries: `calico-neutron` (`src/main.rs`), which keeps etcd's endpoints and
//! profiles equal to Neutron, and `calico-dhcp-agent` (`src/bin/calico-dhcp-agent.rs`), one per
//! compute host. Their work is `calico-openstack`'s (a library the lab uses too); this crate is
//! their `main`s and what both share before their work starts: Neutron's client,
//! authenticated. (Logging, the runtime, the exit code and the signals that stop them are
//! `calico-daemon`'s, as for every daemon of the project.)

use calico_openstack::config::AuthArgs;
use calico_openstack::credentials::Resolved;
use calico_openstack::{NeutronError, client::Client};

/// Neutron's client as `auth` says, authenticated (Keystone) before anything else happens:
/// each setting is logged with its source (the password only as set), what is given but not
/// used is warned about by name, a refused setting ends the program with one line naming it,
/// and while Keystone cannot be reached it is asked again with backoff, one warning each time.
pub async fn neutron_client(url: &str, auth: &AuthArgs) -> anyhow::Result<Client> {
    use anyhow::Context;

    let resolved = auth.resolve()?;
    for unused in &resolved.unused {
        tracing::warn!("{unused}");
    }
    log_settings(&resolved);
    let client = Client::from_settings(url, &resolved)
        .map_err(anyhow::Error::msg)
        .context("--neutron-url")?;
    let mut backoff = calico_datastore::Backoff::default();
    loop {
        match client.authenticate().await {
            Ok(()) => return Ok(client),
            Err(NeutronError::Auth(e)) if e.is_transient() => {
                let delay = backoff.next_delay();
                tracing::warn!("{e}; nothing done yet, retrying in {delay:?}");
                tokio::time::sleep(delay).await;
            }
            Err(e) => return Err(e.into()),
        }
    }
}

fn log_settings(resolved: &Resolved) {
    let ca_file = resolved.ca_file.as_ref().map_or_else(
        || {
            format!(
                "the system's bundle {}",
                calico_openstack::http::SYSTEM_CA_BUNDLE
            )
        },
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
