//! Observed flows before and after a change: each flow the aggregator holds, judged at its
//! reporting endpoint (`flows::judge`) in the model before and the model after.

use calico_calc::{Cluster, Explanation, explain};
use calico_flowlog::protocol::FlowResult;
use calico_model::flow::Verdict;

use crate::commands::flows::judge;

/// A flow whose verdict changes.
#[derive(Debug, Clone)]
pub struct FlowChange {
    pub result: FlowResult,
    pub before: Verdict,
    pub after: Verdict,
    /// The steps that decide, before and after.
    pub before_step: String,
    pub after_step: String,
}

/// What judging the flows found.
#[derive(Debug, Default)]
pub struct Observed {
    pub judged: usize,
    /// Flows that could not be judged (an end gone from the datastore, ...), with why.
    pub not_judged: Vec<(String, String)>,
    pub changes: Vec<FlowChange>,
}

pub fn judge_flows(before: &Cluster, after: &Cluster, flows: &[FlowResult]) -> Observed {
    let mut observed = Observed::default();
    for result in flows {
        let judged = judge::packet_of(before, &result.flow);
        let judged = match judged {
            Ok(judged) => judged,
            Err(reason) => {
                observed.not_judged.push((result.id.clone(), reason));
                continue;
            }
        };
        observed.judged += 1;
        let was = explain(before, &judged.endpoint, judged.direction, &judged.packet);
        let will = explain(after, &judged.endpoint, judged.direction, &judged.packet);
        if was.verdict == will.verdict {
            continue;
        }
        observed.changes.push(FlowChange {
            result: result.clone(),
            before: judge::verdict(&was),
            after: judge::verdict(&will),
            before_step: step(&was),
            after_step: step(&will),
        });
    }
    observed
}

fn step(explained: &Explanation) -> String {
    judge::hit_of(&explained.reason)
        .map_or_else(|| explained.reason.to_string(), |hit| hit.to_string())
}
