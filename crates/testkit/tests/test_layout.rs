//! One way to place unit tests: inline (`#[cfg(test)] mod tests { … }`) or, when long, in
//! `foo/tests.rs` beside `foo.rs`, declared `#[cfg(test)] mod tests;` inside `foo.rs`. A file
//! named `*_tests.rs` or a `#[path]` attribute anywhere under `crates/*/src` is a third way
//! (a module that is not where its name says) and fails the test, naming the file and line.

use std::path::{Path, PathBuf};

mod common;

use common::{Token, crate_dirs, lex, workspace};

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<PathBuf> = entries
        .map(|entry| entry.expect("cannot list a source directory").path())
        .collect();
    paths.sort();
    for path in paths {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The lines of `text` with an attribute that sets `path = "…"`: `#[path = "x.rs"]`, and
/// `#[cfg_attr(test, path = "x.rs")]` too.
fn path_attributes(text: &str) -> Vec<usize> {
    let tokens = lex(text);
    let mut lines = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let opens = tokens[i].0 == Token::Punct('#')
            && tokens.get(i + 1).map(|t| &t.0) == Some(&Token::Punct('['));
        if !opens {
            i += 1;
            continue;
        }
        let mut depth = 0;
        let mut j = i + 1;
        while j < tokens.len() {
            match &tokens[j].0 {
                Token::Punct('[') => depth += 1,
                Token::Punct(']') => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                Token::Ident(word)
                    if word == "path"
                        && tokens.get(j + 1).map(|t| &t.0) == Some(&Token::Punct('=')) =>
                {
                    lines.push(tokens[j].1);
                }
                _ => {}
            }
            j += 1;
        }
        i = j + 1;
    }
    lines
}

/// What is out of place under the `src/` of each crate directory in `crates`.
fn misplaced(root: &Path, crates: &[PathBuf]) -> Vec<String> {
    let mut problems = Vec::new();
    for dir in crates {
        let mut files = Vec::new();
        rust_files(&dir.join("src"), &mut files);
        for file in files {
            let name = file
                .strip_prefix(root)
                .unwrap_or(&file)
                .display()
                .to_string();
            if file
                .file_name()
                .is_some_and(|n| n.to_string_lossy().ends_with("_tests.rs"))
            {
                problems.push(format!(
                    "{name}: a `*_tests.rs` file (move it to `foo/tests.rs` beside `foo.rs`)"
                ));
            }
            let text = std::fs::read_to_string(&file)
                .unwrap_or_else(|e| panic!("cannot read {name}: {e}"));
            for line in path_attributes(&text) {
                problems.push(format!(
                    "{name}:{line}: a `#[path]` attribute (let the module sit where its name says)"
                ));
            }
        }
    }
    problems
}

#[test]
fn unit_tests_are_inline_or_in_foo_tests_rs() {
    let root = workspace();
    let crates = crate_dirs(&root);
    assert!(crates.len() >= 13, "found only {} crates", crates.len());
    let problems = misplaced(&root, &crates);
    assert!(
        problems.is_empty(),
        "unit tests go inline (`#[cfg(test)] mod tests {{ … }}`) or in `foo/tests.rs` declared \
         `#[cfg(test)] mod tests;` in `foo.rs`:\n  {}",
        problems.join("\n  ")
    );
}

#[test]
fn a_third_way_is_found_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let krate = dir.path().join("crates/demo");
    let src = krate.join("src");
    std::fs::create_dir_all(src.join("rule")).unwrap();
    let write = |path: &str, text: &str| std::fs::write(src.join(path), text).unwrap();
    write("lib.rs", "mod rule;\nmod model;\n");
    write("rule.rs", "#[cfg(test)]\nmod tests;\n");
    write("rule/tests.rs", "#[test]\nfn t() {}\n");
    // A comment or a string naming `#[path]` is no attribute.
    write(
        "model.rs",
        "// #[path = \"x.rs\"]\nconst S: &str = \"#[path = \\\"x.rs\\\"]\";\n",
    );
    let crates = [krate];
    assert!(
        misplaced(dir.path(), &crates).is_empty(),
        "{:?}",
        misplaced(dir.path(), &crates)
    );

    write(
        "model.rs",
        "#[cfg(test)]\n#[path = \"model_tests.rs\"]\nmod tests;\n",
    );
    write("model_tests.rs", "#[test]\nfn t() {}\n");
    write(
        "rule.rs",
        "#[cfg(test)]\n#[cfg_attr(test, path = \"elsewhere.rs\")]\nmod tests;\n",
    );
    assert_eq!(
        misplaced(dir.path(), &crates),
        [
            "crates/demo/src/model.rs:2: a `#[path]` attribute (let the module sit where its \
             name says)",
            "crates/demo/src/model_tests.rs: a `*_tests.rs` file (move it to `foo/tests.rs` \
             beside `foo.rs`)",
            "crates/demo/src/rule.rs:2: a `#[path]` attribute (let the module sit where its \
             name says)",
        ]
    );
}
