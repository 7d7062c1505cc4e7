//! Why a selector does not parse.

/// Why a selector does not parse: where (a 0-based character index into the text) and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid selector at character {}: {reason}", position + 1)]
pub struct SelectorError {
    pub position: usize,
    pub reason: String,
}

impl SelectorError {
    pub(super) fn new(position: usize, reason: impl Into<String>) -> SelectorError {
        SelectorError {
            position,
            reason: reason.into(),
        }
    }
}
