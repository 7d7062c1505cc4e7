//! What the console's view does, in Debian's headless chromium against the real
//! `calico-flows`: pausing holds new records back until resumed; the time range (a preset or
//! RFC 3339 bounds) and an address or CIDR narrow the view; the staged diff lists what a
//! staged policy would deny that is allowed today, and the reverse; the JSON and CSV exports
//! are the view, and the API link answers the same flows.
//!
//! Screenshots: `$CARGO_TARGET_TMPDIR/console/` (target/tmp/console/).

mod common;
mod console_support;

use calico_testkit::eventually;
use calico_testkit::webdriver::Browser;
use common::{Flows, batch, http, ingress, json_of, wep};
use console_support::{
    PATIENCE, cells, downloaded, downloads_into, rfc3339, rows, run, save_screenshot, viewport,
    wait_rows,
};
use serde_json::{Value, json};

fn staged(mut flow: Value, name: &str, action: &str) -> Value {
    flow["policies"]["pending"] = json!([{"kind": "staged-policy", "tier": "default", "name": name, "rule_index": 0, "action": action}]);
    flow
}

fn open(flows: &Flows) -> Browser {
    let browser = Browser::start();
    viewport(&browser, 1400, 900);
    browser.open(&format!("{}/", flows.url()));
    browser
}

fn post(flows: &Flows, records: &[Value]) {
    let (status, reply) = flows.post(&batch(records));
    assert_eq!(
        (status, reply["accepted"].as_u64()),
        (200, Some(records.len() as u64)),
        "{reply}"
    );
}

fn text(browser: &Browser, css: &str) -> String {
    browser.texts(css).concat()
}

/// Sets a form field as a person would: the value, then the event the page listens for.
fn set_field(browser: &Browser, name: &str, value: &str) {
    run(
        browser,
        "const f = document.getElementById('filters').elements[arguments[0]]; f.value = arguments[1]; \
         f.dispatchEvent(new Event('change', {bubbles: true}))",
        json!([name, value]),
    );
}

#[test]
fn pausing_holds_new_records_back_until_resumed() {
    let flows = Flows::start(&[]);
    post(
        &flows,
        &[ingress(
            wep("h1", "ns.web", "web"),
            "ns.db",
            "allow",
            "db-in",
            0,
            5,
        )],
    );
    let browser = open(&flows);
    wait_rows(&browser, "the first flow", |rows| rows.len() == 1);

    browser.click("#live");
    assert_eq!(
        browser.script("return document.getElementById('live').getAttribute('aria-pressed')"),
        "true"
    );
    let ticks = |b: &Browser| {
        b.script("return Number(document.getElementById('status').dataset.ticks || 0)")
            .as_u64()
            .unwrap()
    };
    post(
        &flows,
        &[ingress(
            wep("h1", "ns.front", "front"),
            "ns.db",
            "deny",
            "db-guard",
            2,
            4,
        )],
    );
    // The record reached the page (it counts it) and a refresh tick has passed since: it is
    // still not shown.
    eventually(
        "the paused page counting the new record",
        PATIENCE,
        || match text(&browser, "#live") {
            t if t == "Resume (1 new)" => Ok(()),
            t => Err(t),
        },
    );
    let after = ticks(&browser);
    eventually("a refresh tick while paused", PATIENCE, || {
        match ticks(&browser) > after {
            true => Ok(()),
            false => Err(format!("ticks {}", ticks(&browser))),
        }
    });
    let held = rows(&browser);
    assert_eq!(held.len(), 1, "paused: the new record not shown: {held:?}");
    assert!(
        text(&browser, "#status").starts_with("paused at "),
        "{}",
        text(&browser, "#status")
    );
    save_screenshot(&browser, "paused.png");

    browser.click("#live");
    wait_rows(&browser, "both flows once resumed", |rows| rows.len() == 2);
    assert_eq!(text(&browser, "#live"), "Pause");
}

#[test]
fn the_time_range_and_an_address_or_cidr_narrow_the_view() {
    let flows = Flows::start(&[]);
    // One flow that started 40 minutes ago, one a moment ago, one over IPv6.
    let mut old = ingress(
        wep("h1", "ns.old", "web"),
        "ns.db",
        "allow",
        "db-in",
        0,
        2400,
    );
    old["source"]["address"] = json!("10.65.0.10");
    old["destination"]["address"] = json!("10.65.1.20");
    let mut new = ingress(
        wep("h1", "ns.new", "web"),
        "ns.db",
        "deny",
        "db-guard",
        0,
        5,
    );
    new["source"]["address"] = json!("10.65.2.30");
    new["destination"]["address"] = json!("10.65.1.20");
    let mut v6 = ingress(wep("h1", "ns.six", "web"), "ns.db", "allow", "db-in", 0, 6);
    v6["source"]["address"] = json!("2001:db8::30");
    v6["destination"]["address"] = json!("fd00::20");
    post(&flows, &[old.clone(), new, v6]);
    let old_start = old["start_time"].as_u64().unwrap();
    let browser = open(&flows);
    wait_rows(&browser, "all three in the last hour", |rows| {
        rows.len() == 3
    });

    set_field(&browser, "range", "300");
    wait_rows(&browser, "the last 5 minutes: the two new flows", |rows| {
        rows.len() == 2 && !rows.iter().any(|r| r.contains("ns.old"))
    });
    // Bounds in RFC 3339, as the CLI takes them: only the old flow started in them.
    set_field(&browser, "range", "between");
    set_field(&browser, "from", &rfc3339(old_start - 60));
    set_field(&browser, "until", &rfc3339(old_start + 60));
    wait_rows(
        &browser,
        "only the flow that started in the bounds",
        |rows| rows.len() == 1 && rows[0].contains("ns.old"),
    );
    set_field(&browser, "until", "yesterday");
    eventually("the bad bound named", PATIENCE, || {
        match text(&browser, "#filter-error") {
            t if t.contains("Until \"yesterday\": expected an RFC 3339 time") => Ok(()),
            t => Err(t),
        }
    });
    set_field(&browser, "range", "");
    wait_rows(&browser, "any time: all three", |rows| rows.len() == 3);
    assert_eq!(
        text(&browser, "#filter-error"),
        "",
        "the error goes with the range"
    );

    // An address, a CIDR, an IPv6 CIDR: the flows with an end in it.
    for (address, expected) in [
        ("10.65.0.10", vec!["ns.old"]),
        ("10.65.0.0/16", vec!["ns.old", "ns.new"]),
        ("2001:db8::/32", vec!["ns.six"]),
    ] {
        set_field(&browser, "address", address);
        wait_rows(
            &browser,
            &format!("the flows with an end in {address}"),
            |rows| {
                rows.len() == expected.len()
                    && expected.iter().all(|e| rows.iter().any(|r| r.contains(e)))
            },
        );
    }
    set_field(&browser, "address", "web");
    eventually("the aggregator's refusal shown", PATIENCE, || {
        match text(&browser, "#status") {
            t if t.contains("cannot load flows") && t.contains("expected an IP address") => Ok(()),
            t => Err(t),
        }
    });
}

#[test]
fn the_staged_diff_lists_what_would_be_denied_and_what_would_be_allowed() {
    let flows = Flows::start(&[]);
    let would_deny = staged(
        ingress(wep("h1", "ns.web", "web"), "ns.db", "allow", "db-in", 0, 5),
        "lockdown",
        "deny",
    );
    let would_allow = staged(
        ingress(
            wep("h1", "ns.front", "front"),
            "ns.db",
            "deny",
            "db-guard",
            2,
            6,
        ),
        "opener",
        "allow",
    );
    let unchanged = staged(
        ingress(wep("h1", "ns.api", "api"), "ns.db", "allow", "db-in", 1, 7),
        "api-ok",
        "allow",
    );
    let plain = ingress(
        wep("h1", "ns.batch", "batch"),
        "ns.db",
        "deny",
        "db-guard",
        3,
        8,
    );
    post(&flows, &[would_deny, would_allow, unchanged, plain]);
    let browser = open(&flows);
    wait_rows(&browser, "all four flows", |rows| rows.len() == 4);
    assert_eq!(text(&browser, "#staged-count"), "(2)");

    browser.click("#views button[data-view=staged]");
    let shown = wait_rows(&browser, "the two changed flows", |rows| rows.len() == 2);
    let groups = browser.texts("#flows tbody tr.group");
    assert_eq!(
        groups,
        [
            "Allowed today, a staged policy would deny (1)",
            "Denied today, a staged policy would allow (1)"
        ]
    );
    assert!(
        shown[0].contains("h1/ns.web/eth0")
            && shown[0].contains("would deny: tier default staged policy lockdown rule 1: deny"),
        "{shown:?}"
    );
    assert!(
        shown[1].contains("h1/ns.front/eth0")
            && shown[1].contains("would allow: tier default staged policy opener rule 1: allow"),
        "{shown:?}"
    );
    // The order on the page: each group heading right above its flows.
    let order = browser.script(
        "return [...document.querySelectorAll('#flows tbody tr')].map(r => r.dataset.group || r.dataset.action)",
    );
    assert_eq!(order, json!(["deny", "allow", "allow", "deny"]));
    // The graph draws the view: two edges, both dashed.
    assert_eq!(browser.find_all("#graph path.edge.staged").len(), 2);
    assert_eq!(browser.find_all("#graph path.edge").len(), 2);
    save_screenshot(&browser, "staged-diff.png");

    browser.click("#views button[data-view=all]");
    wait_rows(&browser, "all four again", |rows| rows.len() == 4);
    assert!(browser.find_all("#flows tbody tr.group").is_empty());
}

/// A CSV text as rows of fields (RFC 4180: quoted fields, doubled quotes, CRLF).
fn parse_csv(text: &str) -> Vec<Vec<String>> {
    let (mut rows, mut row, mut field) = (Vec::new(), Vec::new(), String::new());
    let mut quoted = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                field.push('"');
                chars.next();
            }
            (true, '"') => quoted = false,
            (true, c) => field.push(c),
            (false, '"') => quoted = true,
            (false, ',') => row.push(std::mem::take(&mut field)),
            (false, '\r') => {}
            (false, '\n') => {
                row.push(std::mem::take(&mut field));
                rows.push(std::mem::take(&mut row));
            }
            (false, c) => field.push(c),
        }
    }
    rows
}

#[test]
fn the_exports_are_the_view_and_the_api_link_asks_the_same() {
    let flows = Flows::start(&[]);
    let mut denied = ingress(
        wep("h1", "ns.front", "front"),
        "ns.db",
        "deny",
        "db-guard",
        2,
        5,
    );
    denied["source"]["address"] = json!("10.65.0.10");
    let mut labelled = wep("h1", "ns.quote,\"comma\"", "web");
    labelled["labels"] = json!({"app": "a,b"});
    let records = [
        denied,
        staged(
            ingress(labelled, "ns.db", "deny", "db-guard", 0, 6),
            "opener",
            "allow",
        ),
        ingress(wep("h1", "ns.web", "web"), "ns.db", "allow", "db-in", 0, 7),
    ];
    post(&flows, &records);
    let browser = open(&flows);
    let dir = tempfile::tempdir().unwrap();
    downloads_into(&browser, dir.path());
    wait_rows(&browser, "all three", |rows| rows.len() == 3);
    set_field(&browser, "action", "deny");
    wait_rows(&browser, "the denied two", |rows| rows.len() == 2);

    // Paused, a new denied record is not in the view, so not in its export either.
    browser.click("#live");
    post(
        &flows,
        &[ingress(
            wep("h1", "ns.late", "late"),
            "ns.db",
            "deny",
            "db-guard",
            1,
            3,
        )],
    );
    eventually(
        "the paused page counting the new record",
        PATIENCE,
        || match text(&browser, "#live") {
            t if t == "Resume (1 new)" => Ok(()),
            t => Err(t),
        },
    );

    browser.click("#export-csv");
    let csv = parse_csv(&downloaded(dir.path(), ".csv"));
    let headings = browser.texts("#flows thead th");
    let shown = cells(&browser);
    assert_eq!(csv[0], headings, "the CSV's header is the table's");
    assert_eq!(csv[1..], shown[..], "the CSV's rows are the table's cells");
    assert_eq!(shown.len(), 2, "{shown:?}");
    assert!(csv.iter().all(|r| r.len() == headings.len()), "{csv:?}");
    assert!(
        csv[1..]
            .iter()
            .any(|r| r[2] == "h1/ns.quote,\"comma\"/eth0"),
        "{csv:?}"
    );

    browser.click("#export-json");
    let exported: Value = serde_json::from_str(&downloaded(dir.path(), ".json")).unwrap();
    let ids: Vec<&str> = exported["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap())
        .collect();
    let row_ids = browser.script(
        "return [...document.querySelectorAll('#flows tbody tr[data-id]')].map(r => r.dataset.id)",
    );
    assert_eq!(
        json!(ids),
        row_ids,
        "the JSON's flows are the table's, in order"
    );
    assert_eq!(exported["view"], "all");
    assert!(
        exported["query"].as_str().unwrap().contains("action=deny"),
        "{exported}"
    );
    for (flow, row) in exported["flows"].as_array().unwrap().iter().zip(&shown) {
        assert_eq!(row[0], rfc3339(flow["flow"]["end_time"].as_u64().unwrap()));
        assert_eq!(flow["flow"]["action"], "deny");
    }

    // The API link asks the aggregator the same query: the same flows, and now the late one.
    let href = browser
        .script("return document.getElementById('api-link').getAttribute('href')")
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        href.starts_with("/api/v1/flows?") && href.contains("action=deny"),
        "{href}"
    );
    let (status, answer) = http(&flows.address, "GET", &href, &[], b"");
    assert_eq!(status, 200);
    let answer = json_of(&answer);
    let answered: Vec<&str> = answer["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap())
        .collect();
    assert_eq!(answered.len(), 3, "{answer}");
    assert!(
        ids.iter().all(|id| answered.contains(id)),
        "{answered:?} ⊇ {ids:?}"
    );

    // The staged diff's export is the diff.
    browser.click("#live");
    browser.click("#views button[data-view=staged]");
    wait_rows(
        &browser,
        "the one flow a staged policy would allow",
        |rows| rows.len() == 1,
    );
    std::fs::remove_dir_all(dir.path()).unwrap();
    std::fs::create_dir(dir.path()).unwrap();
    browser.click("#export-json");
    let exported: Value = serde_json::from_str(&downloaded(dir.path(), ".json")).unwrap();
    assert_eq!(exported["view"], "staged");
    assert_eq!(exported["flows"].as_array().unwrap().len(), 1, "{exported}");
    assert_eq!(
        exported["flows"][0]["flow"]["policies"]["pending"][0]["name"],
        "opener"
    );
}
