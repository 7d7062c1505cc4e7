//! Which strings are written plain and which quoted.
//!
//! A string is written plain only when every YAML reader takes it back as that string: YAML 1.2
//! (serde_yaml_ng, what `apply` reads with) and YAML 1.1 (PyYAML, Ansible, older Go and Ruby
//! libraries), whose resolvers turn more plain scalars into something else:
//!
//! | a plain scalar like | YAML 1.1 reads | YAML 1.2 reads |
//! | --- | --- | --- |
//! | `yes`, `no`, `on`, `off`, `y`, `n` (any case) | a boolean | a string |
//! | `true`, `false`, `null`, `~`, empty | a boolean, null | the same |
//! | `20:30`, `1:30:00` | a number (base 60: 1230, 5400) | a string |
//! | `012`, `0o12`, `0b11`, `0x1F`, `1_000`, `1e5`, `.5`, `.inf`, `192.0.2.1` | a number (some readers) | some a number |
//! | `2001-12-14`, `2001-12-14 21:59:43` | a timestamp | a string |
//! | `<<`, `=` | a merge key, a value key | a string |
//!
//! Rather than repeating each resolver, the rule is a superset of them all: quote a string that
//! could be a number or timestamp (starting with a digit, a sign or `.`, and made only of the
//! characters numbers use, or starting like a date), one of the words above, or one that YAML's
//! syntax would read otherwise (an indicator first, `: ` or ` #` inside, spaces at an end,
//! anything but printable ASCII). Quoted strings are double-quoted, with escapes.

/// A string as a YAML scalar: plain when that is safe, else double-quoted.
pub fn string(text: &str) -> String {
    match needs_quotes(text) {
        true => double_quoted(text),
        false => text.to_owned(),
    }
}

/// Whether a plain `text` could read as anything but that string, in YAML 1.1 or 1.2.
pub fn needs_quotes(text: &str) -> bool {
    let Some(first) = text.chars().next() else {
        return true;
    };
    !text.chars().all(|c| c == ' ' || c.is_ascii_graphic())
        || text.starts_with(' ')
        || text.ends_with(' ')
        || "-?:,[]{}#&*!|>'\"%@`~".contains(first)
        || text.starts_with("...")
        || text.contains(": ")
        || text.contains(" #")
        || text.ends_with(':')
        || WORDS.iter().any(|word| text.eq_ignore_ascii_case(word))
        || could_be_a_number(text)
}

/// The words YAML 1.1 reads as a boolean, null, merge or value key (compared in any case).
const WORDS: [&str; 12] = [
    "y", "n", "yes", "no", "on", "off", "true", "false", "null", "~", "<<", "=",
];

/// Whether `text` could be a YAML 1.1 or 1.2 integer, float or timestamp.
fn could_be_a_number(text: &str) -> bool {
    let unsigned = text.strip_prefix(['+', '-']).unwrap_or(text);
    let Some(first) = unsigned.chars().next() else {
        return false;
    };
    if !(first.is_ascii_digit() || first == '.') {
        return false;
    }
    let lower = unsigned.to_ascii_lowercase();
    let numeric = |c: char| c.is_ascii_hexdigit() || "xob_:.+-".contains(c);
    let date = unsigned.len() >= 5
        && unsigned[..4].bytes().all(|b| b.is_ascii_digit())
        && unsigned.as_bytes()[4] == b'-';
    lower == ".inf" || lower == ".nan" || lower.chars().all(numeric) || date
}

/// A float as YAML 1.1 and 1.2 both read one: a `.` in the mantissa, a sign on the exponent
/// (`1e300` would be a string to YAML 1.1).
pub fn float(text: &str) -> String {
    let (mantissa, exponent) = match text.split_once(['e', 'E']) {
        Some((mantissa, exponent)) => (mantissa, Some(exponent)),
        None => (text, None),
    };
    let mut out = mantissa.to_owned();
    if !out.contains('.') {
        out.push_str(".0");
    }
    if let Some(exponent) = exponent {
        let sign = if exponent.starts_with(['+', '-']) {
            ""
        } else {
            "+"
        };
        out.push_str(&format!("e{sign}{exponent}"));
    }
    out
}

/// `text` double-quoted: `"` and `\` escaped, control characters and the line and paragraph
/// separators as escapes, other characters as they are.
fn double_quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            '\u{2028}' | '\u{2029}' | '\u{feff}' => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
