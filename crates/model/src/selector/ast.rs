//! The parsed form of a selector, its evaluation and its canonical text.

use std::ops::Range;

use super::{Labels, label_key};

/// A label name as a selector mentions it: where it is in the selector's buffer of names (one
/// allocation for all of them), and its [`label_key`], computed once at parse time so label
/// representations that store keys can answer a lookup without comparing strings.
#[derive(Debug, Clone)]
pub(super) struct Name {
    at: Range<usize>,
    key: u64,
}

impl Name {
    /// Appends `text` to the buffer of names.
    pub(super) fn new(names: &mut String, text: &str) -> Name {
        let start = names.len();
        names.push_str(text);
        Name {
            at: start..names.len(),
            key: label_key(text),
        }
    }

    pub(super) fn text<'n>(&self, names: &'n str) -> &'n str {
        &names[self.at.clone()]
    }

    fn get<'l, L: Labels + ?Sized>(&self, names: &str, labels: &'l L) -> Option<&'l str> {
        labels.get_label_keyed(self.text(names), self.key)
    }
}

/// One node of a selector expression.
#[derive(Debug, Clone)]
pub(super) enum Expr {
    /// `all()` or the empty selector.
    All,
    /// `label == "value"`
    Equals(Name, String),
    /// `label != "value"`: also true when the label is absent.
    NotEquals(Name, String),
    /// `label in {...}` with the set sorted and deduplicated.
    In(Name, Vec<String>),
    /// `label not in {...}`: also true when the label is absent.
    NotIn(Name, Vec<String>),
    /// `has(label)`
    Has(Name),
    /// `label contains "s"` (extension from later Calico)
    Contains(Name, String),
    /// `label starts with "s"` (extension)
    StartsWith(Name, String),
    /// `label ends with "s"` (extension)
    EndsWith(Name, String),
    Not(Box<Expr>),
    /// Two or more operands, sorted and deduplicated by canonical text.
    And(Vec<Expr>),
    /// Two or more operands, sorted and deduplicated by canonical text.
    Or(Vec<Expr>),
}

impl Expr {
    /// Whether the labels satisfy the expression. Allocates nothing.
    pub(super) fn evaluate<L: Labels + ?Sized>(&self, names: &str, labels: &L) -> bool {
        match self {
            Expr::All => true,
            Expr::Equals(name, value) => name.get(names, labels) == Some(value.as_str()),
            Expr::NotEquals(name, value) => name.get(names, labels) != Some(value.as_str()),
            Expr::In(name, set) => name.get(names, labels).is_some_and(|v| contains(set, v)),
            Expr::NotIn(name, set) => !name.get(names, labels).is_some_and(|v| contains(set, v)),
            Expr::Has(name) => name.get(names, labels).is_some(),
            Expr::Contains(name, s) => name
                .get(names, labels)
                .is_some_and(|v| v.contains(s.as_str())),
            Expr::StartsWith(name, s) => name
                .get(names, labels)
                .is_some_and(|v| v.starts_with(s.as_str())),
            Expr::EndsWith(name, s) => name
                .get(names, labels)
                .is_some_and(|v| v.ends_with(s.as_str())),
            Expr::Not(inner) => !inner.evaluate(names, labels),
            Expr::And(operands) => operands.iter().all(|e| e.evaluate(names, labels)),
            Expr::Or(operands) => operands.iter().any(|e| e.evaluate(names, labels)),
        }
    }

    /// Calls `visit` with every label name the expression mentions.
    pub(super) fn each_label<'a>(&self, names: &'a str, visit: &mut impl FnMut(&'a str)) {
        match self {
            Expr::All => {}
            Expr::Equals(name, _)
            | Expr::NotEquals(name, _)
            | Expr::In(name, _)
            | Expr::NotIn(name, _)
            | Expr::Has(name)
            | Expr::Contains(name, _)
            | Expr::StartsWith(name, _)
            | Expr::EndsWith(name, _) => visit(name.text(names)),
            Expr::Not(inner) => inner.each_label(names, visit),
            Expr::And(operands) | Expr::Or(operands) => {
                operands.iter().for_each(|e| e.each_label(names, visit));
            }
        }
    }

    /// A label every matching endpoint must have (and, when known, the values it may have):
    /// what an index can look candidates up by. `None` when the selector can match endpoints
    /// without any particular label.
    pub(super) fn requirement<'a>(
        &'a self,
        names: &'a str,
    ) -> Option<(&'a str, Option<&'a [String]>)> {
        match self {
            Expr::Equals(name, value) => {
                Some((name.text(names), Some(std::slice::from_ref(value))))
            }
            Expr::In(name, set) => Some((name.text(names), Some(set))),
            Expr::Has(name)
            | Expr::Contains(name, _)
            | Expr::StartsWith(name, _)
            | Expr::EndsWith(name, _) => Some((name.text(names), None)),
            Expr::And(operands) => {
                let mut best = None;
                for operand in operands {
                    match operand.requirement(names) {
                        Some((name, Some(values))) => return Some((name, Some(values))),
                        Some(any) => best = best.or(Some(any)),
                        None => {}
                    }
                }
                best
            }
            _ => None,
        }
    }

    /// How tightly the canonical text of this node binds: operands of a tighter operator that
    /// bind more loosely get parentheses.
    pub(super) fn binding(&self) -> u8 {
        match self {
            Expr::Or(_) => 0,
            Expr::And(_) => 1,
            _ => 2,
        }
    }

    /// Whether `!` can be written directly in front of this node without parentheses.
    pub(super) fn is_atom(&self) -> bool {
        matches!(self, Expr::All | Expr::Has(_) | Expr::Not(_))
    }
}

/// Sets are sorted at parse time.
fn contains(set: &[String], value: &str) -> bool {
    set.binary_search_by(|member| member.as_str().cmp(value))
        .is_ok()
}

/// Appends a string literal: `"` unless the text contains one (literals have no escapes).
fn push_literal(out: &mut Vec<u8>, value: &str) {
    let quote = if value.contains('"') { b'\'' } else { b'"' };
    out.push(quote);
    out.extend_from_slice(value.as_bytes());
    out.push(quote);
}

/// Appends a set of literals: `{"a", "b"}`.
fn push_set(out: &mut Vec<u8>, members: &[String]) {
    out.push(b'{');
    for (index, member) in members.iter().enumerate() {
        if index > 0 {
            out.extend_from_slice(b", ");
        }
        push_literal(out, member);
    }
    out.push(b'}');
}

/// Appends the canonical text of a comparison, `has()` or `all()` (UTF-8: it is made of
/// strings); `!`, `&&` and `||` are the parser's (and `Display`'s) to write.
pub(super) fn push_leaf(out: &mut Vec<u8>, names: &str, expr: &Expr) {
    let (name, op) = match expr {
        Expr::All => return out.extend_from_slice(b"all()"),
        Expr::Has(name) => {
            out.extend_from_slice(b"has(");
            out.extend_from_slice(name.text(names).as_bytes());
            return out.push(b')');
        }
        Expr::Equals(name, _) => (name, " == "),
        Expr::NotEquals(name, _) => (name, " != "),
        Expr::In(name, _) => (name, " in "),
        Expr::NotIn(name, _) => (name, " not in "),
        Expr::Contains(name, _) => (name, " contains "),
        Expr::StartsWith(name, _) => (name, " starts with "),
        Expr::EndsWith(name, _) => (name, " ends with "),
        Expr::Not(_) | Expr::And(_) | Expr::Or(_) => unreachable!("not a leaf: {expr:?}"),
    };
    out.extend_from_slice(name.text(names).as_bytes());
    out.extend_from_slice(op.as_bytes());
    match expr {
        Expr::In(_, set) | Expr::NotIn(_, set) => push_set(out, set),
        Expr::Equals(_, value)
        | Expr::NotEquals(_, value)
        | Expr::Contains(_, value)
        | Expr::StartsWith(_, value)
        | Expr::EndsWith(_, value) => push_literal(out, value),
        _ => {}
    }
}

impl Expr {
    /// Appends the canonical text: one space around binary operators, minimal parentheses. The
    /// parser writes the same text as it goes; this is for the rare rebuild.
    pub(super) fn render(&self, names: &str, out: &mut Vec<u8>) {
        match self {
            Expr::Not(inner) if inner.is_atom() => {
                out.push(b'!');
                inner.render(names, out);
            }
            Expr::Not(inner) => {
                out.extend_from_slice(b"!(");
                inner.render(names, out);
                out.push(b')');
            }
            Expr::And(operands) => join(operands, names, b" && ", 1, out),
            Expr::Or(operands) => join(operands, names, b" || ", 0, out),
            leaf => push_leaf(out, names, leaf),
        }
    }
}

fn join(operands: &[Expr], names: &str, op: &[u8], binding: u8, out: &mut Vec<u8>) {
    for (index, operand) in operands.iter().enumerate() {
        if index > 0 {
            out.extend_from_slice(op);
        }
        if operand.binding() < binding {
            out.push(b'(');
            operand.render(names, out);
            out.push(b')');
        } else {
            operand.render(names, out);
        }
    }
}
