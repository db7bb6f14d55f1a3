//! Shared fixtures for unit tests.

use k8s_openapi::api::core::v1::{Container, EnvVar};

use crate::crd::{Hollo, HolloSpec};

/// The minimal valid spec (every other field defaulted), version 0.1.0.
pub fn spec() -> HolloSpec {
    serde_json::from_value(serde_json::json!({
        "version": "0.1.0",
        "database": {"urlSecretRef": {"name": "hollo-db", "key": "url"}},
        "secretKeyRef": {"name": "hollo-secret", "key": "key"},
    }))
    .expect("fixture spec parses")
}

/// A stored `Hollo` named `social` in namespace `fedi` with a uid (for owner references).
pub fn hollo(spec: HolloSpec) -> Hollo {
    let mut h = Hollo::new("social", spec);
    h.metadata.namespace = Some("fedi".into());
    h.metadata.uid = Some("0b3c-uid".into());
    h.metadata.generation = Some(3);
    h
}

/// The plain value of the variable `name` in `env`.
pub fn env_value<'a>(env: &'a [EnvVar], name: &str) -> Option<&'a str> {
    env.iter()
        .find(|e| e.name == name)
        .and_then(|e| e.value.as_deref())
}

/// The plain value of the variable `name` of container `c`.
pub fn env<'a>(c: &'a Container, name: &str) -> Option<&'a str> {
    env_value(c.env.as_deref().unwrap_or_default(), name)
}
