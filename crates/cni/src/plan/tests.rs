use std::collections::BTreeMap;

use calico_plumbing::{Placement, Undo as KernelUndo};

use super::*;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// A request for `ifname` of container `c1` on the network `net`, IPAM `ipam_type`.
fn request_with(ifname: &str, ipam_type: &str) -> Request {
    let vars: BTreeMap<String, String> = [
        ("CNI_COMMAND", "ADD"),
        ("CNI_CONTAINERID", "c1"),
        ("CNI_NETNS", "/run/netns/c1"),
        ("CNI_IFNAME", ifname),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let env = Env::parse(&vars).unwrap();
    let conf = format!(
        r#"{{"cniVersion": "1.0.0", "name": "net", "type": "calico", "ipam": {{"type": "{ipam_type}"}}}}"#
    );
    let conf = NetConf::parse(conf.as_bytes()).unwrap();
    let workload = Workload::from_env(&env, "node1").unwrap();
    Request::new(&env, &conf, workload).unwrap()
}

fn request() -> Request {
    request_with("eth0", "calico-ipam")
}

const MAC: MacAddr = MacAddr([0xee, 0xee, 0xee, 0xee, 0xee, 0xee]);
const CONTAINER_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x05]);

/// What each step returns in these tests.
fn outcome(step: &Step) -> Outcome {
    match step {
        Step::Claim => Outcome::Claimed(vec![ip("10.0.0.5"), ip("fd00::5")]),
        Step::Plumb(_) => Outcome::Plumbed(Ends {
            host: Some(MAC),
            container: Some(CONTAINER_MAC),
        }),
        Step::Write { .. } => Outcome::Written,
    }
}

/// ADD driven through its plan with each step succeeding: the steps in order, and the result.
fn run_add(request: &Request, requested: &Requested) -> (Vec<Planned>, CniResult) {
    let mut progress = Progress::default();
    let mut steps = Vec::new();
    loop {
        match next(request, requested, &progress).unwrap() {
            Next::Do(planned) => {
                progress.record(outcome(&planned.step));
                steps.push(planned);
            }
            Next::ReadPlacement { addresses } => {
                assert_eq!(addresses, [ip("10.0.0.5"), ip("fd00::5")]);
                progress.placement = Some(RoutePlacement {
                    v4: Placement::FIRST,
                    v6: Placement::FIRST,
                });
            }
            Next::Done(result) => return (steps, result),
        }
    }
}

#[test]
fn add_claims_plumbs_and_writes_each_step_with_its_undo_and_crash_point() {
    let request = request();
    let (steps, result) = run_add(&request, &Requested::default());
    let veth = request.workload.veth_name();
    let key = "/calico/v1/host/node1/workload/cni/c1/endpoint/eth0";
    let summary: Vec<(&str, &Undo, fault::Step)> = steps
        .iter()
        .map(|p| {
            let name = match &p.step {
                Step::Claim => "claim",
                Step::Plumb(_) => "plumb",
                Step::Write { .. } => "write",
            };
            (name, &p.undo, p.crash_point)
        })
        .collect();
    let unplumb = Undo::Unplumb(vec![KernelUndo::DeleteLink { host: veth.clone() }]);
    let delete = Undo::DeleteEndpoint {
        key: key.to_owned(),
        revision: None,
    };
    assert_eq!(
        summary,
        [
            ("claim", &Undo::Release, fault::Step::Ipam),
            ("plumb", &unplumb, fault::Step::Veth),
            ("write", &delete, fault::Step::Endpoint),
        ]
    );
    let Step::Plumb(kernel) = &steps[1].step else {
        panic!("{:?}", steps[1]);
    };
    assert_eq!(
        (kernel.host.as_str(), kernel.container.as_str()),
        (veth.as_str(), "eth0")
    );
    let Step::Write { profile, endpoint } = &steps[2].step else {
        panic!("{:?}", steps[2]);
    };
    assert_eq!(endpoint.key, key);
    let written: serde_json::Value = serde_json::from_str(&endpoint.value).unwrap();
    assert_eq!(written["mac"], "02:00:00:00:00:05");
    assert_eq!(written["profile_ids"], json!(["net"]));
    assert_eq!(profile[0].key, "/calico/v1/policy/profile/net/tags");
    assert_eq!(result.interfaces[0].name, veth);
    assert_eq!(
        result.interfaces[0].mac.as_deref(),
        Some("ee:ee:ee:ee:ee:ee")
    );
    assert_eq!(
        result.interfaces[1].sandbox.as_deref(),
        Some("/run/netns/c1")
    );
    let routes: Vec<String> = result.routes.iter().map(|r| r.dst.to_string()).collect();
    assert_eq!(routes, ["0.0.0.0/0", "::/0"]);
}

/// The undo a failed ADD runs, last first, when the step at `failing` fails.
fn rollback(failing: usize) -> Vec<Undo> {
    let (steps, _) = run_add(&request(), &Requested::default());
    let owed = steps
        .iter()
        .enumerate()
        .take(failing + 1)
        .filter_map(|(i, p)| p.owed(i < failing));
    owed.rev().collect()
}

#[test]
fn a_failed_add_undoes_what_it_did_last_first_and_a_write_that_may_have_landed() {
    let veth = request().workload.veth_name();
    let unplumb = Undo::Unplumb(vec![KernelUndo::DeleteLink { host: veth }]);
    assert_eq!(rollback(0), [], "a failed claim claimed nothing");
    assert_eq!(
        rollback(1),
        [Undo::Release],
        "plumbing undoes its own steps"
    );
    assert_eq!(
        rollback(2),
        [
            Undo::DeleteEndpoint {
                key: request().key(),
                revision: None
            },
            unplumb,
            Undo::Release
        ]
    );
}

#[test]
fn static_addresses_the_ipam_plugin_did_not_honour_fail_after_the_claim() {
    let request = request_with("eth0", "host-local");
    let asked = Requested {
        ips: vec![ip("10.0.0.5"), ip("fd00::5")],
        mac: None,
    };
    let claimed = |addresses: &[&str]| Progress {
        claimed: Some(addresses.iter().map(|a| ip(a)).collect()),
        ..Progress::default()
    };
    let read = next(&request, &asked, &claimed(&["fd00::5", "10.0.0.5"])).unwrap();
    assert!(matches!(read, Next::ReadPlacement { .. }), "{read:?}");
    let e = next(&request, &asked, &claimed(&["10.0.0.9"])).unwrap_err();
    assert_eq!(e.code, code::IPAM);
    assert_eq!(
        e.msg,
        "IPAM plugin host-local assigned 10.0.0.9 but the runtime asked for 10.0.0.5,fd00::5 \
         (runtimeConfig.ips or CNI_ARGS IP=): it does not take static addresses"
    );
    assert!(next(&request, &Requested::default(), &claimed(&["10.0.0.9"])).is_ok());
}

#[test]
fn a_repeated_add_is_refused_before_any_step() {
    assert!(not_added_yet(&request(), false).is_ok());
    let e = not_added_yet(&request(), true).unwrap_err();
    assert_eq!(e.code, code::KERNEL);
    assert_eq!(
        e.msg,
        "eth0 already exists in /run/netns/c1: a repeated ADD? DEL the container first"
    );
}

/// What DEL finds after ADD crashed right after `crash_point`, or completed.
fn found_after(crash_point: fault::Step) -> Found {
    let request = request();
    let plumbed = crash_point != fault::Step::Ipam;
    let written = crash_point == fault::Step::Endpoint;
    Found {
        container: plumbed.then(Vec::new),
        host_side: plumbed,
        stored: Some(Stored {
            revision: written.then_some(7),
            holders: match written {
                true => vec![(ip("10.0.0.5"), Some(request.handle.clone()))],
                false => Vec::new(),
            },
        }),
    }
}

#[test]
fn del_after_a_crash_at_each_point_undoes_what_that_point_left() {
    let request = request();
    let container_side = Undo::RemoveContainerSide {
        netns: Netns::at_path("/run/netns/c1"),
        ifname: "eth0".to_owned(),
        rules: Vec::new(),
    };
    let host_side = Undo::DeleteHostSide {
        veth: request.workload.veth_name(),
    };
    let endpoint = Undo::DeleteEndpoint {
        key: request.key(),
        revision: Some(7),
    };
    let undo = |point| del_plan(&request, &found_after(point)).undo;
    assert_eq!(undo(fault::Step::Ipam), [Undo::Release]);
    assert_eq!(
        undo(fault::Step::Veth),
        [container_side.clone(), host_side.clone(), Undo::Release]
    );
    assert_eq!(
        undo(fault::Step::Endpoint),
        [endpoint, container_side, host_side, Undo::Release]
    );
    // A repeated DEL finds nothing but still releases the handle (it may hold what a
    // crashed ADD claimed after the first DEL read).
    assert_eq!(undo_of_nothing(&request), [Undo::Release]);
}

fn undo_of_nothing(request: &Request) -> Vec<Undo> {
    let nothing = Found {
        stored: Some(Stored::default()),
        ..Found::default()
    };
    del_plan(request, &nothing).undo
}

#[test]
fn del_of_an_endpoint_a_newer_container_owns_removes_only_the_container_side() {
    let request = request();
    let mut found = found_after(fault::Step::Endpoint);
    let stored = found.stored.as_mut().unwrap();
    stored.holders = vec![(ip("10.0.0.5"), Some("net.c2".to_owned()))];
    let plan = del_plan(&request, &found);
    assert!(plan.newer);
    assert!(matches!(
        plan.undo.as_slice(),
        [Undo::RemoveContainerSide { .. }, Undo::Release]
    ));
}

#[test]
fn del_releases_the_legacy_handle_s_addresses_of_another_interface() {
    let request = request_with("eth1", "calico-ipam");
    assert_eq!(request.legacy_handle, "net.c1");
    let found = Found {
        stored: Some(Stored {
            revision: Some(3),
            holders: vec![
                (ip("10.0.0.5"), Some("net.c1".to_owned())),
                (ip("10.0.0.6"), Some("net.c1.eth1".to_owned())),
            ],
        }),
        ..Found::default()
    };
    let plan = del_plan(&request, &found);
    assert_eq!(
        plan.undo.last(),
        Some(&Undo::ReleaseLegacy {
            addresses: vec![ip("10.0.0.5")]
        })
    );
}

#[test]
fn del_with_the_datastore_unread_removes_only_the_container_side() {
    let found = Found {
        container: Some(Vec::new()),
        host_side: true,
        stored: None,
    };
    let plan = del_plan(&request(), &found);
    assert!(
        matches!(plan.undo.as_slice(), [Undo::RemoveContainerSide { .. }]),
        "{plan:?}"
    );
    assert!(plan.undo.iter().all(Undo::in_kernel));
}
