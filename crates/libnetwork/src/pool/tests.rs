use super::*;

fn pool(cidr: &str) -> IpPool {
    calico_model::from_json(&format!(r#"{{"cidr": "{cidr}"}}"#)).unwrap()
}

fn pools() -> Vec<IpPool> {
    vec![pool("10.65.0.0/16"), pool("fd80:24e2:f998:72d6::/64")]
}

fn request(body: &str) -> RequestPoolRequest {
    serde_json::from_str(body).unwrap()
}

#[test]
fn no_subnet_means_any_pool_and_no_gateway_request() {
    let r =
        request(r#"{"AddressSpace":"CalicoLocal","Pool":"","SubPool":"","Options":{},"V6":false}"#);
    let answer = request_pool(&r, &pools()).unwrap();
    assert_eq!(answer.pool_id, "CalicoPoolIPv4");
    assert_eq!(answer.pool, "0.0.0.0/0");
    assert_eq!(answer.data[GATEWAY_OPTION], "0.0.0.0/0");
    let r = request(r#"{"AddressSpace":"CalicoLocal","Pool":"","V6":true}"#);
    assert_eq!(
        request_pool(&r, &pools()).unwrap().pool_id,
        "CalicoPoolIPv6"
    );
}

#[test]
fn a_subnet_must_lie_inside_a_calico_pool() {
    let r = request(r#"{"AddressSpace":"CalicoLocal","Pool":"10.65.3.0/24"}"#);
    let answer = request_pool(&r, &pools()).unwrap();
    assert_eq!(
        (answer.pool_id.as_str(), answer.pool.as_str()),
        ("10.65.3.0/24", "10.65.3.0/24")
    );
    assert_eq!(
        PoolId::parse(&answer.pool_id).unwrap(),
        PoolId::Subnet("10.65.3.0/24".parse().unwrap())
    );
    let r = request(r#"{"AddressSpace":"CalicoLocal","Pool":"192.168.0.0/24"}"#);
    let err = request_pool(&r, &pools()).unwrap_err().to_string();
    assert!(
        err.contains("subnet 192.168.0.0/24 is not inside an enabled Calico pool"),
        "{err}"
    );
    assert!(err.contains("10.65.0.0/16"), "{err}");
}

#[test]
fn bad_pool_requests_are_refused_by_field() {
    let cases = [
        (
            r#"{"Pool":"10.65.0.0/33"}"#,
            "Pool \"10.65.0.0/33\": not a CIDR",
        ),
        (r#"{"Pool":"10.65.0.0/24","V6":true}"#, "not an IPv6 subnet"),
        (
            r#"{"Pool":"10.65.0.0/24","SubPool":"10.65.0.0/25"}"#,
            "--ip-range is not supported",
        ),
        (
            r#"{"Options":{"foo":"bar"}}"#,
            "Options \"foo\": unknown option",
        ),
        (r#"{"AddressSpace":"other"}"#, "AddressSpace \"other\""),
    ];
    for (body, expected) in cases {
        let err = request_pool(&request(body), &pools())
            .unwrap_err()
            .to_string();
        assert!(err.contains(expected), "{body}: {err}");
    }
    let err = request_pool(&request("{}"), &[]).unwrap_err().to_string();
    assert!(err.contains("no enabled IPv4 Calico pool"), "{err}");
}

fn address(body: &str) -> Result<AddressWanted, DriverError> {
    address_wanted(&serde_json::from_str(body).unwrap())
}

#[test]
fn address_requests() {
    let any = PoolId::Any(IpVersion::V4);
    assert_eq!(
        address(r#"{"PoolID":"CalicoPoolIPv4","Address":"","Options":null}"#).unwrap(),
        AddressWanted::Any(any)
    );
    assert_eq!(
        address(r#"{"PoolID":"10.65.3.0/24","Address":"10.65.3.7"}"#).unwrap(),
        AddressWanted::Exactly(
            PoolId::Subnet("10.65.3.0/24".parse().unwrap()),
            "10.65.3.7".parse().unwrap()
        )
    );
    let gateway = r#"{"PoolID":"CalicoPoolIPv4","Address":"","Options":{"RequestAddressType":"com.docker.network.gateway"}}"#;
    assert_eq!(address(gateway).unwrap(), AddressWanted::Gateway(any));
    let cases = [
        (
            r#"{"PoolID":"10.65.3.0/24","Address":"10.65.4.1"}"#,
            "outside the network's pool 10.65.3.0/24",
        ),
        (
            r#"{"PoolID":"CalicoPoolIPv4","Address":"fd80::1"}"#,
            "outside the network's pool",
        ),
        (r#"{"PoolID":"nope","Address":""}"#, "PoolID \"nope\""),
        (
            r#"{"PoolID":"CalicoPoolIPv4","Address":"10.1"}"#,
            "not an IP address",
        ),
        (
            r#"{"PoolID":"CalicoPoolIPv4","Options":{"RequestAddressType":"com.docker.network.gateway"},"Address":"10.65.0.1"}"#,
            "--gateway is not supported",
        ),
        (
            r#"{"PoolID":"CalicoPoolIPv4","Options":{"x":"y"}}"#,
            "Options \"x\": unknown option",
        ),
    ];
    for (body, expected) in cases {
        let err = address(body).unwrap_err().to_string();
        assert!(err.contains(expected), "{body}: {err}");
    }
}

#[test]
fn assigned_addresses_are_host_routes() {
    assert_eq!(host_prefix("10.65.0.3".parse().unwrap()), "10.65.0.3/32");
    assert_eq!(host_prefix("fd80::3".parse().unwrap()), "fd80::3/128");
}
