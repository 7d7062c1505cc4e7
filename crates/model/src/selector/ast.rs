//! The parsed form of a selector, its evaluation and its canonical text.

use std::fmt::{self, Write};

use super::Labels;

/// One node of a selector expression.
#[derive(Debug, Clone)]
pub(super) enum Expr {
    /// `all()` or the empty selector.
    All,
    /// `label == "value"`
    Equals(String, String),
    /// `label != "value"`: also true when the label is absent.
    NotEquals(String, String),
    /// `label in {...}` with the set sorted and deduplicated.
    In(String, Vec<String>),
    /// `label not in {...}`: also true when the label is absent.
    NotIn(String, Vec<String>),
    /// `has(label)`
    Has(String),
    /// `label contains "s"` (extension from later Calico)
    Contains(String, String),
    /// `label starts with "s"` (extension)
    StartsWith(String, String),
    /// `label ends with "s"` (extension)
    EndsWith(String, String),
    Not(Box<Expr>),
    /// Two or more operands, sorted and deduplicated by canonical text.
    And(Vec<Expr>),
    /// Two or more operands, sorted and deduplicated by canonical text.
    Or(Vec<Expr>),
}

impl Expr {
    /// Whether the labels satisfy the expression. Allocates nothing.
    pub(super) fn evaluate<L: Labels + ?Sized>(&self, labels: &L) -> bool {
        match self {
            Expr::All => true,
            Expr::Equals(name, value) => labels.get_label(name) == Some(value.as_str()),
            Expr::NotEquals(name, value) => labels.get_label(name) != Some(value.as_str()),
            Expr::In(name, set) => labels.get_label(name).is_some_and(|v| contains(set, v)),
            Expr::NotIn(name, set) => !labels.get_label(name).is_some_and(|v| contains(set, v)),
            Expr::Has(name) => labels.get_label(name).is_some(),
            Expr::Contains(name, s) => labels
                .get_label(name)
                .is_some_and(|v| v.contains(s.as_str())),
            Expr::StartsWith(name, s) => labels
                .get_label(name)
                .is_some_and(|v| v.starts_with(s.as_str())),
            Expr::EndsWith(name, s) => labels
                .get_label(name)
                .is_some_and(|v| v.ends_with(s.as_str())),
            Expr::Not(inner) => !inner.evaluate(labels),
            Expr::And(operands) => operands.iter().all(|e| e.evaluate(labels)),
            Expr::Or(operands) => operands.iter().any(|e| e.evaluate(labels)),
        }
    }

    /// Calls `visit` with every label name the expression mentions.
    pub(super) fn each_label<'a>(&'a self, visit: &mut impl FnMut(&'a str)) {
        match self {
            Expr::All => {}
            Expr::Equals(name, _)
            | Expr::NotEquals(name, _)
            | Expr::In(name, _)
            | Expr::NotIn(name, _)
            | Expr::Has(name)
            | Expr::Contains(name, _)
            | Expr::StartsWith(name, _)
            | Expr::EndsWith(name, _) => visit(name),
            Expr::Not(inner) => inner.each_label(visit),
            Expr::And(operands) | Expr::Or(operands) => {
                operands.iter().for_each(|e| e.each_label(visit));
            }
        }
    }

    /// A label every matching endpoint must have (and, when known, the values it may have):
    /// what an index can look candidates up by. `None` when the selector can match endpoints
    /// without any particular label.
    pub(super) fn requirement(&self) -> Option<(&str, Option<&[String]>)> {
        match self {
            Expr::Equals(name, value) => Some((name, Some(std::slice::from_ref(value)))),
            Expr::In(name, set) => Some((name, Some(set))),
            Expr::Has(name)
            | Expr::Contains(name, _)
            | Expr::StartsWith(name, _)
            | Expr::EndsWith(name, _) => Some((name, None)),
            Expr::And(operands) => {
                let mut best = None;
                for operand in operands {
                    match operand.requirement() {
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
    fn binding(&self) -> u8 {
        match self {
            Expr::Or(_) => 0,
            Expr::And(_) => 1,
            _ => 2,
        }
    }

    /// Whether `!` can be written directly in front of this node without parentheses.
    fn is_atom(&self) -> bool {
        matches!(self, Expr::All | Expr::Has(_) | Expr::Not(_))
    }
}

/// Sets are sorted at parse time.
fn contains(set: &[String], value: &str) -> bool {
    set.binary_search_by(|member| member.as_str().cmp(value))
        .is_ok()
}

/// A string literal: `"` unless the text contains one (literals have no escapes).
struct Literal<'a>(&'a str);

impl fmt::Display for Literal<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let quote = if self.0.contains('"') { '\'' } else { '"' };
        write!(f, "{quote}{}{quote}", self.0)
    }
}

struct Set<'a>(&'a [String]);

impl fmt::Display for Set<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_char('{')?;
        for (index, member) in self.0.iter().enumerate() {
            if index > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{}", Literal(member))?;
        }
        f.write_char('}')
    }
}

impl fmt::Display for Expr {
    /// The canonical text: one space around binary operators, minimal parentheses.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expr::All => f.write_str("all()"),
            Expr::Equals(name, value) => write!(f, "{name} == {}", Literal(value)),
            Expr::NotEquals(name, value) => write!(f, "{name} != {}", Literal(value)),
            Expr::In(name, set) => write!(f, "{name} in {}", Set(set)),
            Expr::NotIn(name, set) => write!(f, "{name} not in {}", Set(set)),
            Expr::Has(name) => write!(f, "has({name})"),
            Expr::Contains(name, s) => write!(f, "{name} contains {}", Literal(s)),
            Expr::StartsWith(name, s) => write!(f, "{name} starts with {}", Literal(s)),
            Expr::EndsWith(name, s) => write!(f, "{name} ends with {}", Literal(s)),
            Expr::Not(inner) if inner.is_atom() => write!(f, "!{inner}"),
            Expr::Not(inner) => write!(f, "!({inner})"),
            Expr::And(operands) => join(f, operands, " && ", 1),
            Expr::Or(operands) => join(f, operands, " || ", 0),
        }
    }
}

fn join(f: &mut fmt::Formatter<'_>, operands: &[Expr], op: &str, binding: u8) -> fmt::Result {
    for (index, operand) in operands.iter().enumerate() {
        if index > 0 {
            f.write_str(op)?;
        }
        if operand.binding() < binding {
            write!(f, "({operand})")?;
        } else {
            write!(f, "{operand}")?;
        }
    }
    Ok(())
}
