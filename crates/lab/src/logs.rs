//! The processes' logs, for errors: the last lines of a log, without terminal colours.

use std::path::Path;

use crate::state::Lab;

/// Adds the last lines of a process's log to an error (a failed `up` removes the logs).
pub fn with_log_tail<T>(result: anyhow::Result<T>, lab: &Lab, process: &str) -> anyhow::Result<T> {
    result.map_err(|error| {
        let path = lab.log_path(process);
        anyhow::anyhow!(
            "{error:#}\nlast lines of {}:\n{}",
            path.display(),
            log_tail(&path)
        )
    })
}

pub fn log_hint(lab: &Lab, process: &str) -> String {
    let path = lab.log_path(process);
    format!("see {}:\n{}", path.display(), log_tail(&path))
}

/// The last 15 lines of a log, without terminal colours.
fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    without_colours(&lines[lines.len().saturating_sub(15)..].join("\n"))
}

/// `text` without ANSI escape sequences (`ESC [ … letter`).
fn without_colours(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            // Skip up to and including the sequence's final letter.
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_tails_lose_their_colours() {
        let line = "\x1b[2m2026-11-23\x1b[0m \x1b[32m INFO\x1b[0m started";
        assert_eq!(without_colours(line), "2026-11-23  INFO started");
    }
}
