use super::*;

fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

const OPENRC: [(&str, &str); 5] = [
    ("OS_AUTH_URL", "http://10.0.0.5:5000"),
    ("OS_USERNAME", "calico"),
    ("OS_PASSWORD", "s3cret-pw"),
    ("OS_PROJECT_NAME", "service"),
    ("OS_USER_DOMAIN_NAME", "Default"),
];

fn keystone(config: Option<&Path>, vars: &[(&str, &str)]) -> Result<Resolved, CredentialsError> {
    resolve(Strategy::Keystone, config, &env(vars))
}

#[test]
fn an_openrc_gives_everything_and_v3_is_appended() {
    let resolved = keystone(None, &OPENRC).unwrap();
    let c = resolved.credentials.unwrap();
    assert_eq!(c.auth_url.value.base(), "http://10.0.0.5:5000/v3");
    assert_eq!(c.auth_url.source, Source::Env("OS_AUTH_URL"));
    assert_eq!(c.username.value, "calico");
    assert_eq!(c.project.value, Named::Name("service".into()));
    assert_eq!(c.project_domain.value, Named::Name("Default".into()));
    assert_eq!(c.project_domain.source, Source::Default);
    assert_eq!(resolved.ca_file, None);
    assert_eq!(resolved.unused, Vec::<String>::new());
}

#[test]
fn the_password_is_never_shown() {
    let resolved = keystone(None, &OPENRC).unwrap();
    let shown = format!("{resolved:?}");
    assert!(!shown.contains("s3cret-pw"), "{shown}");
    assert!(shown.contains("***"), "{shown}");
}

#[test]
fn a_file_s_section_is_read_and_a_variable_wins_over_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("calico.conf");
    std::fs::write(
        &path,
        "# the service's settings\n[DEFAULT]\ndebug = true\n\n[keystone_authtoken]\n\
         auth_url = https://keystone.example:5000/v3\nusername = calico\npassword = from-file\n\
         project_id = 0123abcd\nproject_domain_id = default\ncafile = /etc/ssl/private-ca.pem\n\
         memcached_servers = 127.0.0.1:11211\n\n[other]\nx = y\n",
    )
    .unwrap();
    let resolved = keystone(Some(&path), &[("OS_PASSWORD", "from-env")]).unwrap();
    let c = resolved.credentials.unwrap();
    assert_eq!(c.password.value.0, "from-env");
    assert_eq!(c.password.source, Source::Env("OS_PASSWORD"));
    assert_eq!(c.project.value, Named::Id("0123abcd".into()));
    assert_eq!(
        c.username.source.to_string(),
        format!("username in [keystone_authtoken] of {}", path.display())
    );
    assert_eq!(c.auth_url.value.base(), "https://keystone.example:5000/v3");
    let ca = resolved.ca_file.unwrap();
    assert_eq!(ca.value, PathBuf::from("/etc/ssl/private-ca.pem"));
    // keystonemiddleware's own key is not read: said by name.
    assert_eq!(resolved.unused.len(), 1, "{:?}", resolved.unused);
    assert!(resolved.unused[0].starts_with("memcached_servers in [keystone_authtoken]"));
}

#[test]
fn what_is_missing_or_wrong_is_named() {
    let without = |name: &str| -> Vec<(&str, &str)> {
        OPENRC.iter().copied().filter(|(k, _)| *k != name).collect()
    };
    for (vars, setting, reason) in [
        (without("OS_PASSWORD"), "OS_PASSWORD", "not set"),
        (without("OS_AUTH_URL"), "OS_AUTH_URL", "not set"),
        (
            without("OS_PROJECT_NAME"),
            "OS_PROJECT_NAME, or OS_PROJECT_ID",
            "not set",
        ),
    ] {
        let error = keystone(None, &vars).unwrap_err().to_string();
        assert!(error.starts_with(setting), "{error}");
        assert!(error.contains(reason), "{error}");
    }
    let mut bad = OPENRC.to_vec();
    bad.push(("OS_PROJECT_ID", "abc"));
    let error = keystone(None, &bad).unwrap_err().to_string();
    assert!(error.contains("both given"), "{error}");
    for (name, value, reason) in [
        ("OS_AUTH_URL", "keystone:5000", "expected http://HOST:PORT"),
        ("OS_AUTH_URL", "http://k:5000/v2.0", "v2.0"),
        ("OS_AUTH_TYPE", "token", "only password"),
        ("OS_INSECURE", "true", "always checked"),
        ("OS_IDENTITY_API_VERSION", "2", "only Keystone's v3"),
    ] {
        let mut vars = OPENRC.to_vec();
        vars.retain(|(k, _)| *k != name);
        vars.push((name, value));
        let error = keystone(None, &vars).unwrap_err().to_string();
        assert!(
            error.starts_with(&format!("{name} (environment)")),
            "{error}"
        );
        assert!(error.contains(reason), "{error}");
    }
    let error = keystone(Some(Path::new("/nonexistent.conf")), &OPENRC)
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with("--auth-config /nonexistent.conf"),
        "{error}"
    );
}

#[test]
fn a_file_without_the_section_or_with_a_bad_line_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.conf");
    std::fs::write(&path, "[DEFAULT]\nx = 1\n").unwrap();
    let error = keystone(Some(&path), &[]).unwrap_err().to_string();
    assert!(error.contains("no [keystone_authtoken] section"), "{error}");
    std::fs::write(&path, "[keystone_authtoken]\nusername calico\n").unwrap();
    let error = keystone(Some(&path), &[]).unwrap_err().to_string();
    assert!(error.contains("line 2"), "{error}");
    assert!(error.contains("expected key = value"), "{error}");
}

#[test]
fn noauth_names_credentials_it_does_not_use_and_other_variables_are_named() {
    let mut vars = OPENRC.to_vec();
    vars.push(("OS_REGION_NAME", "RegionOne"));
    vars.push(("OS_CACERT", "/etc/ca.pem"));
    let resolved = resolve(Strategy::Noauth, None, &env(&vars)).unwrap();
    assert_eq!(resolved.credentials, None);
    assert_eq!(
        resolved.ca_file.map(|s| s.value),
        Some(PathBuf::from("/etc/ca.pem"))
    );
    let unused = resolved.unused.join("\n");
    assert!(
        unused.contains("OS_REGION_NAME (environment) is set but not read"),
        "{unused}"
    );
    assert!(
        unused.contains("OS_PASSWORD (environment) is set but not used: --auth-strategy is noauth"),
        "{unused}"
    );
    // Keystone reads the same variables without a word.
    let resolved = keystone(None, &OPENRC).unwrap();
    assert!(resolved.unused.is_empty());
}
