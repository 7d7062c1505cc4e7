//! A small W3C WebDriver client: Debian's chromedriver driving Debian's headless chromium,
//! nothing downloaded. Enough to load a page, find elements, read what they show, type, click,
//! run a script and take a screenshot.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::{eventually, free_port};
use serde_json::{Value, json};

use crate::http::{http, json_of, try_http};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// The key W3C WebDriver names an element reference with.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// Fails the test naming the package when the browser or its driver is missing.
pub fn require_browser() {
    for (path, package) in [(CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")] {
        assert!(
            std::path::Path::new(path).exists(),
            "{path} is not installed: run scripts/setup-test-deps.sh (or apt-get install -y {package})"
        );
    }
}

/// chromedriver on a free loopback port and one headless chromium session, both ended on drop.
#[derive(Debug)]
pub struct Browser {
    driver: Child,
    address: String,
    session: String,
    _profile: tempfile::TempDir,
    _log: tempfile::TempDir,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = try_http(
            &self.address,
            "DELETE",
            &format!("/session/{}", self.session),
            &[],
            b"",
        );
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

impl Browser {
    pub fn start() -> Browser {
        require_browser();
        let port = free_port();
        let log = tempfile::tempdir().unwrap();
        let log_path = log.path().join("chromedriver.log");
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .arg(format!("--log-path={}", log_path.display()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let address = format!("127.0.0.1:{port}");
        eventually(
            "chromedriver ready",
            Duration::from_secs(20),
            || match try_http(&address, "GET", "/status", &[], b"") {
                Ok((200, body)) if json_of(&body)["value"]["ready"] == true => Ok(()),
                other => Err(format!("{other:?}")),
            },
        );
        let profile = tempfile::tempdir().unwrap();
        // The flags of a headless Chromium on a machine without network or GPU, and a fresh
        // profile: nothing reaches out, nothing is remembered between runs.
        let args = [
            "--headless=new".to_owned(),
            "--no-sandbox".to_owned(),
            "--disable-gpu".to_owned(),
            "--disable-background-networking".to_owned(),
            "--disable-component-update".to_owned(),
            "--disable-sync".to_owned(),
            "--disable-quic".to_owned(),
            "--no-first-run".to_owned(),
            "--window-size=1400,1000".to_owned(),
            format!("--user-data-dir={}", profile.path().display()),
        ];
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": CHROMIUM, "args": args},
        }}});
        let (status, body) = http(
            &address,
            "POST",
            "/session",
            &[],
            capabilities.to_string().as_bytes(),
        );
        let answer = json_of(&body);
        assert_eq!(
            status,
            200,
            "new session: {answer}; log: {}",
            std::fs::read_to_string(&log_path).unwrap_or_default()
        );
        let session = answer["value"]["sessionId"]
            .as_str()
            .expect("a session id")
            .to_owned();
        Browser {
            driver,
            address,
            session,
            _profile: profile,
            _log: log,
        }
    }

    /// A WebDriver command; the `value` of its answer, or the error's text.
    pub fn command(&self, method: &str, path: &str, body: Value) -> Result<Value, String> {
        let path = format!("/session/{}{path}", self.session);
        let body = if method == "GET" || method == "DELETE" {
            Vec::new()
        } else {
            body.to_string().into_bytes()
        };
        let (status, answer) = http(&self.address, method, &path, &[], &body);
        let answer = json_of(&answer);
        match status {
            200 => Ok(answer["value"].clone()),
            _ => Err(format!("{method} {path}: {status} {}", answer["value"])),
        }
    }

    fn must(&self, method: &str, path: &str, body: Value) -> Value {
        self.command(method, path, body)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    pub fn open(&self, url: &str) {
        self.must("POST", "/url", json!({ "url": url }));
    }

    /// Every element matching a CSS selector.
    pub fn find_all(&self, css: &str) -> Vec<String> {
        let found = self.must(
            "POST",
            "/elements",
            json!({"using": "css selector", "value": css}),
        );
        found
            .as_array()
            .expect("a list of elements")
            .iter()
            .map(|e| {
                e[ELEMENT]
                    .as_str()
                    .unwrap_or_else(|| panic!("not an element: {e}"))
                    .to_owned()
            })
            .collect()
    }

    pub fn find(&self, css: &str) -> String {
        let all = self.find_all(css);
        assert!(!all.is_empty(), "no element matches {css}");
        all[0].clone()
    }

    /// The text an element shows (rendered: what a person reads).
    pub fn text(&self, element: &str) -> String {
        self.must("GET", &format!("/element/{element}/text"), Value::Null)
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// The rendered texts of every element matching `css`, read in one go (the console
    /// re-renders its table on every refresh, so element references go stale).
    pub fn texts(&self, css: &str) -> Vec<String> {
        let found = self.must(
            "POST",
            "/execute/sync",
            json!({
                "script": "return [...document.querySelectorAll(arguments[0])].map(e => e.innerText || e.textContent)",
                "args": [css],
            }),
        );
        let texts = found.as_array().expect("a list of texts");
        texts
            .iter()
            .map(|t| t.as_str().unwrap_or_default().to_owned())
            .collect()
    }

    /// Clicks the first element matching `css`, finding it again if a re-render replaced it.
    pub fn click(&self, css: &str) {
        let mut last = String::new();
        for _ in 0..10 {
            let element = self.find(css);
            match self.command("POST", &format!("/element/{element}/click"), json!({})) {
                Ok(_) => return,
                Err(e) if e.contains("stale element") => last = e,
                Err(e) => panic!("{e}"),
            }
        }
        panic!("cannot click {css}: {last}");
    }

    pub fn type_into(&self, element: &str, text: &str) {
        self.must(
            "POST",
            &format!("/element/{element}/value"),
            json!({ "text": text }),
        );
    }

    pub fn clear(&self, element: &str) {
        self.must("POST", &format!("/element/{element}/clear"), json!({}));
    }

    pub fn script(&self, source: &str) -> Value {
        self.must(
            "POST",
            "/execute/sync",
            json!({"script": source, "args": []}),
        )
    }

    /// The text of an open alert, if one is open.
    pub fn alert(&self) -> Option<String> {
        self.command("GET", "/alert/text", Value::Null)
            .ok()
            .map(|v| v.as_str().unwrap_or_default().to_owned())
    }

    /// A PNG of the window.
    pub fn screenshot(&self) -> Vec<u8> {
        let encoded = self.must("GET", "/screenshot", Value::Null);
        base64(encoded.as_str().expect("base64 text"))
    }
}

/// Standard base64 (what WebDriver sends screenshots in).
fn base64(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        _ => 63,
    };
    let digits: Vec<u8> = text
        .bytes()
        .filter(|c| *c != b'=' && !c.is_ascii_whitespace())
        .map(value)
        .collect();
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    for chunk in digits.chunks(4) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, d)| n | u32::from(*d) << (18 - 6 * i));
        out.extend_from_slice(&n.to_be_bytes()[1..chunk.len()]);
    }
    out
}
