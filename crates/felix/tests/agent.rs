//! calico-felix for real: etcd and Felix run inside a network namespace made for the test;
//! objects written with etcdctl show up (and go away) in that namespace's iptables and ipsets.

use std::fs::File;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use calico_testkit::{EtcdServer, NetNs};

const DB: &str = "/calico/v1/host/h1/workload/k8s/ns.db/endpoint/eth0";

/// A running Felix, killed on drop; its log is kept in a temp dir.
struct Felix {
    child: Child,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Felix {
    fn start(ns: &NetNs, etcd: &EtcdServer, env: &[(&str, String)]) -> Felix {
        let endpoints = [("FELIX_ETCDENDPOINTS", etcd.endpoint())];
        Felix::spawn(ns, &[&endpoints[..], env].concat())
    }

    /// Felix with only `env` saying where etcd is.
    fn spawn(ns: &NetNs, env: &[(&str, String)]) -> Felix {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("felix.log");
        let out = File::create(&log).unwrap();
        let child = Command::new("ip")
            .args([
                "netns",
                "exec",
                ns.name(),
                env!("CARGO_BIN_EXE_calico-felix"),
            ])
            .env("FELIX_FELIXHOSTNAME", "h1")
            .env("FELIX_IPTABLESREFRESHINTERVAL", "1")
            .env("FELIX_REPORTINGINTERVALSECS", "1")
            .env("FELIX_LOGFILEPATH", "none")
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("calico-felix starts");
        Felix {
            child,
            log,
            _dir: dir,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Felix {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls `check` until it holds, failing with `what` and Felix's log after 30 s.
fn eventually(felix: &Felix, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if check() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!(
        "timed out waiting for {what}\n--- felix log ---\n{}",
        felix.log()
    );
}

#[test]
fn felix_programs_what_etcd_says_and_repairs_drift() {
    let ns = NetNs::new("calico-felix");
    let etcd = EtcdServer::start_in_netns(ns.name());
    etcd.put(DB,
        r#"{"state": "active", "name": "calidb", "profile_ids": ["db"], "ipv4_nets": ["10.65.0.2/32"], "labels": {"role": "db"}}"#,
    );
    etcd.put(
        "/calico/v1/policy/profile/db/rules",
        r#"{"inbound_rules": [{"src_tag": "web", "action": "allow"}]}"#,
    );
    etcd.put("/calico/v1/config/InterfacePrefix", "cali");
    let logs = tempfile::tempdir().unwrap();
    let log_file = logs.path().join("calico/felix.log");
    let env = [
        ("FELIX_LOGFILEPATH", log_file.display().to_string()),
        ("FELIX_LOGSEVERITYFILE", "WARNING".to_owned()),
    ];
    let felix = Felix::start(&ns, &etcd, &env);
    let iptables = || ns.run_ok("iptables-save", &[], "");

    // Nothing is programmed until the datastore is ready.
    eventually(&felix, "wait-for-ready in the log", || {
        felix.log().contains("wait-for-ready")
    });
    assert!(!iptables().contains("cali-"), "programmed before Ready");
    assert!(
        felix
            .log()
            .contains("config InterfacePrefix = \"cali\" (etcd /calico/v1/config)"),
        "{}",
        felix.log()
    );

    etcd.put("/calico/v1/Ready", "true");
    eventually(&felix, "the db endpoint's chains", || {
        iptables().contains("-A cali-wi-calidb")
    });
    // The jumps from the kernel chains follow the chains within the same sync.
    eventually(&felix, "the FORWARD jump", || {
        iptables().contains("-A FORWARD -j cali-FORWARD")
    });

    // An update: a new profile rule shows up in the profile's chain.
    etcd.put(
        "/calico/v1/policy/profile/db/rules",
        r#"{"inbound_rules": [{"protocol": "tcp", "dst_ports": [5432], "action": "allow"}]}"#,
    );
    eventually(&felix, "the new rule", || {
        iptables().contains("--dports 5432")
    });

    // Drift: the jump from FORWARD is removed by someone; the refresh puts it back.
    ns.run_ok("iptables", &["-D", "FORWARD", "-j", "cali-FORWARD"], "");
    eventually(&felix, "the FORWARD jump repaired", || {
        iptables().contains("-A FORWARD -j cali-FORWARD")
    });
    eventually(&felix, "the repair logged", || {
        felix.log().contains("repaired dataplane drift")
    });
    // Drift inside one of our chains: the periodic check rewrites that chain.
    let stranger = [
        "-I",
        "cali-wi-calidb",
        "1",
        "-s",
        "192.0.2.99",
        "-j",
        "ACCEPT",
    ];
    ns.run_ok("iptables", &stranger, "");
    eventually(&felix, "the edited chain repaired", || {
        !iptables().contains("192.0.2.99")
    });
    assert!(iptables().contains("-A cali-wi-calidb"));

    // An invalid object is reported and treated as missing: the endpoint's chains go.
    etcd.put(
        DB,
        r#"{"state": "active", "name": "calidb", "ipv4_nets": ["10.65.0.2/24"]}"#,
    );
    eventually(&felix, "the validation warning", || {
        felix
            .log()
            .contains(&format!("Validation failed for {DB}, treating as missing"))
    });
    eventually(&felix, "the invalid endpoint's chains removed", || {
        !iptables().contains("cali-wi-calidb")
    });
    // Each invalid update is logged exactly once (one line naming the key as treated as
    // missing, whoever — calculator or agent — noticed). A second invalid value, then a valid
    // one: once the valid one shows, both invalid updates have been handled.
    let warnings = |felix: &Felix| {
        felix
            .log()
            .lines()
            .filter(|line| line.contains(DB) && line.contains("missing"))
            .count()
    };
    assert_eq!(warnings(&felix), 1, "{}", felix.log());
    etcd.put(
        DB,
        r#"{"state": "active", "name": "calidb", "ipv4_nets": ["10.65.0.3/24"]}"#,
    );
    etcd.put(DB,
        r#"{"state": "active", "name": "calidb", "profile_ids": ["db"], "ipv4_nets": ["10.65.0.2/32"], "labels": {"role": "db"}}"#,
    );
    eventually(&felix, "the fixed endpoint's chains back", || {
        iptables().contains("cali-wi-calidb")
    });
    assert_eq!(warnings(&felix), 2, "{}", felix.log());
    etcd.put(
        DB,
        r#"{"state": "active", "name": "calidb", "ipv4_nets": ["10.65.0.2/24"]}"#,
    );
    eventually(
        &felix,
        "the invalid endpoint's chains removed again",
        || !iptables().contains("cali-wi-calidb"),
    );

    // Status is reported.
    let status = etcd.etcdctl(&[
        "get",
        "/calico/felix/v1/host/h1/status",
        "--print-value-only",
    ]);
    let status = String::from_utf8_lossy(&status.stdout);
    assert!(status.contains("\"uptime\""), "{status}");

    // The log file (its directory made by Felix) has the warnings and nothing below WARNING.
    let file = std::fs::read_to_string(&log_file).expect("Felix wrote its log file");
    assert!(file.contains("Validation failed for"), "{file}");
    assert!(!file.contains(" INFO "), "{file}");
}

/// An endpoint written before its interface exists gets its route, static ARP entry and
/// interface settings when the interface appears (link events), and loses them when it goes.
#[test]
fn interfaces_that_appear_after_their_endpoint_are_programmed() {
    let ns = NetNs::new("calico-felix-link");
    let etcd = EtcdServer::start_in_netns(ns.name());
    etcd.put("/calico/v1/Ready", "true");
    etcd.put("/calico/v1/host/h1/workload/k8s/ns.web/endpoint/eth0",
        r#"{"state": "active", "name": "caliweb", "mac": "ee:ee:ee:00:00:01", "profile_ids": [], "ipv4_nets": ["10.65.0.7/32"]}"#,
    );
    let felix = Felix::start(&ns, &etcd, &[]);
    let routes = || ns.run_ok("ip", &["route", "show", "proto", "80"], "");
    eventually(&felix, "the endpoint's chains", || {
        ns.run_ok("iptables-save", &[], "")
            .contains("cali-wi-caliweb")
    });
    assert_eq!(routes().trim(), "", "no interface, no route");

    ns.run_ok(
        "ip",
        &[
            "link", "add", "caliweb", "type", "veth", "peer", "name", "web0",
        ],
        "",
    );
    ns.run_ok("ip", &["link", "set", "caliweb", "up"], "");
    ns.run_ok("ip", &["link", "set", "web0", "up"], "");
    eventually(&felix, "the route through the new interface", || {
        routes().contains("10.65.0.7 dev caliweb scope link")
    });
    // Neighbours are programmed right after routes, in the same pass.
    eventually(&felix, "the static ARP entry", || {
        ns.run_ok("ip", &["neigh", "show", "dev", "caliweb"], "")
            .contains("10.65.0.7 lladdr ee:ee:ee:00:00:01 PERMANENT")
    });
    let proxy_arp = ns.run_ok("sysctl", &["-n", "net.ipv4.conf.caliweb.proxy_arp"], "");
    assert_eq!(proxy_arp.trim(), "1");

    // The endpoint goes: so do its route and neighbour entry (the interface stays).
    let out = etcd.etcdctl(&[
        "del",
        "/calico/v1/host/h1/workload/k8s/ns.web/endpoint/eth0",
    ]);
    assert!(out.status.success());
    eventually(&felix, "the route removed", || routes().trim().is_empty());
    eventually(&felix, "the static ARP entry removed", || {
        let args = ["neigh", "show", "dev", "caliweb", "nud", "permanent"];
        ns.run_ok("ip", &args, "").trim().is_empty()
    });
}

/// Configuration written to etcd while Felix runs: a parameter Felix can apply live changes the
/// rules at once (same process); one that applies only at start makes Felix exit cleanly so
/// that its supervisor starts it again; a name that is not a parameter is warned about once.
#[test]
fn configuration_changes_in_etcd_apply_live_or_restart() {
    let ns = NetNs::new("calico-felix-config");
    let etcd = EtcdServer::start_in_netns(ns.name());
    etcd.put("/calico/v1/Ready", "true");
    etcd.put(DB,
        r#"{"state": "active", "name": "calidb", "profile_ids": [], "ipv4_nets": ["10.65.0.2/32"]}"#,
    );
    etcd.put("/calico/v1/config/NoSuchParameter", "1");
    etcd.put(
        "/calico/v1/ipam/v4/pool/10.65.0.0-16",
        r#"{"cidr": "10.65.0.0/16", "ipip": "tunl0"}"#,
    );
    let mut felix = Felix::start(&ns, &etcd, &[]);
    let iptables = || ns.run_ok("iptables-save", &["-t", "filter"], "");
    eventually(&felix, "the endpoint's chains", || {
        iptables().contains("-A cali-wi-calidb")
    });
    eventually(&felix, "the unknown name warned about", || {
        felix
            .log()
            .contains("ignoring \"NoSuchParameter\" from etcd /calico/v1/config")
    });
    assert!(iptables().contains("no profile matched\" -j DROP"));
    eventually(&felix, "the IPIP pool warned about", || {
        felix.log().contains(
            "pool 10.65.0.0/16 asks for IPIP through \"tunl0\", but IpInIpEnabled is false",
        )
    });

    // Live: DropActionOverride changes the drop rules without a restart.
    etcd.put("/calico/v1/host/h1/config/DropActionOverride", "ACCEPT");
    eventually(&felix, "the drops turned into accepts", || {
        let rules = iptables();
        rules.contains("no profile matched\" -j ACCEPT")
            && !rules.contains("no profile matched\" -j DROP")
    });
    assert!(
        felix.child.try_wait().unwrap().is_none(),
        "a live change does not restart Felix"
    );
    assert!(
        felix.log().contains("applied while running"),
        "{}",
        felix.log()
    );
    etcd.put("/calico/v1/config/AnotherUnknown", "1");
    etcd.put("/calico/v1/config/NoSuchParameter", "2");
    eventually(&felix, "the second unknown name", || {
        felix.log().contains("\"AnotherUnknown\"")
    });
    assert_eq!(
        felix.log().matches("ignoring \"NoSuchParameter\"").count(),
        1,
        "each unknown name is warned about once"
    );

    // Start-only: the metrics port. Felix exits cleanly, leaving the rules in place.
    etcd.put("/calico/v1/config/PrometheusMetricsEnabled", "true");
    let log = felix.log.clone();
    calico_testkit::eventually(
        "Felix exiting for the restart",
        Duration::from_secs(30),
        || match felix.child.try_wait().unwrap() {
            Some(_) => Ok(()),
            None => Err(std::fs::read_to_string(&log).unwrap_or_default()),
        },
    );
    let status = felix.child.wait().unwrap();
    assert!(status.success(), "a clean exit: {status}");
    assert!(
        felix.log().contains("restarting Felix to apply it"),
        "{}",
        felix.log()
    );
    assert!(
        iptables().contains("-A cali-wi-calidb"),
        "the dataplane stays while Felix restarts"
    );
}

/// An IPIP pool with `IpInIpEnabled` on a kernel without the `ipip` module (this machine's):
/// Felix says which pool and why, and programs everything else.
#[test]
fn ipip_without_the_kernel_module_is_reported_and_nothing_else_stops() {
    let ns = NetNs::new("calico-felix-ipip");
    let etcd = EtcdServer::start_in_netns(ns.name());
    etcd.put("/calico/v1/Ready", "true");
    etcd.put(
        "/calico/v1/ipam/v4/pool/10.65.0.0-16",
        r#"{"cidr": "10.65.0.0/16", "ipip": "tunl0"}"#,
    );
    etcd.put(DB,
        r#"{"state": "active", "name": "calidb", "profile_ids": [], "ipv4_nets": ["10.65.0.2/32"]}"#,
    );
    let felix = Felix::start(&ns, &etcd, &[("FELIX_IPINIPENABLED", "true".to_owned())]);
    if !std::path::Path::new("/sys/module/ipip").exists() {
        eventually(&felix, "the IPIP pool reported", || {
            felix.log().contains(
                "pool 10.65.0.0/16 asks for IPIP through \"tunl0\", but this kernel has no IPIP \
                 support (module ipip is not loaded; no tunl0 device)",
            )
        });
    }
    eventually(&felix, "the endpoint's chains all the same", || {
        ns.run_ok("iptables-save", &["-t", "filter"], "")
            .contains("-A cali-wi-calidb")
    });
}

/// etcd is down when Felix starts: Felix waits for it with the shared backoff (one warning per
/// attempt, naming the endpoint and the cause) and programs what etcd says once it answers.
/// It is pointed at etcd with the variable every component reads (`ETCD_ENDPOINTS`).
#[test]
fn felix_waits_for_etcd_and_reads_the_shared_endpoints_variable() {
    let ns = NetNs::new("calico-felix-wait");
    let mut etcd = EtcdServer::start_in_netns(ns.name());
    etcd.put("/calico/v1/Ready", "true");
    etcd.put(
        "/calico/v1/host/h1/workload/k8s/ns.web/endpoint/eth0",
        r#"{"state": "active", "name": "caliweb", "mac": "ee:ee:ee:00:00:01", "profile_ids": [], "ipv4_nets": ["10.65.0.7/32"]}"#,
    );
    etcd.stop();
    let mut felix = Felix::spawn(&ns, &[("ETCD_ENDPOINTS", etcd.endpoint())]);
    eventually(&felix, "three warnings naming the endpoint", || {
        let log = felix.log();
        log.lines()
            .filter(|line| line.contains("retrying in") && line.contains(&etcd.endpoint()))
            .count()
            >= 3
    });
    assert!(
        felix.child.try_wait().unwrap().is_none(),
        "Felix exited while etcd was down:\n{}",
        felix.log()
    );
    etcd.restart();
    eventually(&felix, "the endpoint's chains once etcd answers", || {
        ns.run_ok("iptables-save", &[], "")
            .contains("cali-wi-caliweb")
    });
    assert!(felix.log().contains("connected to etcd"), "{}", felix.log());
}

/// A compute host with VMs and containers: `InterfacePrefix=cali,tap` makes both kinds of
/// interface workload interfaces, by packets. The VM (behind `tap…`) has a profile that lets
/// nothing in: the container (behind `cali…`) cannot ping it, while the VM pings the container;
/// opening the VM's profile lets the container in. Were `tap` not a workload prefix, nothing
/// would police the VM's interface and the first ping would pass.
#[test]
fn vms_and_containers_on_one_host_with_two_interface_prefixes() {
    let host = NetNs::new("calico-felix-2pfx");
    let vm = NetNs::new("calico-felix-vm");
    let container = NetNs::new("calico-felix-ctr");
    let etcd = EtcdServer::start_in_netns(host.name());
    etcd.put("/calico/v1/Ready", "true");
    let open =
        r#"{"inbound_rules": [{"action": "allow"}], "outbound_rules": [{"action": "allow"}]}"#;
    let closed = r#"{"inbound_rules": [], "outbound_rules": [{"action": "allow"}]}"#;
    etcd.put("/calico/v1/policy/profile/open/rules", open);
    etcd.put("/calico/v1/policy/profile/vm/rules", closed);
    let workloads = [
        (&vm, "tap0123456789a", "openstack/vm1", "vm", "10.200.0.5"),
        (&container, "calictr", "k8s/ns.ctr", "open", "10.65.0.9"),
    ];
    for (ns, iface, workload, profile, ip) in workloads {
        let json = format!(
            r#"{{"state": "active", "name": "{iface}", "profile_ids": ["{profile}"], "ipv4_nets": ["{ip}/32"]}}"#
        );
        etcd.put(
            &format!("/calico/v1/host/h1/workload/{workload}/endpoint/eth0"),
            &json,
        );
        host.run_ok(
            "ip",
            &[
                "link",
                "add",
                iface,
                "type",
                "veth",
                "peer",
                "name",
                "eth0",
                "netns",
                ns.name(),
            ],
            "",
        );
        // The workload reaches its gateway by a static neighbour entry (the test's host has
        // no default route for proxy ARP to answer by).
        host.run_ok(
            "ip",
            &["link", "set", iface, "address", "ee:ee:ee:ee:ee:ee"],
            "",
        );
        host.run_ok("ip", &["link", "set", iface, "up"], "");
        ns.run_ok("ip", &["link", "set", "lo", "up"], "");
        ns.run_ok("ip", &["link", "set", "eth0", "up"], "");
        ns.run_ok(
            "ip",
            &["addr", "add", &format!("{ip}/32"), "dev", "eth0"],
            "",
        );
        ns.run_ok("ip", &["route", "add", "169.254.1.1", "dev", "eth0"], "");
        let gateway = [
            "neigh",
            "add",
            "169.254.1.1",
            "lladdr",
            "ee:ee:ee:ee:ee:ee",
            "dev",
            "eth0",
        ];
        ns.run_ok("ip", &gateway, "");
        ns.run_ok("ip", &["route", "add", "default", "via", "169.254.1.1"], "");
    }
    let prefixes = ("FELIX_INTERFACEPREFIX", "cali,tap".to_owned());
    let felix = Felix::start(&host, &etcd, &[prefixes]);
    eventually(
        &felix,
        "both interfaces dispatched to their endpoints",
        || {
            let rules = host.run_ok("iptables-save", &["-t", "filter"], "");
            [
                "-i cali+ -j cali-wl-out",
                "-o tap+ -j cali-wl-in",
                "cali-wi-tap0123456789a",
            ]
            .iter()
            .all(|rule| rules.contains(rule))
        },
    );
    let ping = |from: &NetNs, to: &str| {
        from.run("ping", &["-c", "1", "-W", "1", to], "")
            .status
            .success()
    };
    eventually(&felix, "the VM pinging the container", || {
        ping(&vm, "10.65.0.9")
    });
    assert!(
        !ping(&container, "10.200.0.5"),
        "the VM's profile lets nothing in, yet the container's ping reached it"
    );
    etcd.put("/calico/v1/policy/profile/vm/rules", open);
    eventually(
        &felix,
        "the container pinging the VM once its profile opens",
        || ping(&container, "10.200.0.5"),
    );
}
