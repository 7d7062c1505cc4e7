//! A file of resource documents: YAML (several documents separated by `---`) or JSON (one or
//! more objects, or a list), each possibly a `kind: List` with `items`.

use anyhow::{Context, bail};
use serde::Deserialize;
use serde_json::Value;

/// One document of a file, numbered from 1 in the order of the file (a list's items count one
/// each), with the line it starts on where that is known.
#[derive(Debug, Clone)]
pub struct Document {
    pub index: usize,
    pub line: Option<usize>,
    pub value: Value,
}

/// Reads every document of `text`. A document that does not parse fails the whole file, with
/// the position the parser gives.
pub fn parse(text: &str) -> anyhow::Result<Vec<Document>> {
    let trimmed = text.trim_start();
    let values = if trimmed.starts_with('{') || trimmed.starts_with('[') {
        json(text)?
    } else {
        yaml(text)?
    };
    let mut documents = Vec::new();
    for (line, value) in values {
        for value in items(value) {
            let index = documents.len() + 1;
            documents.push(Document { index, line, value });
        }
    }
    if documents.is_empty() {
        bail!("no resource documents in the input");
    }
    Ok(documents)
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
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    let mut values = Vec::new();
    loop {
        let start = stream.byte_offset();
        let Some(next) = stream.next() else { break };
        let value = next.context("invalid JSON")?;
        let skipped = text[start..].len() - text[start..].trim_start().len();
        values.push((Some(line_at(text, start + skipped)), value));
    }
    Ok(values)
}

fn yaml(text: &str) -> anyhow::Result<Vec<(Option<usize>, Value)>> {
    let mut values = Vec::new();
    for (number, document) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        let invalid = || format!("invalid YAML in document {}", number + 1);
        // Through YAML's own value first: it refuses duplicate keys, which JSON's would
        // silently overwrite.
        let yaml = serde_yaml_ng::Value::deserialize(document).with_context(invalid)?;
        values.push(serde_json::to_value(&yaml).with_context(invalid)?);
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
    fn duplicate_keys_are_refused() {
        let err = parse("kind: a\nkind: b\n").unwrap_err();
        assert!(format!("{err:#}").contains("duplicate"), "{err:#}");
    }

    #[test]
    fn a_yaml_syntax_error_names_the_line() {
        let err = parse("kind: a\n---\nkind: [b\n").unwrap_err();
        let message = format!("{err:#}");
        assert!(message.contains("document 2"), "{message}");
        assert!(message.contains("line"), "{message}");
    }
}
