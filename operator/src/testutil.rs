//! Shared fixtures for unit tests.

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
