//! The console reads without scrolling, in Debian's headless chromium at 1400×900 and at
//! 1920×1080, checked on element positions (not pixels) with a window of flows that is longer
//! than the screen and has long names, IPv6 ends, staged verdicts both ways and many edges:
//!
//! - the page itself never scrolls; every column of the table ends inside the viewport and no
//!   cell hides part of its text;
//! - the selected flow's details are in a side panel that stays in the viewport after the
//!   table is scrolled to its end (and after the window is asked to scroll);
//! - times are UTC RFC 3339 as `calicoctl flows` prints them, and `tcp/5432` is spelled one way
//!   in the table, the side panel and the graph;
//! - in the graph no two labels overlap and no edge passes through a label; the legend names
//!   exactly the kinds of edge drawn, each sample drawn in the edges' own stroke.
//!
//! Screenshots: `$CARGO_TARGET_TMPDIR/console/layout-WxH.png` (target/tmp/console/).

mod common;
mod console_support;

use calico_testkit::webdriver::Browser;
use common::{Flows, batch, ingress, wep};
use console_support::{SCREENS, cells, rfc3339, run, save_screenshot, viewport, wait_rows};
use serde_json::{Value, json};

/// Flows enough to overflow the table at 1920×1080, with what makes layouts break.
fn window_of_flows() -> Vec<Value> {
    let mut records = Vec::new();
    for i in 0..60u32 {
        let workload = format!("ns.team-{i}.frontend-service-with-a-rather-long-name");
        let verdict = if i % 3 == 0 { "deny" } else { "allow" };
        let mut flow = ingress(
            wep("h1", &workload, "web"),
            &format!("ns.db-{}", i % 5),
            verdict,
            &format!("db-guard-{}", i % 4),
            i % 7,
            5 + u64::from(i),
        );
        flow["source"]["address"] = json!(format!("10.65.0.{}", 10 + i));
        flow["destination"]["address"] = json!(format!("10.65.1.{}", 20 + i % 5));
        flow["packets_in"] = json!(1_234_567 + i);
        flow["bytes_in"] = json!(98_765_432_100u64 + u64::from(i));
        let (staged, action) = match verdict {
            "allow" => ("lockdown-everything-in-the-namespace", "deny"),
            _ => ("open-the-database-port", "allow"),
        };
        if i % 2 == 0 {
            flow["policies"]["pending"] = json!([{"kind": "staged-policy", "tier": "default",
                "name": staged, "rule_index": 0, "action": action}]);
        }
        records.push(flow);
    }
    // A net source over IPv6, and a profile that decided.
    let mut v6 = ingress(
        json!({"kind": "net", "net": "2001:db8:1234:5678:9abc:def0:1234:5678"}),
        "ns.db-0",
        "allow",
        "unused",
        0,
        3,
    );
    v6["source"]["address"] = json!("2001:db8:1234:5678:9abc:def0:1234:5678");
    v6["destination"]["address"] = json!("fd00:10:65:1::20");
    v6["policies"]["enforced"] =
        json!([{"kind": "profile", "name": "db", "rule_index": 11, "action": "allow"}]);
    records.push(v6);
    records
}

/// Everything that would make the page scroll or cut a column: rectangles outside the
/// viewport, cells whose text is wider than the cell.
const LAYOUT: &str = r#"
const vw = innerWidth, vh = innerHeight, bad = [];
const box = (e) => e.getBoundingClientRect();
const out = (r) => r.left < -0.5 || r.top < -0.5 || r.right > vw + 0.5 || r.bottom > vh + 0.5;
const page = document.scrollingElement;
if (page.scrollHeight > vh || page.scrollWidth > vw) bad.push(`the page scrolls: ${page.scrollWidth}x${page.scrollHeight}`);
for (const sel of ['header', '#filters', '#table-section', '#side', '#graph-section', '.exports', '#views']) {
  const r = box(document.querySelector(sel));
  if (out(r)) bad.push(`${sel} outside the viewport: ${JSON.stringify(r)}`);
}
const scroll = document.getElementById('table-scroll');
if (scroll.scrollWidth > scroll.clientWidth) bad.push(`the table scrolls sideways: ${scroll.scrollWidth} > ${scroll.clientWidth}`);
const headers = [...document.querySelectorAll('#flows thead th')];
for (const th of headers) {
  const r = box(th);
  if (r.left < 0 || r.right > vw || r.right > box(scroll).right + 0.5) bad.push(`column ${th.textContent} ends at ${r.right}`);
  if (th.scrollWidth > th.clientWidth) bad.push(`heading ${th.textContent} cut`);
}
for (const td of document.querySelectorAll('#flows tbody td')) {
  if (td.scrollWidth > td.clientWidth || td.scrollHeight > td.clientHeight) bad.push(`cell cut: ${td.textContent}`);
  if (box(td).right > vw) bad.push(`cell ends outside: ${td.textContent}`);
}
return { bad, columns: headers.map(th => [th.textContent, Math.round(box(th).left), Math.round(box(th).right)]),
         rows: document.querySelectorAll('#flows tbody tr[data-id]').length,
         overflowing: scroll.scrollHeight > scroll.clientHeight };
"#;

/// The side panel after the table is scrolled to its end and the window asked to scroll.
const PANEL: &str = r#"
const scroll = document.getElementById('table-scroll');
scroll.scrollTop = scroll.scrollHeight;
window.scrollTo(0, 100000);
const r = document.getElementById('detail-section').getBoundingClientRect();
const detail = document.getElementById('detail');
return { scrolled: scroll.scrollTop, window: [scrollX, scrollY], shown: !detail.hidden,
         rect: [r.left, r.top, r.right, r.bottom], viewport: [innerWidth, innerHeight],
         id: document.getElementById('detail-id').textContent };
"#;

/// Label rectangles that overlap each other, label rectangles that an edge passes through
/// (each edge sampled every 2 px, in screen coordinates), labels outside the drawing, and
/// the legend against the kinds drawn.
const GRAPH: &str = r#"
const graph = document.getElementById('graph');
const area = graph.getBoundingClientRect();
const labels = [...graph.querySelectorAll('g.node text')].map(t => [t.textContent, t.getBoundingClientRect()]);
const hit = (a, b) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
const bad = [];
labels.forEach(([name, r], i) => {
  if (r.width === 0) bad.push(`label ${name} not drawn`);
  if (r.left < area.left || r.right > area.right || r.top < area.top || r.bottom > area.bottom) bad.push(`label ${name} outside the graph`);
  labels.slice(i + 1).forEach(([other, s]) => { if (hit(r, s)) bad.push(`labels overlap: ${name} / ${other}`); });
});
const edges = [...graph.querySelectorAll('path.edge')];
for (const path of edges) {
  const ctm = path.getScreenCTM(), length = path.getTotalLength(), width = parseFloat(getComputedStyle(path).strokeWidth) / 2;
  for (let at = 0; at <= length; at += 2) {
    const p = path.getPointAtLength(at).matrixTransform(ctm);
    for (const [name, r] of labels) {
      if (p.x + width > r.left && p.x - width < r.right && p.y + width > r.top && p.y - width < r.bottom) {
        bad.push(`edge ${path.dataset.kind} through label ${name} at ${Math.round(p.x)},${Math.round(p.y)}`);
        break;
      }
    }
  }
}
const drawn = [...new Set(edges.map(e => e.dataset.kind))].sort();
const legend = [...document.querySelectorAll('#legend li[data-kind]')].map(li => li.dataset.kind).sort();
const style = (e) => { const s = getComputedStyle(e); return [s.stroke, s.strokeDasharray, s.strokeWidth]; };
const samples = legend.map(kind => {
  const sample = document.querySelector(`#legend li[data-kind="${kind}"] path`);
  const edge = edges.find(e => e.dataset.kind === kind);
  return [kind, style(sample), edge ? style(edge) : null, document.querySelector(`#legend li[data-kind="${kind}"]`).textContent];
});
return { bad: [...new Set(bad)].slice(0, 20), labels: labels.length, edges: edges.length, drawn, legend, samples };
"#;

/// The page's text (and the graph's titles), for spellings of times and ports.
const SPELLING: &str = r#"
const text = [document.body.innerText, ...[...document.querySelectorAll('#graph title')].map(t => t.textContent)].join('\n');
const rfc = /\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z/g;
const rest = text.replace(rfc, '');
return { times: (text.match(rfc) || []).length,
         other_times: rest.match(/\b\d{1,2}:\d{2}:\d{2}\b|\b[AP]M\b/g) || [],
         other_ports: text.match(/\b(tcp|udp|sctp|TCP|UDP)[: ]\d+|\bport \d+/g) || [],
         titles: [...document.querySelectorAll('#graph path.edge title')].map(t => t.textContent) };
"#;

#[test]
fn the_console_reads_without_scrolling_at_1400x900_and_1920x1080() {
    let flows = Flows::start(&[]);
    let records = window_of_flows();
    let (status, reply) = flows.post(&batch(&records));
    assert_eq!(
        (status, reply["accepted"].as_u64()),
        (200, Some(records.len() as u64)),
        "{reply}"
    );
    let newest_end = records[records.len() - 1]["end_time"].as_u64().unwrap();
    let browser = Browser::start();
    for (width, height) in SCREENS {
        viewport(&browser, width, height);
        browser.open(&format!("{}/", flows.url()));
        wait_rows(&browser, "every flow in the table", |rows| {
            rows.len() == records.len()
        });

        let layout = run(&browser, LAYOUT, json!([]));
        eprintln!("{width}x{height} columns: {}", layout["columns"]);
        assert_eq!(layout["bad"], json!([]), "{width}x{height}: {layout:#}");
        assert_eq!(
            layout["overflowing"], true,
            "the table is longer than the screen (else the panel check proves nothing)"
        );

        // Spelling: the newest flow's time as the CLI prints it, tcp/5432 everywhere.
        let table = cells(&browser);
        assert_eq!(table[0][0], rfc3339(newest_end), "TIME of the newest flow");
        assert_eq!(table[0][2], "2001:db8:1234:5678:9abc:def0:1234:5678");
        assert_eq!(table[0][4], "tcp/5432");
        assert_eq!(table[0][7], "profile db rule 12: allow");

        // The side panel: a flow far down the table, then the table scrolled to its end.
        browser.click("#flows tbody tr[data-id]:nth-last-child(2)");
        let panel = run(&browser, PANEL, json!([]));
        let rect: Vec<f64> = serde_json::from_value(panel["rect"].clone()).unwrap();
        let inside = rect[0] >= 0.0
            && rect[1] >= 0.0
            && rect[2] <= f64::from(width)
            && rect[3] <= f64::from(height);
        assert!(
            panel["shown"] == true && inside && panel["window"] == json!([0, 0]),
            "the panel in the viewport after scrolling: {panel:#}"
        );
        assert!(
            panel["scrolled"].as_f64().unwrap() > 0.0,
            "the table scrolled: {panel}"
        );
        let details = browser.texts("#detail-fields").concat();
        for expected in ["proto/port\ntcp/5432", "first seen\n", "last seen\n"] {
            assert!(details.contains(expected), "{expected:?} in {details}");
        }
        let spelling = run(&browser, SPELLING, json!([]));
        assert_eq!(
            (&spelling["other_times"], &spelling["other_ports"]),
            (&json!([]), &json!([])),
            "times only as RFC 3339 UTC, ports only as tcp/5432: {spelling:#}"
        );
        assert!(
            spelling["times"].as_u64().unwrap() > records.len() as u64,
            "{spelling}"
        );
        let titles = spelling["titles"].as_array().unwrap();
        assert!(
            titles
                .iter()
                .all(|t| t.as_str().unwrap().contains("\ntcp/5432 ")),
            "edge titles spell the port as the table: {titles:?}"
        );

        // The graph: labels apart from each other and from every edge; the legend is the
        // drawing's.
        let graph = run(&browser, GRAPH, json!([]));
        eprintln!(
            "{width}x{height} graph: {} labels, {} edges, kinds {}",
            graph["labels"], graph["edges"], graph["drawn"]
        );
        assert_eq!(graph["bad"], json!([]), "{width}x{height}: {graph:#}");
        assert!(graph["labels"].as_u64().unwrap() >= 10, "{graph}");
        assert_eq!(
            graph["legend"], graph["drawn"],
            "legend entries = kinds drawn"
        );
        assert_eq!(
            graph["drawn"],
            json!(["allow", "allow staged", "deny", "deny staged"])
        );
        for sample in graph["samples"].as_array().unwrap() {
            assert_eq!(
                sample[1], sample[2],
                "legend sample drawn as its edges: {sample}"
            );
        }
        save_screenshot(&browser, &format!("layout-{width}x{height}.png"));
    }
}

#[test]
fn the_legend_follows_what_is_drawn() {
    let flows = Flows::start(&[]);
    let denied = ingress(
        wep("h1", "ns.front", "front"),
        "ns.db",
        "deny",
        "db-guard",
        0,
        5,
    );
    assert_eq!(flows.post(&batch(&[denied])).1["accepted"], 1);
    let browser = Browser::start();
    viewport(&browser, 1400, 900);
    browser.open(&format!("{}/", flows.url()));
    wait_rows(&browser, "the denied flow", |rows| rows.len() == 1);
    let graph = run(&browser, GRAPH, json!([]));
    assert_eq!(graph["bad"], json!([]), "{graph:#}");
    assert_eq!(
        (&graph["drawn"], &graph["legend"]),
        (&json!(["deny"]), &json!(["deny"])),
        "one kind drawn, one in the legend: {graph:#}"
    );
    assert_eq!(graph["samples"][0][3], "denied");

    // An allowed flow a staged policy would deny arrives: its kind joins the legend.
    let mut staged = ingress(wep("h1", "ns.web", "web"), "ns.db", "allow", "db-in", 0, 4);
    staged["policies"]["pending"] = json!([{"kind": "staged-policy", "tier": "default",
        "name": "lockdown", "rule_index": 0, "action": "deny"}]);
    assert_eq!(flows.post(&batch(&[staged])).1["accepted"], 1);
    wait_rows(&browser, "both flows", |rows| rows.len() == 2);
    let graph = run(&browser, GRAPH, json!([]));
    assert_eq!(
        (&graph["drawn"], &graph["legend"]),
        (
            &json!(["allow staged", "deny"]),
            &json!(["allow staged", "deny"])
        ),
        "{graph:#}"
    );
    let texts: Vec<&str> = graph["samples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s[3].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["allowed, a staged policy would deny", "denied"]);
}
