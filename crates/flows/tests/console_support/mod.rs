//! What the console's browser tests share: a browser at an exact viewport (Chrome's device
//! metrics through chromedriver's CDP endpoint, so the page is laid out at 1400×900 whatever
//! the window is), downloads into a directory of the test's, screenshots kept in the test
//! target's temp dir, and waiting for the table's rows.

#![allow(dead_code)] // each console test file uses part of this

use std::path::{Path, PathBuf};
use std::time::Duration;

use calico_testkit::eventually;
use calico_testkit::webdriver::Browser;
use serde_json::{Value, json};

/// How long a wait for the page may take. The console refreshes every 5 s (console.js
/// REFRESH_MS) and on every streamed record; six refreshes leave room for a machine busy with
/// a build (a wait ends as soon as what it waits for is there).
pub const PATIENCE: Duration = Duration::from_secs(30);

/// The two screens the console must read on without scrolling.
pub const SCREENS: [(u32, u32); 2] = [(1400, 900), (1920, 1080)];

/// A Chrome DevTools command through chromedriver.
pub fn cdp(browser: &Browser, cmd: &str, params: Value) -> Value {
    let body = json!({ "cmd": cmd, "params": params });
    browser
        .command("POST", "/goog/cdp/execute", body)
        .unwrap_or_else(|e| panic!("{cmd}: {e}"))
}

/// Lays the page out at exactly `width`×`height` CSS pixels, and checks that it took.
pub fn viewport(browser: &Browser, width: u32, height: u32) {
    cdp(
        browser,
        "Emulation.setDeviceMetricsOverride",
        json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}),
    );
    let inner = browser.script("return [innerWidth, innerHeight]");
    assert_eq!(
        inner,
        json!([width, height]),
        "the viewport [width, height]"
    );
}

/// Downloads go to `dir`, without asking.
pub fn downloads_into(browser: &Browser, dir: &Path) {
    let path = dir.to_str().expect("a UTF-8 temp dir");
    cdp(
        browser,
        "Browser.setDownloadBehavior",
        json!({"behavior": "allow", "downloadPath": path}),
    );
}

/// The one finished download in `dir` whose name ends in `suffix`.
pub fn downloaded(dir: &Path, suffix: &str) -> String {
    let mut found = None;
    eventually(&format!("a {suffix} download"), PATIENCE, || {
        let names: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        let done: Vec<&PathBuf> = names
            .iter()
            .filter(|p| p.to_string_lossy().ends_with(suffix))
            .collect();
        match done.as_slice() {
            [one] => {
                found = Some(std::fs::read_to_string(one).unwrap());
                Ok(())
            }
            _ => Err(format!("in {}: {names:?}", dir.display())),
        }
    });
    found.unwrap()
}

/// Saves a PNG of the viewport into `$CARGO_TARGET_TMPDIR/console/` and says where.
pub fn save_screenshot(browser: &Browser, name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("console");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, browser.screenshot()).unwrap();
    eprintln!("screenshot: {}", path.display());
    path
}

/// The flow rows of the table (group headings left out), as the browser renders them.
pub fn rows(browser: &Browser) -> Vec<String> {
    browser.texts("#flows tbody tr[data-id]")
}

pub fn wait_rows(browser: &Browser, what: &str, test: impl Fn(&[String]) -> bool) -> Vec<String> {
    let mut seen = Vec::new();
    eventually(what, PATIENCE, || {
        seen = rows(browser);
        match test(&seen) {
            true => Ok(()),
            false => Err(format!("rows: {seen:#?}")),
        }
    });
    seen
}

/// Runs a script with arguments; its value.
pub fn run(browser: &Browser, script: &str, args: Value) -> Value {
    browser
        .command(
            "POST",
            "/execute/sync",
            json!({"script": script, "args": args}),
        )
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The cells of every flow row, as text (what the page holds, line breaks aside).
pub fn cells(browser: &Browser) -> Vec<Vec<String>> {
    let found = browser.script(
        "return [...document.querySelectorAll('#flows tbody tr[data-id]')]\
         .map(r => [...r.cells].map(c => c.textContent))",
    );
    serde_json::from_value(found).expect("rows of cells")
}

/// Unix seconds as RFC 3339 in UTC (`calicoctl flows`' TIME), computed here from the civil
/// calendar so the test does not share the console's code.
pub fn rfc3339(seconds: u64) -> String {
    let days = (seconds / 86_400) as i64;
    let rest = seconds % 86_400;
    // Howard Hinnant's days-to-civil.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest / 60 % 60,
        rest % 60
    )
}

#[test]
fn rfc3339_is_the_calendar() {
    assert_eq!(rfc3339(1_767_225_615), "2026-01-01T00:00:15Z");
    assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
}
