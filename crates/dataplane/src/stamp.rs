//! Stamps: every chain Calico writes starts with a rule that only carries a comment, the hash
//! of the chain's rules as rendered (`-m comment --comment "cali:<16 hex digits>"`). The kernel
//! keeps the comment verbatim, so after a restart Felix can tell a chain that already holds
//! exactly what it would write (stamp matches, and the rule count is the stamp plus the
//! rendered rules) from one that does not, without comparing rules in the kernel's normal form;
//! a restart with everything in place rewrites nothing.
//!
//! Rendering knows nothing of stamps: [`stamp_script`] adds them to restore input on its way to
//! the kernel.

use std::hash::Hasher;

/// The stamp rule of a chain with `rules` (the text after `-A <chain> ` of each).
pub fn stamp(rules: &[String]) -> String {
    let mut hasher = fnv::FnvHasher::default();
    for rule in rules {
        hasher.write(rule.as_bytes());
        hasher.write_u8(b'\n');
    }
    format!("-m comment --comment \"cali:{:016x}\"", hasher.finish())
}

/// Whether a chain as saved by the kernel is the stamp of `rendered` followed by that many
/// rules: what Calico wrote and nobody added or removed a rule since.
pub fn holds(saved: &[String], rendered: &[String]) -> bool {
    saved.len() == rendered.len() + 1 && saved.first() == Some(&stamp(rendered))
}

/// Restore input with each declared chain's stamp as its first rule. Chains the input deletes
/// (`-X`) get none. The input is in the shape the renderers write (per table: declarations,
/// then each chain's rules, then deletions); the output keeps that shape.
pub fn stamp_script(input: &str) -> String {
    let mut out = String::with_capacity(input.len() + 64);
    let mut section: Vec<&str> = Vec::new();
    for line in input.lines() {
        if line == "COMMIT" {
            stamp_section(&section, &mut out);
            out.push_str("COMMIT\n");
            section.clear();
        } else {
            section.push(line);
        }
    }
    for line in section {
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// One table's lines (from `*table` to before `COMMIT`).
fn stamp_section(lines: &[&str], out: &mut String) {
    let declared: Vec<&str> = lines
        .iter()
        .filter_map(|l| l.strip_prefix(':'))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    let deleted: Vec<&str> = lines
        .iter()
        .filter_map(|l| l.strip_prefix("-X "))
        .map(str::trim)
        .collect();
    let rule_of = |line: &str| -> Option<(String, String)> {
        let rest = line.strip_prefix("-A ")?;
        let (chain, body) = rest.split_once(' ').unwrap_or((rest, ""));
        Some((chain.to_owned(), body.to_owned()))
    };
    for line in lines
        .iter()
        .filter(|l| l.starts_with('*') || l.starts_with(':'))
    {
        out.push_str(line);
        out.push('\n');
    }
    for chain in declared.iter().filter(|c| !deleted.contains(c)) {
        let rules: Vec<String> = lines
            .iter()
            .filter_map(|l| rule_of(l))
            .filter(|(c, _)| c == chain)
            .map(|(_, body)| body)
            .collect();
        out.push_str(&format!("-A {chain} {}\n", stamp(&rules)));
        for rule in &rules {
            out.push_str(&format!("-A {chain} {rule}\n"));
        }
    }
    for line in lines {
        let undeclared_rule = rule_of(line).is_some_and(|(c, _)| !declared.contains(&c.as_str()));
        let other = !line.starts_with('*') && !line.starts_with(':') && !line.starts_with("-A ");
        if undeclared_rule || other {
            out.push_str(line);
            out.push('\n');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_declared_chain_starts_with_its_stamp_and_deleted_chains_get_none() {
        let input = "*filter\n:cali-a - [0:0]\n:cali-b - [0:0]\n:cali-old - [0:0]\n\
                     -A cali-a -j ACCEPT\n-A cali-b -s 10.0.0.1 -j DROP\n-X cali-old\nCOMMIT\n";
        let stamped = stamp_script(input);
        let a = stamp(&["-j ACCEPT".to_owned()]);
        let b = stamp(&["-s 10.0.0.1 -j DROP".to_owned()]);
        assert_eq!(
            stamped,
            format!(
                "*filter\n:cali-a - [0:0]\n:cali-b - [0:0]\n:cali-old - [0:0]\n\
                 -A cali-a {a}\n-A cali-a -j ACCEPT\n-A cali-b {b}\n-A cali-b -s 10.0.0.1 -j DROP\n\
                 -X cali-old\nCOMMIT\n"
            )
        );
        assert_ne!(a, b);
    }

    #[test]
    fn a_chain_holds_what_was_rendered_only_with_its_stamp_and_count() {
        let rendered = vec!["-j ACCEPT".to_owned()];
        let saved = vec![stamp(&rendered), "-j ACCEPT".to_owned()];
        assert!(holds(&saved, &rendered));
        let added = vec![
            stamp(&rendered),
            "-j DROP".to_owned(),
            "-j ACCEPT".to_owned(),
        ];
        assert!(!holds(&added, &rendered));
        assert!(!holds(&saved[1..], &rendered), "no stamp");
        assert!(!holds(&saved, &["-j DROP".to_owned()]), "other rules");
    }
}
