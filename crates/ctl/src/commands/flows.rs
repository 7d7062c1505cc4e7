//! `calicoctl flows`: the flow records the aggregator (`calico-flows`) holds, listed newest
//! first or followed live, and `--explain`, which runs `policy explain` for one of them against
//! the live datastore and compares it with the trail the data plane recorded.
//!
//! | module | owns |
//! | --- | --- |
//! | `flows` | listing, following (Ctrl-C ends it) |
//! | `query` | the filter from the flags, the client, its errors in one line, a flow by id |
//! | `render` | the table and its cells (short endpoint names, `tcp/5432`, the deciding step) |
//! | `judge` | a flow record as a packet at its reporting endpoint of the live model (also `policy impact`'s) |
//! | `explain` | `--explain`: picking the flow, explaining it, printing both trails |
//! | `agree` | whether explain and the recorded trail agree, and if not why (pure) |

mod agree;
mod explain;
pub(crate) mod judge;
mod query;
pub(crate) mod render;

use std::io::Write;
use std::process::ExitCode;

use anyhow::bail;
use calico_flowlog::protocol::FlowResult;
use calico_flowlog::{FlowFilter, QueryClient, StreamEvent};
use tokio::signal::unix::{SignalKind, signal};

pub(crate) use query::{MAX_LIMIT, client, failed};
use query::{by_id, filter};

use super::print_report;
use crate::cli::{EtcdArgs, FlowsArgs, FlowsUrl, Output};

pub async fn run(
    etcd: &EtcdArgs,
    args: &FlowsArgs,
    out: &mut impl Write,
) -> anyhow::Result<ExitCode> {
    quiet_pipe(flows(etcd, args, out).await)
}

/// A reader that went away (`calicoctl flows -o json | head`) ends the command quietly.
pub(crate) fn quiet_pipe(result: anyhow::Result<ExitCode>) -> anyhow::Result<ExitCode> {
    match result {
        Err(error)
            if error
                .downcast_ref::<std::io::Error>()
                .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe) =>
        {
            Ok(ExitCode::SUCCESS)
        }
        other => other,
    }
}

async fn flows(
    etcd: &EtcdArgs,
    args: &FlowsArgs,
    out: &mut impl Write,
) -> anyhow::Result<ExitCode> {
    let filter = filter(&args.filter)?;
    let client = client(&args.aggregator)?;
    let format = args.output.output;
    if args.follow {
        return follow(&client, &args.aggregator, &filter, format, out).await;
    }
    if let Some(index) = args.explain {
        return explain::run(etcd, &client, &args.aggregator, &filter, args, index, out).await;
    }
    let list = client
        .list(&filter, limit(args))
        .await
        .map_err(|e| failed(&args.aggregator, e))?;
    let flows: Vec<FlowResult> = match &args.id {
        Some(id) => vec![by_id(list.flows, id, list.total)?],
        None => list.flows,
    };
    match format {
        Output::Table => {
            out.write_all(render::table(&flows, true).as_bytes())?;
            if flows.is_empty() {
                writeln!(out, "(no flows match)")?;
            } else if list.total > flows.len() && args.id.is_none() {
                writeln!(
                    out,
                    "(the newest {} of {} flows that match: narrow the filter, or raise --limit)",
                    flows.len(),
                    list.total
                )?;
            }
        }
        _ => {
            let report = serde_json::json!({"flows": flows, "total": list.total});
            print_report(format, &report, out)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `--limit`, or the most the aggregator gives when a flow is looked up by id.
fn limit(args: &FlowsArgs) -> Option<usize> {
    let limit = match args.id {
        Some(_) => Some(MAX_LIMIT),
        None => args.limit,
    };
    limit.map(|n| n as usize)
}

/// `--follow`: each record as it arrives, until Ctrl-C (or SIGTERM), which ends it with 0.
async fn follow(
    client: &QueryClient,
    url: &FlowsUrl,
    filter: &FlowFilter,
    format: Output,
    out: &mut impl Write,
) -> anyhow::Result<ExitCode> {
    // Registered before anything is printed, so a Ctrl-C from then on ends the loop cleanly.
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    let mut stream = client.stream(filter).await.map_err(|e| failed(url, e))?;
    if format == Output::Table && !wrote(writeln!(out, "{}", render::follow_header()))? {
        return Ok(ExitCode::SUCCESS);
    }
    loop {
        let event = tokio::select! {
            _ = interrupt.recv() => return Ok(ExitCode::SUCCESS),
            _ = terminate.recv() => return Ok(ExitCode::SUCCESS),
            event = stream.next() => event,
        };
        let result = match event {
            None => bail!(
                "the live stream from the flow aggregator at {} ended: calico-flows stopped or \
                 restarted; run the command again",
                url.flows_url
            ),
            Some(Err(error)) => return Err(failed(url, error)),
            Some(Ok(StreamEvent::Lagged(lagged))) => {
                eprintln!(
                    "warning: this stream fell behind and the aggregator skipped {} flow \
                     record(s): narrow the filter, or read the window with `calicoctl flows`",
                    lagged.missed
                );
                continue;
            }
            Some(Ok(StreamEvent::Flow(result))) => result,
        };
        let text = match format {
            Output::Table => render::follow_row(&result),
            Output::Yaml => crate::yaml::document(&serde_json::to_value(&*result)?),
            _ => format!("{}\n", serde_json::to_string(&*result)?),
        };
        if !wrote(out.write_all(text.as_bytes()).and_then(|()| out.flush()))? {
            return Ok(ExitCode::SUCCESS);
        }
    }
}

/// Whether a write got through: a reader that went away (`| head`) ends the output, quietly.
fn wrote(result: std::io::Result<()>) -> anyhow::Result<bool> {
    match result {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(false),
        Err(e) => Err(e.into()),
    }
}
