//! A fault-injection seam for crash tests: `CALICO_CNI_ABORT_AFTER=ipam|veth|endpoint` makes
//! the `calico` plugin's ADD abort the process (`std::process::abort`, SIGABRT) right after
//! that step, as a kill would: no undo runs, nothing more is printed. What DEL must then clean
//! up is what that step left:
//!
//! | value | ADD has done | left behind |
//! | --- | --- | --- |
//! | `ipam` | the IPAM plugin assigned the addresses | the addresses under the call's handle |
//! | `veth` | + the veth pair, the container's addresses and routes | + both interfaces |
//! | `endpoint` | + the workload endpoint (and the network's profile) in etcd | + the endpoint key |
//!
//! Unset or empty: no fault. Any other value is refused (code 4, naming the variable), so a
//! misspelt test setting cannot pass as a crash that never happened. Runtimes never set it.

use crate::error::{CniError, code};

/// The environment variable.
pub const VAR: &str = "CALICO_CNI_ABORT_AFTER";

/// A step of ADD that the plugin can be made to crash after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Ipam,
    Veth,
    Endpoint,
}

impl Step {
    const ALL: [Step; 3] = [Step::Ipam, Step::Veth, Step::Endpoint];

    /// The variable's value for this step.
    pub fn name(self) -> &'static str {
        match self {
            Step::Ipam => "ipam",
            Step::Veth => "veth",
            Step::Endpoint => "endpoint",
        }
    }
}

/// Reads the variable's value (`None`: unset).
pub fn parse(value: Option<&str>) -> Result<Option<Step>, CniError> {
    let Some(value) = value.map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    match Step::ALL.into_iter().find(|s| s.name() == value) {
        Some(step) => Ok(Some(step)),
        None => Err(CniError::new(
            code::INVALID_ENVIRONMENT,
            format!("{VAR}={value:?} is not one of ipam, veth, endpoint (a test seam; unset it)"),
        )),
    }
}

/// Aborts the process here when the call asked to crash after `step`.
pub fn crash_point(wanted: Option<Step>, step: Step) {
    if wanted == Some(step) {
        eprintln!(
            "{VAR}={}: aborting after the {} step, as a crash would",
            step.name(),
            step.name()
        );
        std::process::abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_by_name_and_misspellings_refused_naming_the_variable() {
        assert_eq!(parse(None).unwrap(), None);
        assert_eq!(parse(Some("")).unwrap(), None);
        assert_eq!(parse(Some("veth")).unwrap(), Some(Step::Veth));
        assert_eq!(parse(Some(" endpoint ")).unwrap(), Some(Step::Endpoint));
        let e = parse(Some("vet")).unwrap_err();
        assert_eq!(e.code, code::INVALID_ENVIRONMENT);
        assert_eq!(
            e.msg,
            "CALICO_CNI_ABORT_AFTER=\"vet\" is not one of ipam, veth, endpoint (a test seam; unset it)"
        );
    }

    #[test]
    fn no_fault_asked_for_is_no_crash() {
        crash_point(None, Step::Ipam);
        crash_point(Some(Step::Veth), Step::Ipam);
    }
}
