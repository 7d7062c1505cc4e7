//! What an index can look a selector up by: labels that every endpoint it matches has (`app ==
//! "x" || role == "db"`: `app=x` or `role=db`), or that every endpoint it does not match has
//! (`env != "dev"`: only `env=dev` fails; `all()`: none fails).
//!
//! The model's `Selector` exposes evaluation and its canonical text, not its tree, so the plan is
//! read from the canonical text, whose grammar is fixed (docs/selectors.md): one space around
//! binary operators, `!` directly before `all()`, `has()` and `!`, parentheses only where
//! needed. Text this reader does not follow gives a plan with no atoms: the selector is then
//! evaluated against every endpoint, which is slow but never wrong.

use calico_model::selector::{Selector, is_label_char};

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
        Plan::read(selector.canonical()).unwrap_or_else(Plan::unknown)
    }

    /// The plan of canonical selector text; `None` if the reader does not follow it.
    pub fn read(text: &str) -> Option<Plan> {
        let mut reader = Reader { text, at: 0 };
        let plan = reader.or()?;
        (reader.at == text.len()).then_some(plan)
    }

    fn unknown() -> Plan {
        Plan {
            matches: None,
            misses: None,
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

struct Reader<'t> {
    text: &'t str,
    at: usize,
}

impl Reader<'_> {
    fn eat(&mut self, token: &str) -> bool {
        let found = self.text[self.at..].starts_with(token);
        if found {
            self.at += token.len();
        }
        found
    }

    /// `a || b`: matching needs one operand to match, missing needs all to miss.
    fn or(&mut self) -> Option<Plan> {
        let mut plan = self.and()?;
        while self.eat(" || ") {
            let next = self.and()?;
            plan = Plan {
                matches: union(plan.matches, next.matches),
                misses: cheaper(plan.misses, next.misses),
            };
        }
        Some(plan)
    }

    /// `a && b`: matching needs all operands to match, missing needs one to miss.
    fn and(&mut self) -> Option<Plan> {
        let mut plan = self.unary()?;
        while self.eat(" && ") {
            let next = self.unary()?;
            plan = Plan {
                matches: cheaper(plan.matches, next.matches),
                misses: union(plan.misses, next.misses),
            };
        }
        Some(plan)
    }

    fn unary(&mut self) -> Option<Plan> {
        if self.eat("!") {
            return Some(self.unary()?.negate());
        }
        if self.eat("(") {
            let plan = self.or()?;
            return self.eat(")").then_some(plan);
        }
        self.leaf()
    }

    fn leaf(&mut self) -> Option<Plan> {
        if self.eat("all()") {
            return Some(Plan {
                matches: None,
                misses: Some(Vec::new()),
            });
        }
        if self.eat("has(") {
            let name = self.name()?;
            return self.eat(")").then(|| present(name, None));
        }
        let name = self.name()?;
        if self.eat(" == ") {
            Some(present(name, Some(vec![self.literal()?])))
        } else if self.eat(" != ") {
            Some(present(name, Some(vec![self.literal()?])).negate())
        } else if self.eat(" in ") {
            Some(present(name, Some(self.set()?)))
        } else if self.eat(" not in ") {
            Some(present(name, Some(self.set()?)).negate())
        } else if self.eat(" contains ") || self.eat(" starts with ") || self.eat(" ends with ") {
            self.literal()?;
            Some(present(name, None))
        } else {
            None
        }
    }

    fn name(&mut self) -> Option<String> {
        let rest = &self.text[self.at..];
        let len = rest.find(|c| !is_label_char(c)).unwrap_or(rest.len());
        self.at += len;
        (len > 0).then(|| rest[..len].to_owned())
    }

    /// A quoted string: literals have no escapes, and are quoted with `'` when they hold `"`.
    fn literal(&mut self) -> Option<String> {
        let rest = &self.text[self.at..];
        let quote = rest.chars().next().filter(|&c| c == '"' || c == '\'')?;
        let len = rest[1..].find(quote)?;
        self.at += len + 2;
        Some(rest[1..1 + len].to_owned())
    }

    fn set(&mut self) -> Option<Vec<String>> {
        if !self.eat("{") {
            return None;
        }
        let mut values = Vec::new();
        if self.eat("}") {
            return Some(values);
        }
        loop {
            values.push(self.literal()?);
            if self.eat("}") {
                return Some(values);
            }
            if !self.eat(", ") {
                return None;
            }
        }
    }
}

/// The plan of a selector true exactly when label `name` has one of `values` (`None`: any):
/// matching endpoints hit the atom; missing ones are found by no atom.
fn present(name: String, values: Option<Vec<String>>) -> Plan {
    Plan {
        matches: Some(vec![Atom { name, values }]),
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
