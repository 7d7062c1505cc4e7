//! The selector language as operators use it: every operator, precedence, quoting, negation
//! versus absent labels, the canonical form, and precise errors for bad input.

use std::collections::{BTreeMap, HashMap};

use calico_model::selector::{Labels, Selector};
use proptest::prelude::*;

/// Labels from `"a=1, b=2"` (empty text: no labels).
fn labels(spec: &str) -> BTreeMap<String, String> {
    spec.split(',')
        .map(str::trim)
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (name, value) = pair.split_once('=').expect("name=value");
            (name.to_owned(), value.to_owned())
        })
        .collect()
}

fn check(rows: &[(&str, &str, bool)]) {
    let mut failures = Vec::new();
    for (text, spec, expected) in rows {
        let selector = Selector::parse(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        if selector.evaluate(&labels(spec)) != *expected {
            failures.push(format!("{text:?} on {{{spec}}} should be {expected}"));
        }
        // The canonical form selects exactly the same endpoints.
        let again = Selector::parse(selector.canonical())
            .unwrap_or_else(|e| panic!("canonical {:?}: {e}", selector.canonical()));
        assert_eq!(again.canonical(), selector.canonical(), "{text:?}");
        if again.evaluate(&labels(spec)) != *expected {
            failures.push(format!(
                "canonical {:?} on {{{spec}}}",
                selector.canonical()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn equality() {
    check(&[
        (r#"role == "db""#, "role=db", true),
        (r#"role == "db""#, "role=web", false),
        (r#"role == "db""#, "", false),
        (r#"role == "db""#, "other=db", false),
        (r#"role == "db""#, "role=DB", false),
        (r#"role == "db""#, "role=db.", false),
        (r#"role == """#, "role=", true),
        (r#"role == """#, "", false),
        (r#"role=="db""#, "role=db", true),
        (r#"  role   ==   "db"  "#, "role=db", true),
        (r#"my_label == "foo bar""#, "my_label=foo bar", true),
        (r#"my_label == "foo bar""#, "my_label=foo", false),
        (r#"a == "x" "#, "a=x,b=y", true),
        (
            r#"calico/k8s_ns == "default""#,
            "calico/k8s_ns=default",
            true,
        ),
        (
            r#"app.kubernetes.io/name == "nginx""#,
            "app.kubernetes.io/name=nginx",
            true,
        ),
        (r#"tier-1 == "a""#, "tier-1=a", true),
        (r#"x == "a==b""#, "x=a==b", true),
        (r#"x == "&&""#, "x=&&", true),
        (r#"x == "(""#, "x=(", true),
        (r#"x == "{a}""#, "x={a}", true),
        (r#"x == "ünïcödé""#, "x=ünïcödé", true),
        (r#"x == "ünïcödé""#, "x=unicode", false),
    ]);
}

#[test]
fn inequality_is_true_when_the_label_is_absent() {
    check(&[
        (r#"role != "db""#, "role=web", true),
        (r#"role != "db""#, "role=db", false),
        (r#"role != "db""#, "", true),
        (r#"role != "db""#, "other=db", true),
        (r#"role!="db""#, "role=db", false),
        (r#"role != """#, "role=", false),
        (r#"role != """#, "", true),
        (r#"role != """#, "role=x", true),
        (r#"a != "1" && b != "2""#, "", true),
        (r#"a != "1" && b != "2""#, "a=1", false),
        (r#"a != "1" || b != "2""#, "a=1,b=2", false),
        (r#"a != "1" || b != "2""#, "a=1", true),
    ]);
}

#[test]
fn set_membership() {
    check(&[
        (r#"type in {"frontend", "backend"}"#, "type=frontend", true),
        (r#"type in {"frontend", "backend"}"#, "type=backend", true),
        (r#"type in {"frontend", "backend"}"#, "type=db", false),
        (r#"type in {"frontend", "backend"}"#, "", false),
        (r#"type in {"frontend"}"#, "type=frontend", true),
        (r#"type in {}"#, "type=frontend", false),
        (r#"type in {}"#, "", false),
        (r#"type in {"a","b","c"}"#, "type=c", true),
        (r#"type in{"a"}"#, "type=a", true),
        (r#"type in {  "a"  ,  "b"  }"#, "type=b", true),
        (r#"type in {"a", "a", "b"}"#, "type=a", true),
        (r#"type in {""}"#, "type=", true),
        (r#"type in {"a b"}"#, "type=a b", true),
        (r#"type in {"a,b"}"#, "type=a", false),
        (r#"type in {"a;b"}"#, "type=a;b", true),
        (r#"type in {'x', "y"}"#, "type=x", true),
        (r#"type not in {"frontend", "backend"}"#, "type=db", true),
        (
            r#"type not in {"frontend", "backend"}"#,
            "type=frontend",
            false,
        ),
        (r#"type not in {"frontend", "backend"}"#, "", true),
        (r#"type not in {}"#, "", true),
        (r#"type not in {}"#, "type=x", true),
        (r#"type  not   in {"a"}"#, "type=a", false),
        (r#"type not in {"a"}"#, "other=a", true),
        (r#"!(type in {"a"})"#, "", true),
        (r#"!(type not in {"a"})"#, "", false),
        (r#"!(type not in {"a"})"#, "type=a", true),
    ]);
}

#[test]
fn has() {
    check(&[
        ("has(role)", "role=db", true),
        ("has(role)", "role=", true),
        ("has(role)", "", false),
        ("has(role)", "roles=db", false),
        ("has( role )", "role=x", true),
        ("has (role)", "role=x", true),
        ("!has(role)", "", true),
        ("!has(role)", "role=x", false),
        ("has(calico/k8s_ns)", "calico/k8s_ns=x", true),
        ("has(a) && has(b)", "a=1", false),
        ("has(a) && has(b)", "a=1,b=2", true),
        ("has(a) || has(b)", "b=2", true),
        ("has(a) || has(b)", "c=2", false),
        // A label may be called "has" or "all" when it is compared.
        (r#"has == "x""#, "has=x", true),
        (r#"all == "x""#, "all=x", true),
        (r#"in == "x""#, "in=x", true),
        (r#"not == "x""#, "not=x", true),
    ]);
}

#[test]
fn all_and_the_empty_selector_match_everything() {
    check(&[
        ("all()", "", true),
        ("all()", "a=1", true),
        ("", "", true),
        ("", "a=1", true),
        ("   ", "a=1", true),
        ("\t\n", "", true),
        ("all( )", "", true),
        ("!all()", "", false),
        ("!all()", "a=1", false),
        (r#"all() && a == "1""#, "a=1", true),
        (r#"all() && a == "1""#, "a=2", false),
        (r#"all() || a == "1""#, "a=2", true),
        ("(all())", "", true),
    ]);
}

#[test]
fn negation_versus_absent_labels() {
    check(&[
        // `!(a == x)` and `a != x` agree, also when a is absent.
        (r#"!(a == "x")"#, "", true),
        (r#"!(a == "x")"#, "a=x", false),
        (r#"!(a == "x")"#, "a=y", true),
        (r#"!(a != "x")"#, "", false),
        (r#"!(a != "x")"#, "a=x", true),
        (r#"!!(a == "x")"#, "a=x", true),
        (r#"!!(a == "x")"#, "", false),
        (r#"!!!has(a)"#, "", true),
        (r#"! has(a)"#, "", true),
        (r#"!  ( has(a) )"#, "a=1", false),
        // has() is what tells absent from different.
        (r#"has(a) && a != "x""#, "", false),
        (r#"has(a) && a != "x""#, "a=y", true),
        (r#"!has(a) || a == "x""#, "", true),
        (r#"!has(a) || a == "x""#, "a=y", false),
        (r#"!(has(a) && a == "x")"#, "", true),
        (r#"!(has(a) && a == "x")"#, "a=x", false),
        (r#"!(a in {"x"})"#, "", true),
        (r#"!(a in {"x"})"#, "a=x", false),
        (r#"a not in {"x"}"#, "", true),
        // The seeds' warning: "!has(my_label)" selects endpoints without the label.
        ("!has(my_label)", "other=1", true),
        ("!has(my_label)", "my_label=1", false),
    ]);
}

#[test]
fn and_binds_tighter_than_or() {
    check(&[
        // a || b && c == a || (b && c)
        (r#"a == "1" || b == "1" && c == "1""#, "a=1", true),
        (r#"a == "1" || b == "1" && c == "1""#, "b=1", false),
        (r#"a == "1" || b == "1" && c == "1""#, "b=1,c=1", true),
        (r#"a == "1" || b == "1" && c == "1""#, "c=1", false),
        // a && b || c == (a && b) || c
        (r#"a == "1" && b == "1" || c == "1""#, "c=1", true),
        (r#"a == "1" && b == "1" || c == "1""#, "a=1", false),
        (r#"a == "1" && b == "1" || c == "1""#, "a=1,b=1", true),
        // parentheses override
        (r#"(a == "1" || b == "1") && c == "1""#, "a=1", false),
        (r#"(a == "1" || b == "1") && c == "1""#, "a=1,c=1", true),
        (r#"(a == "1" || b == "1") && c == "1""#, "b=1,c=1", true),
        (r#"a == "1" && (b == "1" || c == "1")"#, "a=1,c=1", true),
        (r#"a == "1" && (b == "1" || c == "1")"#, "b=1,c=1", false),
        // ! binds tightest
        (r#"!a == "1" || b == "1""#, "a=1", false),
        (r#"!a == "1" || b == "1""#, "b=1", true),
        (r#"!a == "1" || b == "1""#, "", true),
        (r#"!has(a) && b == "1""#, "b=1", true),
        (r#"!has(a) && b == "1""#, "a=1,b=1", false),
        (r#"!(has(a) && b == "1")"#, "a=1", true),
        // chains
        (r#"a == "1" && b == "1" && c == "1""#, "a=1,b=1,c=1", true),
        (r#"a == "1" && b == "1" && c == "1""#, "a=1,b=1", false),
        (r#"a == "1" || b == "1" || c == "1""#, "c=1", true),
        (r#"a == "1" || b == "1" || c == "1""#, "d=1", false),
        (
            r#"a == "1" && b == "1" || c == "1" && d == "1""#,
            "c=1,d=1",
            true,
        ),
        (
            r#"a == "1" && b == "1" || c == "1" && d == "1""#,
            "a=1,d=1",
            false,
        ),
        (
            r#"a == "1" && (b == "1" || c == "1") && d == "1""#,
            "a=1,c=1,d=1",
            true,
        ),
        (
            r#"a == "1" && (b == "1" || c == "1") && d == "1""#,
            "a=1,c=1",
            false,
        ),
        (r#"((a == "1"))"#, "a=1", true),
        (r#"(((a == "1") || (b == "1")))"#, "b=1", true),
        (r#"(a == "1")&&(b == "1")"#, "a=1,b=1", true),
        (r#"has(a)&&has(b)||has(c)"#, "c=", true),
    ]);
}

#[test]
fn both_quote_styles() {
    check(&[
        ("role == 'db'", "role=db", true),
        ("role == 'db'", "role=web", false),
        (r#"role == "it's""#, "role=it's", true),
        (r#"role == 'say "hi"'"#, r#"role=say "hi""#, true),
        ("role != 'db'", "", true),
        (
            r#"type == 'webserver' && role == 'frontend'"#,
            "type=webserver,role=frontend",
            true,
        ),
        (
            r#"type == 'webserver' && role == 'frontend'"#,
            "type=webserver",
            false,
        ),
        ("a in {'x', 'y'}", "a=y", true),
        (r#"a == "\n""#, r"a=\n", true), // no escapes: backslash and n are two characters
        (r#"a == "\""#, r"a=\", true),
    ]);
}

#[test]
fn extensions_contains_starts_with_ends_with() {
    check(&[
        (r#"name contains "web""#, "name=my-webserver", true),
        (r#"name contains "web""#, "name=db", false),
        (r#"name contains "web""#, "", false),
        (r#"name contains """#, "name=x", true),
        (r#"name starts with "my-""#, "name=my-webserver", true),
        (r#"name starts with "my-""#, "name=your-webserver", false),
        (r#"name starts with "my-""#, "", false),
        (r#"name ends with "server""#, "name=my-webserver", true),
        (r#"name ends with "server""#, "name=my-servers", false),
        (r#"name ends with "server""#, "", false),
        (r#"name  starts   with  'a'"#, "name=abc", true),
        (r#"!(name contains "web")"#, "", true),
        (
            r#"name contains "web" && env == "prod""#,
            "name=web1,env=prod",
            true,
        ),
    ]);
}

#[test]
fn the_seed_examples() {
    check(&[
        (
            r#"type == "webserver" && deployment == "prod""#,
            "type=webserver,deployment=prod",
            true,
        ),
        (
            r#"type == "webserver" && deployment == "prod""#,
            "type=webserver,deployment=dev",
            false,
        ),
        (r#"type in {"frontend", "backend"}"#, "type=backend", true),
        (r#"deployment != "dev""#, "", true),
        (r#"deployment != "dev""#, "deployment=dev", false),
        (r#"! has(label_name)"#, "label_name=x", false),
        (r#"role=="webserver""#, "role=webserver", true),
        (
            r#"endpoint_type == "management""#,
            "endpoint_type=management",
            true,
        ),
        (
            "type == 'webserver' && role == 'frontend'",
            "type=webserver,role=frontend",
            true,
        ),
        ("all()", "", true),
    ]);
}

/// (selector, 0-based position, part of the reason)
const BAD: &[(&str, usize, &str)] = &[
    (r#"role = "db""#, 5, "expected an operator"),
    (r#"role == "db"#, 8, "unterminated string"),
    (r#"role == 'db"#, 8, "no closing '"),
    (
        "role ==",
        7,
        "expected a quoted string, found the end of the selector",
    ),
    ("role == db", 8, "expected a quoted string, found \"db\""),
    ("role ==  ", 9, "found the end"),
    ("role", 4, "expected an operator"),
    ("role db", 5, "expected an operator"),
    (r#"role === "db""#, 7, "expected a quoted string"),
    (r#"role == "db" &&"#, 15, "expected a label name"),
    (r#"&& role == "db""#, 0, "expected a label name"),
    (r#"role == "db" ||"#, 15, "found the end"),
    (
        r#"role == "db" & a == "b""#,
        13,
        "expected '&&', '||' or the end",
    ),
    (r#"role == "db" | a == "b""#, 13, "found '|'"),
    (
        r#"role == "db" a == "b""#,
        13,
        "expected '&&', '||' or the end",
    ),
    (r#"(role == "db""#, 13, "expected ')' to close the '('"),
    (r#"role == "db")"#, 12, "found ')'"),
    ("()", 1, "expected a label name"),
    ("(", 1, "found the end"),
    (")", 0, "found ')'"),
    ("has()", 4, "a label name inside has()"),
    ("has(", 4, "a label name inside has()"),
    ("has(a", 5, "')' after the label name"),
    ("has(a b)", 6, "')' after the label name"),
    (r#"has("a")"#, 4, "a label name inside has()"),
    ("all(x)", 4, "all() takes no arguments"),
    ("all(", 4, "all() takes no arguments"),
    ("all", 3, "expected an operator"),
    ("foo(a)", 0, "unknown function \"foo\""),
    (r#"a in "x""#, 5, "'{' to start the set"),
    (r#"a in {"x""#, 9, "',' or '}'"),
    (r#"a in {"x" "y"}"#, 10, "',' or '}'"),
    (r#"a in {"x",}"#, 10, "a quoted string"),
    (r#"a in {,}"#, 6, "a quoted string"),
    ("a in {x}", 6, "a quoted string"),
    (r#"a not {"x"}"#, 6, "'in' after 'not'"),
    (r#"a not "x""#, 6, "'in' after 'not'"),
    (r#"a not inn {"x"}"#, 6, "'in' after 'not'"),
    (r#"a starts "x""#, 9, "'with' after 'starts'"),
    (r#"a ends "x""#, 7, "'with' after 'ends'"),
    (r#"a contains x"#, 11, "a quoted string"),
    (r#"a like "x""#, 2, "expected an operator"),
    (r#"a$b == "x""#, 1, "expected an operator"),
    (r#"$a == "x""#, 0, "expected a label name"),
    (r#"a@b == "x""#, 1, "found '@'"),
    (r#"!"#, 1, "found the end"),
    (r#"! && a == "x""#, 2, "expected a label name"),
    (r#"a == "x" && !"#, 13, "found the end"),
    (r#"role != "#, 8, "a quoted string"),
    (r#"!= "x""#, 0, "expected a label name"),
    (r#"== "x""#, 0, "expected a label name"),
    (r#"a == "x" "y""#, 9, "expected '&&', '||' or the end"),
    ("{", 0, "expected a label name"),
    ("a == \"x\" )(", 9, "found ')'"),
];

#[test]
fn bad_selectors_say_where_and_why() {
    let mut failures = Vec::new();
    for (text, position, reason) in BAD {
        match Selector::parse(text) {
            Ok(selector) => failures.push(format!("{text:?} accepted as {selector}")),
            Err(err) => {
                if err.position != *position || !err.reason.contains(reason) {
                    failures.push(format!(
                        "{text:?}: got position {} {:?}, expected {position} {reason:?}",
                        err.position, err.reason
                    ));
                }
                assert_eq!(
                    err.to_string(),
                    format!(
                        "invalid selector at character {}: {}",
                        position + 1,
                        err.reason
                    )
                );
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn serde_errors_carry_the_selector_reason() {
    let err = serde_json::from_str::<Selector>(r#""role = 'x'""#).unwrap_err();
    assert!(err.to_string().contains("expected an operator"), "{err}");
    let ok: Selector = serde_json::from_str(r#""role == 'x'""#).unwrap();
    assert_eq!(serde_json::to_string(&ok).unwrap(), r#""role == \"x\"""#);
}

/// (any spelling, its canonical form)
const CANONICAL: &[(&str, &str)] = &[
    ("", "all()"),
    ("  all( ) ", "all()"),
    ("role=='db'", r#"role == "db""#),
    (r#"role  !=  "db""#, r#"role != "db""#),
    (r#"x == 'say "hi"'"#, r#"x == 'say "hi"'"#),
    (r#"x == "it's""#, r#"x == "it's""#),
    (r#"a in {"b", "a", "b"}"#, r#"a in {"a", "b"}"#),
    ("a in {}", "a in {}"),
    (r#"a not in {'z','y'}"#, r#"a not in {"y", "z"}"#),
    ("has( a )", "has(a)"),
    ("!has(a)", "!has(a)"),
    ("!!has(a)", "has(a)"),
    (r#"!(a == "x")"#, r#"!(a == "x")"#),
    (r#"!((a == "x"))"#, r#"!(a == "x")"#),
    (r#"b == "1" && a == "1""#, r#"a == "1" && b == "1""#),
    (r#"b == "1" || a == "1""#, r#"a == "1" || b == "1""#),
    (r#"a == "1" && a == "1""#, r#"a == "1""#),
    (
        r#"(a == "1" && b == "1") && c == "1""#,
        r#"a == "1" && b == "1" && c == "1""#,
    ),
    (
        r#"a == "1" && (b == "1" && c == "1")"#,
        r#"a == "1" && b == "1" && c == "1""#,
    ),
    (
        r#"(a == "1" || b == "1") || c == "1""#,
        r#"a == "1" || b == "1" || c == "1""#,
    ),
    (
        r#"(a == "1" && b == "1") || c == "1""#,
        r#"a == "1" && b == "1" || c == "1""#,
    ),
    (
        r#"c == "1" || (a == "1" && b == "1")"#,
        r#"a == "1" && b == "1" || c == "1""#,
    ),
    (
        r#"(a == "1" || b == "1") && c == "1""#,
        r#"(a == "1" || b == "1") && c == "1""#,
    ),
    (r#"!(a == "1" || b == "1")"#, r#"!(a == "1" || b == "1")"#),
    (r#"!(a == "1" && b == "1")"#, r#"!(a == "1" && b == "1")"#),
    (r#"a contains "x""#, r#"a contains "x""#),
    (r#"a starts  with 'x'"#, r#"a starts with "x""#),
    (r#"a ends with "x""#, r#"a ends with "x""#),
];

#[test]
fn canonical_form_is_stable_across_spellings() {
    for (text, canonical) in CANONICAL {
        let selector = Selector::parse(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        assert_eq!(selector.canonical(), *canonical, "{text:?}");
        assert_eq!(selector.to_string(), *canonical);
        let again = Selector::parse(canonical).unwrap();
        assert_eq!(again, selector, "{canonical:?} reparsed");
    }
}

#[test]
fn equal_selectors_are_equal_and_hash_alike() {
    use std::collections::HashSet;
    let spellings = [
        r#"role == "db" && env in {"a", "b"}"#,
        r#"env in {'b','a'} && role=='db'"#,
        r#"(env in {"a", "b", "a"}) && (role == "db")"#,
    ];
    let set: HashSet<Selector> = spellings.iter().map(|s| s.parse().unwrap()).collect();
    assert_eq!(set.len(), 1);
    assert_ne!(
        Selector::parse("a == 'x'").unwrap(),
        Selector::parse("a != 'x'").unwrap()
    );
}

#[test]
fn label_names_lists_each_label_once() {
    let selector =
        Selector::parse(r#"b == "1" && (a in {"x"} || !has(b)) && c starts with "z""#).unwrap();
    assert_eq!(selector.label_names().collect::<Vec<_>>(), ["a", "b", "c"]);
    assert_eq!(Selector::all().label_names().count(), 0);
    assert!(Selector::parse("").unwrap().is_all());
}

#[test]
fn labels_come_from_any_map() {
    let selector = Selector::parse(r#"role == "db" && !has(x)"#).unwrap();
    let hash: HashMap<String, String> = HashMap::from([("role".into(), "db".into())]);
    assert!(selector.evaluate(&hash));
    let pairs: &[(&str, &str)] = &[("role", "db"), ("x", "1")];
    assert!(!selector.evaluate(pairs));
    struct Nothing;
    impl Labels for Nothing {
        fn get_label(&self, _: &str) -> Option<&str> {
            None
        }
    }
    assert!(!selector.evaluate(&Nothing));
    assert!(Selector::parse("a != 'x'").unwrap().evaluate(&Nothing));
}

// ---- properties ----

/// A random selector as text, built from a small alphabet of labels and values so that random
/// label maps often hit them.
fn selector_text() -> impl Strategy<Value = String> {
    let name = prop::sample::select(vec!["a", "b", "c", "calico/ns", "x.y"]);
    let value = prop::sample::select(vec!["", "1", "2", "v w", "it's", "say \"hi\""]);
    let quoted = value.prop_map(|v| {
        if v.contains('"') {
            format!("'{v}'")
        } else {
            format!("\"{v}\"")
        }
    });
    let set =
        prop::collection::vec(quoted.clone(), 0..4).prop_map(|m| format!("{{{}}}", m.join(", ")));
    let leaf = prop_oneof![
        (name.clone(), quoted.clone()).prop_map(|(n, v)| format!("{n} == {v}")),
        (name.clone(), quoted.clone()).prop_map(|(n, v)| format!("{n}!={v}")),
        (name.clone(), set.clone()).prop_map(|(n, s)| format!("{n} in {s}")),
        (name.clone(), set).prop_map(|(n, s)| format!("{n} not in {s}")),
        name.clone().prop_map(|n| format!("has({n})")),
        (name.clone(), quoted.clone()).prop_map(|(n, v)| format!("{n} contains {v}")),
        (name.clone(), quoted.clone()).prop_map(|(n, v)| format!("{n} starts with {v}")),
        (name, quoted).prop_map(|(n, v)| format!("{n} ends with {v}")),
        Just("all()".to_owned()),
    ];
    leaf.prop_recursive(4, 32, 3, |inner| {
        prop_oneof![
            inner.clone().prop_map(|e| format!("!({e})")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a}) && ({b})")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("{a} || {b}")),
            (inner.clone(), inner).prop_map(|(a, b)| format!("{a}&&{b}")),
        ]
    })
}

fn label_map() -> impl Strategy<Value = BTreeMap<String, String>> {
    let name = prop::sample::select(vec!["a", "b", "c", "calico/ns", "x.y", "z"]);
    let value = prop::sample::select(vec!["", "1", "2", "v w", "it's", "say \"hi\"", "12"]);
    prop::collection::btree_map(
        name.prop_map(String::from),
        value.prop_map(String::from),
        0..5,
    )
}

proptest! {
    #[test]
    fn canonical_form_reparses_to_itself_and_selects_the_same(
        text in selector_text(),
        maps in prop::collection::vec(label_map(), 1..8),
    ) {
        let selector = Selector::parse(&text).unwrap();
        let again = Selector::parse(selector.canonical()).unwrap();
        prop_assert_eq!(again.canonical(), selector.canonical());
        for labels in &maps {
            prop_assert_eq!(again.evaluate(labels), selector.evaluate(labels));
        }
    }

    #[test]
    fn negation_inverts_every_selector(
        text in selector_text(),
        labels in label_map(),
    ) {
        let selector = Selector::parse(&text).unwrap();
        let negated = Selector::parse(&format!("!({text})")).unwrap();
        prop_assert_eq!(negated.evaluate(&labels), !selector.evaluate(&labels));
    }

    #[test]
    fn and_or_follow_boolean_logic(
        a in selector_text(),
        b in selector_text(),
        labels in label_map(),
    ) {
        let (sa, sb) = (Selector::parse(&a).unwrap(), Selector::parse(&b).unwrap());
        let and = Selector::parse(&format!("({a}) && ({b})")).unwrap();
        let or = Selector::parse(&format!("({a}) || ({b})")).unwrap();
        prop_assert_eq!(and.evaluate(&labels), sa.evaluate(&labels) && sb.evaluate(&labels));
        prop_assert_eq!(or.evaluate(&labels), sa.evaluate(&labels) || sb.evaluate(&labels));
    }

    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,40}") {
        let _ = Selector::parse(&text);
    }
}

#[test]
fn requirements_name_a_label_every_match_has() {
    let req = |text: &str| {
        Selector::parse(text)
            .unwrap()
            .requirement()
            .map(|(name, values)| (name.to_owned(), values.map(<[String]>::to_vec)))
    };
    let values = |v: &[&str]| Some(v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>());
    assert_eq!(req("role == 'db'"), Some(("role".into(), values(&["db"]))));
    assert_eq!(
        req("a in {'x', 'y'}"),
        Some(("a".into(), values(&["x", "y"])))
    );
    assert_eq!(
        req("has(a) && b == 'x'"),
        Some(("b".into(), values(&["x"])))
    );
    assert_eq!(req("has(a) && b != 'x'"), Some(("a".into(), None)));
    assert_eq!(req("a starts with 'x'"), Some(("a".into(), None)));
    for none in [
        "all()",
        "",
        "a == 'x' || b == 'y'",
        "!has(a)",
        "a != 'x'",
        "a not in {'x'}",
    ] {
        assert_eq!(req(none), None, "{none:?}");
    }
}

proptest! {
    /// The requirement never excludes an endpoint the selector matches.
    #[test]
    fn requirements_are_sound(text in selector_text(), labels in label_map()) {
        let selector = Selector::parse(&text).unwrap();
        if selector.evaluate(&labels)
            && let Some((name, values)) = selector.requirement()
        {
            let value = labels.get(name);
            prop_assert!(value.is_some(), "{text} matched without {name}");
            if let Some(values) = values {
                prop_assert!(values.contains(value.unwrap()), "{text}: {name} not in {values:?}");
            }
        }
    }
}
