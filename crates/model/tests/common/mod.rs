//! Helpers the model's integration tests share: the seed fixtures, the round trip, refusals.

// Each test file uses some of these.
#![allow(dead_code, reason = "each test binary uses a part of these helpers")]

use std::fmt::Debug;

use calico_model::{Validate, ValidationError, from_json};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// The text of `tests/fixtures/<name>`.
pub fn fixture(name: &str) -> String {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Parses and validates, serialises, parses again: both parses must be equal.
pub fn round_trip<T>(json: &str) -> T
where
    T: DeserializeOwned + Serialize + Validate + PartialEq + Debug,
{
    let parsed: T = from_json(json).unwrap_or_else(|e| panic!("{e}\n{json}"));
    let written = serde_json::to_string(&parsed).unwrap();
    let again: T = from_json(&written).unwrap_or_else(|e| panic!("{e}\n{written}"));
    assert_eq!(parsed, again, "after writing {written}");
    parsed
}

/// The fixtures of one test file: IP pool, IPAM and BGP ones belong to tests/values.rs, the
/// others to tests/objects.rs.
pub fn value_fixture(name: &str) -> bool {
    ["pool-", "ipam-", "bgp-"]
        .iter()
        .any(|p| name.starts_with(p))
}

/// Asserts that the JSON fixtures `owned` selects are exactly `tested`: a new fixture needs a
/// test, and a test names only fixtures that exist.
pub fn assert_all_fixtures_tested(owned: impl Fn(&str) -> bool, tested: &[&str]) {
    let dir = format!("{}/tests/fixtures", env!("CARGO_MANIFEST_DIR"));
    let mut found: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.ends_with(".json") && owned(name))
        .collect();
    found.sort();
    let mut tested: Vec<String> = tested.iter().map(|t| (*t).to_owned()).collect();
    tested.sort();
    assert_eq!(found, tested);
}

/// Asserts that `json` is refused with exactly this field path and reason.
pub fn refused<T: DeserializeOwned + Validate + Debug>(json: &str, field: &str, reason: &str) {
    let err = refusal::<T>(json);
    assert_eq!(
        (err.field.as_str(), err.reason.as_str()),
        (field, reason),
        "{json}"
    );
}

pub fn refusal<T: DeserializeOwned + Validate + Debug>(json: &str) -> ValidationError {
    match from_json::<T>(json) {
        Ok(value) => panic!("accepted {json} as {value:?}"),
        Err(err) => err,
    }
}
