//! Object Integrity Proofs (FEP-8b32) with the `eddsa-jcs-2022` cryptosuite (W3C vc-di-eddsa
//! §3.3): a proof signs the activity itself, not the HTTP request that carried it, so an
//! activity relayed by someone else (a forwarded reply, a relay) still proves who wrote it.
//!
//! Signing: `proofConfig` = the proof without `proofValue`, with the document's `@context`;
//! the signed bytes are SHA-256(JCS(proofConfig)) ‖ SHA-256(JCS(document without `proof`)),
//! signed with Ed25519; `proofValue` is base58btc multibase (`z…`). The public key is published
//! in the actor's `assertionMethod` as a `Multikey` (`publicKeyMultibase` = `z` + base58btc of
//! the multicodec prefix `0xed 0x01` and the 32 key bytes). This is what Fedify produces and
//! checks; `created` is whole seconds in UTC (`…Z`), a form every `xsd:dateTime` reader
//! round-trips to the same string, which the verifier re-serialises.

use chrono::{DateTime, SecondsFormat, Utc};
use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

pub const CRYPTOSUITE: &str = "eddsa-jcs-2022";
/// The multicodec prefix of an Ed25519 public key (`ed25519-pub`, varint 0xed).
const ED25519_PUB: [u8; 2] = [0xed, 0x01];

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ProofError {
    #[error("the proof is malformed: {0}")]
    Malformed(String),
    #[error("unsupported proof: {0}")]
    Unsupported(String),
    #[error("the proof does not verify")]
    Invalid,
    #[error("not an Ed25519 Multikey: {0}")]
    BadKey(String),
}

/// A local account's proof key: its Ed25519 key and the `verificationMethod` id naming it.
#[derive(Clone)]
pub struct ProofKey {
    pub id: String,
    pub key: SigningKey,
}

/// `z` + base58btc(0xed01 ‖ key): the `publicKeyMultibase` of an Ed25519 `Multikey`.
pub fn multikey(public: &VerifyingKey) -> String {
    let mut bytes = ED25519_PUB.to_vec();
    bytes.extend_from_slice(public.as_bytes());
    format!("z{}", bs58::encode(bytes).into_string())
}

pub fn parse_multikey(value: &str) -> Result<VerifyingKey, ProofError> {
    let encoded = value
        .strip_prefix('z')
        .ok_or_else(|| ProofError::BadKey("not base58btc multibase".into()))?;
    let bytes = bs58::decode(encoded)
        .into_vec()
        .map_err(|e| ProofError::BadKey(e.to_string()))?;
    let raw = bytes
        .strip_prefix(&ED25519_PUB)
        .ok_or_else(|| ProofError::BadKey("not an ed25519-pub multicodec key".into()))?;
    let raw: [u8; 32] = raw
        .try_into()
        .map_err(|_| ProofError::BadKey("an Ed25519 key is 32 bytes".into()))?;
    VerifyingKey::from_bytes(&raw).map_err(|e| ProofError::BadKey(e.to_string()))
}

/// The actor's `assertionMethod` entry for its proof key.
pub fn assertion_method(actor: &str, key: &ProofKey) -> Value {
    json!([{
        "id": key.id,
        "type": "Multikey",
        "controller": actor,
        "publicKeyMultibase": multikey(&key.key.verifying_key()),
    }])
}

fn jcs(v: &Value) -> Result<Vec<u8>, ProofError> {
    serde_jcs::to_vec(v).map_err(|e| ProofError::Malformed(format!("canonicalising: {e}")))
}

/// The bytes a proof signs: the hashes of the proof configuration and of the document.
fn signed_bytes(document: &Map<String, Value>, config: &Value) -> Result<Vec<u8>, ProofError> {
    let mut unsecured = document.clone();
    unsecured.remove("proof");
    // A Linked Data Signature (`RsaSignature2017`, Mastodon's relay-era scheme) is attached
    // after the proof by servers that make both, as Fedify does: it is not part of what the
    // proof signs.
    if unsecured
        .get("signature")
        .and_then(|s| s.get("type"))
        .and_then(Value::as_str)
        == Some("RsaSignature2017")
    {
        unsecured.remove("signature");
    }
    let mut out = Sha256::digest(jcs(config)?).to_vec();
    out.extend_from_slice(&Sha256::digest(jcs(&Value::Object(unsecured))?));
    Ok(out)
}

fn config(document: &Map<String, Value>, verification_method: &str, created: &str) -> Value {
    let mut c = json!({
        "type": "DataIntegrityProof",
        "cryptosuite": CRYPTOSUITE,
        "verificationMethod": verification_method,
        "proofPurpose": "assertionMethod",
        "created": created,
    });
    if let Some(ctx) = document.get("@context") {
        c["@context"] = ctx.clone();
    }
    c
}

/// `document` with a `proof` by `key` made at `at` (replacing any proof it had).
pub fn sign(document: &Value, key: &ProofKey, at: DateTime<Utc>) -> Result<Value, ProofError> {
    let Value::Object(doc) = document else {
        return Err(ProofError::Malformed(
            "only an object can carry a proof".into(),
        ));
    };
    let created = at.to_rfc3339_opts(SecondsFormat::Secs, true);
    let cfg = config(doc, &key.id, &created);
    let signature = key.key.sign(&signed_bytes(doc, &cfg)?);
    let mut proof = cfg;
    if let Value::Object(p) = &mut proof {
        p.remove("@context");
        p.insert(
            "proofValue".into(),
            format!("z{}", bs58::encode(signature.to_bytes()).into_string()).into(),
        );
    }
    let mut signed = doc.clone();
    signed.insert("proof".into(), proof);
    Ok(Value::Object(signed))
}

/// What a document's proof claims, before any key is fetched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    pub verification_method: String,
    created: String,
    signature: [u8; 64],
}

/// The document's proof, if it has one: `Ok(None)` without a `proof`; an error for a proof we
/// cannot check (another cryptosuite or purpose, several proofs, a malformed value).
pub fn claim(document: &Value) -> Result<Option<Claim>, ProofError> {
    let Some(proof) = document.get("proof") else {
        return Ok(None);
    };
    let proof = match proof {
        Value::Object(_) => proof,
        Value::Array(a) if a.len() == 1 => &a[0],
        _ => return Err(ProofError::Unsupported("one proof per activity".into())),
    };
    let field = |name: &str| {
        proof
            .get(name)
            .and_then(Value::as_str)
            .ok_or_else(|| ProofError::Malformed(format!("no {name}")))
    };
    if field("type")? != "DataIntegrityProof" {
        return Err(ProofError::Unsupported(format!("type {}", field("type")?)));
    }
    if field("cryptosuite")? != CRYPTOSUITE {
        return Err(ProofError::Unsupported(format!(
            "cryptosuite {}",
            field("cryptosuite")?
        )));
    }
    if field("proofPurpose")? != "assertionMethod" {
        return Err(ProofError::Unsupported(format!(
            "proof purpose {}",
            field("proofPurpose")?
        )));
    }
    let value = field("proofValue")?;
    let bytes = value
        .strip_prefix('z')
        .and_then(|v| bs58::decode(v).into_vec().ok())
        .ok_or_else(|| ProofError::Malformed("proofValue is not base58btc multibase".into()))?;
    let signature: [u8; 64] = bytes
        .try_into()
        .map_err(|_| ProofError::Malformed("an Ed25519 signature is 64 bytes".into()))?;
    Ok(Some(Claim {
        verification_method: field("verificationMethod")?.to_string(),
        created: field("created")?.to_string(),
        signature,
    }))
}

/// Checks `claim` (from [`claim`]) over `document` against `key`.
pub fn verify(document: &Value, claim: &Claim, key: &VerifyingKey) -> Result<(), ProofError> {
    let Value::Object(doc) = document else {
        return Err(ProofError::Malformed(
            "only an object can carry a proof".into(),
        ));
    };
    let cfg = config(doc, &claim.verification_method, &claim.created);
    key.verify(
        &signed_bytes(doc, &cfg)?,
        &Signature::from_bytes(&claim.signature),
    )
    .map_err(|_| ProofError::Invalid)
}

/// The Ed25519 key an actor document lists as `assertionMethod` under `id`, if its controller
/// is that actor.
pub fn listed_key(actor_doc: &Value, id: &str) -> Result<VerifyingKey, ProofError> {
    let actor = actor_doc.get("id").and_then(Value::as_str).unwrap_or("");
    let entries = match actor_doc.get("assertionMethod") {
        Some(Value::Array(a)) => a.iter().collect::<Vec<_>>(),
        Some(v @ Value::Object(_)) => vec![v],
        _ => vec![],
    };
    let entry = entries
        .into_iter()
        .find(|e| e.get("id").and_then(Value::as_str) == Some(id))
        .ok_or_else(|| ProofError::BadKey(format!("{actor} lists no assertion method {id}")))?;
    if entry.get("type").and_then(Value::as_str) != Some("Multikey") {
        return Err(ProofError::BadKey(format!("{id} is not a Multikey")));
    }
    if entry.get("controller").and_then(Value::as_str) != Some(actor) {
        return Err(ProofError::BadKey(format!(
            "{id} is not controlled by {actor}"
        )));
    }
    parse_multikey(
        entry
            .get("publicKeyMultibase")
            .and_then(Value::as_str)
            .ok_or_else(|| ProofError::BadKey(format!("{id} has no publicKeyMultibase")))?,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> ProofKey {
        ProofKey {
            id: "https://h.example/users/a#ed25519-key".into(),
            key: SigningKey::from_bytes(&[7u8; 32]),
        }
    }

    fn activity() -> Value {
        json!({
            "@context": ["https://www.w3.org/ns/activitystreams", {"votersCount": "toot:votersCount"}],
            "id": "https://h.example/activities/1", "type": "Create",
            "actor": "https://h.example/users/a",
            "object": {"type": "Note", "content": "<p>é &amp; ü</p>", "n": 1.5e3},
        })
    }

    #[test]
    fn a_signed_document_verifies_and_any_change_breaks_it() {
        let at = DateTime::parse_from_rfc3339("2026-12-01T04:40:00Z")
            .expect("date")
            .with_timezone(&Utc);
        let signed = sign(&activity(), &key(), at).expect("sign");
        assert_eq!(signed["proof"]["created"], "2026-12-01T04:40:00Z");
        assert!(signed["proof"].get("@context").is_none());
        let c = claim(&signed).expect("claim").expect("a proof");
        let public = key().key.verifying_key();
        verify(&signed, &c, &public).expect("verifies");
        // Key order does not matter (JCS), content does.
        let reordered: Value =
            serde_json::from_str(&serde_json::to_string(&signed).expect("json")).expect("json");
        verify(&reordered, &c, &public).expect("same document, any order");
        let mut tampered = signed.clone();
        tampered["object"]["content"] = "<p>other</p>".into();
        assert_eq!(verify(&tampered, &c, &public), Err(ProofError::Invalid));
        let other = SigningKey::from_bytes(&[8u8; 32]).verifying_key();
        assert_eq!(verify(&signed, &c, &other), Err(ProofError::Invalid));
    }

    #[test]
    fn a_linked_data_signature_added_after_the_proof_does_not_break_it() {
        let at = Utc::now();
        let mut signed = sign(&activity(), &key(), at).expect("sign");
        signed["signature"] = json!({"type": "RsaSignature2017", "signatureValue": "x"});
        let c = claim(&signed).expect("claim").expect("a proof");
        verify(&signed, &c, &key().key.verifying_key()).expect("still verifies");
        signed["signature"] = json!({"type": "SomethingElse"});
        assert_eq!(
            verify(&signed, &c, &key().key.verifying_key()),
            Err(ProofError::Invalid),
            "any other member is signed content"
        );
    }

    #[test]
    fn multikeys_round_trip_and_look_like_everyone_elses() {
        let public = key().key.verifying_key();
        let mk = multikey(&public);
        assert!(mk.starts_with("z6Mk"), "{mk}: Ed25519 multikeys start z6Mk");
        assert_eq!(parse_multikey(&mk).expect("parse"), public);
        assert!(parse_multikey("zabc").is_err());
        assert!(parse_multikey(&mk[1..]).is_err());
    }

    #[test]
    fn proofs_we_cannot_check_are_named() {
        let mut doc = activity();
        assert_eq!(claim(&doc), Ok(None));
        doc["proof"] = json!({"type": "DataIntegrityProof", "cryptosuite": "ecdsa-rdfc-2019",
                               "proofPurpose": "assertionMethod", "verificationMethod": "x",
                               "created": "2026-01-01T00:00:00Z", "proofValue": "z1"});
        assert!(matches!(claim(&doc), Err(ProofError::Unsupported(_))));
        doc["proof"]["cryptosuite"] = CRYPTOSUITE.into();
        doc["proof"]["proofValue"] = "not-multibase".into();
        assert!(matches!(claim(&doc), Err(ProofError::Malformed(_))));
    }

    #[test]
    fn only_a_listed_multikey_of_the_actor_counts() {
        let k = key();
        let actor = json!({"id": "https://h.example/users/a",
                           "assertionMethod": assertion_method("https://h.example/users/a", &k)});
        assert_eq!(
            listed_key(&actor, &k.id).expect("listed"),
            k.key.verifying_key()
        );
        assert!(listed_key(&actor, "https://h.example/users/a#other").is_err());
        let stolen = json!({"id": "https://evil.example/users/e",
                            "assertionMethod": assertion_method("https://h.example/users/a", &k)});
        assert!(
            listed_key(&stolen, &k.id).is_err(),
            "controller must be the actor"
        );
    }
}
