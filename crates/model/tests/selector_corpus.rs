//! The benchmark corpus (`benches/corpus/mod.rs`) checked against an independent oracle: a tiny
//! evaluator of the 1.4 grammar written from docs/selectors.md, sharing no code with the
//! crate's parser. It evaluates a selector against all label sets at once (one `bool` per set),
//! so a slice of the corpus stays fast in debug builds.

#[path = "../benches/corpus/mod.rs"]
mod corpus;

use std::collections::BTreeMap;

use calico_model::selector::{Node, Selector, Tree};

/// The seeds of the benchmarks: the same corpus.
const SELECTOR_SEED: u64 = 0x5e1e_c705;
const LABEL_SEED: u64 = 0x1abe_15e7;

type Labels = BTreeMap<String, String>;

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Word(String),
    Quoted(String),
    Punct(&'static str),
}

fn tokens(text: &str) -> Vec<Token> {
    const PUNCT: [&str; 10] = ["==", "!=", "&&", "||", "!", "(", ")", "{", "}", ","];
    let mut tokens = Vec::new();
    let mut rest = text.trim_start();
    while !rest.is_empty() {
        if let Some(p) = PUNCT.iter().find(|p| rest.starts_with(**p)) {
            tokens.push(Token::Punct(p));
            rest = &rest[p.len()..];
        } else if let Some(quote) = rest.chars().next().filter(|c| *c == '"' || *c == '\'') {
            let end = rest[1..].find(quote).expect("closed string") + 1;
            tokens.push(Token::Quoted(rest[1..end].to_owned()));
            rest = &rest[end + 1..];
        } else {
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || "_./-".contains(c)))
                .unwrap_or(rest.len());
            assert!(end > 0, "unexpected {rest:?}");
            tokens.push(Token::Word(rest[..end].to_owned()));
            rest = &rest[end..];
        }
        rest = rest.trim_start();
    }
    tokens
}

/// Recursive descent straight to truth values: one per label set.
struct Oracle<'a> {
    tokens: Vec<Token>,
    at: usize,
    sets: &'a [Labels],
}

impl Oracle<'_> {
    fn next(&mut self) -> Token {
        self.at += 1;
        self.tokens[self.at - 1].clone()
    }

    fn eat(&mut self, punct: &'static str) -> bool {
        let found = self.tokens.get(self.at) == Some(&Token::Punct(punct));
        self.at += usize::from(found);
        found
    }

    fn or(&mut self) -> Vec<bool> {
        let mut value = self.and();
        while self.eat("||") {
            let other = self.and();
            value.iter_mut().zip(other).for_each(|(v, o)| *v = *v || o);
        }
        value
    }

    fn and(&mut self) -> Vec<bool> {
        let mut value = self.unary();
        while self.eat("&&") {
            let other = self.unary();
            value.iter_mut().zip(other).for_each(|(v, o)| *v = *v && o);
        }
        value
    }

    fn unary(&mut self) -> Vec<bool> {
        if self.eat("!") {
            return self.unary().into_iter().map(|v| !v).collect();
        }
        if self.eat("(") {
            let value = self.or();
            assert!(self.eat(")"));
            return value;
        }
        let Token::Word(word) = self.next() else {
            panic!("expected a word at token {}", self.at)
        };
        if self.eat("(") {
            let value = match word.as_str() {
                "all" => vec![true; self.sets.len()],
                "has" => {
                    let Token::Word(name) = self.next() else {
                        panic!("has() without a name")
                    };
                    self.each(|labels| labels.contains_key(&name))
                }
                other => panic!("unknown function {other}"),
            };
            assert!(self.eat(")"));
            return value;
        }
        self.comparison(word)
    }

    fn comparison(&mut self, name: String) -> Vec<bool> {
        let value = |labels: &Labels| labels.get(&name).cloned();
        match self.next() {
            Token::Punct("==") => {
                let wanted = self.quoted();
                self.each(|l| value(l).as_ref() == Some(&wanted))
            }
            Token::Punct("!=") => {
                let wanted = self.quoted();
                self.each(|l| value(l).as_ref() != Some(&wanted))
            }
            Token::Word(op) if op == "in" => {
                let set = self.set();
                self.each(|l| value(l).is_some_and(|v| set.contains(&v)))
            }
            Token::Word(op) if op == "not" => {
                assert_eq!(self.next(), Token::Word("in".to_owned()));
                let set = self.set();
                self.each(|l| !value(l).is_some_and(|v| set.contains(&v)))
            }
            other => panic!("unexpected operator {other:?}"),
        }
    }

    fn quoted(&mut self) -> String {
        match self.next() {
            Token::Quoted(text) => text,
            other => panic!("expected a string, found {other:?}"),
        }
    }

    fn set(&mut self) -> Vec<String> {
        assert!(self.eat("{"));
        let mut members = Vec::new();
        while !self.eat("}") {
            members.push(self.quoted());
            self.eat(",");
        }
        members
    }

    fn each(&self, test: impl Fn(&Labels) -> bool) -> Vec<bool> {
        self.sets.iter().map(test).collect()
    }
}

fn oracle(text: &str, sets: &[Labels]) -> Vec<bool> {
    let tokens = tokens(text);
    if tokens.is_empty() {
        return vec![true; sets.len()];
    }
    let mut oracle = Oracle {
        tokens,
        at: 0,
        sets,
    };
    let value = oracle.or();
    assert_eq!(
        oracle.at,
        oracle.tokens.len(),
        "trailing tokens in {text:?}"
    );
    value
}

fn label_sets(count: usize) -> Vec<Labels> {
    corpus::label_sets(count, LABEL_SEED)
        .into_iter()
        .map(|labels| labels.into_iter().collect())
        .collect()
}

#[test]
fn the_whole_corpus_parses_and_its_canonical_form_is_a_fixed_point() {
    for text in corpus::selectors(10_000, SELECTOR_SEED) {
        let selector = Selector::parse(&text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        let again = Selector::parse(selector.canonical()).unwrap();
        assert_eq!(again.canonical(), selector.canonical(), "{text:?}");
    }
}

#[test]
fn match_counts_agree_with_the_oracle() {
    // A slice of the benchmark's 10,000 × 10,000: every selector kind and depth occurs often.
    let texts = corpus::selectors(2_000, SELECTOR_SEED);
    let sets = label_sets(1_000);
    let mut total = 0;
    for text in &texts {
        let expected = oracle(text, &sets);
        let selector = Selector::parse(text).unwrap();
        let canonical = Selector::parse(selector.canonical()).unwrap();
        for (labels, want) in sets.iter().zip(&expected) {
            assert_eq!(selector.evaluate(labels), *want, "{text:?} on {labels:?}");
            assert_eq!(canonical.evaluate(labels), *want, "canonical of {text:?}");
        }
        total += expected.iter().filter(|m| **m).count();
    }
    // Neither almost nothing nor almost everything matches: the comparison means something.
    let share = total as f64 / (texts.len() * sets.len()) as f64;
    assert!((0.2..0.6).contains(&share), "{share}");
}

/// Evaluates the read-only tree (`Selector::tree`) directly, as a user of the view would.
fn evaluate_tree(tree: Tree<'_>, labels: &Labels) -> bool {
    let get = |label: &str| labels.get(label).map(String::as_str);
    match tree.node() {
        Node::All => true,
        Node::Equals { label, value } => get(label) == Some(value),
        Node::NotEquals { label, value } => get(label) != Some(value),
        Node::In { label, values } => get(label).is_some_and(|v| values.iter().any(|m| m == v)),
        Node::NotIn { label, values } => !get(label).is_some_and(|v| values.iter().any(|m| m == v)),
        Node::Has { label } => get(label).is_some(),
        Node::Contains { label, value } => get(label).is_some_and(|v| v.contains(value)),
        Node::StartsWith { label, value } => get(label).is_some_and(|v| v.starts_with(value)),
        Node::EndsWith { label, value } => get(label).is_some_and(|v| v.ends_with(value)),
        Node::Not(inner) => !evaluate_tree(inner, labels),
        Node::And(operands) => operands.iter().all(|t| evaluate_tree(t, labels)),
        Node::Or(operands) => operands.iter().any(|t| evaluate_tree(t, labels)),
    }
}

/// Writes the tree back as selector text (fully parenthesised).
fn spell(tree: Tree<'_>) -> String {
    let set = |values: &[String]| {
        let quoted: Vec<String> = values.iter().map(|v| format!("'{v}'")).collect();
        format!("{{{}}}", quoted.join(", "))
    };
    match tree.node() {
        Node::All => "all()".to_owned(),
        Node::Equals { label, value } => format!("{label} == '{value}'"),
        Node::NotEquals { label, value } => format!("{label} != '{value}'"),
        Node::In { label, values } => format!("{label} in {}", set(values)),
        Node::NotIn { label, values } => format!("{label} not in {}", set(values)),
        Node::Has { label } => format!("has({label})"),
        Node::Contains { label, value } => format!("{label} contains '{value}'"),
        Node::StartsWith { label, value } => format!("{label} starts with '{value}'"),
        Node::EndsWith { label, value } => format!("{label} ends with '{value}'"),
        Node::Not(inner) => format!("!({})", spell(inner)),
        Node::And(operands) => {
            let parts: Vec<String> = operands.iter().map(|t| format!("({})", spell(t))).collect();
            parts.join(" && ")
        }
        Node::Or(operands) => {
            let parts: Vec<String> = operands.iter().map(|t| format!("({})", spell(t))).collect();
            parts.join(" || ")
        }
    }
}

#[test]
fn the_tree_answers_as_the_oracle_and_spells_the_same_selector() {
    let texts = corpus::selectors(1_000, SELECTOR_SEED);
    let sets = label_sets(300);
    for text in &texts {
        let expected = oracle(text, &sets);
        let selector = Selector::parse(text).unwrap();
        for (labels, want) in sets.iter().zip(&expected) {
            assert_eq!(
                evaluate_tree(selector.tree(), labels),
                *want,
                "{text:?} on {labels:?}"
            );
        }
        // The corpus's values hold no `'`, so the spelling parses back.
        let spelled = spell(selector.tree());
        let again = Selector::parse(&spelled).unwrap_or_else(|e| panic!("{spelled:?}: {e}"));
        assert_eq!(
            again.canonical(),
            selector.canonical(),
            "{text:?} spelled {spelled:?}"
        );
    }
}

#[test]
fn the_oracle_reads_the_documented_examples() {
    let sets = label_sets(200);
    for (text, expected) in [
        (r#"role == "db" || app != 'web'"#, None),
        ("has(calico/k8s_ns) && !has(app.kubernetes.io/name)", None),
        ("app in {} || all()", Some(true)),
        ("app in {}", Some(false)),
        ("", Some(true)),
    ] {
        let values = oracle(text, &sets);
        if let Some(all) = expected {
            assert!(values.iter().all(|v| *v == all), "{text:?}");
        }
        let selector = Selector::parse(text).unwrap();
        let evaluated: Vec<bool> = sets.iter().map(|l| selector.evaluate(l)).collect();
        assert_eq!(values, evaluated, "{text:?}");
    }
}
