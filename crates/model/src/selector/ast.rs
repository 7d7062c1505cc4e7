//! The parsed form of a selector, its evaluation and its canonical text.

use std::ops::Range;

use super::label::{Labels, label_key};

/// A label name as a selector mentions it: where it is in the selector's buffer of names (one
/// allocation for all of them), and its [`label_key`], computed once at parse time so label
/// representations that store keys can answer a lookup without comparing strings.
#[derive(Debug, Clone)]
pub(super) struct Name {
    /// Offsets as `u32`: a smaller tree is moved faster while it is built (selectors are
    /// far shorter than 4 GiB; their length is checked before parsing).
    at: Range<u32>,
    key: u64,
}

impl Name {
    /// Appends `text` to the buffer of names.
    pub(super) fn new(names: &mut String, text: &str) -> Name {
        let start = names.len() as u32;
        names.push_str(text);
        Name {
            at: start..names.len() as u32,
            key: label_key(text),
        }
    }

    pub(super) fn text<'n>(&self, names: &'n str) -> &'n str {
        &names[self.at.start as usize..self.at.end as usize]
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
fn push_literal(out: &mut String, value: &str) {
    let quote = if value.contains('"') { '\'' } else { '"' };
    out.push(quote);
    out.push_str(value);
    out.push(quote);
}

/// Appends a set of literals: `{"a", "b"}`.
fn push_set(out: &mut String, members: &[String]) {
    out.push('{');
    for (index, member) in members.iter().enumerate() {
        if index > 0 {
            out.push_str(", ");
        }
        push_literal(out, member);
    }
    out.push('}');
}

/// Appends the canonical text of a comparison, `has()` or `all()`; `!`, `&&` and `||` are the parser's (and `Display`'s) to write.
pub(super) fn push_leaf(out: &mut String, names: &str, expr: &Expr) {
    let (name, op) = match expr {
        Expr::All => return out.push_str("all()"),
        Expr::Has(name) => {
            out.push_str("has(");
            out.push_str(name.text(names));
            return out.push(')');
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
    out.push_str(name.text(names));
    out.push_str(op);
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
    pub(super) fn render(&self, names: &str, out: &mut String) {
        match self {
            Expr::Not(inner) if inner.is_atom() => {
                out.push('!');
                inner.render(names, out);
            }
            Expr::Not(inner) => {
                out.push_str("!(");
                inner.render(names, out);
                out.push(')');
            }
            Expr::And(operands) => join(operands, names, " && ", 1, out),
            Expr::Or(operands) => join(operands, names, " || ", 0, out),
            leaf => push_leaf(out, names, leaf),
        }
    }
}

fn join(operands: &[Expr], names: &str, op: &str, binding: u8, out: &mut String) {
    for (index, operand) in operands.iter().enumerate() {
        if index > 0 {
            out.push_str(op);
        }
        if operand.binding() < binding {
            out.push('(');
            operand.render(names, out);
            out.push(')');
        } else {
            operand.render(names, out);
        }
    }
}

/// A read-only view of a parsed selector's tree ([`crate::selector::Selector::tree`]), in its
/// canonical shape: the operands of `&&` and `||` flattened, sorted and deduplicated, sets
/// sorted and deduplicated, no double negation. Borrowed from the selector: nothing is copied.
#[derive(Debug, Clone, Copy)]
pub enum Node<'a> {
    /// `all()` (or the empty selector).
    All,
    /// `label == "value"`
    Equals { label: &'a str, value: &'a str },
    /// `label != "value"`: also true when the label is absent.
    NotEquals { label: &'a str, value: &'a str },
    /// `label in {...}`, sorted and deduplicated.
    In {
        label: &'a str,
        values: &'a [String],
    },
    /// `label not in {...}`: also true when the label is absent.
    NotIn {
        label: &'a str,
        values: &'a [String],
    },
    /// `has(label)`
    Has { label: &'a str },
    /// `label contains "value"`
    Contains { label: &'a str, value: &'a str },
    /// `label starts with "value"`
    StartsWith { label: &'a str, value: &'a str },
    /// `label ends with "value"`
    EndsWith { label: &'a str, value: &'a str },
    /// `!operand`
    Not(Tree<'a>),
    /// `a && b && ...`: two or more operands.
    And(Operands<'a>),
    /// `a || b || ...`: two or more operands.
    Or(Operands<'a>),
}

/// A subtree: [`Tree::node`] tells what it is.
#[derive(Debug, Clone, Copy)]
pub struct Tree<'a> {
    expr: &'a Expr,
    names: &'a str,
}

impl<'a> Tree<'a> {
    pub(super) fn new(expr: &'a Expr, names: &'a str) -> Tree<'a> {
        Tree { expr, names }
    }

    /// What this subtree is.
    pub fn node(self) -> Node<'a> {
        let names = self.names;
        match self.expr {
            Expr::All => Node::All,
            Expr::Equals(name, value) => Node::Equals {
                label: name.text(names),
                value,
            },
            Expr::NotEquals(name, value) => Node::NotEquals {
                label: name.text(names),
                value,
            },
            Expr::In(name, values) => Node::In {
                label: name.text(names),
                values,
            },
            Expr::NotIn(name, values) => Node::NotIn {
                label: name.text(names),
                values,
            },
            Expr::Has(name) => Node::Has {
                label: name.text(names),
            },
            Expr::Contains(name, value) => Node::Contains {
                label: name.text(names),
                value,
            },
            Expr::StartsWith(name, value) => Node::StartsWith {
                label: name.text(names),
                value,
            },
            Expr::EndsWith(name, value) => Node::EndsWith {
                label: name.text(names),
                value,
            },
            Expr::Not(inner) => Node::Not(Tree::new(inner, names)),
            Expr::And(operands) => Node::And(Operands { operands, names }),
            Expr::Or(operands) => Node::Or(Operands { operands, names }),
        }
    }
}

/// The operands of an `&&` or `||`, in canonical order.
#[derive(Debug, Clone, Copy)]
pub struct Operands<'a> {
    operands: &'a [Expr],
    names: &'a str,
}

impl<'a> Operands<'a> {
    pub fn len(self) -> usize {
        self.operands.len()
    }

    /// Never true: `&&` and `||` have two or more operands.
    pub fn is_empty(self) -> bool {
        self.operands.is_empty()
    }

    pub fn iter(self) -> impl ExactSizeIterator<Item = Tree<'a>> {
        let names = self.names;
        self.operands.iter().map(move |expr| Tree::new(expr, names))
    }
}
