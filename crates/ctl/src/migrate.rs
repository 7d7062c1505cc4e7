//! The plan of `calicoctl datastore migrate --from-v2`, as a pure function of the v2 leaves and
//! the v3 keys already present: what each key becomes, counted per kind of key.
//!
//! | v2 key | becomes |
//! | --- | --- |
//! | has a TTL (Felix's status report) | skipped: a liveness report must expire, and Felix writes a fresh one |
//! | `Key::parse` or `parse_value` refuses it | invalid: reported with the reason, not copied |
//! | absent from v3 | new: written |
//! | in v3 with the same value | same: nothing to do (a second run writes nothing) |
//! | in v3 with another value | different: the v3 value is taken as newer; overwritten only with `--force` |

use std::collections::{BTreeMap, HashMap};

use calico_model::{Key, parse_value};

use crate::v2::V2Key;

/// What happens to one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Action {
    /// Absent from v3: written.
    New,
    /// v3 already holds this value.
    Same,
    /// v3 holds another value.
    Different,
}

/// A key the migration will not copy, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    pub key: String,
    pub reason: String,
}

/// Counts for one kind of key (`Key::kind`, or "invalid" / "with TTL").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub new: usize,
    pub same: usize,
    pub different: usize,
}

/// The whole migration, decided before anything is written.
#[derive(Debug, Default)]
pub struct Plan {
    /// Valid keys with their value and what happens to them, sorted by key.
    pub keys: Vec<(String, String, Action)>,
    /// Per kind of key.
    pub counts: BTreeMap<&'static str, Counts>,
    /// Keys that do not validate, with the reason.
    pub invalid: Vec<Rejected>,
    /// Keys written with a TTL, not copied.
    pub with_ttl: Vec<Rejected>,
    /// The v3 value of every key v3 holds with another value (`Action::Different`).
    pub in_v3: BTreeMap<String, String>,
}

impl Plan {
    /// Decides every key. `v3` maps the v3 keys under `/calico/` to their values.
    pub fn new(v2: Vec<V2Key>, v3: &HashMap<String, String>) -> Plan {
        let mut plan = Plan::default();
        for leaf in v2 {
            if let Some(ttl) = leaf.ttl {
                let reason = format!("written with a TTL ({ttl}s left): not copied");
                plan.with_ttl.push(Rejected {
                    key: leaf.key,
                    reason,
                });
                continue;
            }
            let kind = match validate(&leaf.key, &leaf.value) {
                Ok(kind) => kind,
                Err(reason) => {
                    plan.invalid.push(Rejected {
                        key: leaf.key,
                        reason,
                    });
                    continue;
                }
            };
            let action = match v3.get(&leaf.key) {
                None => Action::New,
                Some(value) if *value == leaf.value => Action::Same,
                Some(value) => {
                    plan.in_v3.insert(leaf.key.clone(), value.clone());
                    Action::Different
                }
            };
            plan.count(kind, action);
            plan.keys.push((leaf.key, leaf.value, action));
        }
        plan
    }

    fn count(&mut self, kind: &'static str, action: Action) {
        let counts = self.counts.entry(kind).or_default();
        match action {
            Action::New => counts.new += 1,
            Action::Same => counts.same += 1,
            Action::Different => counts.different += 1,
        }
    }

    /// The keys with this action.
    pub fn with(&self, action: Action) -> impl Iterator<Item = (&str, &str)> {
        self.keys
            .iter()
            .filter(move |(_, _, a)| *a == action)
            .map(|(key, value, _)| (key.as_str(), value.as_str()))
    }

    /// The keys v3 holds with another value: key, the v2 value, the v3 value.
    pub fn different(&self) -> impl Iterator<Item = (&str, &str, &str)> {
        self.with(Action::Different)
            .map(|(key, v2)| (key, v2, self.in_v3[key].as_str()))
    }

    /// The totals over every kind.
    pub fn totals(&self) -> Counts {
        self.counts
            .values()
            .fold(Counts::default(), |sum, c| Counts {
                new: sum.new + c.new,
                same: sum.same + c.same,
                different: sum.different + c.different,
            })
    }
}

/// The kind of a key whose value validates, as `calicoctl validate` checks it.
fn validate(key: &str, value: &str) -> Result<&'static str, String> {
    let parsed = Key::parse(key).map_err(|e| e.reason)?;
    parse_value(&parsed, value).map_err(|e| format!("invalid {}: {e}", parsed.kind()))?;
    Ok(parsed.kind())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaf(key: &str, value: &str, ttl: Option<i64>) -> V2Key {
        V2Key {
            key: key.to_owned(),
            value: value.to_owned(),
            ttl,
        }
    }

    #[test]
    fn each_key_is_new_same_different_invalid_or_ephemeral() {
        let v2 = vec![
            leaf("/calico/v1/Ready", "true", None),
            leaf("/calico/v1/policy/tier/a/metadata", r#"{"order": 1}"#, None),
            leaf("/calico/v1/policy/tier/b/metadata", r#"{"order": 2}"#, None),
            leaf(
                "/calico/v1/policy/tier/c/metadata",
                r#"{"order": "x"}"#,
                None,
            ),
            leaf("/calico/v1/nonsense", "1", None),
            leaf("/calico/felix/v1/host/h1/status", "{}", Some(30)),
        ];
        let v3 = HashMap::from([
            ("/calico/v1/Ready".to_owned(), "true".to_owned()),
            (
                "/calico/v1/policy/tier/b/metadata".to_owned(),
                r#"{"order": 3}"#.to_owned(),
            ),
        ]);
        let plan = Plan::new(v2, &v3);
        let actions: Vec<Action> = plan.keys.iter().map(|(_, _, a)| *a).collect();
        assert_eq!(actions, [Action::Same, Action::New, Action::Different]);
        assert_eq!(plan.counts["tier metadata"].new, 1);
        assert_eq!(plan.counts["tier metadata"].different, 1);
        assert_eq!(plan.counts["ready flag"].same, 1);
        let invalid: Vec<&str> = plan.invalid.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(
            invalid,
            ["/calico/v1/policy/tier/c/metadata", "/calico/v1/nonsense"]
        );
        assert!(
            plan.invalid[0].reason.contains("order"),
            "{:?}",
            plan.invalid
        );
        assert_eq!(plan.with_ttl.len(), 1);
        let different: Vec<_> = plan.different().collect();
        assert_eq!(
            different,
            [(
                "/calico/v1/policy/tier/b/metadata",
                r#"{"order": 2}"#,
                r#"{"order": 3}"#
            )]
        );
    }
}
