//! Whether the inbox takes an activity (R-AP-1, SPEC.md §9): the request's signature (RFC 9421
//! or draft-cavage, whichever it carries) checked before and after the body is read, the
//! signer's key (cached, refetched when it stops verifying), an integrity proof (FEP-8b32) when
//! there is one, and who may speak for the activity's actor. The HTTP handler only reads the
//! body within its limits and turns an `InboxError` into a status.
//!
//! Checks, cheapest first: signature header and date window (before the body) → `Digest`
//! (with it) → the activity's id, type and actor, its id on its actor's origin → the signer's
//! key → signer is the actor, or a relay with a valid proof by the actor.

use std::time::SystemTime;

use axum::http::HeaderMap;
use serde_json::Value;
use sqlx::PgPool;

use super::incoming::{self, Verified};
use crate::accounts::Account;
use crate::federation::actors::actor::{self, ActorError, id_of};
use crate::federation::iri::same_origin;
use crate::federation::transport::fetch::FetchError;
use crate::federation::transport::signature::{self, PendingVerification, SigningKey};
use crate::federation::{
    Federation, crypto::keys, crypto::proof_keys, crypto::proofs, normalize, transport::rfc9421,
    transport::schemes,
};

/// A key that fails to verify is refetched only if our copy is older than this, so forged
/// requests cannot make us hammer the key's server.
const KEY_REFETCH_AFTER_SECONDS: f64 = 60.0;

#[derive(Debug, thiserror::Error)]
pub enum InboxError {
    /// The request does not prove who sent it (401).
    #[error("{0}")]
    Unauthorized(String),
    /// The document is not an activity we can store (400).
    #[error("{0}")]
    Malformed(String),
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
}

fn unauthorized(msg: impl Into<String>) -> InboxError {
    InboxError::Unauthorized(msg.into())
}

fn malformed(msg: impl Into<String>) -> InboxError {
    InboxError::Malformed(msg.into())
}

/// A POST to one of our inboxes (or a signed GET, [`SignedRequest::get`]), as far as its
/// signature is concerned.
pub struct SignedRequest<'a> {
    method: &'static str,
    path_and_query: &'a str,
    headers: &'a HeaderMap,
    /// RFC 9421 (`Signature-Input`), else draft-cavage.
    rfc9421: bool,
    target_uri: String,
}

impl<'a> SignedRequest<'a> {
    pub fn new(fed: &Federation, path_and_query: &'a str, headers: &'a HeaderMap) -> Self {
        SignedRequest {
            method: "POST",
            path_and_query,
            headers,
            rfc9421: rfc9421::is_signed(headers),
            target_uri: format!("{}{path_and_query}", fed.origin),
        }
    }

    /// A GET of one of our documents.
    pub fn get(fed: &Federation, path_and_query: &'a str, headers: &'a HeaderMap) -> Self {
        SignedRequest {
            method: "GET",
            ..SignedRequest::new(fed, path_and_query, headers)
        }
    }

    /// The signature's fields, coverage and time, checked before the body is read, so an
    /// unsigned or stale request is refused without reading it. With the body, the digest too.
    pub fn check(&self, body: Option<&[u8]>) -> Result<PendingVerification, InboxError> {
        let now = SystemTime::now();
        if self.rfc9421 {
            let target = rfc9421::Target {
                method: self.method,
                uri: &self.target_uri,
            };
            rfc9421::prepare(&target, self.headers, body, now)
        } else {
            let (method, path) = (self.method, self.path_and_query);
            signature::prepare_verification(method, path, self.headers, body, now)
        }
        .map_err(|e| unauthorized(e.to_string()))
    }

    /// Whether it carries a signature at all.
    pub fn is_signed(&self) -> bool {
        self.rfc9421 || self.headers.contains_key("signature")
    }
}

/// Who signed the GET `request`: the owner of the key its signature verifies with (fetched
/// as the inbox fetches one, signed as the instance actor). `None` for an unsigned request or
/// one whose signature does not verify: such a request is read as an anonymous one, as
/// Mastodon reads it when it does not require signed fetches.
pub async fn signer_of_get(
    pool: &PgPool,
    fed: &Federation,
    request: &SignedRequest<'_>,
) -> Result<Option<String>, sqlx::Error> {
    if !request.is_signed() {
        return Ok(None);
    }
    let Ok(pending) = request.check(None) else {
        return Ok(None);
    };
    match verified_owner(pool, fed, &pending, None).await {
        Ok(owner) => Ok(Some(owner)),
        Err(InboxError::Database(e)) => Err(e),
        Err(e) => {
            tracing::debug!(key = %pending.key_id, error = %e, "a signed GET read as anonymous");
            Ok(None)
        }
    }
}

/// An activity the inbox took.
pub struct Accepted {
    pub id: String,
    pub ty: String,
    /// `false` when the same id was already stored (nothing is enqueued again).
    pub fresh: bool,
}

/// Verifies `activity` (as parsed from the body `pending` covers), sent to `account`'s inbox or
/// the shared one, and stores it once with its processing enqueued.
pub async fn accept(
    pool: &PgPool,
    fed: &Federation,
    account: Option<&Account>,
    request: &SignedRequest<'_>,
    pending: &PendingVerification,
    activity: Value,
) -> Result<Accepted, InboxError> {
    if let Some(why) = normalize::malformed_context(&activity) {
        return Err(malformed(why));
    }
    // A proof (FEP-8b32) signs the document as its author sent it, so it is checked on that.
    let proof = proofs::claim(&activity);
    let original = activity.clone();
    // Whatever compaction the sender chose, what is stored and processed has one shape.
    let activity = normalize::normalize(activity);
    let text = |key: &str| activity.get(key).and_then(Value::as_str);
    let id = text("id").ok_or_else(|| malformed("activity has no id"))?;
    let ty = text("type").ok_or_else(|| malformed("activity has no type"))?;
    let actor_iri = activity
        .get("actor")
        .and_then(id_of)
        .ok_or_else(|| malformed("activity has no actor"))?;
    if !same_origin(id, actor_iri) {
        return Err(malformed("activity id is not on its actor's origin"));
    }

    let owner = verified_owner(pool, fed, pending, account).await?;
    let proven = match proof {
        Ok(None) => false,
        Ok(Some(claim)) => {
            let signer = fetch_signer(pool, fed, account).await;
            proof_keys::check(pool, fed, &original, &claim, actor_iri, signer.as_ref())
                .await
                .map_err(|e| match e {
                    // A fetch failure says no more than a signature key's does (no network
                    // detail: the inbox must not be an oracle for what we can reach).
                    proof_keys::ProofCheckError::Key(k) => {
                        key_fetch_failed(&claim.verification_method, signer.as_ref(), &k)
                    }
                    other => unauthorized(format!("integrity proof: {other}")),
                })?;
            true
        }
        // A proof we cannot check (another cryptosuite) proves nothing; the actor's own HTTP
        // signature still does, so only a relayed activity is refused for it.
        Err(e) if owner == actor_iri => {
            tracing::info!(activity = id, error = %e, "inbox: ignoring a proof we cannot check");
            false
        }
        Err(e) => return Err(unauthorized(format!("integrity proof: {e}"))),
    };
    // Relayed (signed by someone else): accepted only with a valid proof by its actor.
    if owner != actor_iri && !proven {
        return Err(unauthorized(format!(
            "signed by {owner}, but the activity's actor is {actor_iri}"
        )));
    }
    if request.rfc9421 {
        // It signs with RFC 9421, so it reads it: our deliveries to it knock that way first.
        schemes::learned_from_request(pool, fed, &pending.key_id).await;
    }
    let verified = Verified {
        id,
        ty,
        actor: actor_iri,
        body: &activity,
    };
    let fresh = incoming::store(pool, account.map(|a| a.id), &pending.key_id, &verified).await?;
    Ok(Accepted {
        id: id.to_string(),
        ty: ty.to_string(),
        fresh,
    })
}

/// Checks the signature against the signer's key and returns the key's owner. A cached key
/// that fails is refetched once (the remote may have rotated it). The fetch is signed with the
/// addressed account's key, or, at the shared inbox, with the instance actor's, so servers in
/// authorized-fetch mode answer it.
async fn verified_owner(
    pool: &PgPool,
    fed: &Federation,
    pending: &PendingVerification,
    account: Option<&Account>,
) -> Result<String, InboxError> {
    if let Some(k) = fed.verified_keys.get(&pending.key_id)
        && pending.verify(&k.key).is_ok()
    {
        return Ok(k.owner);
    }
    let cached = actor::cached_key(pool, &pending.key_id).await?;
    if let Some(k) = &cached {
        if let Ok(key) = keys::public_key_from_pem(&k.pem)
            && pending.verify(&key).is_ok()
        {
            fed.verified_keys.put(&pending.key_id, key, &k.owner);
            return Ok(k.owner.clone());
        }
        if k.age_seconds < KEY_REFETCH_AFTER_SECONDS {
            return Err(unauthorized("signature does not verify"));
        }
    }
    let signer = fetch_signer(pool, fed, account).await;
    let key = actor::fetch_key(pool, fed, &pending.key_id, signer.as_ref())
        .await
        .map_err(|e| key_fetch_failed(&pending.key_id, signer.as_ref(), &e))?;
    let public = keys::public_key_from_pem(&key.pem)
        .map_err(|e| unauthorized(format!("bad public key: {e}")))?;
    pending
        .verify(&public)
        .map_err(|e| unauthorized(e.to_string()))?;
    fed.verified_keys.put(&pending.key_id, public, &key.owner);
    Ok(key.owner)
}

/// The 401 for a key we could not fetch or trust. The client learns what the key's server
/// answered (its HTTP status) but nothing of our side: why the guard refused an address, what
/// a name resolved to or that it did not resolve would make the inbox an oracle for internal
/// DNS and addresses. The detail goes to the log.
fn key_fetch_failed(key_id: &str, signer: Option<&SigningKey>, e: &ActorError) -> InboxError {
    let how = match signer {
        Some(k) => format!("signed as {}", k.key_id),
        None => "unsigned".to_string(),
    };
    tracing::info!(key = key_id, error = %e, "inbox: cannot fetch or trust the signer's key");
    let why = match e {
        ActorError::Fetch(FetchError::Status(code @ (401 | 403))) => {
            format!("HTTP {code} (the key's server refused our signed fetch)")
        }
        ActorError::Fetch(FetchError::Status(code)) => format!("HTTP {code}"),
        ActorError::Fetch(FetchError::TooManyRequests(_)) => "HTTP 429".into(),
        ActorError::Invalid(_) | ActorError::Fetch(FetchError::Invalid(_)) => {
            "key document not accepted".into()
        }
        _ => "key fetch refused".into(),
    };
    unauthorized(format!("cannot fetch key {key_id} ({how}): {why}"))
}

/// The key that signs a key fetch: the addressed account's, else the instance actor's. Without
/// either (a key that cannot be decrypted, the database unreachable) the fetch goes unsigned,
/// which servers outside authorized-fetch mode still answer.
async fn fetch_signer(
    pool: &PgPool,
    fed: &Federation,
    account: Option<&Account>,
) -> Option<SigningKey> {
    if let Some(a) = account {
        match fed.signing_key(a) {
            Ok(k) => return Some(k),
            Err(e) => tracing::warn!(
                account = %a.username,
                error = %format!("{e:#}"),
                "cannot use the account's key; signing the key fetch as the instance actor"
            ),
        }
    }
    match fed.instance_key(pool).await {
        Ok(k) => Some(k.signing.clone()),
        Err(e) => {
            tracing::warn!(
                error = %format!("{e:#}"),
                "cannot load the instance actor's key; fetching the signer's key unsigned"
            );
            None
        }
    }
}
