//! Names that become etcd key segments or are referenced from other objects: profile ids, tag
//! names, tier names, policy ids, endpoint ids, orchestrator and workload ids, hostnames.
//!
//! Two rules, both from Calico 1.x:
//!
//! | kind | allowed | why |
//! | --- | --- | --- |
//! | profile id, tag, tier, policy id, endpoint id | `[a-zA-Z0-9_.-]`, 1..=253 | Felix 1.x accepted exactly this set; these names end up in ipset and chain names (hashed) and in log lines |
//! | hostname, orchestrator id, workload id | any printable character but `/`, 1..=253 | chosen by orchestrators (Kubernetes `namespace.pod`, Docker hex ids, OpenStack UUIDs); they only have to stay one key segment |
//!
//! 253 is the longest DNS name: generous for every orchestrator, and it bounds what a watcher has
//! to hold per key. Each check returns an error about the value itself (empty field path), so
//! callers re-root it with [`ValidationError::within`].

use crate::error::ValidationError;

/// The longest id or key segment accepted, in bytes.
pub const MAX_NAME_LEN: usize = 253;

/// Checks a profile id (`/calico/v1/policy/profile/<profile_id>`, `profile_ids` entries).
pub fn validate_profile_id(id: &str) -> Result<(), ValidationError> {
    check_id("profile id", id)
}

/// Checks a tag name (profile `tags` entries, rule `src_tag` / `dst_tag`).
pub fn validate_tag(tag: &str) -> Result<(), ValidationError> {
    check_id("tag", tag)
}

/// Checks a tier name (`/calico/v1/policy/tier/<tier_name>`).
pub fn validate_tier_name(name: &str) -> Result<(), ValidationError> {
    check_id("tier name", name)
}

/// Checks a policy id (`.../tier/<tier_name>/policy/<policy_id>`).
pub fn validate_policy_id(id: &str) -> Result<(), ValidationError> {
    check_id("policy id", id)
}

/// Checks an endpoint id (the last segment of workload and host endpoint keys).
pub fn validate_endpoint_id(id: &str) -> Result<(), ValidationError> {
    check_id("endpoint id", id)
}

/// Checks a hostname (`/calico/v1/host/<hostname>`).
pub fn validate_hostname(name: &str) -> Result<(), ValidationError> {
    check_segment("hostname", name)
}

/// Checks an orchestrator id (`docker`, `k8s`, `openstack`, ...).
pub fn validate_orchestrator_id(id: &str) -> Result<(), ValidationError> {
    check_segment("orchestrator id", id)
}

/// Checks a workload id (chosen by the orchestrator).
pub fn validate_workload_id(id: &str) -> Result<(), ValidationError> {
    check_segment("workload id", id)
}

/// The name that means the shared space wherever a space is named (an endpoint's
/// `address_space`, a mapping); no space object has it.
pub const SHARED: &str = "shared";

/// Checks an address space name (`/calico/v1/address_space/space/<space>`, an endpoint's
/// `address_space`): the id charset, as it may end up in chain and set names.
pub fn validate_space_name(name: &str) -> Result<(), ValidationError> {
    check_id("address space name", name)
}

/// Checks a Neutron network or project id (`/calico/v1/address_space/network/<id>`).
pub fn validate_neutron_id(id: &str) -> Result<(), ValidationError> {
    check_id("Neutron id", id)
}

/// Checks an IPAM handle id (`/calico/ipam/v2/handle/<handle_id>`, chosen by the allocator).
pub fn validate_handle_id(id: &str) -> Result<(), ValidationError> {
    check_segment("handle id", id)
}

/// Checks a Felix config parameter name (`LogSeverityScreen`, `marker`): letters, digits, `_`.
pub fn validate_config_name(name: &str) -> Result<(), ValidationError> {
    check_length("config name", name)?;
    match name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '_'))
    {
        Some(bad) => Err(ValidationError::object(format!(
            "invalid config name {name:?}: character {bad:?} is not allowed \
             (only letters, digits and '_')"
        ))),
        None => Ok(()),
    }
}

/// True for the characters Calico 1.x allowed in ids: `[a-zA-Z0-9_.-]`.
pub fn is_id_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')
}

fn check_id(kind: &str, value: &str) -> Result<(), ValidationError> {
    check_length(kind, value)?;
    match value.chars().find(|c| !is_id_char(*c)) {
        Some(bad) => Err(ValidationError::object(format!(
            "invalid {kind} {value:?}: character {bad:?} is not allowed \
             (only letters, digits, '_', '.' and '-')"
        ))),
        None => Ok(()),
    }
}

fn check_segment(kind: &str, value: &str) -> Result<(), ValidationError> {
    check_length(kind, value)?;
    // `.` and `..` would be read as path components by anything that joins keys like paths.
    if value == "." || value == ".." {
        return Err(ValidationError::object(format!(
            "invalid {kind} {value:?}: not a usable key segment"
        )));
    }
    match value
        .chars()
        .find(|c| *c == '/' || c.is_whitespace() || c.is_control())
    {
        Some(bad) => Err(ValidationError::object(format!(
            "invalid {kind} {value:?}: character {bad:?} is not allowed in a key segment"
        ))),
        None => Ok(()),
    }
}

fn check_length(kind: &str, value: &str) -> Result<(), ValidationError> {
    if value.is_empty() {
        return Err(ValidationError::object(format!("{kind} must not be empty")));
    }
    if value.len() > MAX_NAME_LEN {
        return Err(ValidationError::object(format!(
            "{kind} is {} bytes long, the limit is {MAX_NAME_LEN}",
            value.len()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_use_the_calico_1x_charset() {
        assert!(validate_profile_id("k8s_ns.default-1").is_ok());
        let err = validate_tag("a b").unwrap_err();
        assert_eq!(err.field, "");
        assert!(
            err.reason
                .starts_with(r#"invalid tag "a b": character ' '"#)
        );
        assert!(
            validate_tier_name("")
                .unwrap_err()
                .reason
                .contains("tier name must not be empty")
        );
        assert!(
            validate_policy_id(&"p".repeat(254))
                .unwrap_err()
                .reason
                .contains("254 bytes long, the limit is 253")
        );
        assert!(
            validate_endpoint_id("eth0/1")
                .unwrap_err()
                .reason
                .contains("character '/' is not allowed")
        );
    }

    #[test]
    fn segments_only_refuse_slashes_and_whitespace() {
        assert!(validate_hostname("node-1.example.com").is_ok());
        assert!(validate_workload_id("kube-system.dns:1").is_ok());
        assert!(
            validate_hostname("a/b")
                .unwrap_err()
                .reason
                .contains("invalid hostname \"a/b\": character '/'")
        );
        assert!(
            validate_orchestrator_id("..")
                .unwrap_err()
                .reason
                .contains("not a usable key segment")
        );
        assert!(
            validate_workload_id("a b")
                .unwrap_err()
                .reason
                .contains("character ' ' is not allowed in a key segment")
        );
    }
}
