//! Structure-aware mutation of JSON documents for the fuzz harness (`fuzzing/mod.rs`), for the
//! parsers whose input is JSON (model values, CNI configs): byte mutations mostly break the
//! syntax, so these keep it and change the tree instead (a field removed, a value of another
//! type or at a boundary, an element doubled), which gets inputs into the validation behind
//! the JSON parser. Included with `#[path]` by the fuzz tests of crates that have
//! `serde_json`.

use serde_json::{Map, Value};

use crate::fuzzing::{BOUNDARY_NUMBERS, NASTY, Rng, Target, input, text};

/// `seed` (JSON text) with one to four changes to its tree; `tokens` are strings to put in
/// (field names and values of the format). Text that is not JSON is returned unchanged.
pub fn mutated(rng: &mut Rng, seed: &[u8], tokens: &[&[u8]]) -> Vec<u8> {
    let Ok(mut value) = serde_json::from_slice::<Value>(seed) else {
        return seed.to_vec();
    };
    for _ in 0..1 + rng.below(4) {
        mutate(rng, &mut value, tokens);
    }
    value.to_string().into_bytes()
}

fn mutate(rng: &mut Rng, value: &mut Value, tokens: &[&[u8]]) {
    match value {
        Value::Object(map) if !map.is_empty() && !rng.one_in(4) => {
            let key = map
                .keys()
                .nth(rng.below(map.len()))
                .cloned()
                .expect("a key");
            match rng.below(8) {
                0 => {
                    map.remove(&key);
                }
                1 => {
                    let field = text(rng.bytes(tokens)).trim_matches('"').to_owned();
                    map.insert(field, scalar(rng, &Value::Null, tokens));
                }
                _ => mutate(rng, map.get_mut(&key).expect("the key"), tokens),
            }
        }
        Value::Array(items) if !items.is_empty() && !rng.one_in(4) => {
            let at = rng.below(items.len());
            match rng.below(6) {
                0 => {
                    items.remove(at);
                }
                1 => {
                    let copy = items[at].clone();
                    items.insert(at, copy);
                }
                _ => mutate(rng, &mut items[at], tokens),
            }
        }
        _ => *value = scalar(rng, value, tokens),
    }
}

/// A value in place of `old`: another type, a boundary, a nasty or mutated string.
fn scalar(rng: &mut Rng, old: &Value, tokens: &[&[u8]]) -> Value {
    match rng.below(9) {
        0 => Value::Null,
        1 => Value::Bool(rng.one_in(2)),
        2 => serde_json::from_slice(rng.bytes(BOUNDARY_NUMBERS)).unwrap_or(Value::Null),
        3 => Value::String(text(rng.bytes(BOUNDARY_NUMBERS))),
        4 => Value::String(text(rng.bytes(NASTY))),
        5 => Value::String(text(rng.bytes(tokens))),
        6 => match rng.one_in(2) {
            true => Value::Array(vec![old.clone()]),
            false => Value::Object(Map::new()),
        },
        7 => Value::String(old.to_string()),
        _ => {
            // The old value's text, mutated byte by byte.
            let old_text = match old {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            let seeds = [old_text.as_bytes()];
            let target = Target {
                name: "",
                seeds: &seeds,
                tokens,
            };
            Value::String(text(&input(rng, &target)))
        }
    }
}
