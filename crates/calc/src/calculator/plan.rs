//! What an index can look a selector up by: labels that every endpoint it matches has (`app ==
//! "x" || role == "db"`: `app=x` or `role=db`), or that every endpoint it does not match has
//! (`env != "dev"`: only `env=dev` fails; `all()`: none fails).
//!
//! The plan is read from the selector's tree (`Selector::tree`), which covers the whole grammar:
//! every selector has a plan, though for some (`a contains "x" || !has(b)`) it lists no atoms
//! on one side or both, and the selector is then evaluated against every endpoint.

use calico_model::selector::{Node, Selector, Tree};

/// A label an endpoint may have: `values` lists the values that count (`None`: any value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Atom {
    pub name: String,
    pub values: Option<Vec<String>>,
}

impl Atom {
    /// Whether labels with this (name, value) hit the atom.
    #[cfg(test)]
    pub fn hit(&self, value: &str) -> bool {
        self.values
            .as_ref()
            .is_none_or(|values| values.iter().any(|v| v == value))
    }
}

/// How an index finds the endpoints whose answer may be `true` (`matches`) or `false`
/// (`misses`): `Some(atoms)` when every such endpoint hits one of the atoms, `None` when there
/// is no such list. `misses == Some([])`: the selector matches every endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Plan {
    pub matches: Option<Vec<Atom>>,
    pub misses: Option<Vec<Atom>>,
}

impl Plan {
    pub fn of(selector: &Selector) -> Plan {
        Plan::of_tree(selector.tree())
    }

    fn of_tree(tree: Tree<'_>) -> Plan {
        let one = |value: &str| Some(vec![value.to_owned()]);
        match tree.node() {
            Node::All => Plan {
                matches: None,
                misses: Some(Vec::new()),
            },
            Node::Equals { label, value } => present(label, one(value)),
            Node::NotEquals { label, value } => present(label, one(value)).negate(),
            Node::In { label, values } => present(label, Some(values.to_vec())),
            Node::NotIn { label, values } => present(label, Some(values.to_vec())).negate(),
            Node::Has { label }
            | Node::Contains { label, .. }
            | Node::StartsWith { label, .. }
            | Node::EndsWith { label, .. } => present(label, None),
            Node::Not(inner) => Plan::of_tree(inner).negate(),
            // `a && b`: matching needs all operands to match, missing needs one to miss.
            Node::And(operands) => operands
                .iter()
                .map(Plan::of_tree)
                .reduce(|plan, next| Plan {
                    matches: cheaper(plan.matches, next.matches),
                    misses: union(plan.misses, next.misses),
                })
                .expect("two or more operands"),
            // `a || b`: matching needs one operand to match, missing needs all to miss.
            Node::Or(operands) => operands
                .iter()
                .map(Plan::of_tree)
                .reduce(|plan, next| Plan {
                    matches: union(plan.matches, next.matches),
                    misses: cheaper(plan.misses, next.misses),
                })
                .expect("two or more operands"),
        }
    }

    fn negate(self) -> Plan {
        Plan {
            matches: self.misses,
            misses: self.matches,
        }
    }
}

/// What looking atoms up costs, roughly: each listed value is one lookup with few endpoints,
/// an atom taking any value finds every endpoint with the label.
pub(super) fn cost(atoms: &[Atom]) -> usize {
    atoms
        .iter()
        .map(|a| a.values.as_ref().map_or(1_000, Vec::len))
        .sum()
}

/// The cheaper of two atom lists (either holds).
fn cheaper(a: Option<Vec<Atom>>, b: Option<Vec<Atom>>) -> Option<Vec<Atom>> {
    match (a, b) {
        (Some(a), Some(b)) if cost(&b) < cost(&a) => Some(b),
        (Some(a), _) => Some(a),
        (None, b) => b,
    }
}

/// Both atom lists (one of them holds, and neither is known to).
fn union(a: Option<Vec<Atom>>, b: Option<Vec<Atom>>) -> Option<Vec<Atom>> {
    let (mut a, b) = (a?, b?);
    a.extend(b);
    Some(a)
}

/// The plan of a selector true exactly when label `name` has one of `values` (`None`: any):
/// matching endpoints hit the atom; missing ones are found by no atom.
fn present(name: &str, values: Option<Vec<String>>) -> Plan {
    Plan {
        matches: Some(vec![Atom {
            name: name.to_owned(),
            values,
        }]),
        misses: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(text: &str) -> Plan {
        Plan::of(&Selector::parse(text).unwrap())
    }

    fn atom(name: &str, values: &[&str]) -> Atom {
        let values = values.iter().map(|v| (*v).to_owned()).collect();
        Atom {
            name: name.to_owned(),
            values: Some(values),
        }
    }

    #[test]
    fn or_not_equals_and_all_get_atoms() {
        let either = plan("app == 'a' || role in {'db', 'web'}");
        assert_eq!(
            either.matches,
            Some(vec![atom("app", &["a"]), atom("role", &["db", "web"])])
        );
        assert_eq!(
            plan("env != 'dev'").misses,
            Some(vec![atom("env", &["dev"])])
        );
        assert_eq!(plan("all()").misses, Some(Vec::new()));
        // `app != "a" && has(b)`: matches have `b`; a miss may have no label at all.
        let negated = plan("!(app == 'a' || !has(b))");
        let b = Atom {
            name: "b".to_owned(),
            values: None,
        };
        assert_eq!(negated.matches, Some(vec![b]));
        assert_eq!(negated.misses, None);
    }

    #[test]
    fn quotes_and_sets_are_read_as_written() {
        let quoted = plan(r#"a == 'say "hi"' && b not in {}"#);
        assert_eq!(quoted.matches, Some(vec![atom("a", &[r#"say "hi""#])]));
    }
}
