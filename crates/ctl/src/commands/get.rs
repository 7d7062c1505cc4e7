//! `calicoctl get KEY-or-PREFIX`: the value at a key, or every key and value under a prefix
//! (`get KIND [NAME]`, for resources, is `resource::get`).
//! Stored values that the model refuses are flagged on stderr, so an operator sees at once
//! which object Felix is treating as missing.

use std::io::Write;
use std::process::ExitCode;

use calico_datastore::{Datastore, KvPair};
use calico_model::invalid_warning;
use calico_model::key::Key;
use calico_model::value::parse_value;

use crate::cli::{GetArgs, Output};
use calico_model::bundle;

pub async fn run(
    store: &dyn Datastore,
    args: &GetArgs,
    out: &mut impl Write,
) -> anyhow::Result<ExitCode> {
    if !args.target.starts_with('/') {
        return super::resource::get(store, args, out).await;
    }
    if let Some(name) = &args.name {
        anyhow::bail!("unexpected {name:?} after a key: `get KEY` takes one key or prefix");
    }
    let key = &args.target;
    let (pairs, single) = fetch(store, key).await?;
    if pairs.is_empty() {
        anyhow::bail!("nothing at {key}: no such key and no keys below it");
    }
    pairs.iter().for_each(warn_if_invalid);
    match (args.output.unwrap_or(Output::Text), single) {
        (Output::Json, _) => {
            let rendered = bundle::render(pairs.iter().map(|p| (p.key.as_str(), p.value.as_str())));
            out.write_all(rendered.as_bytes())?;
        }
        (Output::Text, true) => writeln!(out, "{}", pairs[0].value)?,
        (Output::Text, false) => {
            for pair in &pairs {
                writeln!(out, "{}\n{}", pair.key, pair.value)?;
            }
        }
        (other, _) => anyhow::bail!(
            "-o {other:?} is for resources; a key prints as text or json",
            other = format!("{other:?}").to_lowercase()
        ),
    }
    Ok(ExitCode::SUCCESS)
}

/// The exact key if it exists (and does not end in '/'), else everything below it as a prefix.
async fn fetch(store: &dyn Datastore, key: &str) -> anyhow::Result<(Vec<KvPair>, bool)> {
    if !key.ends_with('/')
        && let Some(pair) = store.get(key).await?
    {
        return Ok((vec![pair], true));
    }
    let prefix = if key.ends_with('/') {
        key.to_owned()
    } else {
        format!("{key}/")
    };
    Ok((store.list(&prefix).await?, false))
}

fn warn_if_invalid(pair: &KvPair) {
    let Ok(key) = Key::parse(&pair.key) else {
        return; // not a key of the data model: nothing to check it against
    };
    if let Err(err) = parse_value(&key, &pair.value) {
        eprintln!("warning: {}", invalid_warning(&pair.key, &err));
    }
}
