//! What the checks of `tests/` share: where the workspace is, its crates, and Rust source as
//! they read it (identifiers, `::`, string literals and punctuation, each with its line;
//! comments and character literals dropped). Used by `modules.rs` (the files' `use` graph),
//! `map.rs` (what the map cites) and `architecture.rs` (the manifests).

// Each test binary uses part of what the checks share.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// The workspace's root (two levels above this crate).
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("crates/testkit has a workspace two levels up")
        .to_path_buf()
}

/// Every crate's directory (`crates/*` with a `Cargo.toml`), sorted.
pub fn crate_dirs(root: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))
        .expect("cannot list crates/")
        .map(|entry| entry.expect("cannot list crates/").path())
        .filter(|dir| dir.join("Cargo.toml").is_file())
        .collect();
    dirs.sort();
    dirs
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Token {
    Ident(String),
    Str(String),
    /// `::`
    Path,
    Punct(char),
}

/// A token and the line it is on.
pub type Lexed = Vec<(Token, usize)>;

/// Identifiers, `::`, string literals (for `#[path]`) and punctuation; comments and
/// character literals dropped.
pub fn lex(text: &str) -> Lexed {
    let chars: Vec<char> = text.chars().collect();
    let mut tokens = Vec::new();
    let (mut i, mut line) = (0, 1);
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    line += usize::from(chars[i] == '\n');
                    i += 1;
                }
            }
        } else if c == 'r' && matches!(next, Some('"') | Some('#')) && raw_string_at(&chars, i) {
            let start_line = line;
            let mut j = i + 1;
            let mut hashes = 0;
            while chars[j] == '#' {
                hashes += 1;
                j += 1;
            }
            j += 1;
            let start = j;
            loop {
                if j >= chars.len() {
                    break;
                }
                if chars[j] == '"' && (0..hashes).all(|h| chars.get(j + 1 + h) == Some(&'#')) {
                    break;
                }
                line += usize::from(chars[j] == '\n');
                j += 1;
            }
            let value: String = chars[start..j.min(chars.len())].iter().collect();
            tokens.push((Token::Str(value), start_line));
            i = j + 1 + hashes;
        } else if c == '"' || (c == 'b' && next == Some('"')) {
            let start_line = line;
            let mut j = if c == 'b' { i + 2 } else { i + 1 };
            let mut value = String::new();
            while j < chars.len() && chars[j] != '"' {
                if chars[j] == '\\' {
                    j += 1;
                }
                if let Some(&ch) = chars.get(j) {
                    line += usize::from(ch == '\n');
                    value.push(ch);
                }
                j += 1;
            }
            tokens.push((Token::Str(value), start_line));
            i = j + 1;
        } else if c == '\'' {
            // A character literal ('a', '\n', '\'') or a lifetime ('a).
            if next == Some('\\') {
                let mut j = i + 2;
                while j < chars.len() && chars[j] != '\'' {
                    j += 1;
                }
                i = j + 1;
            } else if chars.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                i += 1;
                while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
            }
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let word = word.strip_prefix("r#").map(str::to_owned).unwrap_or(word);
            tokens.push((Token::Ident(word), line));
        } else if c.is_ascii_digit() {
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
        } else if c == ':' && next == Some(':') {
            tokens.push((Token::Path, line));
            i += 2;
        } else {
            tokens.push((Token::Punct(c), line));
            i += 1;
        }
    }
    tokens
}

fn raw_string_at(chars: &[char], i: usize) -> bool {
    // `r"…"` or `r#"…"#`, not an identifier that starts with r.
    if i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_') {
        return false;
    }
    let mut j = i + 1;
    while chars.get(j) == Some(&'#') {
        j += 1;
    }
    chars.get(j) == Some(&'"')
}
