//! How `calico-neutron` and `calico-dhcp-agent` authenticate to Neutron: the strategy
//! (`keystone`, or `noauth` for a neutron-server run without Keystone) and, for Keystone, the
//! service user's settings as every OpenStack service takes them: the `OS_*` environment
//! variables of an openrc, or the `[keystone_authtoken]` section of an ini file (the section
//! neutron.conf and nova.conf have), a variable winning over the file. Every setting keeps its
//! source, so an error names exactly what to fix; the password is never shown.
//!
//! | setting (file key) | variable | default |
//! | --- | --- | --- |
//! | `auth_url` | `OS_AUTH_URL` | required; `/v3` appended when the path does not end in it |
//! | `username` | `OS_USERNAME` | required |
//! | `password` | `OS_PASSWORD` | required |
//! | `project_name` / `project_id` | `OS_PROJECT_NAME` / `OS_PROJECT_ID` | one of them required |
//! | `user_domain_name` / `user_domain_id` | `OS_USER_DOMAIN_NAME` / `OS_USER_DOMAIN_ID` | name `Default` |
//! | `project_domain_name` / `project_domain_id` | `OS_PROJECT_DOMAIN_NAME` / `OS_PROJECT_DOMAIN_ID` | name `Default` |
//! | `cafile` | `OS_CACERT` | the system's CA bundle; for Keystone and Neutron alike, also with `noauth` |
//! | `auth_type` | `OS_AUTH_TYPE` | `password` (the only one supported) |
//! | — | `OS_IDENTITY_API_VERSION` | `3` (the only one supported) |
//!
//! Refused: `insecure = true` / `OS_INSECURE`. Warned about by name: other keys of the section
//! (keystonemiddleware's own, when the file is a service's configuration) and other `OS_*`
//! variables (e.g. `OS_REGION_NAME`: nothing here reads the catalog), and, with `noauth`, any
//! credential given.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::http::Endpoint;

/// The ini section read.
pub const SECTION: &str = "keystone_authtoken";

/// How requests to Neutron are authenticated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Strategy {
    /// A token of the service user from Keystone in every request (`X-Auth-Token`).
    Keystone,
    /// No token: for a neutron-server with `auth_strategy = noauth` (labs only).
    Noauth,
}

/// Where a setting's value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Env(&'static str),
    File { path: PathBuf, key: &'static str },
    Default,
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Env(name) => write!(f, "{name} (environment)"),
            Source::File { path, key } => {
                write!(f, "{key} in [{SECTION}] of {}", path.display())
            }
            Source::Default => write!(f, "the default"),
        }
    }
}

/// A value and its source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting<T> {
    pub value: T,
    pub source: Source,
}

/// A secret: shown as `***` by `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("***")
    }
}

/// A project or a domain, by name or by id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Named {
    Name(String),
    Id(String),
}

impl std::fmt::Display for Named {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Named::Name(name) => write!(f, "{name:?}"),
            Named::Id(id) => write!(f, "id {id:?}"),
        }
    }
}

impl Named {
    /// Keystone's JSON for it: `{"name": …}` or `{"id": …}`.
    pub fn json(&self) -> serde_json::Value {
        match self {
            Named::Name(name) => serde_json::json!({ "name": name }),
            Named::Id(id) => serde_json::json!({ "id": id }),
        }
    }
}

/// The service user's settings for Keystone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    /// Keystone's v3 API, `/v3` included.
    pub auth_url: Setting<Endpoint>,
    pub username: Setting<String>,
    pub password: Setting<Secret>,
    pub user_domain: Setting<Named>,
    pub project: Setting<Named>,
    pub project_domain: Setting<Named>,
}

/// Everything resolved: the strategy, the credentials (Keystone only), the CA file and what
/// was given but is not used (to be logged as warnings).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub strategy: Strategy,
    pub credentials: Option<Credentials>,
    pub ca_file: Option<Setting<PathBuf>>,
    pub unused: Vec<String>,
}

/// A setting that cannot be used: its source and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{setting}: {reason}")]
pub struct CredentialsError {
    pub setting: String,
    pub reason: String,
}

impl CredentialsError {
    fn new(setting: impl std::fmt::Display, reason: impl Into<String>) -> Self {
        CredentialsError {
            setting: setting.to_string(),
            reason: reason.into(),
        }
    }
}

/// One setting: its file key, its variable.
struct Known {
    key: &'static str,
    env: &'static str,
}

const AUTH_URL: Known = Known {
    key: "auth_url",
    env: "OS_AUTH_URL",
};
const USERNAME: Known = Known {
    key: "username",
    env: "OS_USERNAME",
};
const PASSWORD: Known = Known {
    key: "password",
    env: "OS_PASSWORD",
};
const PROJECT_NAME: Known = Known {
    key: "project_name",
    env: "OS_PROJECT_NAME",
};
const PROJECT_ID: Known = Known {
    key: "project_id",
    env: "OS_PROJECT_ID",
};
const USER_DOMAIN_NAME: Known = Known {
    key: "user_domain_name",
    env: "OS_USER_DOMAIN_NAME",
};
const USER_DOMAIN_ID: Known = Known {
    key: "user_domain_id",
    env: "OS_USER_DOMAIN_ID",
};
const PROJECT_DOMAIN_NAME: Known = Known {
    key: "project_domain_name",
    env: "OS_PROJECT_DOMAIN_NAME",
};
const PROJECT_DOMAIN_ID: Known = Known {
    key: "project_domain_id",
    env: "OS_PROJECT_DOMAIN_ID",
};
const CAFILE: Known = Known {
    key: "cafile",
    env: "OS_CACERT",
};
const AUTH_TYPE: Known = Known {
    key: "auth_type",
    env: "OS_AUTH_TYPE",
};
const INSECURE: Known = Known {
    key: "insecure",
    env: "OS_INSECURE",
};
/// Read from the environment only.
const API_VERSION: &str = "OS_IDENTITY_API_VERSION";

const KNOWN: [&Known; 12] = [
    &AUTH_URL,
    &USERNAME,
    &PASSWORD,
    &PROJECT_NAME,
    &PROJECT_ID,
    &USER_DOMAIN_NAME,
    &USER_DOMAIN_ID,
    &PROJECT_DOMAIN_NAME,
    &PROJECT_DOMAIN_ID,
    &CAFILE,
    &AUTH_TYPE,
    &INSECURE,
];

/// The raw inputs: the environment's `OS_*` variables and the file's section.
struct Inputs<'a> {
    env: &'a BTreeMap<String, String>,
    file: Option<(&'a Path, BTreeMap<String, String>)>,
}

impl Inputs<'_> {
    /// The variable, else the file's key; empty values count as unset.
    fn get(&self, known: &Known) -> Option<Setting<String>> {
        if let Some(value) = self.env.get(known.env).filter(|v| !v.is_empty()) {
            return Some(Setting {
                value: value.clone(),
                source: Source::Env(known.env),
            });
        }
        let (path, section) = self.file.as_ref()?;
        let value = section.get(known.key).filter(|v| !v.is_empty())?;
        Some(Setting {
            value: value.clone(),
            source: Source::File {
                path: path.to_path_buf(),
                key: known.key,
            },
        })
    }

    fn required(&self, known: &Known) -> Result<Setting<String>, CredentialsError> {
        self.get(known).ok_or_else(|| self.missing(&[known]))
    }

    fn missing(&self, alternatives: &[&Known]) -> CredentialsError {
        let names: Vec<String> = alternatives
            .iter()
            .map(|k| match &self.file {
                Some(_) => format!("{} or {} in [{SECTION}]", k.env, k.key),
                None => k.env.to_owned(),
            })
            .collect();
        CredentialsError::new(
            names.join(", or "),
            "not set: Keystone needs it (or run with --auth-strategy noauth against a \
             neutron-server with auth_strategy = noauth)",
        )
    }

    /// A name or an id (not both); `default_name` when neither is given.
    fn named(
        &self,
        name: &Known,
        id: &Known,
        default_name: Option<&str>,
    ) -> Result<Setting<Named>, CredentialsError> {
        match (self.get(name), self.get(id)) {
            (Some(n), Some(i)) => Err(CredentialsError::new(
                format!("{} and {}", n.source, i.source),
                "both given: give the name or the id",
            )),
            (Some(n), None) => Ok(Setting {
                value: Named::Name(n.value),
                source: n.source,
            }),
            (None, Some(i)) => Ok(Setting {
                value: Named::Id(i.value),
                source: i.source,
            }),
            (None, None) => match default_name {
                Some(default) => Ok(Setting {
                    value: Named::Name(default.to_owned()),
                    source: Source::Default,
                }),
                None => Err(self.missing(&[name, id])),
            },
        }
    }
}

/// Resolves the settings for `strategy` from `env` (the process's variables; only `OS_*` ones
/// are looked at) and the ini file `config` (if given).
pub fn resolve(
    strategy: Strategy,
    config: Option<&Path>,
    env: &BTreeMap<String, String>,
) -> Result<Resolved, CredentialsError> {
    let file = match config {
        Some(path) => Some((path, read_section(path)?)),
        None => None,
    };
    let inputs = Inputs { env, file };
    let mut unused = unknown(&inputs);
    refuse_unsupported(&inputs)?;
    let ca_file = inputs.get(&CAFILE).map(|s| Setting {
        value: PathBuf::from(s.value),
        source: s.source,
    });
    let credentials =
        match strategy {
            Strategy::Keystone => Some(credentials(&inputs)?),
            Strategy::Noauth => {
                unused.extend(given_credentials(&inputs).into_iter().map(|source| {
                    format!("{source} is set but not used: --auth-strategy is noauth")
                }));
                None
            }
        };
    Ok(Resolved {
        strategy,
        credentials,
        ca_file,
        unused,
    })
}

fn credentials(inputs: &Inputs) -> Result<Credentials, CredentialsError> {
    let url = inputs.required(&AUTH_URL)?;
    let auth_url = Setting {
        value: auth_url(&url.value).map_err(|e| CredentialsError::new(&url.source, e))?,
        source: url.source,
    };
    let password = inputs.required(&PASSWORD)?;
    Ok(Credentials {
        auth_url,
        username: inputs.required(&USERNAME)?,
        password: Setting {
            value: Secret(password.value),
            source: password.source,
        },
        user_domain: inputs.named(&USER_DOMAIN_NAME, &USER_DOMAIN_ID, Some("Default"))?,
        project: inputs.named(&PROJECT_NAME, &PROJECT_ID, None)?,
        project_domain: inputs.named(&PROJECT_DOMAIN_NAME, &PROJECT_DOMAIN_ID, Some("Default"))?,
    })
}

/// Keystone's v3 API from an auth URL as openrc files give it: `/v3` appended unless there.
pub fn auth_url(text: &str) -> Result<Endpoint, String> {
    let endpoint = Endpoint::parse(text)?;
    if endpoint.prefix().ends_with("/v2.0") {
        return Err(format!(
            "{text:?}: Keystone's v2.0 API is gone since Queens; give the v3 URL"
        ));
    }
    Ok(match endpoint.prefix().ends_with("/v3") {
        true => endpoint,
        false => endpoint.join("/v3"),
    })
}

fn refuse_unsupported(inputs: &Inputs) -> Result<(), CredentialsError> {
    let password = |v: &str| matches!(v, "password" | "v3password");
    if let Some(kind) = inputs.get(&AUTH_TYPE).filter(|k| !password(&k.value)) {
        return Err(CredentialsError::new(
            &kind.source,
            format!(
                "{:?}: only password authentication is supported",
                kind.value
            ),
        ));
    }
    let off = |v: &str| matches!(v.to_ascii_lowercase().as_str(), "false" | "0" | "no");
    if let Some(insecure) = inputs.get(&INSECURE).filter(|i| !off(&i.value)) {
        return Err(CredentialsError::new(
            &insecure.source,
            "certificates are always checked: give the CA file (OS_CACERT or cafile)",
        ));
    }
    let version = inputs.env.get(API_VERSION);
    if let Some(version) = version.filter(|v| !v.is_empty() && v.as_str() != "3") {
        return Err(CredentialsError::new(
            format!("{API_VERSION} (environment)"),
            format!("{version:?}: only Keystone's v3 API is supported"),
        ));
    }
    Ok(())
}

/// What is given but not read: other `OS_*` variables, other keys of the section.
fn unknown(inputs: &Inputs) -> Vec<String> {
    let known_env = |name: &str| name == API_VERSION || KNOWN.iter().any(|k| k.env == name);
    let mut unused: Vec<String> = inputs
        .env
        .keys()
        .filter(|name| name.starts_with("OS_") && !known_env(name))
        .map(|name| format!("{name} (environment) is set but not read"))
        .collect();
    if let Some((path, section)) = &inputs.file {
        unused.extend(
            section
                .keys()
                .filter(|key| !KNOWN.iter().any(|k| k.key == key.as_str()))
                .map(|key| {
                    format!(
                        "{key} in [{SECTION}] of {} is not read (a keystonemiddleware \
                         setting, or a typo)",
                        path.display()
                    )
                }),
        );
    }
    unused
}

/// The sources of the Keystone credentials that are given.
fn given_credentials(inputs: &Inputs) -> Vec<Source> {
    KNOWN
        .iter()
        .filter(|k| !matches!(k.key, "cafile" | "insecure"))
        .filter_map(|k| inputs.get(k).map(|s| s.source))
        .collect()
}

/// The `[keystone_authtoken]` section of the ini file at `path` (keys lowercased, `#` and `;`
/// comments, blank lines); the error names the file and the line.
pub fn read_section(path: &Path) -> Result<BTreeMap<String, String>, CredentialsError> {
    let named = || format!("--auth-config {}", path.display());
    let text =
        std::fs::read_to_string(path).map_err(|e| CredentialsError::new(named(), e.to_string()))?;
    let section = parse_section(&text).map_err(|(line, reason)| {
        CredentialsError::new(format!("{} line {line}", path.display()), reason)
    })?;
    section.ok_or_else(|| {
        CredentialsError::new(
            named(),
            format!("no [{SECTION}] section (auth_url, username, password, project_name, ...)"),
        )
    })
}

/// The section, if the text has one; or the first bad line and why.
fn parse_section(text: &str) -> Result<Option<BTreeMap<String, String>>, (usize, String)> {
    let mut current: Option<String> = None;
    let mut found: Option<BTreeMap<String, String>> = None;
    for (index, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[') {
            let name = name.strip_suffix(']').ok_or((
                index + 1,
                format!("{line:?}: a section header ends with ']'"),
            ))?;
            current = Some(name.trim().to_owned());
            if name.trim() == SECTION {
                found.get_or_insert_with(BTreeMap::new);
            }
            continue;
        }
        let (key, value) = line
            .split_once('=')
            .ok_or((index + 1, format!("{line:?}: expected key = value")))?;
        if current.as_deref() == Some(SECTION) {
            let map = found.get_or_insert_with(BTreeMap::new);
            map.insert(key.trim().to_ascii_lowercase(), value.trim().to_owned());
        } else if current.is_none() {
            return Err((index + 1, format!("{line:?}: outside any section")));
        }
    }
    Ok(found)
}

/// The process's `OS_*` variables.
pub fn os_environment() -> BTreeMap<String, String> {
    std::env::vars()
        .filter(|(name, _)| name.starts_with("OS_"))
        .collect()
}

#[cfg(test)]
mod tests;
