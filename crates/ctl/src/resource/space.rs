//! The rules between address spaces, pools and endpoints (`calico_model::space::rules`), run
//! by `create`, `apply`, `replace` and `delete` on the datastore as the change would leave it:
//! what etcd holds of spaces and pools, with the file's writes recorded over it. A change that
//! touches none of them (a shared-space endpoint, a policy) costs no request.

use calico_datastore::{Datastore, TxnOp};
use calico_model::key::{Key, Prefix};
use calico_model::space::rules::Spaces;
use calico_model::{Value as Stored, parse_value};

use super::describe;
use super::store::Change;

/// A written key and its value (`None`: deleted).
type Write = (Key, Option<Stored>);

/// The keys a change writes (`None`: deleted), parsed with their values.
fn writes(change: &Change) -> Vec<Write> {
    let parse = |key: &str, raw: Option<&str>| {
        let key = Key::parse(key).ok()?;
        let value = match raw {
            Some(raw) => Some(parse_value(&key, raw).ok()?),
            None => None,
        };
        Some((key, value))
    };
    (change.ops.iter())
        .filter_map(|op| match op {
            TxnOp::Put { key, value } => parse(key, Some(value)),
            TxnOp::Delete { key } => parse(key, None),
        })
        .collect()
}

/// Whether the rules look at this write.
fn concerns(key: &Key, value: &Option<Stored>) -> bool {
    match (key, value) {
        (Key::WorkloadEndpoint(_), Some(Stored::WorkloadEndpoint(e))) => {
            e.private_space().is_some()
        }
        (Key::WorkloadEndpoint(_), _) => false,
        (
            Key::Pool { .. }
            | Key::SpacePool { .. }
            | Key::SpaceConfig
            | Key::AddressSpace { .. }
            | Key::SpaceMapping { .. },
            _,
        ) => true,
        _ => false,
    }
}

/// What to tell the operator when `changes` write an address space, its configuration, a
/// mapping or a space's pool: they are stored and checked, but nothing acts on them yet.
pub fn not_in_effect(changes: &[Change]) -> Option<&'static str> {
    let writes_space = changes.iter().flat_map(writes).any(|(key, value)| {
        value.is_some()
            && matches!(
                key,
                Key::AddressSpace { .. }
                    | Key::SpaceConfig
                    | Key::SpaceMapping { .. }
                    | Key::SpacePool { .. }
            )
    });
    writes_space.then_some(
        "warning: address spaces are stored and checked but not in effect yet: IPAM does not \
         allocate from a space's pools, calico-neutron does not read mappings, and Felix \
         refuses (status error) every endpoint in a private space (docs/address-spaces.md)",
    )
}

/// Refuses the changes if one breaks a rule between objects, naming every problem.
pub async fn check(store: &dyn Datastore, changes: &[Change]) -> anyhow::Result<()> {
    let planned: Vec<(&Change, Vec<Write>)> = changes.iter().map(|c| (c, writes(c))).collect();
    let relevant = |w: &[Write]| w.iter().any(|(k, v)| concerns(k, v));
    if !planned.iter().any(|(_, w)| relevant(w)) {
        return Ok(());
    }
    let deletes_space = (planned.iter().flat_map(|(_, w)| w))
        .any(|(k, v)| matches!(k, Key::AddressSpace { .. }) && v.is_none());
    let mut prefixes = vec![Prefix::AddressSpaces, Prefix::Pools];
    if deletes_space {
        prefixes.push(Prefix::Hosts);
    }
    let mut spaces = Spaces::default();
    for prefix in prefixes {
        for pair in store.list(&prefix.to_string()).await? {
            let Ok(key) = Key::parse(&pair.key) else {
                continue;
            };
            if let Ok(value) = parse_value(&key, &pair.value) {
                spaces.record(&key, Some(&value));
            }
        }
    }
    for (_, writes) in &planned {
        for (key, value) in writes {
            spaces.record(key, value.as_ref());
        }
    }
    let mut problems = Vec::new();
    for (change, writes) in &planned {
        for (key, value) in writes.iter().filter(|(k, v)| concerns(k, v)) {
            for problem in spaces.problems(key, value.as_ref()) {
                let what = describe(&change.id);
                problems.push(format!("document {} ({what}): {problem}", change.index));
            }
        }
    }
    if problems.is_empty() {
        return Ok(());
    }
    for problem in &problems {
        eprintln!("error: {problem}");
    }
    anyhow::bail!(
        "{} problems between address spaces, pools and endpoints; nothing was written",
        problems.len()
    )
}
