//! What `policy impact` prints: the changes it judged, the probes, the endpoint pairs and the
//! observed flows that change verdict; as text, or as one JSON/YAML object (camelCase fields,
//! docs/observability.md).

use std::fmt::Write as _;
use std::time::Duration;

use calico_datastore::TxnOp;
use serde_json::{Value, json};

use super::observed::Observed;
use super::pairs::{PairChange, Pairs, Scope, Side};
use super::probes::Probe;
use crate::commands::flows::render;
use crate::resource::describe;
use crate::resource::store::Change;

/// The observed flows: read and judged, not asked for, or not reachable (why).
pub enum Flows {
    Read {
        total: usize,
        read: usize,
        observed: Observed,
    },
    Skipped,
    Unreachable(String),
}

pub struct Report<'a> {
    pub changes: &'a [Change],
    pub staged: &'a [usize],
    pub probes: &'a [Probe],
    pub scope: &'a Scope,
    pub pairs: &'a Pairs,
    pub flows: &'a Flows,
    pub since: Duration,
    pub url: &'a str,
}

impl Report<'_> {
    fn resource(&self, change: &Change) -> String {
        let mut text = describe(&change.id);
        if self.staged.contains(&change.index) {
            text.push_str(" (from a stagedPolicy: enforced)");
        }
        text
    }

    fn since(&self) -> String {
        humantime::format_duration(self.since).to_string()
    }

    pub fn text(&self) -> String {
        let mut text = String::new();
        for change in self.changes {
            let keys = change.ops.len();
            let _ = writeln!(
                text,
                "{}: would be {} ({keys} key(s) written)",
                self.resource(change),
                change.outcome
            );
        }
        text.push_str("nothing was written\n\n");
        let probes: Vec<String> = self.probes.iter().map(ToString::to_string).collect();
        let _ = writeln!(text, "probes: {}", probes.join(", "));
        let scope = match self.scope {
            Scope::All => "every endpoint".to_owned(),
            Scope::Some(keys) => format!("the {} endpoint(s)", keys.len()),
        };
        let pairs = self.pairs;
        let _ = writeln!(
            text,
            "endpoint pairs: {} of {} judged change verdict (the pairs of {} end(s) with an end \
             among {scope} the change can judge differently, each with the probes of its IP \
             version)",
            pairs.changes.len(),
            pairs.judged,
            pairs.ends,
        );
        if !pairs.changes.is_empty() {
            text.push_str(&pair_table(&pairs.changes));
        }
        text.push('\n');
        text.push_str(&self.flows_text());
        text
    }

    fn flows_text(&self) -> String {
        let (total, read, observed) = match self.flows {
            Flows::Skipped => return "observed flows: not read (--no-flows)\n".to_owned(),
            Flows::Unreachable(error) => {
                return format!("observed flows: not read: {error}; or give --no-flows\n");
            }
            Flows::Read {
                total,
                read,
                observed,
            } => (total, read, observed),
        };
        let mut text = format!(
            "observed flows (from {}, started in the last {}): {read} read",
            self.url,
            self.since()
        );
        if read < total {
            let _ = write!(text, " (the newest {read} of {total})");
        }
        let _ = writeln!(
            text,
            ", {} judged, {} not judged, {} change verdict",
            observed.judged,
            observed.not_judged.len(),
            observed.changes.len()
        );
        if !observed.changes.is_empty() {
            let mut rows = vec![
                [
                    "TIME",
                    "REPORTER",
                    "SOURCE",
                    "DESTINATION",
                    "PROTO/PORT",
                    "DIRECTION",
                ]
                .into_iter()
                .chain(["RECORDED", "NOW", "AFTER", "DECIDED AFTER BY", "ID"])
                .map(str::to_owned)
                .collect(),
            ];
            for change in &observed.changes {
                let flow = &change.result.flow;
                rows.push(vec![
                    render::time(flow.end_time),
                    flow.reporter.clone(),
                    render::short(&flow.source),
                    render::short(&flow.destination),
                    render::port(flow),
                    flow.direction.as_str().to_owned(),
                    flow.action.to_string(),
                    change.before.to_string(),
                    change.after.to_string(),
                    change.after_step.clone(),
                    change.result.id.clone(),
                ]);
            }
            text.push_str(&render::align(&rows));
        }
        for (id, reason) in &observed.not_judged {
            let _ = writeln!(text, "  not judged: flow {id}: {reason}");
        }
        text
    }

    pub fn json(&self) -> Value {
        let changes: Vec<Value> = (self.changes.iter())
            .map(|change| {
                let keys: Vec<String> = change.ops.iter().map(op_text).collect();
                json!({
                    "document": change.index,
                    "resource": describe(&change.id),
                    "staged": self.staged.contains(&change.index),
                    "outcome": change.outcome,
                    "writes": keys,
                })
            })
            .collect();
        let pairs: Vec<Value> = self.pairs.changes.iter().map(pair_json).collect();
        json!({
            "changes": changes,
            "written": false,
            "probes": self.probes.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "pairs": {
                "ends": self.pairs.ends,
                "scope": match self.scope {
                    Scope::All => Value::from("all"),
                    Scope::Some(keys) => keys.iter().map(|k| k.to_string()).collect(),
                },
                "judged": self.pairs.judged,
                "changed": pairs,
            },
            "flows": self.flows_json(),
        })
    }

    fn flows_json(&self) -> Value {
        let since = self.since.as_secs();
        match self.flows {
            Flows::Skipped => {
                json!({"read": false, "error": null, "url": null, "sinceSecs": since})
            }
            Flows::Unreachable(error) => {
                json!({"read": false, "error": error, "url": self.url, "sinceSecs": since})
            }
            Flows::Read {
                total,
                read,
                observed,
            } => {
                let changed: Vec<Value> = (observed.changes.iter())
                    .map(|c| {
                        json!({
                            "id": c.result.id,
                            "flow": c.result.flow,
                            "recorded": c.result.flow.action,
                            "before": c.before,
                            "after": c.after,
                            "beforeStep": c.before_step,
                            "afterStep": c.after_step,
                        })
                    })
                    .collect();
                let not_judged: Vec<Value> = (observed.not_judged.iter())
                    .map(|(id, reason)| json!({"id": id, "reason": reason}))
                    .collect();
                json!({
                    "read": true, "error": null, "url": self.url, "sinceSecs": since,
                    "total": total, "listed": read, "judged": observed.judged,
                    "notJudged": not_judged, "changed": changed,
                })
            }
        }
    }
}

fn op_text(op: &TxnOp) -> String {
    match op {
        TxnOp::Put { key, .. } => format!("put {key}"),
        TxnOp::Delete { key } => format!("delete {key}"),
    }
}

/// The most pairs the table shows; `-o json` lists them all.
const MAX_ROWS: usize = 100;

fn pair_table(changes: &[PairChange]) -> String {
    let header = [
        "SOURCE",
        "DESTINATION",
        "PROBE",
        "NOW",
        "AFTER",
        "BECAUSE (AFTER)",
    ];
    let mut rows = vec![header.map(str::to_owned).to_vec()];
    for change in changes.iter().take(MAX_ROWS) {
        let because: Vec<String> = (change.sides.iter())
            .map(|(side, _, after)| format!("{side}: {}", step(after)))
            .collect();
        rows.push(vec![
            render::short_key(&change.source),
            render::short_key(&change.destination),
            change.probe.to_string(),
            change.before.to_string(),
            change.after.to_string(),
            because.join("; "),
        ]);
    }
    let mut text = render::align(&rows);
    if changes.len() > MAX_ROWS {
        let more = changes.len() - MAX_ROWS;
        let _ = writeln!(text, "(and {more} more pairs: -o json lists them all)");
    }
    text
}

fn step(side: &Option<Side>) -> String {
    side.as_ref()
        .map_or_else(|| "-".to_owned(), |s| s.step.clone())
}

fn pair_json(change: &PairChange) -> Value {
    let sides: Vec<Value> = (change.sides.iter())
        .map(|(side, before, after)| {
            let judged = |s: &Option<Side>| match s {
                Some(s) => {
                    json!({"verdict": s.verdict.to_string(), "step": s.step, "decidedBy": s.hit})
                }
                None => Value::Null,
            };
            json!({"side": side, "before": judged(before), "after": judged(after)})
        })
        .collect();
    json!({
        "source": change.source,
        "destination": change.destination,
        "probe": change.probe.to_string(),
        "before": change.before.to_string(),
        "after": change.after.to_string(),
        "sides": sides,
    })
}
