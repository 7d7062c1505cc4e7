//! Everything `docs/architecture.md` names exists (its rule 11): a map that points at a file
//! or a function that is gone sends a new engineer on a search.
//!
//! Every span in backticks outside code blocks and outside the dependency table is read:
//! - a **path** (`felix/src/core.rs`, `routing.rs`, `nft/`, `src/main.rs`,
//!   `dataplane/tests/{driver,kernel}.rs`): it exists, under the crate whose row of the crates
//!   table cites it, or else at the root, under `crates/`, under `docs/`, or as the end of a
//!   path anywhere in the workspace;
//! - a path and an item (`sh.rs::command_in`): the item is defined in such a file;
//! - an **item** (`Dataplane::sync`, `IpSetIndex::join`, `Ipam::{auto_assign, assign_ip}`,
//!   `calico_bgp::render(config, host)`): its last name is defined (fn, type, module, field,
//!   variant, …) and every other name is used, in the sources of one crate: the row's, the
//!   one the path starts with, or else any. A name alone with an underscore (`interfaces_of`)
//!   is in code. Comments do not count; a bare word (`plan`, `ADD`) or a type or parameter
//!   alone (`IpSetIndex`, `FanoutAddr`) only has to appear in code or a string.
//!
//! Everything else (keys, commands, flags, JSON) is not checked.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

mod common;

use common::{Token, crate_dirs, lex, workspace};

const DOC: &str = "docs/architecture.md";
const EXTENSIONS: &[&str] = &["rs", "j2", "md", "sh", "py", "toml", "json"];

/// What a crate's sources define and use.
#[derive(Debug, Default)]
struct Index {
    /// Every file and directory, relative to the crate (`src/core/pass.rs`, `src/core`).
    paths: BTreeSet<String>,
    /// Names defined: after `fn`, `struct`, … or as a field or variant; module files.
    defined: BTreeSet<String>,
    /// Identifiers in code (not comments, not strings).
    used: BTreeSet<String>,
    /// Words in code and string literals, and in the crate's manifest.
    words: BTreeSet<String>,
    /// Per file (relative path): the names it defines.
    per_file: BTreeMap<String, BTreeSet<String>>,
    /// Per type, trait or enum: what its `impl` blocks and its body define (methods,
    /// associated items, variants, fields).
    members: BTreeMap<String, BTreeSet<String>>,
}

impl Index {
    fn of_crate(dir: &Path) -> Index {
        let mut index = Index::default();
        let mut files = Vec::new();
        walk(dir, dir, &mut index.paths, &mut files);
        if let Ok(manifest) = std::fs::read_to_string(dir.join("Cargo.toml")) {
            index.words.extend(words(&manifest));
        }
        for file in files {
            let relative = file.strip_prefix(dir).unwrap().display().to_string();
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            if relative.ends_with(".rs") {
                let defined = index.read_rust(&text);
                index.per_file.insert(relative.clone(), defined);
            } else if relative.ends_with(".j2") {
                index.words.extend(words(&text));
            }
            // A module is defined by its file or directory.
            let stem = Path::new(&relative).file_stem().unwrap().to_string_lossy();
            index.defined.insert(stem.into_owned());
        }
        let dirs: Vec<String> = index.paths.iter().map(|p| last(p).to_owned()).collect();
        index.defined.extend(dirs);
        index
    }

    /// Adds a Rust file's names; returns the ones it defines.
    fn read_rust(&mut self, text: &str) -> BTreeSet<String> {
        const KEYWORDS: &[&str] = &[
            "fn", "struct", "enum", "trait", "type", "const", "static", "mod", "union",
        ];
        let tokens = lex(text);
        let mut defined = BTreeSet::new();
        // The owners of the braces open: (type, the depth inside its braces).
        let (mut depth, mut owners, mut next_owner) = (0usize, Vec::new(), None);
        for (i, (token, _)) in tokens.iter().enumerate() {
            match token {
                Token::Punct('{') => {
                    depth += 1;
                    if let Some(owner) = next_owner.take() {
                        owners.push((owner, depth));
                    }
                }
                Token::Punct('}') => {
                    if owners.last().is_some_and(|(_, d)| *d == depth) {
                        owners.pop();
                    }
                    depth = depth.saturating_sub(1);
                }
                Token::Punct(';') => next_owner = None,
                Token::Str(text) => self.words.extend(words(text)),
                Token::Ident(name) => {
                    self.used.insert(name.clone());
                    self.words.insert(name.clone());
                    if ["impl", "struct", "enum", "trait", "union"].contains(&name.as_str()) {
                        next_owner = owner_of(&tokens[i..]);
                    }
                    let before = i.checked_sub(1).map(|j| &tokens[j].0);
                    let after = tokens.get(i + 1).map(|t| &t.0);
                    let keyword =
                        matches!(before, Some(Token::Ident(k)) if KEYWORDS.contains(&k.as_str()));
                    let member_start = matches!(
                        before,
                        Some(Token::Punct('{' | ',' | ')' | ']')) | Some(Token::Ident(_))
                    );
                    let member_end =
                        matches!(after, Some(Token::Punct(':' | ',' | '(' | '{' | '}' | '=')));
                    let macro_rules =
                        i >= 2 && matches!(&tokens[i - 2].0, Token::Ident(m) if m == "macro_rules");
                    if keyword || macro_rules || (member_start && member_end) {
                        defined.insert(name.clone());
                        if let Some((owner, d)) = owners.last()
                            && *d == depth
                        {
                            let members = self.members.entry(owner.clone()).or_default();
                            members.insert(name.clone());
                        }
                    }
                }
                _ => {}
            }
        }
        self.defined.extend(defined.iter().cloned());
        defined
    }
}

/// The type an `impl`, `struct`, `enum`, `trait` or `union` (at `tokens[0]`) is about: the
/// first name after `for` if there is one, else the first name outside `<…>`.
fn owner_of(tokens: &[(Token, usize)]) -> Option<String> {
    let mut angle = 0i32;
    let mut owner = None;
    for (token, _) in &tokens[1..] {
        match token {
            Token::Punct('{') | Token::Punct(';') => break,
            Token::Punct('<') => angle += 1,
            Token::Punct('>') => angle -= 1,
            Token::Ident(word) if word == "for" => owner = None,
            Token::Ident(word) if word == "where" => break,
            Token::Ident(word) if angle == 0 && owner.is_none() && word != "dyn" => {
                owner = Some(word.clone());
            }
            _ => {}
        }
    }
    owner
}

fn walk(root: &Path, dir: &Path, paths: &mut BTreeSet<String>, files: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == "target" || name.starts_with('.') {
            continue;
        }
        paths.insert(path.strip_prefix(root).unwrap().display().to_string());
        if path.is_dir() {
            walk(root, &path, paths, files);
        } else {
            files.push(path);
        }
    }
}

fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
}

fn last(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// The workspace: each crate's index, by directory name.
struct World {
    root: PathBuf,
    crates: BTreeMap<String, Index>,
}

impl World {
    fn load() -> World {
        let root = workspace();
        let mut crates = BTreeMap::new();
        for dir in crate_dirs(&root) {
            let name = dir.file_name().unwrap().to_string_lossy().into_owned();
            crates.insert(name, Index::of_crate(&dir));
        }
        World { root, crates }
    }

    /// The crates a span is looked up in: the row's, or every one.
    fn scope<'a>(&'a self, krate: Option<&str>) -> Vec<(&'a str, &'a Index)> {
        self.crates
            .iter()
            .filter(|(name, _)| krate.is_none_or(|k| k == name.as_str()))
            .map(|(name, index)| (name.as_str(), index))
            .collect()
    }

    /// The files (crate, relative path) a path span names, in scope.
    fn files(&self, krate: Option<&str>, path: &str) -> Vec<(String, String)> {
        let path = path.trim_end_matches('/');
        let mut found = Vec::new();
        // `felix/src/core.rs`: a crate's directory first.
        if let Some((first, rest)) = path.split_once('/')
            && let Some(index) = self.crates.get(first)
            && index.paths.contains(rest)
        {
            found.push((first.to_owned(), rest.to_owned()));
        }
        for (name, index) in self.scope(krate) {
            for candidate in &index.paths {
                if candidate == path || candidate.ends_with(&format!("/{path}")) {
                    found.push((name.to_owned(), candidate.clone()));
                }
            }
        }
        found
    }

    fn path_exists(&self, krate: Option<&str>, path: &str) -> bool {
        let bare = path.trim_end_matches('/');
        let outside = [
            self.root.join(bare),
            self.root.join("crates").join(bare),
            self.root.join("docs").join(bare),
        ];
        outside.iter().any(|p| p.exists()) || !self.files(krate, path).is_empty()
    }
}

/// `a/{b,c}.rs` → `a/b.rs`, `a/c.rs`.
fn expand_braces(span: &str) -> Vec<String> {
    let (Some(open), Some(close)) = (span.find('{'), span.find('}')) else {
        return vec![span.to_owned()];
    };
    let (head, tail) = (&span[..open], &span[close + 1..]);
    span[open + 1..close]
        .split(',')
        .flat_map(|part| expand_braces(&format!("{head}{}{tail}", part.trim())))
        .collect()
}

/// `a::{b, c::{d, e}}` → `[a, b]`, `[a, c, d]`, `[a, c, e]`.
fn item_paths(span: &str) -> Vec<Vec<String>> {
    fn tree(text: &str, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
        let text = text.trim();
        if let Some(open) = text.find('{') {
            let close = text.rfind('}').unwrap_or(text.len());
            let mut head = prefix.clone();
            head.extend(
                text[..open]
                    .split("::")
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned),
            );
            let (mut depth, mut start) = (0, open + 1);
            for (i, c) in text.char_indices().skip(open + 1) {
                match c {
                    '{' => depth += 1,
                    '}' if depth > 0 => depth -= 1,
                    ',' if depth == 0 => {
                        tree(&text[start..i], head.clone(), out);
                        start = i + 1;
                    }
                    _ => {}
                }
            }
            tree(&text[start..close], head, out);
            return;
        }
        let mut path = prefix;
        path.extend(
            text.split("::")
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned),
        );
        if !path.is_empty() {
            out.push(path);
        }
    }
    let mut out = Vec::new();
    tree(span, Vec::new(), &mut out);
    out
}

fn is_ident(word: &str) -> bool {
    let mut chars = word.chars();
    chars.next().is_some_and(|c| c.is_alphabetic() || c == '_')
        && chars.all(|c| c.is_alphanumeric() || c == '_')
}

/// What a span is.
#[derive(Debug, PartialEq)]
enum Cited {
    Path(String),
    PathItem(String, Vec<String>),
    Item(Vec<Vec<String>>),
    Other,
}

fn classify(span: &str) -> Cited {
    let span = span.trim();
    // A call's arguments say nothing about the item: `apply(key, value)`.
    let item = span.split('(').next().unwrap_or(span).trim();
    if let Some((file, rest)) = item.split_once("::")
        && EXTENSIONS.iter().any(|e| file.ends_with(&format!(".{e}")))
    {
        let rest: Vec<String> = rest.split("::").map(str::to_owned).collect();
        if rest.iter().all(|s| is_ident(s)) {
            return Cited::PathItem(file.to_owned(), rest);
        }
    }
    let path_chars = |c: char| c.is_alphanumeric() || "_./-{},".contains(c);
    let has_extension = EXTENSIONS.iter().any(|e| span.ends_with(&format!(".{e}")));
    if span.chars().all(path_chars)
        && !span.starts_with('/')
        && span.chars().any(char::is_alphabetic)
        && (has_extension || (span.ends_with('/') && span.contains('/') && !span.starts_with('.')))
    {
        return Cited::Path(span.to_owned());
    }
    let item_chars = |c: char| c.is_alphanumeric() || "_:{}, ".contains(c);
    let spaces_only_in_braces = !item.replace(", ", ",").contains(' ');
    if !item.is_empty()
        && item.chars().all(item_chars)
        && spaces_only_in_braces
        && item
            .chars()
            .next()
            .is_some_and(|c| c.is_alphabetic() || c == '_')
    {
        let paths = item_paths(item);
        if paths.iter().flatten().all(|s| is_ident(s)) {
            return Cited::Item(paths);
        }
    }
    Cited::Other
}

/// Why an item is not in scope, or `None` when it is.
fn check_item(world: &World, krate: Option<&str>, path: &[String]) -> Option<String> {
    let is_crate = |name: &str| {
        let name = name.strip_prefix("calico_").unwrap_or(name);
        world.crates.contains_key(name)
    };
    // `calico_bgp::render`, `model::parse_value`: the crate named first is the scope.
    let (scope, names) = match path.first() {
        Some(first) if path.len() > 1 && is_crate(first) => (
            Some(first.strip_prefix("calico_").unwrap_or(first)),
            &path[1..],
        ),
        _ => (krate, path),
    };
    let where_ = scope.map_or("the workspace".to_owned(), |k| format!("crate `{k}`"));
    let last = names.last()?;
    let (prefix, indexes) = (&names[..names.len() - 1], world.scope(scope));
    // `Type::method`, `Enum::Variant`: what the type's `impl` blocks or body define.
    let owner = prefix
        .last()
        .filter(|p| p.chars().next().is_some_and(char::is_uppercase));
    let members: Option<BTreeSet<&String>> = owner.and_then(|owner| {
        let all: BTreeSet<&String> = indexes
            .iter()
            .filter_map(|(_, i)| i.members.get(owner))
            .flatten()
            .collect();
        (!all.is_empty()).then_some(all)
    });
    if let (Some(owner), Some(members)) = (owner, members) {
        return (!members.contains(last)).then(|| format!("`{owner}` has no `{last}` in {where_}"));
    }
    if !prefix.is_empty() {
        // `module::item`: one crate uses every name before the last, and defines the last.
        let found = indexes.iter().any(|(_, index)| {
            let known =
                |n: &String| index.used.contains(n) || index.defined.contains(n) || is_crate(n);
            prefix.iter().all(known) && index.defined.contains(last)
        });
        let before = prefix.join("::");
        return (!found).then(|| format!("no crate of {where_} defines `{last}` with `{before}`"));
    }
    let defined = indexes.iter().any(|(_, i)| i.defined.contains(last)) || is_crate(last);
    let used = defined || indexes.iter().any(|(_, i)| i.used.contains(last));
    let appears = used || indexes.iter().any(|(_, i)| i.words.contains(last));
    let word = last.chars().all(|c| c.is_lowercase() || c.is_ascii_digit())
        || last
            .chars()
            .all(|c| c.is_uppercase() || c.is_ascii_digit() || c == '_');
    let capital = last.chars().next().is_some_and(char::is_uppercase);
    // A word (`plan`, `ADD`) or a type or parameter (`IpSetIndex`, `FanoutAddr`) appears; a
    // name with an underscore (`interfaces_of`, `block_in_place`) is in code.
    let ok = match word || capital {
        true => appears,
        false => used,
    };
    (!ok).then(|| format!("`{last}` is not defined in {where_}"))
}

/// The problems of one span, cited in the row of `krate` (if any).
fn check_span(world: &World, krate: Option<&str>, span: &str) -> Vec<String> {
    let mut problems = Vec::new();
    match classify(span) {
        Cited::Path(path) => {
            for path in expand_braces(&path) {
                if !world.path_exists(krate, &path) {
                    problems.push(format!("no file or directory `{path}`"));
                }
            }
        }
        Cited::PathItem(file, item) => {
            let files = world.files(krate, &file);
            if files.is_empty() && !world.files(None, &file).is_empty() {
                // Cited in a row about another crate: look everywhere.
                return check_span(world, None, span);
            }
            if files.is_empty() {
                problems.push(format!("no file `{file}`"));
            }
            let name = item.last().unwrap();
            let defined = files.iter().any(|(k, f)| {
                world.crates[k]
                    .per_file
                    .get(f)
                    .is_some_and(|d| d.contains(name))
            });
            if !files.is_empty() && !defined {
                problems.push(format!("`{name}` is not defined in `{file}`"));
            }
        }
        Cited::Item(paths) => {
            for path in paths {
                let problem = match check_item(world, krate, &path) {
                    // A row may name another crate's item (`linux::Netns`): the workspace then.
                    Some(why) if krate.is_some() => check_item(world, None, &path).map(|_| why),
                    problem => problem,
                };
                problems.extend(problem.map(|why| format!("`{}`: {why}", path.join("::"))));
            }
        }
        Cited::Other => {}
    }
    problems
}

/// Every backticked span of the page, with its line and the crate whose row it is in.
fn spans(doc: &str, crates: &BTreeMap<String, Index>) -> Vec<(usize, Option<String>, String)> {
    let mut out = Vec::new();
    let (mut in_code, mut in_table) = (false, false);
    for (i, line) in doc.lines().enumerate() {
        if line.starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if line.contains("allowed-dependencies:begin") {
            in_table = true;
        }
        if line.contains("allowed-dependencies:end") {
            in_table = false;
            continue;
        }
        if in_code || in_table {
            continue;
        }
        let row = line
            .strip_prefix("| `")
            .and_then(|rest| rest.split_once('`'))
            .map(|(name, _)| name)
            .filter(|name| crates.contains_key(*name))
            .map(str::to_owned);
        let parts: Vec<&str> = line.split('`').collect();
        for span in parts.iter().skip(1).step_by(2) {
            out.push((i + 1, row.clone(), (*span).to_owned()));
        }
    }
    out
}

#[test]
fn every_path_and_item_the_map_cites_exists() {
    let world = World::load();
    let doc = std::fs::read_to_string(world.root.join(DOC)).expect("docs/architecture.md");
    let mut problems = Vec::new();
    let mut checked = 0;
    for (line, krate, span) in spans(&doc, &world.crates) {
        if classify(&span) != Cited::Other {
            checked += 1;
        }
        for problem in check_span(&world, krate.as_deref(), &span) {
            problems.push(format!("{DOC}:{line}: {problem}"));
        }
    }
    assert!(
        checked > 200,
        "only {checked} citations found: is the page read right?"
    );
    assert!(
        problems.is_empty(),
        "the map cites what does not exist (fix the page, or the name):\n  {}",
        problems.join("\n  ")
    );
}

/// README's layout names every crate of the workspace, as `crates/<dir>` (`calico-<dir>`).
#[test]
fn the_readme_layout_lists_every_crate() {
    let world = World::load();
    let readme = std::fs::read_to_string(world.root.join("README.md")).expect("README.md");
    let missing: Vec<&String> = world
        .crates
        .keys()
        .filter(|dir| !readme.contains(&format!("| `crates/{dir}` (`calico-{dir}`) |")))
        .collect();
    assert!(
        missing.is_empty(),
        "README.md's layout table has no row for {missing:?}"
    );
}

#[test]
fn spans_are_read_as_paths_items_or_neither() {
    assert_eq!(
        classify("felix/src/core.rs"),
        Cited::Path("felix/src/core.rs".into())
    );
    assert_eq!(classify("nft/"), Cited::Path("nft/".into()));
    assert_eq!(
        classify("sh.rs::command_in"),
        Cited::PathItem("sh.rs".into(), vec!["command_in".into()])
    );
    assert_eq!(
        classify("Ipam::{auto_assign, assign_ip}"),
        Cited::Item(vec![
            vec!["Ipam".into(), "auto_assign".into()],
            vec!["Ipam".into(), "assign_ip".into()],
        ])
    );
    assert_eq!(
        classify("calico_bgp::render(config, host)"),
        Cited::Item(vec![vec!["calico_bgp".into(), "render".into()]])
    );
    for other in [
        "/calico/v1/host/",
        "cali-hi-<iface>",
        "10.65.0.0/16",
        "ip netns exec",
    ] {
        assert_eq!(classify(other), Cited::Other, "{other}");
    }
    assert_eq!(
        expand_braces("dataplane/tests/{driver,kernel}.rs"),
        ["dataplane/tests/driver.rs", "dataplane/tests/kernel.rs"]
    );
}

#[test]
fn a_stale_citation_is_named() {
    let world = World::load();
    assert!(check_span(&world, Some("calc"), "IpSetIndex::join").is_empty());
    assert!(check_span(&world, None, "lab/src/sh.rs").is_empty());
    let gone = check_span(&world, Some("calc"), "join_ipset");
    assert_eq!(
        gone,
        ["`join_ipset`: `join_ipset` is not defined in crate `calc`"]
    );
    let moved = check_span(&world, None, "lab/src/nowhere.rs");
    assert_eq!(moved, ["no file or directory `lab/src/nowhere.rs`"]);
    let method = check_span(&world, Some("dataplane"), "Dataplane::nothing");
    assert_eq!(
        method,
        ["`Dataplane::nothing`: `Dataplane` has no `nothing` in crate `dataplane`"]
    );
    assert!(check_span(&world, Some("dataplane"), "Dataplane::{sync, plan_sync}").is_empty());
    let item = check_span(&world, None, "sh.rs::build_ip_netns_exec");
    assert_eq!(item, ["`build_ip_netns_exec` is not defined in `sh.rs`"]);
}
