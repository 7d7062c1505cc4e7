use super::*;
use crate::value::parse_value;

/// The datastore holding `pairs` (key, JSON).
fn spaces(pairs: &[(&str, &str)]) -> Spaces {
    let mut spaces = Spaces::default();
    for (key, raw) in pairs {
        let (key, value) = parsed(key, raw);
        spaces.record(&key, Some(&value));
    }
    spaces
}

fn parsed(key: &str, raw: &str) -> (Key, Value) {
    let key = Key::parse(key).unwrap();
    let value = parse_value(&key, raw).unwrap_or_else(|e| panic!("{key}: {e}"));
    (key, value)
}

/// The problems of writing `raw` at `key` into `spaces`.
fn writing(spaces: &Spaces, key: &str, raw: &str) -> Vec<String> {
    let (key, value) = parsed(key, raw);
    let mut after = spaces.clone();
    after.record(&key, Some(&value));
    after.problems(&key, Some(&value))
}

fn deleting(spaces: &Spaces, key: &str) -> Vec<String> {
    let key = Key::parse(key).unwrap();
    let mut after = spaces.clone();
    after.record(&key, None);
    after.problems(&key, None)
}

const CONFIG: (&str, &str) = (
    "/calico/v1/address_space/config",
    r#"{"translation_prefix": "fd5a:5a5a::/80"}"#,
);
const A: (&str, &str) = ("/calico/v1/address_space/space/a", r#"{"id": 1}"#);
const B: (&str, &str) = ("/calico/v1/address_space/space/b", r#"{"id": 2}"#);
const SHARED_POOL: (&str, &str) = (
    "/calico/v1/ipam/v4/pool/10.65.0.0-16",
    r#"{"cidr": "10.65.0.0/16"}"#,
);
const A_POOL: &str = "/calico/v1/ipam/space/a/v4/pool/10.0.0.0-24";

fn wep(space: &str, addr: &str) -> String {
    format!(
        r#"{{"state": "active", "name": "tap1", "profile_ids": [], "ipv4_nets": ["{addr}/32"], "address_space": "{space}"}}"#
    )
}

const WEP: &str = "/calico/v1/host/h1/workload/openstack/vm1/endpoint/port1";

fn one(problems: Vec<String>, part: &str) {
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].contains(part),
        "{:?} lacks {part:?}",
        problems[0]
    );
}

#[test]
fn two_spaces_use_one_range_but_one_space_does_not_overlap_itself() {
    let b_pool = "/calico/v1/ipam/space/b/v4/pool/10.0.0.0-24";
    let world = spaces(&[
        CONFIG,
        A,
        B,
        SHARED_POOL,
        (A_POOL, r#"{"cidr": "10.0.0.0/24"}"#),
    ]);
    assert_eq!(
        writing(&world, b_pool, r#"{"cidr": "10.0.0.0/24"}"#),
        Vec::<String>::new()
    );
    one(
        writing(
            &world,
            "/calico/v1/ipam/space/a/v4/pool/10.0.0.128-25",
            r#"{"cidr": "10.0.0.128/25"}"#,
        ),
        "pool 10.0.0.128/25 of space \"a\" overlaps pool 10.0.0.0/24 of space \"a\"",
    );
    // The shared space is one space too.
    one(
        writing(
            &world,
            "/calico/v1/ipam/v4/pool/10.65.1.0-24",
            r#"{"cidr": "10.65.1.0/24"}"#,
        ),
        "the shared pool 10.65.1.0/24 overlaps the shared pool 10.65.0.0/16",
    );
}

#[test]
fn a_private_range_stays_outside_the_shared_pools() {
    let world = spaces(&[CONFIG, A, SHARED_POOL]);
    one(
        writing(
            &world,
            "/calico/v1/ipam/space/a/v4/pool/10.65.3.0-24",
            r#"{"cidr": "10.65.3.0/24"}"#,
        ),
        "pool 10.65.3.0/24 of space \"a\" overlaps the shared pool 10.65.0.0/16",
    );
    let world = spaces(&[CONFIG, A, (A_POOL, r#"{"cidr": "10.0.0.0/24"}"#)]);
    one(
        writing(
            &world,
            "/calico/v1/ipam/v4/pool/10.0.0.0-8",
            r#"{"cidr": "10.0.0.0/8"}"#,
        ),
        "the shared pool 10.0.0.0/8 overlaps pool 10.0.0.0/24 of space \"a\"",
    );
    let world = spaces(&[CONFIG, A, SHARED_POOL]);
    one(
        writing(&world, WEP, &wep("a", "10.65.0.9")),
        "10.65.0.9 of space \"a\" is in the shared pool 10.65.0.0/16",
    );
    assert!(writing(&world, WEP, &wep("a", "10.0.0.9")).is_empty());
    assert!(writing(&world, WEP, &wep("shared", "10.65.0.9")).is_empty());
}

#[test]
fn what_names_a_space_needs_it_to_exist() {
    let world = spaces(&[CONFIG, A]);
    one(
        writing(&world, WEP, &wep("nope", "10.0.0.9")),
        "no address space \"nope\" exists",
    );
    one(
        writing(
            &world,
            "/calico/v1/ipam/space/nope/v4/pool/10.0.0.0-24",
            r#"{"cidr": "10.0.0.0/24"}"#,
        ),
        "no address space \"nope\"",
    );
    one(
        writing(
            &world,
            "/calico/v1/address_space/project/p1",
            r#"{"address_space": "nope"}"#,
        ),
        "no address space \"nope\"",
    );
    assert!(
        writing(
            &world,
            "/calico/v1/address_space/project/p1",
            r#"{"address_space": "shared"}"#
        )
        .is_empty()
    );
    let used = spaces(&[
        CONFIG,
        A,
        (A_POOL, r#"{"cidr": "10.0.0.0/24"}"#),
        (
            "/calico/v1/address_space/network/n1",
            r#"{"address_space": "a"}"#,
        ),
        (WEP, &wep("a", "10.0.0.5")),
    ]);
    one(
        deleting(&used, A.0),
        "address space \"a\" is still used by pool 10.0.0.0/24, network n1, workload endpoint h1/workload/openstack/vm1/endpoint/port1",
    );
    assert!(deleting(&world, A.0).is_empty());
}

#[test]
fn ids_fit_the_prefix_and_are_unique() {
    let world = spaces(&[CONFIG, A]);
    one(
        writing(&world, B.0, r#"{"id": 70000}"#),
        "id: 70000 is outside the room of the translation prefix fd5a:5a5a::/80",
    );
    one(
        writing(&world, B.0, r#"{"id": 1}"#),
        "id: 1 is also the ID of space \"a\"",
    );
    one(
        writing(&spaces(&[]), A.0, A.1),
        "no translation prefix is configured",
    );
    let big = spaces(&[CONFIG, A, (B.0, r#"{"id": 300}"#)]);
    one(
        writing(
            &big,
            CONFIG.0,
            r#"{"translation_prefix": "fd5a:5a5a::/90"}"#,
        ),
        "space \"b\"'s ID 300 is outside the room",
    );
    one(deleting(&world, CONFIG.0), "still used by address spaces a");
    assert!(deleting(&spaces(&[CONFIG]), CONFIG.0).is_empty());
}

#[test]
fn shared_ipv6_pools_stay_outside_the_translation_prefix() {
    let world = spaces(&[CONFIG]);
    one(
        writing(
            &world,
            "/calico/v1/ipam/v6/pool/fd5a:5a5a::-64",
            r#"{"cidr": "fd5a:5a5a::/64"}"#,
        ),
        "overlaps the translation prefix fd5a:5a5a::/80",
    );
    let v6 = spaces(&[(
        "/calico/v1/ipam/v6/pool/fd5a:5a5a::-64",
        r#"{"cidr": "fd5a:5a5a::/64"}"#,
    )]);
    one(
        writing(&v6, CONFIG.0, CONFIG.1),
        "overlaps the shared pool fd5a:5a5a::/64",
    );
}
