//! The quoting rule of `get -o yaml` against the resolvers of YAML readers: every string that
//! PyYAML, the YAML 1.1 type repository or the YAML 1.2 core schema would read as anything but a
//! string is quoted, and every string, quoted or not, reads back as itself in serde_yaml_ng.
//! Checked exhaustively for every string of up to three characters of an alphabet of the
//! characters that matter, for known tricky values, and for random number-like strings.

use calico_ctl::yaml::scalar::{float, needs_quotes, string};
use regex::Regex;

/// The implicit resolvers a plain scalar goes through, each anchored, by reader.
fn resolvers() -> Vec<(&'static str, Regex)> {
    let table = [
        // PyYAML 6 (yaml/resolver.py), what Ansible uses.
        (
            "PyYAML bool",
            r"yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF",
        ),
        (
            "PyYAML float",
            r"[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)",
        ),
        (
            "PyYAML int",
            r"[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+",
        ),
        ("PyYAML merge", r"<<"),
        ("PyYAML null", r"~|null|Null|NULL|"),
        (
            "PyYAML timestamp",
            r"[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]|[0-9][0-9][0-9][0-9]-[0-9][0-9]?-[0-9][0-9]?(?:[Tt]|[ \t]+)[0-9][0-9]?:[0-9][0-9]:[0-9][0-9](?:\.[0-9]*)?(?:[ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?",
        ),
        ("PyYAML value", r"="),
        // The YAML 1.1 type repository (yaml.org/type), which some readers follow to the letter.
        (
            "YAML 1.1 bool",
            r"y|Y|yes|Yes|YES|n|N|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF",
        ),
        (
            "YAML 1.1 float",
            r"[-+]?([0-9][0-9_]*)?\.[0-9.]*([eE][-+][0-9]+)?|[-+]?[0-9][0-9_]*(:[0-5]?[0-9])+\.[0-9_]*|[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN)",
        ),
        // YAML 1.2's core schema (serde_yaml_ng, Go yaml.v3).
        ("YAML 1.2 bool", r"true|True|TRUE|false|False|FALSE"),
        ("YAML 1.2 null", r"null|Null|NULL|~|"),
        ("YAML 1.2 int", r"[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+"),
        (
            "YAML 1.2 float",
            r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?|[-+]?\.(inf|Inf|INF)|\.nan|\.NaN|\.NAN",
        ),
    ];
    table
        .into_iter()
        .map(|(name, pattern)| (name, Regex::new(&format!("^(?:{pattern})$")).unwrap()))
        .collect()
}

/// Checks one string: quoted when any resolver takes it, and read back as itself.
fn check(text: &str, resolvers: &[(&str, Regex)]) {
    if let Some((name, _)) = resolvers.iter().find(|(_, re)| re.is_match(text)) {
        assert!(
            needs_quotes(text),
            "{text:?} is a {name} but was left plain"
        );
    }
    let document = format!("k: {}\n{}: v\n", string(text), string(text));
    let read: serde_yaml_ng::Mapping = serde_yaml_ng::from_str(&document)
        .unwrap_or_else(|e| panic!("{document:?} does not read: {e}"));
    assert_eq!(
        read.get("k"),
        Some(&serde_yaml_ng::Value::String(text.to_owned())),
        "{document:?}"
    );
    assert_eq!(
        read.len(),
        2,
        "{document:?}: the key did not read as itself"
    );
    let key = serde_yaml_ng::Value::String(text.to_owned());
    assert_eq!(
        read.get(&key).and_then(|v| v.as_str()),
        Some("v"),
        "{document:?}"
    );
}

const ALPHABET: &str = "0179aeEfxobnNyYtTZ._:+-~#'\" /[{,!&*|>%@`=<?\\\t\n";

#[test]
fn every_short_string_is_quoted_when_a_reader_would_take_it_for_something_else() {
    let resolvers = resolvers();
    let chars: Vec<char> = ALPHABET.chars().collect();
    let mut count = 0;
    check("", &resolvers);
    for a in &chars {
        check(&a.to_string(), &resolvers);
        for b in &chars {
            check(&format!("{a}{b}"), &resolvers);
            for c in &chars {
                check(&format!("{a}{b}{c}"), &resolvers);
                count += 1;
            }
        }
    }
    assert_eq!(count, chars.len().pow(3));
}

#[test]
fn known_values_that_change_meaning_are_quoted() {
    let resolvers = resolvers();
    for text in [
        "20:30",
        "1:30:00",
        "190:20:30.15",
        "yes",
        "No",
        "ON",
        "off",
        "y",
        "N",
        "~",
        "null",
        "NULL",
        "0o12",
        "012",
        "0x1F",
        "0b101",
        "1_000",
        "1e5",
        "1.5e+10",
        ".5",
        "-.inf",
        "+.inf",
        ".NaN",
        "2001-12-14",
        "2001-12-14t21:59:43.10-05:00",
        "2001-12-14 21:59:43.10 -5",
        "192.0.2.1",
        "2001:db8::1",
        "<<",
        "=",
        "true",
        "False",
        "-",
        "- x",
        "a: b",
        "a #b",
        "a:",
        " a",
        "a ",
        "\u{2028}",
        "é",
        "line\nbreak",
        "---",
        "...",
        "... x",
    ] {
        check(text, &resolvers);
        assert!(needs_quotes(text), "{text:?}");
    }
    // What an operator writes most is left plain.
    for text in [
        "allow",
        "tcp",
        "10.65.0.0/16",
        "role == \"webserver\"",
        "has(role)",
        "fd00::1",
        "ee:ee:ee:ee:ee:ee",
        "cali1234",
        "my-tier",
        "projectcalico.org/v1",
        "node.host1",
        "http://a:80",
        "a#b",
        "a:b",
    ] {
        check(text, &resolvers);
        assert!(!needs_quotes(text), "{text:?}");
    }
}

#[test]
fn floats_read_as_floats_in_yaml_1_1_and_1_2() {
    let resolvers = resolvers();
    for (json, yaml) in [
        ("1e300", "1.0e+300"),
        ("1.5e-7", "1.5e-7"),
        ("100.0", "100.0"),
        ("0.25", "0.25"),
    ] {
        assert_eq!(float(json), yaml);
        let (pyyaml, _) = &resolvers[1];
        assert_eq!(*pyyaml, "PyYAML float");
        assert!(resolvers[1].1.is_match(yaml), "{yaml}");
        let read: f64 = serde_yaml_ng::from_str(yaml).unwrap();
        assert_eq!(read, json.parse::<f64>().unwrap());
    }
}

proptest::proptest! {
    /// Longer strings shaped like numbers, dates and times.
    #[test]
    fn number_like_strings(text in "[-+]?[0-9._:eExXoObB+-]{1,14}|[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}([Tt ][0-9:. Z+-]{0,12})?") {
        check(&text, &resolvers());
    }
}
