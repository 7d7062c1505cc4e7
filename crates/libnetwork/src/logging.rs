//! The driver's log filter, `CALICO_LIBNETWORK_LOG`: comma-separated `tracing` directives. A
//! bare level (`debug`) is the level of the driver and of the project's libraries it runs
//! (`calico_*`); every other crate stays at `warn` unless a directive names it (`h2=debug`):
//! at `debug` the HTTP/2 stack under etcd's client logs every frame, which buried the driver's
//! own lines ("every request and answer").

use std::collections::BTreeMap;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::filter::{Directive, LevelFilter};

/// The variable holding the filter.
pub const VARIABLE: &str = "CALICO_LIBNETWORK_LOG";

/// Our crates: what a bare level applies to.
const OURS: &[&str] = &[
    "calico_libnetwork",
    "calico_plumbing",
    "calico_ipam",
    "calico_datastore",
    "calico_linux",
    "calico_model",
];

/// Every other crate's level, unless named.
const OTHERS: &str = "warn";

/// Our crates' level when the variable gives none.
const DEFAULT: &str = "info";

/// A filter that names no level and no `target=level`.
#[derive(Debug, thiserror::Error)]
#[error(
    "{VARIABLE} {value:?}: {directive:?} {reason}; give a level (trace, debug, info, warn, \
     error, off) and/or target=level directives, separated by commas"
)]
pub struct LogFilterError {
    pub value: String,
    pub directive: String,
    pub reason: String,
}

/// The directives `value` (the variable's text, if set) stands for: others at `warn`, our
/// crates at the bare level given (or `info`), then the named targets as given (a named one
/// of ours replaces its bare level).
pub fn directives(value: Option<&str>) -> Result<Vec<String>, LogFilterError> {
    let value = value.unwrap_or_default();
    let refuse = |directive: &str, reason: &str| LogFilterError {
        value: value.to_owned(),
        directive: directive.to_owned(),
        reason: reason.to_owned(),
    };
    let mut ours: BTreeMap<&str, String> = OURS.iter().map(|c| (*c, DEFAULT.to_owned())).collect();
    let mut named = Vec::new();
    for part in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        if part.parse::<LevelFilter>().is_ok() {
            ours.values_mut().for_each(|level| *level = part.to_owned());
            continue;
        }
        if !part.contains('=') {
            return Err(refuse(part, "is neither a level nor target=level"));
        }
        part.parse::<Directive>()
            .map_err(|e| refuse(part, &format!("is not a directive ({e})")))?;
        let ours_named = part
            .split_once('=')
            .and_then(|(target, level)| Some((ours.get_mut(target)?, level)));
        match ours_named {
            Some((ours_level, level)) => *ours_level = level.to_owned(),
            None => named.push(part.to_owned()),
        }
    }
    let mut all = vec![OTHERS.to_owned()];
    all.extend(OURS.iter().map(|c| format!("{c}={}", ours[c])));
    all.extend(named);
    Ok(all)
}

/// The filter `value` stands for.
pub fn filter(value: Option<&str>) -> Result<EnvFilter, LogFilterError> {
    let joined = directives(value)?.join(",");
    EnvFilter::builder()
        .parse(&joined)
        .map_err(|e| LogFilterError {
            value: value.unwrap_or_default().to_owned(),
            directive: joined,
            reason: e.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ours_at(level: &str) -> Vec<String> {
        OURS.iter().map(|c| format!("{c}={level}")).collect()
    }

    #[test]
    fn a_bare_level_is_our_crates_level_and_the_others_stay_at_warn() {
        let mut expected = vec!["warn".to_owned()];
        expected.extend(ours_at("debug"));
        assert_eq!(directives(Some("debug")).unwrap(), expected);
        let mut default = vec!["warn".to_owned()];
        default.extend(ours_at("info"));
        assert_eq!(directives(None).unwrap(), default);
        assert_eq!(directives(Some("")).unwrap(), default);
    }

    #[test]
    fn named_targets_are_kept_and_name_one_of_ours_over_the_bare_level() {
        let got = directives(Some("debug, h2=trace,calico_ipam=warn")).unwrap();
        assert!(got.contains(&"h2=trace".to_owned()), "{got:?}");
        assert!(got.contains(&"calico_ipam=warn".to_owned()), "{got:?}");
        assert!(
            got.contains(&"calico_libnetwork=debug".to_owned()),
            "{got:?}"
        );
        assert!(!got.contains(&"calico_ipam=debug".to_owned()), "{got:?}");
        let got = directives(Some("calico_libnetwork=debug")).unwrap();
        assert!(
            got.contains(&"calico_libnetwork=debug".to_owned()),
            "{got:?}"
        );
        assert!(got.contains(&"calico_ipam=info".to_owned()), "{got:?}");
        filter(Some("debug,h2=trace")).unwrap();
    }

    #[test]
    fn a_word_that_is_no_level_is_refused_by_name() {
        let err = directives(Some("debgu")).unwrap_err().to_string();
        assert!(
            err.starts_with("CALICO_LIBNETWORK_LOG \"debgu\": \"debgu\" is neither a level"),
            "{err}"
        );
        let err = directives(Some("info,h2=loud")).unwrap_err().to_string();
        assert!(err.contains("\"h2=loud\" is not a directive"), "{err}");
    }
}
