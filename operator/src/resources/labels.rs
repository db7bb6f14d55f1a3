//! Labels shared by every child object.
//!
//! Selectors use only the stable labels (name, instance, component): a Deployment's selector is
//! immutable, so the version label must never be part of it.

use std::collections::BTreeMap;

pub const NAME: &str = "app.kubernetes.io/name";
pub const INSTANCE: &str = "app.kubernetes.io/instance";
pub const COMPONENT: &str = "app.kubernetes.io/component";
pub const VERSION: &str = "app.kubernetes.io/version";
pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
pub const MANAGER: &str = "hollo-operator";
pub const APP: &str = "hollo";

/// The process roles that run as Deployments, plus the migration Job.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Component {
    Web,
    Worker,
    All,
    Migration,
    /// The 503 page during an upgrade's downtime (R-OP-ZD).
    MaintenancePage,
}

impl Component {
    pub fn as_str(self) -> &'static str {
        match self {
            Component::Web => "web",
            Component::Worker => "worker",
            Component::All => "all",
            Component::Migration => "migration",
            Component::MaintenancePage => "maintenance-page",
        }
    }
}

/// Labels a selector matches on.
pub fn selector(instance: &str, component: Component) -> BTreeMap<String, String> {
    BTreeMap::from([
        (NAME.to_string(), APP.to_string()),
        (INSTANCE.to_string(), instance.to_string()),
        (COMPONENT.to_string(), component.as_str().to_string()),
    ])
}

/// Full labels: selector labels plus version and manager.
pub fn labels(instance: &str, component: Component, version: &str) -> BTreeMap<String, String> {
    let mut l = selector(instance, component);
    l.insert(VERSION.to_string(), label_value(version));
    l.insert(MANAGED_BY.to_string(), MANAGER.to_string());
    l
}

/// A valid label value: at most 63 characters of `[A-Za-z0-9._-]`, starting and ending with an
/// alphanumeric. Versions like `1.0.0+build` would otherwise make the apply fail.
pub fn label_value(raw: &str) -> String {
    let mapped: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(63)
        .collect();
    mapped
        .trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selector_has_no_version() {
        let s = selector("social", Component::Worker);
        assert_eq!(s.len(), 3);
        assert_eq!(s[COMPONENT], "worker");
        assert_eq!(s[INSTANCE], "social");
        assert!(!s.contains_key(VERSION));
    }

    #[test]
    fn labels_carry_version_and_manager() {
        let l = labels("social", Component::Web, "0.1.0");
        assert_eq!(l[VERSION], "0.1.0");
        assert_eq!(l[MANAGED_BY], "hollo-operator");
        assert_eq!(l[NAME], "hollo");
    }

    #[test]
    fn label_value_is_sanitized() {
        assert_eq!(label_value("1.0.0+build.5"), "1.0.0_build.5");
        assert_eq!(label_value("-v1-"), "v1");
        assert_eq!(label_value(&"a".repeat(80)).len(), 63);
    }
}
