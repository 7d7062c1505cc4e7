//! Resources: the operator's documents (`apiVersion` / `kind` / `metadata` / `spec`) and their
//! mapping onto the keys of the data model. docs/resources.md describes every kind.
//!
//! | module | owns |
//! | --- | --- |
//! | `kind` | the kinds, their spelling in documents and on the command line |
//! | `id` | a resource's identity from `metadata` or from a key; its keys |
//! | `spec` | `spec` to the keys' values and back, with the model's validation |
//! | `parse` | a file (YAML or JSON, several documents, lists) into documents |
//! | `unique` | JSON and YAML values whose mappings name each key once |
//! | `space` | the rules between address spaces, pools and endpoints, checked on what a change leaves |
//! | `store` | reading resources from the datastore; planning and writing changes |
//! | `table` | the `get` table columns of every kind |

pub mod id;
pub mod kind;
pub mod parse;
pub mod space;
pub mod spec;
pub mod store;
pub mod table;
mod unique;

use std::fmt;

use calico_model::ValidationError;
use calico_model::key::Key;
use serde_json::{Map, Value};

use id::Id;
use kind::{API_VERSION, Kind};
use parse::Document;

const TOP_FIELDS: [&str; 4] = ["apiVersion", "kind", "metadata", "spec"];

/// A valid document: which resource, and (unless it is only named, for `delete`) the keys and
/// values its spec gives.
#[derive(Debug, Clone)]
pub struct Resource {
    pub index: usize,
    pub id: Id,
    pub pairs: Vec<(Key, String)>,
}

/// Why a document was refused: which document, the field path and the reason.
#[derive(Debug, Clone)]
pub struct DocumentError {
    pub index: usize,
    pub line: Option<usize>,
    /// `policy "web"`, once the kind and name are known.
    pub what: Option<String>,
    pub error: ValidationError,
}

impl fmt::Display for DocumentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "document {}", self.index)?;
        let place: Vec<String> = (self.line.map(|line| format!("line {line}")).into_iter())
            .chain(self.what.clone())
            .collect();
        if !place.is_empty() {
            write!(f, " ({})", place.join(", "))?;
        }
        write!(f, ": {}", self.error)
    }
}

/// `policy "web"`: how messages name a resource.
pub fn describe(id: &Id) -> String {
    let mut text = format!("{} {:?}", id.kind(), id.name());
    match id {
        Id::Policy { tier, .. } | Id::StagedPolicy { tier, .. } => {
            text.push_str(&format!(" in tier {tier:?}"))
        }
        Id::WorkloadEndpoint(w) => text.push_str(&format!(
            " of {}/{} on node {:?}",
            w.orchestrator, w.workload, w.hostname
        )),
        Id::SpacePool { space, .. } => text.push_str(&format!(" of space {space:?}")),
        Id::HostEndpoint(_) | Id::BgpPeer { node: Some(_), .. } => {
            text.push_str(&format!(" on node {:?}", id.node().unwrap_or_default()))
        }
        _ => {}
    }
    text
}

impl Resource {
    /// Validates a document. `with_spec: false` (for `delete`) reads only its identity.
    pub fn from_document(document: &Document, with_spec: bool) -> Result<Resource, DocumentError> {
        let fail = |what: Option<String>, error: ValidationError| DocumentError {
            index: document.index,
            line: document.line,
            what,
            error,
        };
        let (kind, metadata, spec) = envelope(&document.value).map_err(|e| fail(None, e))?;
        let guess = metadata.get("name").and_then(Value::as_str);
        let what = Some(match guess {
            Some(name) => format!("{kind} {name:?}"),
            None => kind.to_string(),
        });
        check_metadata(kind, metadata).map_err(|e| fail(what.clone(), e))?;
        let id = Id::from_metadata(kind, metadata).map_err(|e| fail(what.clone(), e))?;
        let pairs = match with_spec {
            true => spec::encode(&id, spec).map_err(|e| fail(what, e))?,
            false => Vec::new(),
        };
        Ok(Resource {
            index: document.index,
            id,
            pairs,
        })
    }
}

/// The kind, metadata and spec of a document whose top level is as it should be.
fn envelope(value: &Value) -> Result<(Kind, &Map<String, Value>, &Value), ValidationError> {
    let Value::Object(top) = value else {
        return Err(ValidationError::object(format!(
            "expected a mapping with {}, got {value}",
            TOP_FIELDS.join(", ")
        )));
    };
    if let Some(field) = top.keys().find(|f| !TOP_FIELDS.contains(&f.as_str())) {
        let reason = format!("unknown field (expected {})", TOP_FIELDS.join(", "));
        return Err(ValidationError::new(field.clone(), reason));
    }
    match top.get("apiVersion").and_then(Value::as_str) {
        Some(API_VERSION) => {}
        Some(other) => {
            let reason = format!("unknown version {other:?} (expected {API_VERSION})");
            return Err(ValidationError::new("apiVersion", reason));
        }
        None => return Err(ValidationError::new("apiVersion", "missing")),
    }
    let kind = match top.get("kind") {
        Some(Value::String(text)) => Kind::from_document(text).ok_or_else(|| {
            let reason = format!("unknown kind {text:?} (expected one of {})", Kind::list());
            ValidationError::new("kind", reason)
        })?,
        _ => return Err(ValidationError::new("kind", "missing")),
    };
    let metadata = match top.get("metadata") {
        Some(Value::Object(map)) => map,
        Some(other) => {
            let reason = format!("expected a mapping, got {other}");
            return Err(ValidationError::new("metadata", reason));
        }
        None => return Err(ValidationError::new("metadata", "missing")),
    };
    Ok((kind, metadata, top.get("spec").unwrap_or(&Value::Null)))
}

fn check_metadata(kind: Kind, metadata: &Map<String, Value>) -> Result<(), ValidationError> {
    let (required, optional) = kind.metadata_fields();
    let known = || required.iter().chain(optional).copied();
    match metadata.keys().find(|f| !known().any(|k| k == f.as_str())) {
        Some(field) => {
            let expected: Vec<&str> = known().collect();
            let reason = format!(
                "unknown field for a {kind} (expected {})",
                expected.join(", ")
            );
            Err(ValidationError::new(format!("metadata.{field}"), reason))
        }
        None => Ok(()),
    }
}

/// A resource as a document.
pub fn document(id: &Id, spec: Value) -> Value {
    let mut top = Map::new();
    top.insert("apiVersion".into(), API_VERSION.into());
    top.insert("kind".into(), id.kind().as_str().into());
    top.insert("metadata".into(), Value::Object(id.metadata()));
    top.insert("spec".into(), spec);
    Value::Object(top)
}

/// Several resources as one `kind: List` document.
pub fn list(items: Vec<Value>) -> Value {
    let mut top = Map::new();
    top.insert("apiVersion".into(), API_VERSION.into());
    top.insert("kind".into(), "List".into());
    top.insert("items".into(), Value::Array(items));
    Value::Object(top)
}
