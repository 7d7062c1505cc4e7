//! Felix's configuration precedence and validation, as 000 §2.5.1 describes them.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use calico_dataplane::{DropAction, EndpointToHostAction};
use calico_felix::{Bootstrap, Config, Inputs, Source};

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn inputs(
    env: &[(&str, &str)],
    file: Option<&str>,
    host: &[(&str, &str)],
    global: &[(&str, &str)],
) -> Inputs {
    Inputs {
        env: map(env),
        file: file.map(|text| (PathBuf::from("/etc/calico/felix.cfg"), text.to_owned())),
        etcd_host: map(host),
        etcd_global: map(global),
    }
}

fn source_of<'a>(config: &'a Config, param: &str) -> (&'a str, &'a Source) {
    let (_, value, source) = config
        .report
        .iter()
        .find(|(name, _, _)| *name == param)
        .unwrap_or_else(|| panic!("{param} is not in the report"));
    (value.as_str(), source)
}

#[test]
fn defaults_are_the_seeds() {
    let config = Config::load(&Inputs::default(), "node1").unwrap();
    assert_eq!(config.bootstrap.etcd_endpoints, ["http://localhost:4001"]);
    assert_eq!(config.bootstrap.hostname, "node1");
    assert_eq!(config.bootstrap.etcd_ca_file, None, "no CA over plain http");
    assert_eq!(config.endpoint_to_host, EndpointToHostAction::Drop);
    assert_eq!(config.drop_action, DropAction::Drop);
    assert_eq!(config.metadata_addr.as_deref(), Some("127.0.0.1"));
    assert_eq!(config.failsafe_inbound, [22]);
    assert_eq!(config.failsafe_outbound, [2379, 2380, 4001, 7001]);
    assert_eq!(config.interface_prefixes.to_string(), "cali");
    assert_eq!(
        config.log_file_path,
        Some(PathBuf::from("/var/log/calico/felix.log"))
    );
    assert!(!config.ip_in_ip_enabled);
    assert_eq!(config.reporting_interval, Duration::from_secs(30));
    assert!(config.report.iter().all(|(_, _, s)| *s == Source::Default));
}

#[test]
fn env_beats_file_beats_host_etcd_beats_global_etcd() {
    let param = "DropActionOverride";
    let all = inputs(
        &[("FELIX_DROPACTIONOVERRIDE", "LOG-and-ACCEPT")],
        Some("[global]\nDropActionOverride = ACCEPT\n"),
        &[(param, "LOG-and-DROP")],
        &[(param, "DROP")],
    );
    let config = Config::load(&all, "h").unwrap();
    assert_eq!(config.drop_action, DropAction::LogAndAccept);
    assert_eq!(
        source_of(&config, param).1,
        &Source::Env("FELIX_DROPACTIONOVERRIDE".into())
    );
    let no_env = Inputs {
        env: BTreeMap::new(),
        ..all.clone()
    };
    let config = Config::load(&no_env, "h").unwrap();
    assert_eq!(config.drop_action, DropAction::Accept);
    assert!(matches!(source_of(&config, param).1, Source::File(_)));
    let no_file = Inputs {
        file: None,
        ..no_env.clone()
    };
    assert_eq!(
        Config::load(&no_file, "h").unwrap().drop_action,
        DropAction::LogAndDrop
    );
    let global_only = Inputs {
        etcd_host: BTreeMap::new(),
        ..no_file
    };
    let config = Config::load(&global_only, "h").unwrap();
    assert_eq!(source_of(&config, param), ("DROP", &Source::EtcdGlobal));
}

#[test]
fn env_names_are_case_insensitive_and_etcd_names_case_sensitive() {
    let config = Config::load(
        &inputs(&[("felix_interfaceprefix", "tap")], None, &[], &[]),
        "h",
    )
    .unwrap();
    assert_eq!(config.interface_prefixes.to_string(), "tap");
    let config = Config::load(&inputs(&[], None, &[], &[("interfaceprefix", "tap")]), "h").unwrap();
    assert_eq!(
        config.interface_prefixes.to_string(),
        "cali",
        "etcd names are case-sensitive"
    );
    let config = Config::load(&inputs(&[], Some("INTERFACEPREFIX: tap"), &[], &[]), "h").unwrap();
    assert_eq!(
        config.interface_prefixes.to_string(),
        "tap",
        "file keys are case-insensitive"
    );
}

/// A compute host with VMs (`tap`) and containers (`cali`): several prefixes, comma-separated.
#[test]
fn several_interface_prefixes_are_each_a_workload_interface() {
    let config = Config::load(
        &inputs(
            &[("FELIX_INTERFACEPREFIX", "cali, tap,cali")],
            None,
            &[],
            &[],
        ),
        "h",
    )
    .unwrap();
    let prefixes = &config.interface_prefixes;
    assert_eq!(prefixes.to_string(), "cali,tap", "trimmed, each once");
    assert!(prefixes.matches("cali1234") && prefixes.matches("tap0123456789a"));
    assert!(!prefixes.matches("eth0") && !prefixes.matches("vxlan.calico"));
}

#[test]
fn etcd_cannot_set_how_to_reach_etcd_or_the_hostname() {
    let etcd = [("EtcdAddr", "10.0.0.1:2379"), ("FelixHostname", "other")];
    let config = Config::load(&inputs(&[], None, &etcd, &etcd), "mine").unwrap();
    assert_eq!(config.bootstrap.etcd_endpoints, ["http://localhost:4001"]);
    assert_eq!(config.bootstrap.hostname, "mine");
}

#[test]
fn etcd_location_from_addr_scheme_or_endpoints() {
    let env = [
        ("FELIX_ETCDADDR", "10.0.0.1:2379"),
        ("FELIX_ETCDSCHEME", "https"),
    ];
    let boot = Bootstrap::load(&inputs(&env, None, &[], &[]), "h").unwrap();
    assert_eq!(boot.etcd_endpoints, ["https://10.0.0.1:2379"]);
    assert_eq!(
        boot.etcd_ca_file,
        Some(PathBuf::from("/etc/ssl/certs/ca-certificates.crt"))
    );
    let env = [
        ("FELIX_ETCDENDPOINTS", "https://a:2379, https://b:2379"),
        ("FELIX_ETCDCAFILE", "/etc/etcd/ca.pem"),
    ];
    let boot = Bootstrap::load(&inputs(&env, None, &[], &[]), "h").unwrap();
    assert_eq!(boot.etcd_endpoints, ["https://a:2379", "https://b:2379"]);
    assert_eq!(boot.etcd_ca_file, Some(PathBuf::from("/etc/etcd/ca.pem")));
    // The seed's table spells it EtdcAddr: read too.
    let boot = Bootstrap::load(
        &inputs(&[], Some("EtdcAddr = 10.9.9.9:4001"), &[], &[]),
        "h",
    )
    .unwrap();
    assert_eq!(boot.etcd_endpoints, ["http://10.9.9.9:4001"]);
}

#[test]
fn bad_values_name_the_parameter_the_source_and_the_reason() {
    let cases: &[(Inputs, &str, &str)] = &[
        (
            inputs(&[("FELIX_DROPACTIONOVERRIDE", "REJECT")], None, &[], &[]),
            "DropActionOverride",
            "environment variable FELIX_DROPACTIONOVERRIDE",
        ),
        (
            inputs(&[], Some("DefaultEndpointToHostAction = allow"), &[], &[]),
            "DefaultEndpointToHostAction",
            "config file /etc/calico/felix.cfg",
        ),
        (
            inputs(&[("FELIX_ETCDSCHEME", "ftp")], None, &[], &[]),
            "EtcdScheme",
            "FELIX_ETCDSCHEME",
        ),
        (
            inputs(&[("FELIX_ETCDENDPOINTS", "10.0.0.1:2379")], None, &[], &[]),
            "EtcdEndpoints",
            "not an http:// or https:// URL",
        ),
        (
            inputs(&[("FELIX_LOGSEVERITYSCREEN", "LOUD")], None, &[], &[]),
            "LogSeverityScreen",
            "expected DEBUG",
        ),
        (
            inputs(&[("FELIX_INTERFACEPREFIX", "cali-")], None, &[], &[]),
            "InterfacePrefix",
            "letters or digits",
        ),
        (
            inputs(&[("FELIX_INTERFACEPREFIX", "cali,,tap")], None, &[], &[]),
            "InterfacePrefix",
            "\"\": expected 1-10 letters or digits",
        ),
        (
            inputs(&[("FELIX_REPORTINGINTERVALSECS", "-1")], None, &[], &[]),
            "ReportingIntervalSecs",
            "from 0.001 to 31536000",
        ),
        (
            inputs(&[("FELIX_FELIXHOSTNAME", "a/b")], None, &[], &[]),
            "FelixHostname",
            "not allowed",
        ),
        (
            inputs(&[], Some("just words"), &[], &[]),
            "config file",
            "line 1",
        ),
    ];
    for (inputs, param, part) in cases {
        let err = Config::load(inputs, "h").unwrap_err();
        assert_eq!(err.param, *param, "{err}");
        assert!(err.to_string().contains(part), "{err} (expected {part:?})");
    }
}

#[test]
fn the_render_settings_follow_the_config() {
    let env = [
        ("FELIX_INTERFACEPREFIX", "tap"),
        ("FELIX_DEFAULTENDPOINTTOHOSTACTION", "accept"),
        ("FELIX_FAILSAFEINBOUNDHOSTPORTS", ""),
        ("FELIX_IPTABLESMARKMASK", "0x700"),
    ];
    let render = Config::load(&inputs(&env, None, &[], &[]), "h")
        .unwrap()
        .render();
    assert_eq!(render.interface_prefixes.to_string(), "tap");
    assert_eq!(render.endpoint_to_host, EndpointToHostAction::Accept);
    assert!(
        render.failsafe_inbound.is_empty(),
        "an empty list disables the failsafe"
    );
    assert_eq!(
        (
            render.marks.accept,
            render.marks.pass,
            render.marks.untracked
        ),
        (0x100, 0x200, 0x400)
    );
}

#[test]
fn names_that_are_not_parameters_are_reported_with_their_place() {
    let given = inputs(
        &[
            ("FELIX_LOGFILEPATH", "none"),
            ("FELIX_NOSUCH", "1"),
            ("PATH", "/bin"),
        ],
        Some("[global]\nMetadataAddr = None\nMetadatAport = 1\nbogus = 2\n"),
        &[("EtcdAddr", "10.0.0.1:2379")],
        &[("DropActionOverride", "ACCEPT"), ("Typo", "1")],
    );
    let unknown = calico_felix::config::unknown_names(&given);
    let file = Source::File(PathBuf::from("/etc/calico/felix.cfg"));
    assert_eq!(
        unknown,
        [
            (
                "FELIX_NOSUCH".to_owned(),
                Source::Env("FELIX_NOSUCH".to_owned())
            ),
            ("bogus".to_owned(), file),
            ("Typo".to_owned(), Source::EtcdGlobal),
            // etcd cannot set what is needed to reach etcd.
            ("EtcdAddr".to_owned(), Source::EtcdHost),
        ]
    );
}

#[test]
fn changed_parameters_are_applied_live_or_need_a_restart() {
    let load =
        |global: &[(&str, &str)]| Config::load(&inputs(&[], None, &[], global), "h1").unwrap();
    let running = load(&[]);
    let changed = load(&[
        ("DropActionOverride", "ACCEPT"),
        ("FailsafeInboundHostPorts", ""),
        ("IptablesRefreshInterval", "5"),
    ]);
    assert!(running.restart_needed(&changed).is_empty());
    assert_eq!(
        running.live_changes(&changed),
        [
            "DropActionOverride",
            "FailsafeInboundHostPorts",
            "IptablesRefreshInterval"
        ]
    );
    let restart = load(&[("HealthPort", "9100"), ("InterfacePrefix", "tap")]);
    assert_eq!(
        running.restart_needed(&restart),
        ["InterfacePrefix", "HealthPort"]
    );
    assert!(
        running.live_changes(&running).is_empty() && running.restart_needed(&running).is_empty()
    );
}

/// Seed 000 lets `EtcdCaFile=none` turn off the check of etcd's certificate; this Felix refuses
/// it by name rather than pretend (over http it changes nothing and is accepted).
#[test]
fn etcd_ca_file_none_is_refused_over_https() {
    let https = inputs(
        &[
            ("FELIX_ETCDENDPOINTS", "https://10.0.0.1:2379"),
            ("FELIX_ETCDCAFILE", "none"),
        ],
        None,
        &[],
        &[],
    );
    let error = Bootstrap::load(&https, "h1").unwrap_err();
    assert_eq!(error.param, "EtcdCaFile");
    assert!(error.reason.contains("not supported"), "{error}");
    let http = inputs(&[("FELIX_ETCDCAFILE", "none")], None, &[], &[]);
    assert_eq!(Bootstrap::load(&http, "h1").unwrap().etcd_ca_file, None);
}

/// A bad value in etcd is shared by every host: it is treated as missing (the default applies)
/// with the seed's warning, instead of stopping every Felix.
#[test]
fn bad_values_in_etcd_are_treated_as_missing() {
    let config = Config::load(
        &inputs(
            &[],
            None,
            &[("FailsafeInboundHostPorts", "22,ssh")],
            &[
                ("IptablesMarkMask", "0x1"),
                ("DropActionOverride", "ACCEPT"),
            ],
        ),
        "h",
    )
    .unwrap();
    assert_eq!(config.failsafe_inbound, [22]);
    assert_eq!(
        source_of(&config, "IptablesMarkMask"),
        ("0xff000000", &Source::Default)
    );
    assert_eq!(
        config.drop_action,
        DropAction::Accept,
        "valid values still apply"
    );
    assert_eq!(config.warnings.len(), 2, "{:?}", config.warnings);
    assert!(
        config.warnings[0].starts_with(
            "Validation failed for FailsafeInboundHostPorts \"22,ssh\" from etcd host config, \
             treating as missing:"
        ),
        "{:?}",
        config.warnings
    );
    assert!(config.warnings[1].contains("IptablesMarkMask \"0x1\" from etcd /calico/v1/config"));
}

/// A bad host value is treated as missing: the next place, the cluster-wide key, applies
/// (not the default), for a parameter of every kind.
#[test]
fn a_bad_host_value_falls_through_to_the_global_value_not_the_default() {
    use calico_felix::config::NftablesMode;
    let params: [(&str, &str, &str); 7] = [
        ("NFTablesMode", "bogus2", "Enabled"),
        ("DefaultEndpointToHostAction", "REJECT", "ACCEPT"),
        ("FailsafeInboundHostPorts", "22,ssh", "2222"),
        ("IptablesRefreshInterval", "soon", "7"),
        ("PrometheusMetricsEnabled", "maybe", "true"),
        ("MetadataPort", "99999", "8080"),
        ("InterfacePrefix", "", "tap"),
    ];
    let host: Vec<_> = params.iter().map(|(name, bad, _)| (*name, *bad)).collect();
    let global: Vec<_> = params
        .iter()
        .map(|(name, _, good)| (*name, *good))
        .collect();
    let config = Config::load(&inputs(&[], None, &host, &global), "h").unwrap();
    assert_eq!(config.nftables_mode, NftablesMode::Enabled);
    assert_eq!(config.endpoint_to_host, EndpointToHostAction::Accept);
    assert_eq!(config.failsafe_inbound, [2222]);
    assert_eq!(config.iptables_refresh, Duration::from_secs(7));
    assert!(config.metrics_enabled);
    assert_eq!(config.metadata_port, 8080);
    for (name, bad, good) in params {
        assert_eq!(
            source_of(&config, name),
            (good, &Source::EtcdGlobal),
            "{name}"
        );
        let warning = format!(
            "Validation failed for {name} {bad:?} from etcd host config, treating as missing:"
        );
        let line = config
            .warnings
            .iter()
            .find(|w| w.starts_with(&warning))
            .unwrap_or_else(|| panic!("no warning for {name}: {:?}", config.warnings));
        assert!(
            line.ends_with(&format!(
                "(the value {good:?} from etcd /calico/v1/config applies)"
            )),
            "{line}"
        );
    }
    assert_eq!(config.warnings.len(), params.len(), "{:?}", config.warnings);

    // Both etcd layers bad: the default applies, with a warning for each.
    let both = Config::load(
        &inputs(
            &[],
            None,
            &[("NFTablesMode", "bogus2")],
            &[("NFTablesMode", "bogus1")],
        ),
        "h",
    )
    .unwrap();
    assert_eq!(both.nftables_mode, NftablesMode::Disabled);
    assert_eq!(
        source_of(&both, "NFTablesMode"),
        ("Disabled", &Source::Default)
    );
    assert_eq!(both.warnings.len(), 2, "{:?}", both.warnings);
    assert!(both.warnings[1].contains("\"bogus1\" from etcd /calico/v1/config"));
    assert!(both.warnings[1].ends_with("(the default \"Disabled\" applies)"));
}

#[test]
fn nftables_mode_from_every_place_and_applied_live() {
    use calico_felix::config::NftablesMode;
    let default = Config::load(&Inputs::default(), "node1").unwrap();
    assert_eq!(default.nftables_mode, NftablesMode::Disabled);
    let env = Config::load(
        &inputs(&[("FELIX_NFTABLESMODE", "enabled")], None, &[], &[]),
        "n",
    )
    .unwrap();
    assert_eq!(env.nftables_mode, NftablesMode::Enabled);
    let host = Config::load(&inputs(&[], None, &[("NFTablesMode", "Auto")], &[]), "n").unwrap();
    assert_eq!(host.nftables_mode, NftablesMode::Auto);
    assert_eq!(default.live_changes(&host), ["NFTablesMode"]);
    assert!(default.restart_needed(&host).is_empty());
    let bad = Config::load(
        &inputs(&[("FELIX_NFTABLESMODE", "yes")], None, &[], &[]),
        "n",
    )
    .unwrap_err()
    .to_string();
    assert!(
        bad.contains("NFTablesMode") && bad.contains("Enabled, Disabled or Auto"),
        "{bad}"
    );
}
