//! One module per subcommand. Each takes the datastore (if it needs one) and a writer, so the
//! logic is testable without a terminal.

pub mod datastore;
pub mod delete;
pub mod diags;
pub mod explain;
pub mod flows;
pub mod get;
pub mod impact;
pub mod ipam;
pub mod load;
pub mod node;
pub mod node_remove;
pub mod put;
pub mod resource;
pub mod selector;
pub mod status;
pub mod validate;

use std::io::Read;
use std::path::Path;

use anyhow::Context;
use calico_model::key::Key;
use calico_model::value::{Value, parse_value};

use crate::cli::{Output, ValueSource};

/// Prints a report as JSON (pretty, one document) or YAML (one `---` document), the two
/// machine formats of `-o`; the shapes are documented in docs/calicoctl-ops.md.
pub fn print_report(
    format: Output,
    report: &serde_json::Value,
    out: &mut impl std::io::Write,
) -> anyhow::Result<()> {
    match format {
        Output::Yaml => out.write_all(crate::yaml::document(report).as_bytes())?,
        _ => writeln!(out, "{}", serde_json::to_string_pretty(report)?)?,
    }
    Ok(())
}

/// Parses the key and validates the value for it: the check every write goes through.
pub fn check(key: &str, raw: &str) -> anyhow::Result<(Key, Value)> {
    let parsed = Key::parse(key)?;
    let value = parse_value(&parsed, raw)
        .with_context(|| format!("invalid value for {} {key}", parsed.kind()))?;
    Ok((parsed, value))
}

/// The value given inline or in a file ('-' = stdin), without a trailing newline.
pub fn read_value(source: &ValueSource) -> anyhow::Result<String> {
    let text = match (source.value.as_deref(), source.file.as_deref()) {
        (Some(text), _) => text.to_owned(),
        (None, Some(path)) => read_file(path)?,
        (None, None) => anyhow::bail!("give the value inline or with -f FILE"),
    };
    Ok(text.trim_end_matches(['\n', '\r']).to_owned())
}

/// Reads a file, or stdin for '-'.
pub fn read_file(path: &Path) -> anyhow::Result<String> {
    if path == Path::new("-") {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("cannot read stdin")?;
        return Ok(text);
    }
    std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
}

/// The kernel's host name, as Felix and calico-node default to it.
pub fn kernel_hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_owned())
        .unwrap_or_else(|_| "localhost".to_owned())
}
