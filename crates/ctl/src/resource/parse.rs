//! A file of resource documents: YAML (several documents separated by `---`) or JSON (one or
//! more objects, or a list), each possibly a `kind: List` with `items`.
//!
//! Both are read the same strict way: a mapping that names a key twice is refused (serde_json
//! would keep the last one), and YAML nested too deeply is refused before libyaml parses it
//! (its cost grows with the square of the depth; serde_json stops at 128 levels itself).

use anyhow::{Context, bail};
use serde::Deserialize;
use serde_json::Value;

use super::unique::{Unique, to_json};
use crate::yaml::depth;

/// One document of a file, numbered from 1 in the order of the file (a list's items count one
/// each), with the line it starts on where that is known.
#[derive(Debug, Clone)]
pub struct Document {
    pub index: usize,
    pub line: Option<usize>,
    pub value: Value,
}

/// Reads every document of `text`. A document that does not parse fails the whole file, with
/// the position the parser gives. A file with no document at all is refused; a `List` (or JSON
/// list) without items is a file of no resources, as `get KIND -o yaml` prints when there are
/// none, and gives an empty `Vec`.
pub fn parse(text: &str) -> anyhow::Result<Vec<Document>> {
    let trimmed = text.trim_start();
    let values = if trimmed.starts_with('{') || trimmed.starts_with('[') {
        json(text)?
    } else {
        yaml(text)?
    };
    let mut documents = Vec::new();
    let mut lists = 0;
    for (line, value) in values {
        lists += usize::from(is_list(&value));
        for value in items(value) {
            let index = documents.len() + 1;
            documents.push(Document { index, line, value });
        }
    }
    if documents.is_empty() && lists == 0 {
        bail!("no resource documents in the input");
    }
    Ok(documents)
}

fn is_list(value: &Value) -> bool {
    match value {
        Value::Array(_) => true,
        Value::Object(map) => map.get("kind").and_then(Value::as_str) == Some("List"),
        _ => false,
    }
}

/// A list's items (lists nest), or the document itself.
fn items(value: Value) -> Vec<Value> {
    match value {
        Value::Null => Vec::new(),
        Value::Array(entries) => entries.into_iter().flat_map(items).collect(),
        Value::Object(map) if map.get("kind").and_then(Value::as_str) == Some("List") => {
            match map.get("items") {
                Some(Value::Array(entries)) => entries.iter().cloned().flat_map(items).collect(),
                _ => vec![Value::Object(map)],
            }
        }
        other => vec![other],
    }
}

fn json(text: &str) -> anyhow::Result<Vec<(Option<usize>, Value)>> {
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Unique>();
    let mut values = Vec::new();
    loop {
        let start = stream.byte_offset();
        let Some(next) = stream.next() else { break };
        let Unique(value) = next.context("invalid JSON")?;
        let skipped = text[start..].len() - text[start..].trim_start().len();
        values.push((Some(line_at(text, start + skipped)), value));
    }
    Ok(values)
}

fn yaml(text: &str) -> anyhow::Result<Vec<(Option<usize>, Value)>> {
    if let Err(deep) = depth::check(text) {
        bail!(
            "invalid YAML: more than {} levels of [ ] and {{ }} one inside another at line {} \
             column {} (refused before parsing; a resource document nests fewer than 10)",
            depth::MAX_DEPTH,
            deep.line,
            deep.column
        );
    }
    let mut values = Vec::new();
    for (number, document) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        let invalid = || format!("invalid YAML in document {}", number + 1);
        // Through YAML's own value first: it refuses duplicate keys, naming where they are.
        let yaml = serde_yaml_ng::Value::deserialize(document).with_context(invalid)?;
        values.push(
            to_json(yaml)
                .map_err(anyhow::Error::msg)
                .with_context(invalid)?,
        );
    }
    let starts = document_lines(text);
    // The line of each document is known when the separators found agree with the parser.
    let lines: Vec<Option<usize>> = match starts.len() == values.len() {
        true => starts.into_iter().map(Some).collect(),
        false => vec![None; values.len()],
    };
    Ok(lines.into_iter().zip(values).collect())
}

/// The first content line of every YAML document: after each `---`, past any blank and comment
/// lines; a stream without content before the first `---` has no document there.
fn document_lines(text: &str) -> Vec<usize> {
    let mut starts = Vec::new();
    let mut pending = true;
    for (number, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if let Some(rest) = line.strip_prefix("---") {
            pending = true;
            let rest = rest.trim();
            if rest.is_empty() || rest.starts_with('#') {
                continue;
            }
        } else if trimmed.is_empty() || trimmed.starts_with('#') || line.starts_with("...") {
            continue;
        }
        if pending {
            starts.push(number + 1);
            pending = false;
        }
    }
    starts
}

fn line_at(text: &str, offset: usize) -> usize {
    text[..offset].matches('\n').count() + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_documents_know_their_lines() {
        let text = "# pools\n---\nkind: a\n---\n\nkind: b\n";
        let documents = parse(text).unwrap();
        assert_eq!(documents.len(), 2);
        assert_eq!(documents[1].line, Some(6));
        assert_eq!(documents[1].value["kind"], "b");
    }

    #[test]
    fn json_lists_and_list_kinds_are_flattened() {
        let text = "[{\"kind\": \"a\"},\n {\"kind\": \"List\", \"items\": [{\"kind\": \"b\"}, {\"kind\": \"c\"}]}]";
        let documents = parse(text).unwrap();
        let kinds: Vec<_> = documents.iter().map(|d| d.value["kind"].clone()).collect();
        assert_eq!(kinds, ["a", "b", "c"].map(Value::from));
        let text = "{\"kind\": \"a\"}\n{\"kind\": \"b\"}";
        assert_eq!(parse(text).unwrap()[1].line, Some(2));
    }

    #[test]
    fn duplicate_keys_are_refused_in_yaml_and_json_alike_naming_the_key() {
        let err = parse("kind: a\nkind: b\n").unwrap_err();
        assert!(
            format!("{err:#}").contains("duplicate entry with key \"kind\""),
            "{err:#}"
        );
        let err = parse("{\"kind\": \"a\",\n \"spec\": {\"x\": 1, \"x\": 2}}").unwrap_err();
        assert_eq!(
            format!("{err:#}"),
            "invalid JSON: duplicate entry with key \"x\" at line 2 column 21"
        );
        let err = parse("spec: {1: a, \"1\": b}\n").unwrap_err();
        assert!(
            format!("{err:#}").contains("duplicate entry with key \"1\""),
            "{err:#}"
        );
    }

    #[test]
    fn an_empty_list_is_no_resources_and_an_empty_file_is_refused() {
        let empty = "---\napiVersion: projectcalico.org/v1\nkind: List\nitems: []\n";
        assert!(parse(empty).unwrap().is_empty());
        assert!(parse("[]").unwrap().is_empty());
        for nothing in ["", "# nothing\n", "---\n", "null"] {
            let err = parse(nothing).unwrap_err();
            assert_eq!(err.to_string(), "no resource documents in the input");
        }
    }

    #[test]
    fn a_yaml_syntax_error_names_the_line() {
        let err = parse("kind: a\n---\nkind: [b\n").unwrap_err();
        let message = format!("{err:#}");
        assert!(message.contains("document 2"), "{message}");
        assert!(message.contains("line"), "{message}");
    }
}
