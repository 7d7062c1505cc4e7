//! `calicoctl flows --explain`: one flow, `policy explain` for it on the live datastore, the two
//! side by side, and whether they agree (`agree`).

use std::io::Write;
use std::process::ExitCode;

use anyhow::bail;
use calico_calc::{Explanation, explain};
use calico_flowlog::protocol::FlowResult;
use calico_flowlog::{FlowFilter, QueryClient};
use calico_model::flow::{FlowRecord, PolicyHit};
use serde_json::{Value, json};

use super::agree::{self, Agreement};
use super::judge::{self, Judgement};
use super::query::{MAX_LIMIT, by_id, failed};
use super::render;
use crate::cli::{EtcdArgs, FlowsArgs, FlowsUrl, Output};
use crate::commands::{explain as explain_command, print_report};
use crate::connect;

/// Explains the flow numbered `index` in the listing (or the one `--id` names).
pub async fn run(
    etcd: &EtcdArgs,
    client: &QueryClient,
    url: &FlowsUrl,
    filter: &FlowFilter,
    args: &FlowsArgs,
    index: Option<usize>,
    out: &mut impl Write,
) -> anyhow::Result<ExitCode> {
    let (number, result) = pick(client, url, filter, args, index).await?;
    let store = connect::connect(etcd).await?;
    let cluster = explain_command::load(store.as_ref()).await?;
    let judged = judge::packet_of(&cluster, &result.flow);
    let explained = judged
        .as_ref()
        .ok()
        .map(|j| explain(&cluster, &j.endpoint, j.direction, &j.packet));
    let newer = same_connection(client, url, &result.flow).await?;
    let agreement = agree::compare(&cluster, &result.flow, &judged, explained.as_ref(), &newer);
    let shown = Shown {
        number,
        result: &result,
        judged: &judged,
        explained: explained.as_ref(),
        agreement: &agreement,
    };
    match args.output.output {
        Output::Table => out.write_all(shown.text().as_bytes())?,
        format => print_report(format, &shown.json(), out)?,
    }
    Ok(ExitCode::SUCCESS)
}

/// The flow to explain: by its number in the listing with the same filter and limit, or by id.
async fn pick(
    client: &QueryClient,
    url: &FlowsUrl,
    filter: &FlowFilter,
    args: &FlowsArgs,
    index: Option<usize>,
) -> anyhow::Result<(Option<usize>, FlowResult)> {
    let limit = match (&args.id, index) {
        (Some(_), Some(_)) => bail!("--explain takes a number or --id, not both"),
        (None, None) => bail!(
            "--explain needs the flow: its number in the # column of `calicoctl flows` with the \
             same filters (--explain 3), or --id ID"
        ),
        (None, Some(0)) => bail!("--explain 0: flows are numbered from 1"),
        (Some(_), None) => MAX_LIMIT,
        (None, Some(_)) => args.limit.unwrap_or(1000),
    };
    let list = client
        .list(filter, Some(limit as usize))
        .await
        .map_err(|e| failed(url, e))?;
    if let Some(id) = &args.id {
        return Ok((None, by_id(list.flows, id, list.total)?));
    }
    let index = index.expect("checked above");
    let count = list.flows.len();
    match list.flows.into_iter().nth(index - 1) {
        Some(result) => Ok((Some(index), result)),
        None => bail!(
            "--explain {index}: the listing with these filters has {count} flow(s); see \
             `calicoctl flows` with the same filters for the numbers"
        ),
    }
}

/// The aggregator's records of the flow's connection (every trail it was recorded with).
async fn same_connection(
    client: &QueryClient,
    url: &FlowsUrl,
    flow: &FlowRecord,
) -> anyhow::Result<Vec<FlowResult>> {
    let (_, side) = flow.reporting_side();
    let filter = FlowFilter {
        endpoints: vec![side.name()],
        reporters: vec![flow.reporter.clone()],
        directions: vec![flow.direction],
        ..FlowFilter::default()
    };
    let list = client
        .list(&filter, Some(MAX_LIMIT as usize))
        .await
        .map_err(|e| failed(url, e))?;
    Ok(list.flows)
}

/// What is printed.
struct Shown<'a> {
    number: Option<usize>,
    result: &'a FlowResult,
    judged: &'a Result<Judgement, String>,
    explained: Option<&'a Explanation>,
    agreement: &'a Agreement,
}

impl Shown<'_> {
    fn text(&self) -> String {
        let flow = &self.result.flow;
        let number = self.number.map(|n| format!("{n} ")).unwrap_or_default();
        let mut text = format!(
            "flow {number}(id {}): {} -> {} {} {}, reported by {}, {} to {}\n\n",
            self.result.id,
            render::short(&flow.source),
            render::short(&flow.destination),
            render::port(flow),
            flow.direction.as_str(),
            flow.reporter,
            render::time(flow.start_time),
            render::time(flow.end_time),
        );
        let now = self.explained.map(|e| {
            let step =
                judge::hit_of(&e.reason).map_or_else(|| e.reason.to_string(), |h| h.to_string());
            (judge::verdict(e).to_string(), step)
        });
        let (now_verdict, now_step) = now.unwrap_or_else(|| ("-".into(), "-".into()));
        let rows = vec![
            vec![
                String::new(),
                "recorded (data plane)".into(),
                "explain now (datastore)".into(),
            ],
            vec!["verdict".into(), flow.action.to_string(), now_verdict],
            vec!["decided by".into(), render::decided(flow), now_step],
        ];
        text.push_str(&render::align(&rows));
        text.push_str("\nrecorded trail:\n");
        text.push_str(&steps(&flow.policies.enforced));
        if !flow.policies.pending.is_empty() {
            text.push_str(&format!(
                "with staged policies ({}):\n",
                render::staged(flow)
            ));
            text.push_str(&steps(&flow.policies.pending));
        }
        match (self.judged, self.explained) {
            (Ok(judged), Some(explained)) => {
                text.push_str(&format!("\n{}\n", judge::command(judged)));
                text.push_str(&format!("{explained}\n"));
            }
            (Err(reason), _) => text.push_str(&format!("\nnot explained: {reason}\n")),
            (Ok(_), None) => {}
        }
        text.push_str(&format!("\n{}\n", self.agreement));
        text
    }

    fn json(&self) -> Value {
        let explain = match (self.judged, self.explained) {
            (Ok(judged), Some(explained)) => json!({
                "command": judge::command(judged),
                "endpoint": judged.endpoint.to_string(),
                "direction": judged.direction.to_string(),
                "src": judged.packet.src.to_string(),
                "dst": judged.packet.dst.to_string(),
                "verdict": judge::verdict(explained),
                "decidedBy": judge::hit_of(&explained.reason),
                "reason": explained.reason.to_string(),
                "trace": explained.trace,
                "error": null,
            }),
            (Err(reason), _) => json!({"error": reason}),
            (Ok(_), None) => Value::Null,
        };
        json!({
            "number": self.number,
            "flow": self.result,
            "explain": explain,
            "agreement": {
                "agree": *self.agreement == Agreement::Agree,
                "cause": self.agreement.cause(),
                "details": self.agreement.details(),
            },
        })
    }
}

fn steps(trail: &[PolicyHit]) -> String {
    let lines = trail
        .iter()
        .enumerate()
        .map(|(i, step)| format!("  {}. {step}\n", i + 1));
    lines.collect()
}
