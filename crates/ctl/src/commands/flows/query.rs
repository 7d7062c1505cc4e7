//! The aggregator's side of `calicoctl flows` (and `policy impact`'s): the filter from the
//! flags, the client of `--flows-url`, a failed request in one line, a flow by its id.

use anyhow::{anyhow, bail};
use calico_flowlog::protocol::FlowResult;
use calico_flowlog::{FlowFilter, FlowLogError, QueryClient};

use crate::cli::{FlowActionArg, FlowDirectionArg, FlowFilterArgs, FlowsUrl};

/// The most flows one query returns (the aggregator's limit).
pub(crate) const MAX_LIMIT: u64 = 10_000;

/// The flow with this id among `flows`.
pub(crate) fn by_id(flows: Vec<FlowResult>, id: &str, total: usize) -> anyhow::Result<FlowResult> {
    let wanted = id.to_ascii_lowercase();
    if wanted.len() != 16 || !wanted.bytes().all(|b| b.is_ascii_hexdigit()) {
        bail!("--id {id:?}: expected the 16 hex digits of the ID column (or \"id\" in -o json)");
    }
    flows.into_iter().find(|f| f.id == wanted).ok_or_else(|| {
        anyhow!(
            "no flow with id {wanted} among the {total} that match the filter: it may have left \
             the aggregator's window (see `calicoctl flows` for the flows it holds)"
        )
    })
}

/// The flags as the aggregator's filter, each value checked by the filter itself.
pub(crate) fn filter(args: &FlowFilterArgs) -> anyhow::Result<FlowFilter> {
    let mut filter = FlowFilter::default();
    let lists: [(&str, &Vec<String>); 6] = [
        ("endpoint", &args.endpoint),
        ("address", &args.address),
        ("profile", &args.profile),
        ("tier", &args.tier),
        ("policy", &args.policy),
        ("reporter", &args.reporter),
    ];
    let actions = args.action.iter().map(|a| match a {
        FlowActionArg::Allow => "allow",
        FlowActionArg::Deny => "deny",
    });
    let directions = args.direction.iter().map(|d| match d {
        FlowDirectionArg::Ingress => "ingress",
        FlowDirectionArg::Egress => "egress",
    });
    let mut pairs: Vec<(&str, String)> = Vec::new();
    for (name, values) in lists {
        pairs.extend(values.iter().map(|v| (name, v.clone())));
    }
    pairs.extend(actions.map(|a| ("action", a.to_owned())));
    pairs.extend(directions.map(|d| ("direction", d.to_owned())));
    for (name, value) in pairs {
        filter
            .set(name, &value)
            .map_err(|e| anyhow!("--{name} {value:?}: {}", e.reason))?;
    }
    filter.start_gte = args.since.unwrap_or(0);
    filter.start_lt = args.until.unwrap_or(0);
    Ok(filter)
}

/// A client of `--flows-url`.
pub(crate) fn client(url: &FlowsUrl) -> anyhow::Result<QueryClient> {
    QueryClient::new(&url.flows_url).map_err(|e| match e {
        FlowLogError::Url { url, reason } => {
            anyhow!("--flows-url {url:?}: {reason} (or set CALICO_FLOWS_URL)")
        }
        other => anyhow!(other),
    })
}

/// A failed request, in one line; an aggregator that cannot be reached says what to do.
pub(crate) fn failed(url: &FlowsUrl, error: FlowLogError) -> anyhow::Error {
    let url = &url.flows_url;
    match error {
        FlowLogError::Connect { source, .. } => anyhow!(
            "cannot reach the flow aggregator at {url} ({source}): start calico-flows there \
             (see docs/observability.md), or give its address with --flows-url or \
             CALICO_FLOWS_URL"
        ),
        FlowLogError::Timeout { seconds, .. } => anyhow!(
            "the flow aggregator at {url} did not answer within {seconds} s: check that \
             calico-flows runs there, or give another address with --flows-url or \
             CALICO_FLOWS_URL"
        ),
        other => anyhow!(other),
    }
}
