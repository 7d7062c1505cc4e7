//! `calicoctl selector eval`: one verdict per JSON line on stdin, so operators can check a
//! selector against sample labels before deploying it. A bad line yields `error: <reason>` and
//! evaluation goes on with the next line.

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::process::ExitCode;

use calico_model::selector::Selector;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
struct Input {
    selector: String,
    #[serde(default)]
    labels: BTreeMap<String, String>,
}

pub fn eval(input: impl BufRead, out: &mut impl Write) -> anyhow::Result<ExitCode> {
    for line in input.lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        writeln!(out, "{}", verdict(&line))?;
    }
    Ok(ExitCode::SUCCESS)
}

fn verdict(line: &str) -> String {
    let input: Input = match serde_json::from_str(line) {
        Ok(input) => input,
        Err(err) => return format!("error: invalid input line: {err}"),
    };
    match Selector::parse(&input.selector) {
        Ok(selector) => selector.evaluate(&input.labels).to_string(),
        Err(err) => format!("error: {err}"),
    }
}
