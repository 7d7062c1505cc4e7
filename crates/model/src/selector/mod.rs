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
mod error;
mod label;
mod parse;

use std::fmt;
use std::hash::{Hash, Hasher};
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

pub use ast::{Node, Operands, Tree};
pub use error::SelectorError;
pub use label::{Labels, label_key};
pub use parse::{MAX_DEPTH, is_label_char};

/// A parsed selector. Two selectors are equal when their canonical forms are.
#[derive(Debug, Clone)]
pub struct Selector {
    expr: ast::Expr,
    /// The canonical text (written by the parser as it builds `expr`: operands are sorted by
    /// it anyway), then the label names `expr` mentions: one allocation.
    text: Box<str>,
    /// Where the names start in `text`.
    split: usize,
}

impl Selector {
    /// Parses selector text; the empty selector is `all()`.
    pub fn parse(text: &str) -> Result<Selector, SelectorError> {
        let parse::Parsed { expr, text, split } = parse::parse(text)?;
        Ok(Selector {
            expr,
            text: text.into_boxed_str(),
            split,
        })
    }

    /// The selector that matches every endpoint.
    pub fn all() -> Selector {
        Selector {
            expr: ast::Expr::All,
            text: "all()".into(),
            split: 5,
        }
    }

    /// Whether an endpoint with these labels is selected. Allocates nothing.
    pub fn evaluate<L: Labels + ?Sized>(&self, labels: &L) -> bool {
        self.expr.evaluate(self.names(), labels)
    }

    /// The canonical text: stable across spellings (spacing, quotes, operand order, duplicate
    /// set members, redundant parentheses), so equal selectors can share one ipset.
    pub fn canonical(&self) -> &str {
        &self.text[..self.split]
    }

    /// The label names of the tree, one after the other.
    fn names(&self) -> &str {
        &self.text[self.split..]
    }

    /// The label names the selector looks at, sorted, each once (collected on each call).
    pub fn label_names(&self) -> impl Iterator<Item = &str> {
        let mut names = Vec::new();
        self.expr
            .each_label(self.names(), &mut |name| names.push(name));
        names.sort_unstable();
        names.dedup();
        names.into_iter()
    }

    /// A label every endpoint this selector matches must have, and the values it may take
    /// (`None`: any value): `role == "db" && ...` requires `role` with value `db`;
    /// `has(role)` requires `role` with any value. `None` for selectors with no such label
    /// (`all()`, `!`, `||`, `!=`, `not in`). Indexes use it to evaluate a selector only against
    /// endpoints that can match.
    pub fn requirement(&self) -> Option<(&str, Option<&[String]>)> {
        self.expr.requirement(self.names())
    }

    /// The parsed tree, read-only, in canonical shape (what [`Selector::canonical`] spells):
    /// for indexes that plan lookups by the selector's structure.
    ///
    /// ```
    /// use calico_model::selector::{Node, Selector};
    ///
    /// let selector = Selector::parse("role == 'db' || !has(debug)").unwrap();
    /// let Node::Or(operands) = selector.tree().node() else { panic!("an ||") };
    /// let kinds: Vec<_> = operands.iter().map(|t| t.node()).collect();
    /// assert!(matches!(kinds[0], Node::Not(_)), "`!has(debug)` sorts first");
    /// assert!(matches!(kinds[1], Node::Equals { label: "role", value: "db" }));
    /// ```
    pub fn tree(&self) -> Tree<'_> {
        Tree::new(&self.expr, self.names())
    }

    /// Whether this is `all()`.
    pub fn is_all(&self) -> bool {
        matches!(self.expr, ast::Expr::All)
    }
}

impl PartialEq for Selector {
    fn eq(&self, other: &Selector) -> bool {
        self.canonical() == other.canonical()
    }
}

impl Eq for Selector {}

impl Hash for Selector {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.canonical().hash(state);
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
        f.write_str(self.canonical())
    }
}

impl Serialize for Selector {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.canonical())
    }
}

impl<'de> Deserialize<'de> for Selector {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Selector::parse(&text).map_err(serde::de::Error::custom)
    }
}
