//! Runs a plan's steps in a network namespace, stopping at the first the kernel refuses.

use calico_linux::Netns;

use crate::error::ExecError;
use crate::plan::Step;

/// What `ip`/`tc` print when the object of a removal is already gone.
const MISSING: [&str; 3] = [
    "No such file or directory",
    "Cannot find device",
    "Cannot find specified qdisc",
];

/// Applies `steps` in order inside `netns`.
pub fn apply(netns: &Netns, steps: &[Step]) -> Result<(), ExecError> {
    steps.iter().try_for_each(|step| apply_one(netns, step))
}

fn apply_one(netns: &Netns, step: &Step) -> Result<(), ExecError> {
    match step {
        Step::WriteObject { path, bytes } => {
            let write = |source| ExecError::Write {
                path: path.display().to_string(),
                source,
            };
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).map_err(write)?;
            }
            std::fs::write(path, bytes).map_err(write)
        }
        Step::RemoveFile { path } => match std::fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(ExecError::Write {
                path: path.display().to_string(),
                source: e,
            }),
            _ => Ok(()),
        },
        Step::Sysctl { key, value } => run(
            netns,
            step,
            "sysctl",
            &["-qw".into(), format!("{key}={value}")],
            false,
        ),
        Step::Run {
            program,
            args,
            tolerate_missing,
        } => run(netns, step, program, args, *tolerate_missing),
    }
}

fn run(
    netns: &Netns,
    step: &Step,
    program: &str,
    args: &[String],
    tolerate_missing: bool,
) -> Result<(), ExecError> {
    let output = netns
        .command(program)
        .args(args)
        .output()
        .map_err(|source| ExecError::Spawn {
            step: step.to_string(),
            source,
        })?;
    if output.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&output.stderr).trim().to_owned();
    // A removal of something already removed has done its job.
    if tolerate_missing && MISSING.iter().any(|m| stderr.contains(m)) {
        return Ok(());
    }
    Err(ExecError::Refused {
        step: step.to_string(),
        stderr,
    })
}
