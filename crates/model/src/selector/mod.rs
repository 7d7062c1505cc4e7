//! The selector language of policies and rules: which endpoints (by their labels) a policy
//! applies to, or a rule matches. See docs/selectors.md for the grammar and semantics.
//!
//! ```
//! use std::collections::BTreeMap;
//! use calico_model::selector::Selector;
//!
//! let selector = Selector::parse("role == 'webserver' && env != \"dev\"").unwrap();
//! let labels = BTreeMap::from([("role".to_owned(), "webserver".to_owned())]);
//! assert!(selector.evaluate(&labels));
//! assert_eq!(selector.canonical(), "env != \"dev\" && role == \"webserver\"");
//! ```

mod ast;
mod parse;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::hash::{BuildHasher, Hash, Hasher};
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

pub use parse::is_label_char;

/// Where an endpoint's labels come from: anything that can look a label up by name.
pub trait Labels {
    fn get_label(&self, name: &str) -> Option<&str>;
}

impl Labels for BTreeMap<String, String> {
    fn get_label(&self, name: &str) -> Option<&str> {
        self.get(name).map(String::as_str)
    }
}

impl<S: BuildHasher> Labels for HashMap<String, String, S> {
    fn get_label(&self, name: &str) -> Option<&str> {
        self.get(name).map(String::as_str)
    }
}

impl Labels for [(&str, &str)] {
    fn get_label(&self, name: &str) -> Option<&str> {
        self.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
    }
}

/// Why a selector does not parse: where (a 0-based character index into the text) and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid selector at character {}: {reason}", position + 1)]
pub struct SelectorError {
    pub position: usize,
    pub reason: String,
}

impl SelectorError {
    fn new(position: usize, reason: impl Into<String>) -> SelectorError {
        SelectorError {
            position,
            reason: reason.into(),
        }
    }
}

/// A parsed selector. Two selectors are equal when their canonical forms are.
#[derive(Debug, Clone)]
pub struct Selector {
    expr: ast::Expr,
    canonical: String,
    labels: Vec<String>,
}

impl Selector {
    /// Parses selector text; the empty selector is `all()`.
    pub fn parse(text: &str) -> Result<Selector, SelectorError> {
        Ok(Selector::from_expr(parse::parse(text)?))
    }

    /// The selector that matches every endpoint.
    pub fn all() -> Selector {
        Selector::from_expr(ast::Expr::All)
    }

    fn from_expr(expr: ast::Expr) -> Selector {
        let mut labels = Vec::new();
        expr.each_label(&mut |name| labels.push(name.to_owned()));
        labels.sort();
        labels.dedup();
        Selector {
            canonical: expr.to_string(),
            expr,
            labels,
        }
    }

    /// Whether an endpoint with these labels is selected. Allocates nothing.
    pub fn evaluate<L: Labels + ?Sized>(&self, labels: &L) -> bool {
        self.expr.evaluate(labels)
    }

    /// The canonical text: stable across spellings (spacing, quotes, operand order, duplicate
    /// set members, redundant parentheses), so equal selectors can share one ipset.
    pub fn canonical(&self) -> &str {
        &self.canonical
    }

    /// The label names the selector looks at, sorted, each once.
    pub fn label_names(&self) -> impl Iterator<Item = &str> {
        self.labels.iter().map(String::as_str)
    }

    /// A label every endpoint this selector matches must have, and the values it may take
    /// (`None`: any value): `role == "db" && ...` requires `role` with value `db`;
    /// `has(role)` requires `role` with any value. `None` for selectors with no such label
    /// (`all()`, `!`, `||`, `!=`, `not in`). Indexes use it to evaluate a selector only against
    /// endpoints that can match.
    pub fn requirement(&self) -> Option<(&str, Option<&[String]>)> {
        self.expr.requirement()
    }

    /// Whether this is `all()`.
    pub fn is_all(&self) -> bool {
        matches!(self.expr, ast::Expr::All)
    }
}

impl PartialEq for Selector {
    fn eq(&self, other: &Selector) -> bool {
        self.canonical == other.canonical
    }
}

impl Eq for Selector {}

impl Hash for Selector {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.canonical.hash(state);
    }
}

impl Default for Selector {
    fn default() -> Selector {
        Selector::all()
    }
}

impl FromStr for Selector {
    type Err = SelectorError;

    fn from_str(text: &str) -> Result<Selector, SelectorError> {
        Selector::parse(text)
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.canonical)
    }
}

impl Serialize for Selector {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.canonical)
    }
}

impl<'de> Deserialize<'de> for Selector {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Selector::parse(&text).map_err(serde::de::Error::custom)
    }
}
