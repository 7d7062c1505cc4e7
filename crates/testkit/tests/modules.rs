//! Each crate's files form a tree (docs/architecture.md, "The dependency rules", rule 10): no
//! file reaches itself through `use crate::…`, `super::…`, `self::…` or a child module's path.
//!
//! The check reads every crate root (`src/lib.rs`, `src/main.rs`, `src/bin/*.rs`), follows its
//! `mod` declarations (with `#[path]`) to the files, and collects, per file, the files its paths
//! name: a path is resolved to the deepest module it names, through `pub use` re-exports.
//! A re-export (`pub use`, `pub(crate) use`) is a dependency like any `use`: the file that has
//! it needs the file that defines the item, and a file that names the item through it needs
//! the file that has the re-export (the door) as well as the one behind it, so a re-export
//! cannot hide a circle. One exception, the facade: a module re-exporting an item of its own
//! child modules (`pub use store::EndpointMap;` in `cluster.rs`) is where the `mod` tree
//! already puts it, and is seen through. Two files that name each other, directly or around a
//! longer circle, fail the test with the lines that make the circle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

mod common;

use common::{Lexed, Token, crate_dirs, lex, workspace};

/// A module: where it is in the crate, the file it lives in, its children and re-exports.
#[derive(Debug, Default)]
struct Module {
    path: Vec<String>,
    file: usize,
    children: BTreeMap<String, usize>,
    /// `pub use` names → the absolute path they stand for, and whether it is a facade (an
    /// item of this module's own children, seen through without a dependency).
    reexports: BTreeMap<String, (Vec<String>, bool)>,
}

/// A reference from a file: the absolute path named, and the line.
#[derive(Debug)]
struct Reference {
    file: usize,
    line: usize,
    path: Vec<String>,
}

/// One crate root and everything reachable from it by `mod`.
#[derive(Debug, Default)]
struct Tree {
    files: Vec<PathBuf>,
    modules: Vec<Module>,
    references: Vec<Reference>,
}

impl Tree {
    fn load(root_file: &Path) -> Tree {
        let mut tree = Tree::default();
        tree.modules.push(Module::default());
        tree.read_file(root_file, 0, root_file.parent().unwrap().to_path_buf());
        tree
    }

    /// Reads the file of module `module`; `dir` is where its `mod x;` children live.
    fn read_file(&mut self, file: &Path, module: usize, dir: PathBuf) {
        let text = std::fs::read_to_string(file)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", file.display()));
        let file_index = self.files.len();
        self.files.push(file.to_path_buf());
        self.modules[module].file = file_index;
        let tokens = lex(&text);
        // (module, brace depth at which it closes, the directory of its `mod x;` children)
        let mut stack: Vec<(usize, usize, PathBuf)> = vec![(module, 0, dir)];
        let mut depth = 0usize;
        let mut pending_path: Option<String> = None;
        let mut i = 0;
        while i < tokens.len() {
            let (current, _, current_dir) = stack.last().cloned().unwrap();
            match &tokens[i].0 {
                Token::Punct('#') => {
                    // `#[path = "x.rs"]`
                    if let (
                        Some((Token::Punct('['), _)),
                        Some((Token::Ident(word), _)),
                        Some((Token::Punct('='), _)),
                        Some((Token::Str(value), _)),
                    ) = (
                        tokens.get(i + 1),
                        tokens.get(i + 2),
                        tokens.get(i + 3),
                        tokens.get(i + 4),
                    ) && word == "path"
                    {
                        pending_path = Some(value.clone());
                    }
                    i += 1;
                }
                Token::Punct('{') => {
                    depth += 1;
                    i += 1;
                }
                Token::Punct('}') => {
                    depth = depth.saturating_sub(1);
                    if stack.len() > 1 && stack.last().unwrap().1 == depth {
                        stack.pop();
                    }
                    i += 1;
                }
                Token::Ident(word) if word == "mod" => {
                    let Some((Token::Ident(name), _)) = tokens.get(i + 1) else {
                        i += 1;
                        continue;
                    };
                    let name = name.clone();
                    let child = self.child(current, &name);
                    match tokens.get(i + 2).map(|t| &t.0) {
                        Some(Token::Punct(';')) => {
                            let (child_file, child_dir) = match pending_path.take() {
                                Some(path) => {
                                    // Relative to the file's own directory outside inline
                                    // modules (the Reference, "The path attribute").
                                    let base = match stack.len() {
                                        1 => file.parent().unwrap().to_path_buf(),
                                        _ => current_dir.clone(),
                                    };
                                    let f = base.join(path);
                                    let d = f.with_extension("");
                                    (f, d)
                                }
                                None => child_location(&current_dir, &name),
                            };
                            self.read_file(&child_file, child, child_dir);
                            i += 3;
                        }
                        Some(Token::Punct('{')) => {
                            pending_path = None;
                            depth += 1;
                            stack.push((child, depth - 1, current_dir.join(&name)));
                            i += 3;
                        }
                        _ => i += 1,
                    }
                }
                Token::Ident(word) if word == "use" => {
                    let public = i > 0 && self.is_public_use(&tokens, i);
                    let end = (i..tokens.len())
                        .find(|&j| tokens[j].0 == Token::Punct(';'))
                        .unwrap_or(tokens.len());
                    let mut leaves = Vec::new();
                    use_tree(&tokens[i + 1..end], Vec::new(), &mut leaves);
                    for (path, alias, line) in leaves {
                        let Some(absolute) = self.absolute(current, &path) else {
                            continue;
                        };
                        // A facade: this module re-exports an item of its own children.
                        let own = &self.modules[current].path;
                        let facade = absolute.len() > own.len() && absolute.starts_with(own);
                        if public && alias != "*" && alias != "self" {
                            self.modules[current]
                                .reexports
                                .insert(alias, (absolute.clone(), facade));
                        }
                        // Any other re-export is a dependency like any `use`: the file that
                        // has it needs the file that defines the item.
                        if !public || !facade {
                            self.references.push(Reference {
                                file: file_index,
                                line,
                                path: absolute,
                            });
                        }
                    }
                    i = end + 1;
                }
                Token::Ident(first) => {
                    let starts_path = i == 0 || tokens[i - 1].0 != Token::Path;
                    let is_path = matches!(tokens.get(i + 1), Some((Token::Path, _)));
                    let known = ["crate", "super", "self"].contains(&first.as_str())
                        || self.modules[current].children.contains_key(first);
                    if starts_path && is_path && known {
                        let mut path = vec![first.clone()];
                        let mut j = i + 1;
                        while let (Some((Token::Path, _)), Some((Token::Ident(s), _))) =
                            (tokens.get(j), tokens.get(j + 1))
                        {
                            path.push(s.clone());
                            j += 2;
                        }
                        if let Some(absolute) = self.absolute(current, &path) {
                            self.references.push(Reference {
                                file: file_index,
                                line: tokens[i].1,
                                path: absolute,
                            });
                        }
                        i = j;
                    } else {
                        i += 1;
                    }
                }
                _ => i += 1,
            }
        }
    }

    /// Whether the `use` at `i` is a re-export (`pub use`, `pub(crate) use`, …).
    fn is_public_use(&self, tokens: &Lexed, i: usize) -> bool {
        match &tokens[i - 1].0 {
            Token::Ident(word) => word == "pub",
            Token::Punct(')') => (0..i)
                .rev()
                .take(6)
                .any(|j| tokens[j].0 == Token::Ident("pub".into())),
            _ => false,
        }
    }

    fn child(&mut self, parent: usize, name: &str) -> usize {
        if let Some(&child) = self.modules[parent].children.get(name) {
            return child;
        }
        let mut path = self.modules[parent].path.clone();
        path.push(name.to_owned());
        self.modules.push(Module {
            path,
            file: self.modules[parent].file,
            ..Module::default()
        });
        let child = self.modules.len() - 1;
        self.modules[parent].children.insert(name.to_owned(), child);
        child
    }

    /// `path` as written in module `current`, from the crate root; `None` for paths outside
    /// the crate (`std::…`, other crates).
    fn absolute(&self, current: usize, path: &[String]) -> Option<Vec<String>> {
        let mut base = self.modules[current].path.clone();
        let mut rest = path;
        match path.first().map(String::as_str) {
            Some("crate") => {
                base.clear();
                rest = &path[1..];
            }
            Some("self") => rest = &path[1..],
            Some("super") => {
                while rest.first().map(String::as_str) == Some("super") {
                    base.pop()?;
                    rest = &rest[1..];
                }
            }
            Some(first) if self.modules[current].children.contains_key(first) => {}
            _ => return None,
        }
        base.extend(rest.iter().cloned());
        Some(base)
    }

    /// The module a path lands in: the deepest module it names, through re-exports; and the
    /// modules whose (non-facade) re-exports it went through, the doors it also depends on.
    fn resolve(&self, path: &[String]) -> (usize, Vec<usize>) {
        let mut path = path.to_vec();
        let mut doors = Vec::new();
        for _ in 0..16 {
            let mut module = 0;
            let mut used = 0;
            for segment in &path {
                match self.modules[module].children.get(segment) {
                    Some(&child) => {
                        module = child;
                        used += 1;
                    }
                    None => break,
                }
            }
            let next = path.get(used);
            match next.and_then(|name| self.modules[module].reexports.get(name)) {
                Some((target, facade)) if *target != path[..=used] => {
                    if !facade {
                        doors.push(module);
                    }
                    let mut redirected = target.clone();
                    redirected.extend(path[used + 1..].iter().cloned());
                    path = redirected;
                }
                _ => return (module, doors),
            }
        }
        (0, doors)
    }

    /// Edges between files: (from, to) → the first line of `from` that makes it.
    fn edges(&self) -> BTreeMap<(usize, usize), usize> {
        let mut edges = BTreeMap::new();
        for reference in &self.references {
            let (module, doors) = self.resolve(&reference.path);
            for to in doors.into_iter().chain([module]) {
                let to = self.modules[to].file;
                if to != reference.file {
                    edges.entry((reference.file, to)).or_insert(reference.line);
                }
            }
        }
        edges
    }
}

fn child_location(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let flat = dir.join(format!("{name}.rs"));
    if flat.is_file() {
        return (flat, dir.join(name));
    }
    (dir.join(name).join("mod.rs"), dir.join(name))
}

/// The leaves of a use tree: (path, the name it binds, line).
fn use_tree(
    tokens: &[(Token, usize)],
    prefix: Vec<String>,
    out: &mut Vec<(Vec<String>, String, usize)>,
) {
    let mut path = prefix.clone();
    let mut i = 0;
    let line = tokens.first().map_or(0, |t| t.1);
    while i < tokens.len() {
        match &tokens[i].0 {
            Token::Ident(word) if word == "as" => {
                if let Some((Token::Ident(alias), _)) = tokens.get(i + 1) {
                    out.push((path.clone(), alias.clone(), line));
                    path = prefix.clone();
                }
                i += 2;
                continue;
            }
            Token::Ident(word) => path.push(word.clone()),
            Token::Punct('*') => {
                out.push((path.clone(), "*".into(), line));
                path = prefix.clone();
            }
            Token::Punct('{') => {
                let close = matching(tokens, i);
                for part in split_top(&tokens[i + 1..close]) {
                    use_tree(part, path.clone(), out);
                }
                path = prefix.clone();
                i = close;
            }
            Token::Punct(',') => {
                push_leaf(&path, &prefix, line, out);
                path = prefix.clone();
            }
            _ => {}
        }
        i += 1;
    }
    push_leaf(&path, &prefix, line, out);
}

fn push_leaf(
    path: &[String],
    prefix: &[String],
    line: usize,
    out: &mut Vec<(Vec<String>, String, usize)>,
) {
    if path.len() > prefix.len() {
        let name = path.last().unwrap().clone();
        // `use a::b::{self}` binds `b`.
        if name == "self" {
            let trimmed = path[..path.len() - 1].to_vec();
            let bound = trimmed.last().cloned().unwrap_or_default();
            out.push((trimmed, bound, line));
        } else {
            out.push((path.to_vec(), name, line));
        }
    }
}

fn matching(tokens: &[(Token, usize)], open: usize) -> usize {
    let mut depth = 0;
    for (j, (token, _)) in tokens.iter().enumerate().skip(open) {
        match token {
            Token::Punct('{') => depth += 1,
            Token::Punct('}') => {
                depth -= 1;
                if depth == 0 {
                    return j;
                }
            }
            _ => {}
        }
    }
    tokens.len()
}

fn split_top(tokens: &[(Token, usize)]) -> Vec<&[(Token, usize)]> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (j, (token, _)) in tokens.iter().enumerate() {
        match token {
            Token::Punct('{') => depth += 1,
            Token::Punct('}') => depth -= 1,
            Token::Punct(',') if depth == 0 => {
                parts.push(&tokens[start..j]);
                start = j + 1;
            }
            _ => {}
        }
    }
    parts.push(&tokens[start..]);
    parts
}

/// The circles among a tree's files: each strongly connected set of two or more files, with
/// one circle through it as `a.rs:12 → b.rs:40 → a.rs`.
fn circles(tree: &Tree, root: &Path) -> Vec<String> {
    let edges = tree.edges();
    let n = tree.files.len();
    let mut out: Vec<Vec<usize>> = vec![Vec::new(); n];
    for &(from, to) in edges.keys() {
        out[from].push(to);
    }
    let mut problems = Vec::new();
    let mut reported: BTreeSet<usize> = BTreeSet::new();
    for start in 0..n {
        if reported.contains(&start) {
            continue;
        }
        if let Some(circle) = find_circle(start, &out) {
            let name = |f: usize| {
                tree.files[f]
                    .strip_prefix(root)
                    .unwrap_or(&tree.files[f])
                    .display()
                    .to_string()
            };
            let mut text = String::new();
            for pair in circle.windows(2) {
                let line = edges[&(pair[0], pair[1])];
                text.push_str(&format!("{}:{line} → ", name(pair[0])));
            }
            text.push_str(&name(circle[0]));
            reported.extend(circle.iter().copied());
            problems.push(text);
        }
    }
    problems
}

/// A path start → … → start, if there is one (shortest, by breadth-first search).
fn find_circle(start: usize, out: &[Vec<usize>]) -> Option<Vec<usize>> {
    let mut previous: BTreeMap<usize, usize> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(node) = queue.pop_front() {
        for &next in &out[node] {
            if next == start {
                let mut chain = vec![node];
                let mut at = node;
                while at != start {
                    at = previous[&at];
                    chain.push(at);
                }
                chain.reverse();
                chain.push(start);
                return Some(chain);
            }
            if next != start && !previous.contains_key(&next) {
                previous.insert(next, node);
                queue.push_back(next);
            }
        }
    }
    None
}

/// Every crate root of the workspace: `crates/*/src/{lib,main}.rs` and `src/bin/*.rs`.
fn roots(workspace: &Path) -> Vec<PathBuf> {
    let mut roots = Vec::new();
    let crates = crate_dirs(workspace);
    for dir in crates {
        let src = dir.join("src");
        for name in ["lib.rs", "main.rs"] {
            if src.join(name).is_file() {
                roots.push(src.join(name));
            }
        }
        if let Ok(bins) = std::fs::read_dir(src.join("bin")) {
            let mut bins: Vec<PathBuf> = bins
                .map(|e| e.expect("cannot list src/bin").path())
                .filter(|p| p.extension().is_some_and(|e| e == "rs"))
                .collect();
            bins.sort();
            roots.extend(bins);
        }
    }
    roots
}

/// Circles allowed today, by the directory all their files are in, each with its reason: code
/// other work is rebuilding right now (docs/architecture.md, known departures). A listed
/// directory without a circle fails the test too: remove the row, so the list only shrinks.
const DEPARTURES: &[(&str, &str)] = &[];

#[test]
fn every_crates_files_form_a_tree() {
    let workspace = workspace();
    let roots = roots(&workspace);
    assert!(roots.len() >= 13, "found only {} crate roots", roots.len());
    let mut problems = Vec::new();
    let mut departed: BTreeSet<&str> = BTreeSet::new();
    for root in &roots {
        let tree = Tree::load(root);
        for circle in circles(&tree, &workspace) {
            let files: Vec<&str> = circle
                .split(" → ")
                .map(|step| step.split(':').next().unwrap_or(step))
                .collect();
            let known = DEPARTURES
                .iter()
                .find(|(dir, _)| files.iter().all(|f| f.starts_with(dir)));
            match known {
                Some((dir, _)) => {
                    departed.insert(dir);
                }
                None => problems.push(circle),
            }
        }
    }
    for (dir, reason) in DEPARTURES {
        if !departed.contains(dir) {
            problems.push(format!(
                "{dir} has no circle any more ({reason}): remove it from DEPARTURES"
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "files that reach themselves through `use crate::`/`super::` paths (break the circle: \
         move what both need into a file both use, or pass it in):\n  {}",
        problems.join("\n  ")
    );
}

#[test]
fn a_circle_is_found_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("a")).unwrap();
    std::fs::write(
        src.join("lib.rs"),
        "mod a;\npub mod b;\npub use b::Thing;\n",
    )
    .unwrap();
    std::fs::write(
        src.join("a.rs"),
        "mod inner;\n// use crate::b::Nothing;\nuse crate::Thing;\nfn f() { inner::g(); }\n",
    )
    .unwrap();
    std::fs::write(
        src.join("a/inner.rs"),
        "pub fn g() { let _ = \"crate::b\"; }\n",
    )
    .unwrap();
    std::fs::write(
        src.join("b.rs"),
        "pub struct Thing;\nfn h() { crate::a::f() }\n",
    )
    .unwrap();
    let tree = Tree::load(&src.join("lib.rs"));
    let found = circles(&tree, dir.path());
    assert_eq!(found, ["src/a.rs:3 → src/b.rs:2 → src/a.rs"], "{tree:#?}");

    // Broken: b no longer names a; a → inner and a → b are a tree.
    std::fs::write(src.join("b.rs"), "pub struct Thing;\n").unwrap();
    let tree = Tree::load(&src.join("lib.rs"));
    assert!(circles(&tree, dir.path()).is_empty());
}

/// Writes `files` (path under `src/`, text) into a fresh crate and returns its circles.
fn circles_of(files: &[(&str, &str)]) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    for (path, text) in files {
        let file = src.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    }
    let tree = Tree::load(&src.join("lib.rs"));
    circles(&tree, dir.path())
}

#[test]
fn a_reexport_is_a_dependency() {
    // The door: fault names `CniError` through spec's re-export of error's, and spec names
    // fault (cni/src/{fault,spec}.rs before they were untangled).
    let door = [
        ("lib.rs", "mod error;\nmod fault;\nmod spec;\n"),
        ("error.rs", "pub struct CniError;\n"),
        (
            "spec.rs",
            "pub use crate::error::CniError;\nfn s() { crate::fault::f() }\n",
        ),
        ("fault.rs", "use crate::spec::CniError;\npub fn f() {}\n"),
    ];
    assert_eq!(
        circles_of(&door),
        ["src/fault.rs:1 → src/spec.rs:2 → src/fault.rs"]
    );
    // Naming it where it is defined breaks the circle.
    let mut untangled = door;
    untangled[3].1 = "use crate::error::CniError;\npub fn f() {}\n";
    assert!(circles_of(&untangled).is_empty());

    // The re-export itself: a re-exports b's item (`pub(crate) use` too), b names a.
    for public in ["pub", "pub(crate)"] {
        let a = format!("{public} use crate::b::Thing;\npub fn f() {{}}\n");
        let found = circles_of(&[
            ("lib.rs", "mod a;\nmod b;\n"),
            ("a.rs", &a),
            ("b.rs", "pub struct Thing;\nfn h() { crate::a::f() }\n"),
        ]);
        assert_eq!(
            found,
            ["src/a.rs:1 → src/b.rs:2 → src/a.rs"],
            "{public} use"
        );
    }

    // A facade is seen through: a module re-exporting its own child's item, the child naming
    // the module's own items.
    let facade = circles_of(&[
        (
            "lib.rs",
            "mod cluster;\npub use cluster::EndpointMap;\npub fn top() {}\n",
        ),
        (
            "cluster.rs",
            "mod store;\npub use store::EndpointMap;\npub struct Endpoint;\n",
        ),
        (
            "cluster/store.rs",
            "use super::Endpoint;\npub struct EndpointMap;\nfn g() { crate::top() }\n",
        ),
    ]);
    assert!(facade.is_empty(), "{facade:?}");
}
