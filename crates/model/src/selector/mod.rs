//! The selector language (placeholder until implemented).
