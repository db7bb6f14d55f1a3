//! `SECRET_KEY` when `spec.secretKeyRef` names none (issue 63 item 7): the Secret
//! `<name>-secret-key` that the operator generates once and owns. The reconcile reads it like
//! any referenced Secret and creates it only when it is absent (a create, never an apply or an
//! update: a key already there is never replaced, and the Secret is `immutable`). The key's
//! value is never logged, never put into a status, event or pod spec (the pods read it by
//! reference, as every Secret).
//!
//! The builders all read `spec.secretKeyRef`; [`resolved`] fills it in with this Secret
//! first, so they render the same `valueFrom.secretKeyRef` either way.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;

use super::labels;
use crate::crd::{Hollo, SecretKeyRef};

/// The key of the generated Secret (the variable it becomes).
pub const KEY: &str = "SECRET_KEY";
/// `app.kubernetes.io/component` of the generated Secret.
pub const COMPONENT: &str = "secret-key";
/// Random bytes in a generated key: 64 hex characters, past both images' minimum (hollo-rs
/// 32 characters, upstream 44).
const KEY_BYTES: usize = 32;

/// `<name>-secret-key`.
pub fn name(hollo: &Hollo) -> String {
    format!("{}-secret-key", hollo.name_any())
}

/// Whether the operator provides the key (the spec names no Secret).
pub fn generated(hollo: &Hollo) -> bool {
    hollo.spec.secret_key_ref.is_none()
}

/// The reference the pods read `SECRET_KEY` by: the spec's, else the generated Secret's.
pub fn reference(hollo: &Hollo) -> SecretKeyRef {
    hollo
        .spec
        .secret_key_ref
        .clone()
        .unwrap_or_else(|| SecretKeyRef {
            name: name(hollo),
            key: KEY.into(),
        })
}

/// `hollo` as the builders see it: `spec.secretKeyRef` always set (to the generated Secret
/// when the spec names none). Every reconcile starts with it.
pub fn resolved(hollo: &Hollo) -> Cow<'_, Hollo> {
    if generated(hollo) {
        let mut h = hollo.clone();
        h.spec.secret_key_ref = Some(reference(&h));
        Cow::Owned(h)
    } else {
        Cow::Borrowed(hollo)
    }
}

/// A fresh key: [`KEY_BYTES`] from the operating system's random source, in hex.
pub fn new_key() -> String {
    use rand::RngCore;
    let mut bytes = [0u8; KEY_BYTES];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The Secret holding `key`, owned by `hollo` (deleted with it) and immutable.
pub fn secret(hollo: &Hollo, key: String) -> Secret {
    let l = BTreeMap::from([
        (labels::NAME.to_string(), labels::APP.to_string()),
        (labels::INSTANCE.to_string(), hollo.name_any()),
        (labels::COMPONENT.to_string(), COMPONENT.to_string()),
        (labels::MANAGED_BY.to_string(), labels::MANAGER.to_string()),
    ]);
    Secret {
        metadata: ObjectMeta {
            name: Some(name(hollo)),
            namespace: hollo.namespace(),
            labels: Some(l),
            owner_references: Some(vec![super::owner_ref(hollo)]),
            ..ObjectMeta::default()
        },
        immutable: Some(true),
        type_: Some("Opaque".into()),
        data: Some(BTreeMap::from([(
            KEY.to_string(),
            ByteString(key.into_bytes()),
        )])),
        ..Secret::default()
    }
}

/// Reasons of the `SecretKey` condition while the operator provides the key.
pub const GENERATED: &str = "Generated";
pub const GONE: &str = "GeneratedSecretMissing";
pub const INCOMPLETE: &str = "GeneratedSecretIncomplete";

/// Whether the status says the operator's Secret was there before (its `SecretKey`
/// condition has one of our reasons): then it is not generated again when it is gone.
pub fn was_generated(hollo: &Hollo) -> bool {
    hollo.status.as_ref().is_some_and(|s| {
        s.conditions.iter().any(|c| {
            c.type_ == crate::status::SECRET_KEY
                && [GENERATED, GONE, INCOMPLETE].contains(&c.reason.as_str())
        })
    })
}

/// The Secret to create now: the spec names none, the generated one is not there, and it
/// never was (a key generated before encrypted the accounts' private keys: a new one could
/// not decrypt them, so a deleted Secret is reported, not replaced). `found` is what the
/// reconcile read of it.
pub fn to_create(hollo: &Hollo, found: Option<&Secret>) -> Option<Secret> {
    (generated(hollo) && found.is_none() && !was_generated(hollo)).then(|| secret(hollo, new_key()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil;

    fn without_ref() -> Hollo {
        let mut spec = testutil::spec();
        spec.secret_key_ref = None;
        testutil::hollo(spec)
    }

    #[test]
    fn a_spec_naming_a_secret_is_left_as_it_is() {
        let h = testutil::hollo(testutil::spec());
        assert!(!generated(&h));
        assert!(matches!(resolved(&h), Cow::Borrowed(_)));
        assert_eq!(reference(&h).name, "hollo-secret");
        assert_eq!(to_create(&h, None), None, "nothing generated");
    }

    #[test]
    fn without_one_the_pods_read_the_generated_secret() {
        let h = without_ref();
        let r = resolved(&h);
        let want = SecretKeyRef {
            name: "social-secret-key".into(),
            key: "SECRET_KEY".into(),
        };
        assert_eq!(r.spec.secret_key_ref.as_ref(), Some(&want));
        // Every builder then renders it: the web pods' env, the migration Job's.
        let web = crate::resources::web::deployment(&r, "0.1.0", None);
        let c = &web.spec.template.spec.unwrap().containers[0];
        let var = c
            .env
            .iter()
            .flatten()
            .find(|e| e.name == "SECRET_KEY")
            .expect("SECRET_KEY");
        let from = var.value_from.as_ref().unwrap().secret_key_ref.as_ref();
        assert_eq!(from.map(|s| s.name.as_str()), Some("social-secret-key"));
        assert_eq!(from.map(|s| s.key.as_str()), Some("SECRET_KEY"));
        assert_eq!(var.value, None, "by reference only");
    }

    #[test]
    fn the_generated_secret_is_owned_immutable_and_random() {
        let h = without_ref();
        let s = to_create(&h, None).expect("absent: created");
        assert_eq!(s.metadata.name.as_deref(), Some("social-secret-key"));
        assert_eq!(s.metadata.namespace.as_deref(), Some("fedi"));
        let owner = &s.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str()),
            ("Hollo", "0b3c-uid")
        );
        assert_eq!(s.immutable, Some(true), "its key can never be replaced");
        assert_eq!(
            s.metadata.labels.as_ref().unwrap().get(labels::MANAGED_BY),
            Some(&labels::MANAGER.to_string())
        );
        let key = &s.data.as_ref().unwrap()[KEY].0;
        assert_eq!(key.len(), 64);
        assert!(key.iter().all(u8::is_ascii_hexdigit), "hex");
        let again = secret(&h, new_key());
        assert_ne!(again.data.unwrap()[KEY].0, *key, "each key is drawn afresh");
        // Present already: never made again, whatever it holds.
        assert_eq!(to_create(&h, Some(&s)), None);
        assert_eq!(to_create(&h, Some(&Secret::default())), None);
    }

    #[test]
    fn a_generated_secret_that_is_gone_is_not_generated_again() {
        let mut h = without_ref();
        for (reason, again) in [
            ("LongEnough", true),
            (GENERATED, false),
            (GONE, false),
            (INCOMPLETE, false),
        ] {
            h.status = Some(crate::crd::HolloStatus {
                conditions: vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
                    type_: crate::status::SECRET_KEY.into(),
                    status: "True".into(),
                    reason: reason.into(),
                    message: String::new(),
                    observed_generation: None,
                    last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                        k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
                    ),
                }],
                ..Default::default()
            });
            assert_eq!(to_create(&h, None).is_some(), again, "after {reason}");
        }
    }
}
