use super::*;

fn with_env(pairs: &[(&str, &str)]) -> Result<Config, ConfigError> {
    let inputs = Inputs {
        env: pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        ..Inputs::default()
    };
    Config::load(&inputs, "h")
}

#[test]
fn metadata_defaults_to_localhost_8775_and_reaches_the_renderer() {
    let config = with_env(&[]).unwrap();
    assert_eq!(
        config.render().metadata,
        Some("127.0.0.1:8775".parse().unwrap())
    );
    let config = with_env(&[
        ("FELIX_METADATAADDR", "10.0.0.5"),
        ("FELIX_METADATAPORT", "9697"),
    ])
    .unwrap();
    assert_eq!(
        config.render().metadata,
        Some("10.0.0.5:9697".parse().unwrap())
    );
}

#[test]
fn metadata_addr_none_in_any_case_turns_the_path_off() {
    for none in ["None", "none", "NONE"] {
        let config = with_env(&[("FELIX_METADATAADDR", none)]).unwrap();
        assert_eq!(config.metadata_addr, None);
        assert_eq!(config.render().metadata, None);
    }
}

#[test]
fn metadata_addr_refuses_host_names_and_ipv6_naming_the_parameter() {
    for bad in ["nova-api.example.com", "fd00::1", ""] {
        let err = with_env(&[("FELIX_METADATAADDR", bad)]).unwrap_err();
        assert_eq!(err.param, "MetadataAddr", "{err}");
        let text = err.to_string();
        assert!(
            text.contains("MetadataAddr") && text.contains("IPv4"),
            "{text}"
        );
    }
    let err = with_env(&[("FELIX_METADATAPORT", "0")]).unwrap_err();
    assert_eq!(err.param, "MetadataPort");
}

#[test]
fn the_shared_etcd_variables_apply_after_felixs_own() {
    let config = with_env(&[
        ("ETCD_ENDPOINTS", "https://a:2379,https://b:2379"),
        ("ETCD_CA_CERT_FILE", "/ca.pem"),
        ("ETCD_CERT_FILE", "/c.pem"),
        ("ETCD_KEY_FILE", "/k.pem"),
    ])
    .unwrap();
    let bootstrap = &config.bootstrap;
    assert_eq!(
        bootstrap.etcd_endpoints,
        ["https://a:2379", "https://b:2379"]
    );
    assert_eq!(bootstrap.etcd_ca_file, Some(PathBuf::from("/ca.pem")));
    assert_eq!(bootstrap.etcd_cert_file, Some(PathBuf::from("/c.pem")));
    assert_eq!(bootstrap.etcd_key_file, Some(PathBuf::from("/k.pem")));
    let config = with_env(&[
        ("ETCD_ENDPOINTS", "http://shared:2379"),
        ("FELIX_ETCDENDPOINTS", "http://felix:2379"),
    ])
    .unwrap();
    assert_eq!(config.bootstrap.etcd_endpoints, ["http://felix:2379"]);
    let err = with_env(&[("ETCD_ENDPOINTS", "shared:2379")]).unwrap_err();
    assert_eq!(err.param, "EtcdEndpoints", "{err}");
    assert!(err.to_string().contains("ETCD_ENDPOINTS"), "{err}");
}

#[test]
fn fanout_addr_is_host_and_port_or_nothing() {
    assert_eq!(with_env(&[]).unwrap().fanout_addr, None);
    let config = with_env(&[("FELIX_FANOUTADDR", "fanout.example:5473")]).unwrap();
    assert_eq!(config.fanout_addr.as_deref(), Some("fanout.example:5473"));
    for bad in ["fanout.example", ":5473", "h:0", "h:port"] {
        let err = with_env(&[("FELIX_FANOUTADDR", bad)]).unwrap_err();
        assert_eq!(err.param, "FanoutAddr", "{err}");
    }
    let old = with_env(&[]).unwrap();
    assert_eq!(old.restart_needed(&config), ["FanoutAddr"]);
}
