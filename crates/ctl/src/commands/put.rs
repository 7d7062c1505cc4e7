//! `calicoctl put KEY VALUE|-f FILE`: validate, then write the value exactly as given.

use std::io::Write;
use std::process::ExitCode;

use calico_datastore::Datastore;

use super::{check, read_value};
use crate::cli::PutArgs;

pub async fn run(
    store: &dyn Datastore,
    args: &PutArgs,
    out: &mut impl Write,
) -> anyhow::Result<ExitCode> {
    let raw = read_value(&args.value)?;
    check(&args.key, &raw)?;
    store.put(&args.key, &raw).await?;
    writeln!(out, "OK")?;
    Ok(ExitCode::SUCCESS)
}
