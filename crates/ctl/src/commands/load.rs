//! `calicoctl load -f BUNDLE`: every entry is validated first and all problems are reported;
//! only when all are valid is anything written, in one etcd transaction per batch.

use std::io::Write;
use std::process::ExitCode;

use calico_datastore::{Datastore, TxnOp};

use super::{check, read_file};
use crate::cli::LoadArgs;
use calico_model::bundle::{self, Entry};

/// etcd refuses transactions with more than 128 operations by default.
const BATCH: usize = 100;

pub async fn run(
    store: &dyn Datastore,
    args: &LoadArgs,
    out: &mut impl Write,
) -> anyhow::Result<ExitCode> {
    let entries = bundle::parse(&read_file(&args.file)?)?;
    let problems: Vec<String> = entries
        .iter()
        .filter_map(|entry| check(&entry.key, &entry.raw).err())
        .map(|err| format!("{err:#}"))
        .collect();
    if !problems.is_empty() {
        for problem in &problems {
            writeln!(out, "error: {problem}")?;
        }
        anyhow::bail!(
            "{} of {} entries are invalid; nothing was written",
            problems.len(),
            entries.len()
        );
    }
    for batch in entries.chunks(BATCH) {
        store.transaction(&[], &ops(batch)).await?;
    }
    writeln!(out, "loaded {} keys", entries.len())?;
    Ok(ExitCode::SUCCESS)
}

fn ops(batch: &[Entry]) -> Vec<TxnOp> {
    batch
        .iter()
        .map(|entry| TxnOp::Put {
            key: entry.key.clone(),
            value: entry.raw.clone(),
        })
        .collect()
}
