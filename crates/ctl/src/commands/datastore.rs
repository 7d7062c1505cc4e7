//! `calicoctl datastore migrate --from-v2 ENDPOINTS [--apply] [--force]`: every `/calico/` key of
//! a Calico 1.4 datastore (etcd's v2 API) copied into the v3 datastore calicoctl points at.
//! A dry run unless `--apply`; the plan (`crate::migrate`) is the same either way.

use std::collections::HashMap;
use std::io::Write;
use std::process::ExitCode;

use calico_datastore::{Compare, Datastore, Expect, KvPair, TxnOp};
use calico_model::key::Prefix;

use serde_json::json;

use super::print_report;
use crate::cli::{MigrateArgs, Output};
use crate::migrate::{Action, Plan, Rejected};
use crate::v2;

/// etcd refuses transactions with more than 128 operations by default.
const BATCH: usize = 100;

pub async fn migrate(
    store: &dyn Datastore,
    args: &MigrateArgs,
    out: &mut impl Write,
) -> anyhow::Result<ExitCode> {
    let endpoints: Vec<String> = args
        .from_v2
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(str::to_owned)
        .collect();
    let client = calico_http::Client::new(&calico_http::Tls {
        ca_file: args.v2_ca_cert_file.clone(),
        cert_file: args.v2_cert_file.clone(),
        key_file: args.v2_key_file.clone(),
        system_bundle: false,
    })
    .map_err(|why| anyhow::anyhow!("TLS for the v2 source: {why}"))?
    .named("calicoctl");
    let leaves = v2::read_calico(&client, &endpoints).await?;
    let existing: HashMap<String, KvPair> = store
        .list(&Prefix::Calico.to_string())
        .await?
        .into_iter()
        .map(|pair| (pair.key.clone(), pair))
        .collect();
    let values = existing
        .iter()
        .map(|(key, pair)| (key.clone(), pair.value.clone()))
        .collect();
    let plan = Plan::new(leaves, &values);
    let format = args.output.output;
    let totals = plan.totals();
    let refused = totals.different > 0 && !args.force;
    let (outcome, written) = if refused {
        ("refused", 0)
    } else if !args.apply {
        (
            "dry-run",
            totals.new + if args.force { totals.different } else { 0 },
        )
    } else {
        ("written", write(store, &plan, &existing).await?)
    };
    if format != Output::Table {
        print_report(format, &report_json(&plan, outcome, written), out)?;
    } else {
        report(&plan, out)?;
        match outcome {
            "refused" => writeln!(
                out,
                "refused: {} keys hold other (newer) values in the v3 datastore; nothing {}written \
                 (--force overwrites them with the v2 values)",
                totals.different,
                if args.apply { "was " } else { "would be " }
            )?,
            "dry-run" => writeln!(
                out,
                "dry run: nothing written; {written} keys would be written (run again with --apply)"
            )?,
            _ => writeln!(out, "wrote {written} keys")?,
        }
    }
    Ok(if refused {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// The plan as `-o json|yaml` prints it.
fn report_json(plan: &Plan, outcome: &str, written: usize) -> serde_json::Value {
    let counts = |c: &crate::migrate::Counts| json!({ "new": c.new, "same": c.same, "different": c.different });
    let rejected = |keys: &[Rejected]| {
        keys.iter()
            .map(|r| json!({ "key": r.key, "reason": r.reason }))
            .collect::<Vec<_>>()
    };
    let kinds: serde_json::Map<String, serde_json::Value> = plan
        .counts
        .iter()
        .map(|(kind, c)| ((*kind).to_owned(), counts(c)))
        .collect();
    let different: Vec<&str> = plan.different().map(|(k, _, _)| k).collect();
    let values: Vec<serde_json::Value> = plan
        .different()
        .map(|(key, v2, v3)| json!({ "key": key, "v2": v2, "v3": v3 }))
        .collect();
    json!({
        "outcome": outcome,
        "keysWritten": written,
        "kinds": kinds,
        "total": counts(&plan.totals()),
        "invalid": rejected(&plan.invalid),
        "withTtl": rejected(&plan.with_ttl),
        "different": different,
        "differentValues": values,
    })
}

/// Writes the new keys (expecting them still absent) and, with `--force`, the different ones
/// (expecting them unchanged since they were read), in transactions of `BATCH` keys.
async fn write(
    store: &dyn Datastore,
    plan: &Plan,
    existing: &HashMap<String, KvPair>,
) -> anyhow::Result<usize> {
    let writes: Vec<(&str, &str, Expect)> = plan
        .keys
        .iter()
        .filter_map(|(key, value, action)| {
            let expect = match action {
                Action::New => Expect::Absent,
                Action::Different => Expect::ModRevision(existing[key].mod_revision),
                Action::Same => return None,
            };
            Some((key.as_str(), value.as_str(), expect))
        })
        .collect();
    for batch in writes.chunks(BATCH) {
        let compares: Vec<Compare> = batch
            .iter()
            .map(|(key, _, expect)| Compare {
                key: (*key).to_owned(),
                expect: *expect,
            })
            .collect();
        let ops: Vec<TxnOp> = batch
            .iter()
            .map(|(key, value, _)| TxnOp::Put {
                key: (*key).to_owned(),
                value: (*value).to_owned(),
            })
            .collect();
        if !store.transaction(&compares, &ops).await? {
            anyhow::bail!(
                "the v3 datastore changed while migrating (a key from {} to {} was written \
                 by someone else); run the migration again",
                batch[0].0,
                batch[batch.len() - 1].0
            );
        }
    }
    Ok(writes.len())
}

/// The counts per kind, then every key not copied and every key in the way.
fn report(plan: &Plan, out: &mut impl Write) -> std::io::Result<()> {
    writeln!(
        out,
        "{:<28} {:>6} {:>6} {:>10}",
        "KIND", "NEW", "SAME", "DIFFERENT"
    )?;
    for (kind, c) in &plan.counts {
        writeln!(
            out,
            "{kind:<28} {:>6} {:>6} {:>10}",
            c.new, c.same, c.different
        )?;
    }
    let t = plan.totals();
    writeln!(
        out,
        "{:<28} {:>6} {:>6} {:>10}",
        "total", t.new, t.same, t.different
    )?;
    rejected(out, "invalid, not copied", &plan.invalid)?;
    rejected(out, "with a TTL, not copied", &plan.with_ttl)?;
    let different: Vec<_> = plan.different().collect();
    if !different.is_empty() {
        writeln!(out, "different in v3 ({}):", different.len())?;
        for (key, v2, v3) in different {
            // The exact texts (a difference may be only in spacing); lines of a multi-line
            // value are indented under it.
            let shown = |value: &str| value.trim_end().replace('\n', "\n        ");
            writeln!(out, "  {key}\n    v2: {}\n    v3: {}", shown(v2), shown(v3))?;
        }
    }
    Ok(())
}

fn rejected(out: &mut impl Write, title: &str, keys: &[Rejected]) -> std::io::Result<()> {
    if keys.is_empty() {
        return Ok(());
    }
    writeln!(out, "{title} ({}):", keys.len())?;
    for r in keys {
        writeln!(out, "  {}: {}", r.key, r.reason)?;
    }
    Ok(())
}
