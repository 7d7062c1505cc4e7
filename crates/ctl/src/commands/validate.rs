//! `calicoctl validate KEY VALUE|-f FILE`: prints OK or the precise error, writes nothing.

use std::io::Write;
use std::process::ExitCode;

use super::{check, read_value};
use crate::cli::ValidateArgs;

pub fn run(args: &ValidateArgs, out: &mut impl Write) -> anyhow::Result<ExitCode> {
    let raw = read_value(&args.value)?;
    match check(&args.key, &raw) {
        Ok(_) => {
            writeln!(out, "OK")?;
            Ok(ExitCode::SUCCESS)
        }
        Err(err) => {
            writeln!(out, "error: {err:#}")?;
            Ok(ExitCode::FAILURE)
        }
    }
}
