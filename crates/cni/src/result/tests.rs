use super::*;

fn sample() -> CniResult {
    CniResult {
        interfaces: vec![
            Interface {
                name: "cali0123456789a".into(),
                mac: Some("ee:ee:ee:ee:ee:ee".into()),
                sandbox: None,
            },
            Interface {
                name: "eth0".into(),
                mac: Some("aa:bb:cc:dd:ee:ff".into()),
                sandbox: Some("/run/netns/x".into()),
            },
        ],
        ips: vec![
            IpConfig {
                address: "10.0.0.5/32".parse().unwrap(),
                gateway: None,
                interface: Some(1),
            },
            IpConfig {
                address: "fd00::5/128".parse().unwrap(),
                gateway: Some("fe80::1".parse().unwrap()),
                interface: Some(1),
            },
        ],
        routes: vec![
            RouteConfig {
                dst: "0.0.0.0/0".parse().unwrap(),
                gw: None,
            },
            RouteConfig {
                dst: "::/0".parse().unwrap(),
                gw: Some("fe80::1".parse().unwrap()),
            },
        ],
        dns: json!({"nameservers": ["10.96.0.10"], "search": ["svc.cluster.local"]}),
    }
}

/// The bytes the plugin printed before results were serde types.
const OUTPUT_040: &str = r#"{"cniVersion":"0.4.0","ips":[{"address":"10.0.0.5/32","version":"4","interface":1},{"address":"fd00::5/128","version":"6","gateway":"fe80::1","interface":1}],"interfaces":[{"name":"cali0123456789a","mac":"ee:ee:ee:ee:ee:ee"},{"name":"eth0","mac":"aa:bb:cc:dd:ee:ff","sandbox":"/run/netns/x"}],"routes":[{"dst":"0.0.0.0/0"},{"dst":"::/0","gw":"fe80::1"}],"dns":{"nameservers":["10.96.0.10"],"search":["svc.cluster.local"]}}"#;
const OUTPUT_100: &str = r#"{"cniVersion":"1.0.0","ips":[{"address":"10.0.0.5/32","interface":1},{"address":"fd00::5/128","gateway":"fe80::1","interface":1}],"interfaces":[{"name":"cali0123456789a","mac":"ee:ee:ee:ee:ee:ee"},{"name":"eth0","mac":"aa:bb:cc:dd:ee:ff","sandbox":"/run/netns/x"}],"routes":[{"dst":"0.0.0.0/0"},{"dst":"::/0","gw":"fe80::1"}],"dns":{"nameservers":["10.96.0.10"],"search":["svc.cluster.local"]}}"#;

#[test]
fn output_is_unchanged_byte_for_byte() {
    let result = sample();
    assert_eq!(result.to_json("0.4.0").to_string(), OUTPUT_040);
    assert_eq!(result.to_json("1.0.0").to_string(), OUTPUT_100);
    // Printed from the typed value directly, too.
    assert_eq!(
        serde_json::to_string(&result.to_040("0.4.0")).unwrap(),
        OUTPUT_040
    );
    assert_eq!(
        serde_json::to_string(&result.to_100("1.0.0")).unwrap(),
        OUTPUT_100
    );
    // What calico-ipam prints: no interfaces, routes or index; dns always an object.
    let ipam = CniResult {
        ips: vec![IpConfig {
            address: "10.0.0.5/32".parse().unwrap(),
            gateway: None,
            interface: None,
        }],
        ..CniResult::default()
    };
    assert_eq!(
        ipam.to_json("0.3.1").to_string(),
        r#"{"cniVersion":"0.3.1","ips":[{"address":"10.0.0.5/32","version":"4"}],"dns":{}}"#
    );
    assert_eq!(
        ipam.to_json("1.0.0").to_string(),
        r#"{"cniVersion":"1.0.0","ips":[{"address":"10.0.0.5/32"}],"dns":{}}"#
    );
}

#[test]
fn a_result_of_each_version_round_trips() {
    let result = sample();
    for version in crate::spec::SUPPORTED_VERSIONS {
        let written = result.to_json(version);
        assert_eq!(written["cniVersion"], version);
        assert_eq!(
            written["ips"][0].get("version").is_some(),
            version != "1.0.0",
            "{version}: {written}"
        );
        let back = CniResult::from_json(&written, "result").unwrap();
        assert_eq!(back, result, "{version}");
    }
    // The per-version types themselves.
    let typed: Result040 = serde_json::from_str(OUTPUT_040).unwrap();
    assert_eq!(typed.cni_version, "0.4.0");
    assert_eq!(typed.ips[1].version, None, "version is written, never read");
    assert_eq!(CniResult::from(typed.clone()), result);
    assert_eq!(
        serde_json::to_string(&result.to_040(&typed.cni_version)).unwrap(),
        OUTPUT_040
    );
    let typed: Result100 = serde_json::from_str(OUTPUT_100).unwrap();
    assert_eq!(typed, result.to_100("1.0.0"));
    assert_eq!(serde_json::to_string(&typed).unwrap(), OUTPUT_100);
}

#[test]
fn a_0_4_0_result_is_written_as_1_0_0() {
    let prev = json!({
        "cniVersion": "0.4.0",
        "interfaces": [{"name": "eth0", "sandbox": "/run/netns/x"}],
        "ips": [
            {"version": "4", "address": "10.0.0.5/32", "gateway": "10.0.0.1", "interface": 0},
            {"version": "6", "address": "fd00::5/128"}
        ],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dns": {"nameservers": ["10.96.0.10"]}
    });
    let result = CniResult::from_json(&prev, "prevResult").unwrap();
    assert_eq!(
        result.to_json("1.0.0"),
        json!({
            "cniVersion": "1.0.0",
            "ips": [
                {"address": "10.0.0.5/32", "gateway": "10.0.0.1", "interface": 0},
                {"address": "fd00::5/128"}
            ],
            "interfaces": [{"name": "eth0", "sandbox": "/run/netns/x"}],
            "routes": [{"dst": "0.0.0.0/0"}],
            "dns": {"nameservers": ["10.96.0.10"]}
        })
    );
}

#[test]
fn unknown_fields_and_any_version_are_tolerated() {
    let prev = json!({
        "cniVersion": "1.0.0",
        "interfaces": [{"name": "eth0", "mtu": 1500, "socketPath": "/x"}],
        // A 1.0.0 reader ignores a 0.4.0-style version, like any other unknown field.
        "ips": [{"version": 4, "address": "10.0.0.5/32", "interface": 0, "extra": [1]}],
        "routes": [{"dst": "0.0.0.0/0", "mtu": 1400, "advmss": 1360}],
        "extra": {"anything": true}
    });
    let result = CniResult::from_json(&prev, "prevResult").unwrap();
    assert_eq!(result.interfaces[0].name, "eth0");
    assert_eq!(result.ips[0].interface, Some(0));
    assert_eq!(result.routes.len(), 1);
    assert_eq!(result.dns, json!({}), "dns defaults to an empty object");
    // No version, or one that is not a string, or nulls for the lists: read as before.
    for prev in [
        json!({"ips": [{"address": "10.0.0.5/32"}]}),
        json!({"cniVersion": 5, "ips": [{"address": "10.0.0.5/32"}], "routes": null, "interfaces": null}),
        json!({"cniVersion": "9.9.9", "ips": [{"address": "10.0.0.5/32", "gateway": null}]}),
    ] {
        let result = CniResult::from_json(&prev, "prevResult").unwrap();
        assert_eq!(result.ips.len(), 1, "{prev}");
    }
}

#[test]
fn bad_results_are_errors_naming_the_field() {
    let cases = [
        (json!(5), "not a JSON object"),
        (json!([]), "not a JSON object"),
        (json!({"interfaces": 5}), "interfaces is not a list"),
        (json!({"interfaces": [5]}), "interfaces[0].name is missing"),
        (json!({"interfaces": [[]]}), "interfaces[0].name is missing"),
        (
            json!({"interfaces": [{"name": null}]}),
            "interfaces[0].name is missing",
        ),
        (
            json!({"interfaces": [{"name": 5}]}),
            "interfaces[0].name is not a string",
        ),
        (
            json!({"interfaces": [{"name": "a", "mac": 5}]}),
            "interfaces[0].mac is not a string",
        ),
        (
            json!({"interfaces": [{"name": "a", "sandbox": []}]}),
            "interfaces[0].sandbox is not a string",
        ),
        (json!({"ips": {}}), "ips is not a list"),
        (json!({"ips": [{}]}), "ips[0].address is missing"),
        (
            json!({"ips": [{"address": "10.0.0.1/32"}, 7]}),
            "ips[1].address is missing",
        ),
        (
            json!({"ips": [{"address": 1}]}),
            "ips[0].address is not a string",
        ),
        (
            json!({"ips": [{"address": "x"}]}),
            r#"ips[0].address "x" is not an address/prefix"#,
        ),
        (
            json!({"ips": [{"address": "10.0.0.1"}]}),
            r#"ips[0].address "10.0.0.1" is not an address/prefix"#,
        ),
        (
            json!({"ips": [{"address": "10.0.0.1/32", "gateway": "g"}]}),
            r#"ips[0].gateway "g" is not an address"#,
        ),
        (
            json!({"ips": [{"address": "10.0.0.1/32", "gateway": 3}]}),
            "ips[0].gateway is not a string",
        ),
        (
            json!({"ips": [{"address": "10.0.0.1/32", "interface": -1}]}),
            "ips[0].interface is not an index",
        ),
        (
            json!({"ips": [{"address": "10.0.0.1/32", "interface": 1.0}]}),
            "ips[0].interface is not an index",
        ),
        (
            json!({"ips": [{"address": "10.0.0.1/32", "interface": "0"}]}),
            "ips[0].interface is not an index",
        ),
        (
            json!({"cniVersion": "1.0.0", "ips": [{"address": "x"}]}),
            r#"ips[0].address "x" is not an address/prefix"#,
        ),
        (json!({"routes": "x"}), "routes is not a list"),
        (json!({"routes": [{}]}), "routes[0].dst is missing"),
        (
            json!({"routes": [{"dst": "x"}]}),
            r#"routes[0].dst "x" is not a network"#,
        ),
        (
            json!({"routes": [{"dst": "0.0.0.0/0", "gw": "x"}]}),
            r#"routes[0].gw "x" is not an address"#,
        ),
        (
            json!({"routes": [{"dst": "0.0.0.0/0", "gw": true}]}),
            "routes[0].gw is not a string",
        ),
    ];
    for (value, reason) in cases {
        let e = CniResult::from_json(&value, "prevResult").unwrap_err();
        assert_eq!(e.code, code::DECODING_FAILURE, "{value}");
        assert_eq!(e.msg, format!("prevResult: {reason}"), "{value}");
    }
}

#[test]
fn error_objects_leave_out_empty_details() {
    let e = CniError::new(code::INVALID_CONFIG, "name: must not be empty");
    assert_eq!(
        e.to_json("0.3.1").to_string(),
        r#"{"cniVersion":"0.3.1","code":7,"msg":"name: must not be empty"}"#
    );
    let e = e.with_details("more");
    assert_eq!(
        e.to_json("1.0.0").to_string(),
        r#"{"cniVersion":"1.0.0","code":7,"msg":"name: must not be empty","details":"more"}"#
    );
    let back: ErrorObject = serde_json::from_value(e.to_json("1.0.0")).unwrap();
    assert_eq!(back, e.to_object("1.0.0"));
    assert_eq!(
        crate::spec::version_json("0.4.0").to_string(),
        r#"{"cniVersion":"0.4.0","supportedVersions":["0.3.0","0.3.1","0.4.0","1.0.0"]}"#
    );
}

proptest::proptest! {
    /// Any JSON document (weighted towards result-like ones) is a result or an error
    /// object, never a panic; whatever is read writes and reads back the same.
    #[test]
    fn reading_any_json_never_panics(value in any_json()) {
        if let Ok(result) = CniResult::from_json(&value, "prevResult") {
            for version in crate::spec::SUPPORTED_VERSIONS {
                let back = CniResult::from_json(&result.to_json(version), "result");
                proptest::prop_assert_eq!(back.as_ref().map(|r| &r.ips), Ok(&result.ips));
            }
        }
    }
}

fn any_json() -> impl proptest::strategy::Strategy<Value = Value> {
    use proptest::prelude::*;
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| json!(f)),
        prop::sample::select(vec![
            "10.0.0.1/32",
            "fd00::1/128",
            "10.0.0.1",
            "0.0.0.0/0",
            "eth0",
            "1.0.0",
            "0.4.0",
        ])
        .prop_map(Value::from),
        "\\PC{0,8}".prop_map(Value::from),
    ];
    let keys = prop::sample::select(vec![
        "cniVersion",
        "interfaces",
        "ips",
        "routes",
        "dns",
        "name",
        "mac",
        "sandbox",
        "address",
        "gateway",
        "interface",
        "version",
        "dst",
        "gw",
        "other",
    ]);
    leaf.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((keys.clone(), inner), 0..6).prop_map(|pairs| {
                Value::Object(pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
            }),
        ]
    })
}
