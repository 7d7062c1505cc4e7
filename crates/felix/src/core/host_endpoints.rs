//! Host endpoints given only by their expected addresses apply to the interface holding one
//! of them (the calculator resolves them from the addresses read); here each resolution is
//! said once, when it changes.

use std::collections::BTreeMap;

use calico_calc::{Calculator, EndpointKey};

/// The interfaces each local host endpoint given by address resolves to, logging those that
/// changed since `before`.
pub(super) fn resolve(
    calc: &Calculator,
    before: &BTreeMap<EndpointKey, Vec<String>>,
) -> BTreeMap<EndpointKey, Vec<String>> {
    let mut resolved = BTreeMap::new();
    for key in calc.state().endpoints.keys() {
        let Some(endpoint) = calc.cluster().endpoints.get(key) else {
            continue;
        };
        if !matches!(key, EndpointKey::Host(_)) || endpoint.interface.is_some() {
            continue;
        }
        let holders: Vec<String> = calc
            .interfaces_of(key)
            .into_iter()
            .map(str::to_owned)
            .collect();
        if before.get(key) != Some(&holders) {
            say(key, &endpoint.addresses, &holders);
        }
        resolved.insert(key.clone(), holders);
    }
    resolved
}

fn say(key: &EndpointKey, addresses: &impl std::fmt::Debug, holders: &[String]) {
    match holders {
        [] => tracing::warn!(
            endpoint = %key,
            ?addresses,
            "no interface holds the host endpoint's expected addresses: no policy applies to \
             it and it is reported down"
        ),
        [one] => tracing::info!(endpoint = %key, interface = one, "host endpoint found by address"),
        [first, ..] => tracing::warn!(
            endpoint = %key,
            interfaces = ?holders,
            "the host endpoint's expected addresses are on several interfaces; it applies to \
             {first} only (give it a \"name\" to choose)"
        ),
    }
}
