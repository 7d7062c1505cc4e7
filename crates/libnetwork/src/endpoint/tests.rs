use super::*;

use crate::server::parse;

fn pools() -> Vec<IpPool> {
    vec![calico_model::from_json(r#"{"cidr": "10.65.0.0/16"}"#).unwrap()]
}

const EP: &str = "d594538e6c7555095dd637dff4235631d8f2f4370e020b727f5f899696519a93";

fn network(body: &str) -> CreateNetworkRequest {
    parse("NetworkDriver.CreateNetwork", body.as_bytes()).unwrap()
}

#[test]
fn networks_take_calico_pools_and_no_options() {
    let ok = r#"{"NetworkID":"42dd","Options":{"com.docker.network.enable_ipv6":false,"com.docker.network.generic":{}},"IPv4Data":[{"AddressSpace":"CalicoLocal","Gateway":"0.0.0.0/0","Pool":"0.0.0.0/0"}],"IPv6Data":[]}"#;
    check_network(&network(ok), &pools()).unwrap();
    let subnet = ok.replace(r#""Pool":"0.0.0.0/0""#, r#""Pool":"10.65.1.0/24""#);
    check_network(&network(&subnet), &pools()).unwrap();
    let foreign = ok.replace(r#""Pool":"0.0.0.0/0""#, r#""Pool":"172.18.0.0/16""#);
    let err = check_network(&network(&foreign), &pools())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("Pool \"172.18.0.0/16\": not inside an enabled Calico pool"),
        "{err}"
    );
    let opt = ok.replace(
        r#""com.docker.network.generic":{}"#,
        r#""com.docker.network.generic":{"mtu":"1400"}"#,
    );
    let err = check_network(&network(&opt), &pools())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("Options \"mtu\": unknown driver option"),
        "{err}"
    );
}

fn endpoint(interface: &str) -> Result<EndpointSpec, DriverError> {
    let body = format!(
        r#"{{"NetworkID":"n","EndpointID":"{EP}","Interface":{interface},"Options":{{}}}}"#
    );
    EndpointSpec::parse(&parse("NetworkDriver.CreateEndpoint", body.as_bytes()).unwrap())
}

#[test]
fn endpoints_need_an_ipv4_address() {
    let spec = endpoint(r#"{"Address":"10.65.0.5/32","AddressIPv6":"","MacAddress":""}"#).unwrap();
    assert_eq!(spec.addresses, ["10.65.0.5".parse::<IpAddr>().unwrap()]);
    assert_eq!((spec.mac, spec.families()), (None, vec![Family::V4]));
    let spec = endpoint(
        r#"{"Address":"10.65.0.5/16","AddressIPv6":"fd80::5/64","MacAddress":"ee:ee:ee:ee:ee:01"}"#,
    )
    .unwrap();
    assert_eq!(spec.addresses.len(), 2);
    assert_eq!(spec.mac, Some(MacAddr([0xee, 0xee, 0xee, 0xee, 0xee, 1])));
    assert_eq!(spec.families(), vec![Family::V4, Family::V6]);
    let err = endpoint(r#"{"Address":""}"#).unwrap_err().to_string();
    assert!(
        err.contains("Interface.Address \"\": no IPv4 address"),
        "{err}"
    );
    let err = endpoint(r#"{"Address":"10.65.0.5/32","MacAddress":"zz"}"#)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("Interface.MacAddress \"zz\": invalid MAC address"),
        "{err}"
    );
}

#[test]
fn malformed_bodies_name_the_field() {
    let err = parse::<crate::api::JoinRequest>(
        "NetworkDriver.Join",
        br#"{"NetworkID":"n","EndpointID":5}"#,
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.starts_with("NetworkDriver.Join: malformed request: EndpointID:"),
        "{err}"
    );
    let err = parse::<crate::api::JoinRequest>("NetworkDriver.Join", b"not json")
        .unwrap_err()
        .to_string();
    assert!(err.contains("malformed request"), "{err}");
}

#[test]
fn the_endpoint_json_follows_seed_003() {
    let key = crate::names::endpoint_key("h1", "e4da01fbfec8", EP).unwrap();
    let mac = calico_model::MacAddr([0xee, 0, 0, 0, 0, 1]);
    let addresses = ["10.65.0.5".parse().unwrap()];
    let written = crate::endpoint::endpoint("calid594538e6c7", mac, "net1", &addresses);
    let json = DriverError::value_of(&key, &written).unwrap();
    let value = calico_model::parse_value(&key, &json).unwrap();
    assert!(format!("{value:?}").contains("calid594538e6c7"));
    assert_eq!(
        json,
        r#"{"state":"active","name":"calid594538e6c7","mac":"ee:00:00:00:00:01","profile_ids":["net1"],"ipv4_nets":["10.65.0.5/32"]}"#
    );
    let bad = crate::endpoint::endpoint("bad/name", mac, "net1", &[]);
    let error = DriverError::value_of(&key, &bad).unwrap_err().to_string();
    assert!(error.starts_with(&format!("{key}: name")), "{error}");
}

fn workload(json: &str) -> WorkloadEndpoint {
    calico_model::from_json(json).unwrap()
}

#[test]
fn a_sandbox_gets_each_familys_routes_once() {
    let v4 = EndpointSpec {
        addresses: vec!["10.65.0.5".parse().unwrap()],
        mac: None,
    };
    let dual = EndpointSpec {
        addresses: vec!["10.65.0.6".parse().unwrap(), "fd80::6".parse().unwrap()],
        mac: None,
    };
    let v4_member = workload(
        r#"{"state":"active","name":"calia","mac":"ee:00:00:00:00:01","profile_ids":["a"],"ipv4_nets":["10.65.0.5/32"]}"#,
    );
    let all = SandboxRoutes { v4: true, v6: true };
    assert_eq!(SandboxRoutes::needed(&dual, &[]), all);
    assert_eq!(
        SandboxRoutes::needed(&v4, &[]),
        SandboxRoutes {
            v4: true,
            v6: false
        }
    );
    assert_eq!(
        SandboxRoutes::needed(&dual, &[v4_member]),
        SandboxRoutes {
            v4: false,
            v6: true
        }
    );
    let gateway = "fe80::ecee:eeff:feee:eeee".parse().unwrap();
    let first =
        serde_json::to_string(&join_response("tmpd594538e6c7", all, Some(gateway))).unwrap();
    assert_eq!(
        first,
        r#"{"InterfaceName":{"SrcName":"tmpd594538e6c7","DstPrefix":"eth"},"StaticRoutes":[{"Destination":"169.254.1.1/32","RouteType":1},{"Destination":"0.0.0.0/0","RouteType":0,"NextHop":"169.254.1.1"},{"Destination":"::/0","RouteType":0,"NextHop":"fe80::ecee:eeff:feee:eeee"}],"DisableGatewayService":true}"#
    );
    assert!(
        join_response("tmpd594538e6c7", SandboxRoutes::default(), None)
            .static_routes
            .is_empty()
    );
}
