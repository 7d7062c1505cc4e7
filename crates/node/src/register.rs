//! Registering the host: its BGP addresses (given, or those of the interface with the default
//! route) and AS number at `/calico/bgp/v1/host/<host>/…`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use anyhow::{Context, bail};
use calico_datastore::Datastore;
use calico_linux::Netns;
use calico_model::IpVersion;
use calico_model::Key;
use calico_model::bgp::AsNumber;
use serde_json::Value;

/// What the host announces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registration {
    pub hostname: String,
    pub ipv4: Option<Ipv4Addr>,
    pub ipv6: Option<Ipv6Addr>,
    pub as_num: Option<AsNumber>,
}

/// `--ip`: `auto`, `none`, or an IPv4 address.
pub fn pick_ipv4(setting: &str) -> anyhow::Result<Option<Ipv4Addr>> {
    Ok(
        pick(setting, IpVersion::V4, "--ip")?.and_then(|ip| match ip {
            IpAddr::V4(v4) => Some(v4),
            IpAddr::V6(_) => None,
        }),
    )
}

/// `--ip6`: `auto`, `none`, or an IPv6 address.
pub fn pick_ipv6(setting: &str) -> anyhow::Result<Option<Ipv6Addr>> {
    Ok(
        pick(setting, IpVersion::V6, "--ip6")?.and_then(|ip| match ip {
            IpAddr::V6(v6) => Some(v6),
            IpAddr::V4(_) => None,
        }),
    )
}

fn pick(setting: &str, version: IpVersion, flag: &str) -> anyhow::Result<Option<IpAddr>> {
    let ip = match setting {
        "none" | "" => return Ok(None),
        "auto" => return detect(version),
        text => text.parse::<IpAddr>().ok(),
    };
    match ip {
        Some(ip) if IpVersion::of_addr(&ip) == version => Ok(Some(ip)),
        _ => bail!("{flag} {setting:?}: expected an {version} address, auto or none"),
    }
}

/// The first global address of `version` on the interface that has the default route (for
/// IPv6, the IPv4 default route's interface when IPv6 has none).
fn detect(version: IpVersion) -> anyhow::Result<Option<IpAddr>> {
    let here = Netns::current();
    let family = match version {
        IpVersion::V4 => "-4",
        IpVersion::V6 => "-6",
    };
    let device = |family: &str| -> anyhow::Result<Option<String>> {
        let out = here.run("ip", &["-j", family, "route", "show", "default"], "")?;
        let routes: Value = serde_json::from_str(&out).unwrap_or(Value::Null);
        Ok(routes[0]["dev"].as_str().map(str::to_owned))
    };
    let Some(dev) = device(family)?.or(device("-4")?) else {
        return Ok(None);
    };
    let out = here.run(
        "ip",
        &["-j", family, "addr", "show", "dev", &dev, "scope", "global"],
        "",
    )?;
    let addresses: Value = serde_json::from_str(&out).context("ip -j addr printed no JSON")?;
    Ok(addresses[0]["addr_info"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a["local"].as_str()?.parse().ok())
        .next())
}

/// Writes the host's keys. Without an address of either version there is nothing to peer from.
pub async fn register(store: &dyn Datastore, registration: &Registration) -> anyhow::Result<()> {
    if registration.ipv4.is_none() && registration.ipv6.is_none() {
        bail!(
            "no BGP address for {}: none was given (--ip/--ip6) and none was found on the \
             interface with the default route",
            registration.hostname
        );
    }
    let hostname = registration.hostname.clone();
    for (version, ip) in [
        (IpVersion::V4, registration.ipv4.map(IpAddr::V4)),
        (IpVersion::V6, registration.ipv6.map(IpAddr::V6)),
    ] {
        let key = Key::HostIp {
            hostname: hostname.clone(),
            version,
        }
        .to_string();
        match ip {
            Some(ip) => store.put(&key, &ip.to_string()).await?,
            None => store.put(&key, "").await?,
        };
    }
    if let Some(as_num) = registration.as_num {
        let key = Key::HostAsNum { hostname }.to_string();
        store.put(&key, &as_num.to_string()).await?;
    }
    tracing::info!(?registration, "registered");
    Ok(())
}
