//! Stamps: every chain Calico writes starts with a rule that only carries a comment, the hash
//! of the chain's rules as rendered (`-m comment --comment "cali:<16 hex digits>"`). The kernel
//! keeps the comment verbatim, so after a restart Felix can tell a chain that already holds
//! exactly what it would write (stamp matches, and the rule count is the stamp plus the
//! rendered rules) from one that does not, without comparing rules in the kernel's normal form;
//! a restart with everything in place rewrites nothing.
//!
//! Rendering knows nothing of stamps: [`stamp_script`] adds them to restore input on its way to
//! the kernel.

use std::collections::{HashMap, HashSet};
use std::hash::Hasher;

/// The stamp rule of a chain with `rules` (the text after `-A <chain> ` of each).
pub fn stamp(rules: &[impl AsRef<str>]) -> String {
    let mut hasher = fnv::FnvHasher::default();
    for rule in rules {
        hasher.write(rule.as_ref().as_bytes());
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

/// One table's lines (from `*table` to before `COMMIT`), in one pass over them: a full sync
/// writes thousands of chains, so nothing here may look at every line once per chain.
fn stamp_section(lines: &[&str], out: &mut String) {
    let mut declared: Vec<&str> = Vec::new();
    let mut deleted: HashSet<&str> = HashSet::new();
    let mut rules: HashMap<&str, Vec<&str>> = HashMap::new();
    for line in lines {
        if let Some(declaration) = line.strip_prefix(':') {
            let chain = declaration.split_whitespace().next().unwrap_or_default();
            declared.push(chain);
            rules.entry(chain).or_default();
        } else if let Some(chain) = line.strip_prefix("-X ") {
            deleted.insert(chain.trim());
        }
    }
    for line in lines {
        if let Some(rest) = line.strip_prefix("-A ") {
            let (chain, body) = rest.split_once(' ').unwrap_or((rest, ""));
            if let Some(bodies) = rules.get_mut(chain) {
                bodies.push(body);
            }
        }
    }
    for line in lines
        .iter()
        .filter(|l| l.starts_with('*') || l.starts_with(':'))
    {
        out.push_str(line);
        out.push('\n');
    }
    for chain in declared.iter().filter(|c| !deleted.contains(*c)) {
        let bodies = &rules[chain];
        out.push_str(&format!("-A {chain} {}\n", stamp(bodies)));
        for body in bodies {
            out.push_str(&format!("-A {chain} {body}\n"));
        }
    }
    // Rules of chains this input does not declare, deletions and anything else, as they came.
    for line in lines {
        let declared_rule = line
            .strip_prefix("-A ")
            .is_some_and(|rest| rules.contains_key(rest.split(' ').next().unwrap_or(rest)));
        let structure = line.starts_with('*') || line.starts_with(':');
        if !declared_rule && !structure {
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
