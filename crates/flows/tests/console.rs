//! The web console in a real browser: Debian's headless chromium, driven through chromedriver
//! (WebDriver), against the real `calico-flows`. Checks what a person sees: a denied flow
//! posted to the aggregator shows up in the open page with the policy that denied it, a filter
//! narrows the table, the graph draws the denied edge, and names that are HTML stay text.
//!
//! Needs chromium and chromium-driver (scripts/setup-test-deps.sh).

mod common;

use std::time::{Duration, Instant};

use calico_testkit::eventually;
use common::webdriver::Browser;
use common::{Flows, batch, ingress, wep};
use serde_json::json;

/// The console refreshes every 5 s (console.js REFRESH_MS) and on every streamed record; a
/// row must be there within a refresh, with room for a slow machine.
const REFRESH: Duration = Duration::from_secs(5);

/// Rows of the flow table, as the browser renders them.
fn rows(browser: &Browser) -> Vec<String> {
    browser.texts("#flows tbody tr")
}

fn wait_rows(browser: &Browser, what: &str, test: impl Fn(&[String]) -> bool) -> Vec<String> {
    let mut seen = Vec::new();
    eventually(what, 3 * REFRESH, || {
        seen = rows(browser);
        if test(&seen) {
            Ok(())
        } else {
            Err(format!("rows: {seen:#?}"))
        }
    });
    seen
}

fn save_screenshot(browser: &Browser, name: &str) {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let _ = std::fs::write(dir.join(name), browser.screenshot());
}

#[test]
fn a_denied_flow_appears_with_its_policy_and_filters_narrow_the_table() {
    let flows = Flows::start(&[]);
    // An allowed flow that a staged policy would deny.
    let mut allowed = ingress(wep("h1", "ns.web", "web"), "ns.db", "allow", "db-in", 0, 5);
    allowed["policies"]["pending"] = json!([
        {"kind": "staged-policy", "tier": "default", "name": "lockdown", "rule_index": 0, "action": "deny"}
    ]);
    let (status, reply) = flows.post(&batch(&[allowed]));
    assert_eq!(
        (status, reply["accepted"].as_u64()),
        (200, Some(1)),
        "{reply}"
    );
    let browser = Browser::start();
    browser.open(&format!("{}/", flows.url()));
    let seen = wait_rows(&browser, "the allowed flow in the table", |rows| {
        rows.len() == 1
    });
    assert!(
        seen[0].contains("allow")
            && seen[0].contains("would deny: tier default staged policy lockdown rule 1: deny"),
        "the real verdict and the staged one side by side: {seen:?}"
    );

    // A denied flow arrives while the page is open: no reload.
    let posted = Instant::now();
    let mut denied = ingress(
        wep("h1", "ns.front", "front"),
        "ns.db",
        "deny",
        "db-guard",
        2,
        5,
    );
    denied["source"]["address"] = json!("10.65.0.10");
    denied["destination"]["address"] = json!("10.65.1.20");
    assert_eq!(flows.post(&batch(&[denied])).1["accepted"], 1);
    let seen = wait_rows(&browser, "the denied flow in the table", |rows| {
        rows.iter()
            .any(|r| r.contains("tier default policy db-guard rule 3: deny"))
    });
    eprintln!(
        "the denied flow appeared {:?} after it was posted",
        posted.elapsed()
    );
    let row = seen.iter().find(|r| r.contains("db-guard")).unwrap();
    assert!(
        row.contains("h1/ns.front/eth0 (10.65.0.10)") && row.contains("h2/ns.db/eth0 (10.65.1.20)"),
        "each side with its address: {row}"
    );
    assert!(row.contains("deny") && row.contains("tcp/5432"), "{row}");
    assert_eq!(
        browser
            .find_all("#flows tbody tr[data-action=\"deny\"]")
            .len(),
        1
    );

    // The picture: both endpoints as nodes, the denied flow as a red edge.
    let denied_edges = browser.find_all("#graph path.edge.deny");
    assert_eq!(denied_edges.len(), 1);
    assert_eq!(
        browser.find_all("#graph path.edge.allow.staged").len(),
        1,
        "the staged deny, dashed"
    );
    assert_eq!(
        browser.find_all("#graph g.node").len(),
        3,
        "web, front and db"
    );

    // The trail, on a click: tier → policy → rule → action.
    browser.click("#flows tbody tr[data-action=\"deny\"]");
    let trail = browser.texts("#trail-enforced li");
    assert_eq!(trail.len(), 1);
    for hop in ["tier default", "policy db-guard", "rule 3", "deny"] {
        assert!(trail[0].contains(hop), "{trail:?}");
    }
    let details = browser.texts("#detail-fields dd");
    assert!(details.iter().any(|d| d == "10.65.0.10"), "{details:?}");
    save_screenshot(&browser, "console.png");
    browser.click("#flows tbody tr[data-action=\"allow\"]");
    let pending = browser.texts("#trail-pending li");
    assert_eq!(pending.len(), 1, "{pending:?}");
    for hop in ["tier default", "staged policy lockdown", "rule 1", "deny"] {
        assert!(pending[0].contains(hop), "{pending:?}");
    }

    // Typing a policy narrows the table to its flows; clearing brings the others back.
    let policy = browser.find("input[name=policy]");
    browser.type_into(&policy, "db-guard");
    let narrowed = wait_rows(&browser, "only db-guard's flows", |rows| {
        rows.len() == 1 && rows[0].contains("db-guard")
    });
    assert_eq!(narrowed.len(), 1);
    browser.clear(&policy);
    browser.script("document.getElementById('filters').dispatchEvent(new Event('input'))");
    wait_rows(&browser, "both flows again", |rows| rows.len() == 2);
    // An address (or CIDR) narrows to the flows with it at either end.
    let address = browser.find("input[name=address]");
    browser.type_into(&address, "10.65.1.0/24");
    wait_rows(
        &browser,
        "only the flow with an address in 10.65.1.0/24",
        |rows| rows.len() == 1 && rows[0].contains("db-guard"),
    );
    browser.clear(&address);
    browser.script("document.getElementById('filters').dispatchEvent(new Event('input'))");
    wait_rows(&browser, "both flows again", |rows| rows.len() == 2);
    browser.click("select[name=action] option[value=allow]");
    wait_rows(&browser, "only the allowed flow", |rows| {
        rows.len() == 1 && rows[0].contains("db-in")
    });
}

#[test]
fn names_that_are_html_are_shown_as_text_and_never_run() {
    let flows = Flows::start(&[]);
    // A profile id cannot hold markup (the model allows [a-zA-Z0-9_.-]): refused by name.
    let mut hostile_profile = ingress(
        wep("h1", "ns.web", "web"),
        "ns.db",
        "deny",
        "db-guard",
        0,
        5,
    );
    hostile_profile["source"]["profiles"] = json!(["<script>alert(1)</script>"]);
    // A workload id and label values can: they must stay text.
    let workload = "<script>alert(1)<script>";
    let label = "<img src=x onerror=\"window.__xss=1;alert(2)\">";
    let mut source = wep("h1", workload, "web");
    source["labels"] = json!({ "note": label, "app": "<script>window.__xss=1</script>" });
    let marked_up = ingress(source, "ns.db", "deny", "db-guard", 0, 5);
    let (_, reply) = flows.post(&batch(&[hostile_profile, marked_up]));
    assert_eq!(reply["accepted"], 1, "{reply}");
    assert_eq!(
        reply["refused"][0]["field"], "records[0].source.profiles[0]",
        "{reply}"
    );
    assert!(
        reply["refused"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("invalid profile id")
    );

    let browser = Browser::start();
    browser.open(&format!("{}/", flows.url()));
    let seen = wait_rows(&browser, "the flow in the table", |rows| rows.len() == 1);
    assert!(
        seen[0].contains(&format!("h1/{workload}/eth0")),
        "the name as text: {seen:?}"
    );
    browser.click("#flows tbody tr");
    let details = browser.texts("#detail-fields").concat();
    assert!(details.contains(label), "the label as text: {details}");
    assert!(
        details.contains("<script>window.__xss=1</script>"),
        "{details}"
    );
    // The graph names the node in its SVG title (the label may be shortened), as text too.
    let nodes = browser.script(
        "return Array.from(document.querySelectorAll('#graph g.node title'), t => t.textContent);",
    );
    let nodes: Vec<String> = serde_json::from_value(nodes).expect("the node titles");
    assert!(nodes.iter().any(|n| n.contains(workload)), "{nodes:?}");
    save_screenshot(&browser, "console-escaping.png");

    // Nothing ran: no alert, no marker, no element made from the names.
    assert_eq!(browser.alert(), None, "an alert is open");
    let ran = browser.script(
        "return [window.__xss === undefined, \
         document.querySelectorAll('main img, main script, #graph foreignObject').length]",
    );
    assert_eq!(
        ran,
        json!([true, 0]),
        "[no marker set, no element injected]"
    );
}
