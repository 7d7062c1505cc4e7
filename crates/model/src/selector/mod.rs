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

pub use ast::{Node, Operands, Tree};
pub use parse::{MAX_DEPTH, is_label_char};

/// Where an endpoint's labels come from: anything that can look a label up by name.
pub trait Labels {
    fn get_label(&self, name: &str) -> Option<&str>;

    /// The same lookup, also given the name's [`label_key`] (selectors compute it once, when
    /// parsed). A representation that keeps the keys of its names (calc's `LabelSet` keeps a
    /// filter of them) can answer most misses without comparing a string. The answer must be
    /// `get_label(name)`'s.
    fn get_label_keyed(&self, name: &str, key: u64) -> Option<&str> {
        let _ = key;
        self.get_label(name)
    }
}

/// A 64-bit hash of a label name for [`Labels::get_label_keyed`]: FxHash-style (multiply,
/// rotate), fast on the short names labels have; its high bits are the best mixed. Stable within
/// a build only: never store it.
pub fn label_key(name: &str) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let mix = |hash: u64, word: u64| (hash.rotate_left(5) ^ word).wrapping_mul(K);
    let mut chunks = name.as_bytes().chunks_exact(8);
    let mut hash = name.len() as u64;
    for chunk in &mut chunks {
        let mut word = [0; 8];
        word.copy_from_slice(chunk);
        hash = mix(hash, u64::from_le_bytes(word));
    }
    let mut tail = [0; 8];
    tail[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
    mix(hash, u64::from_le_bytes(tail))
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
