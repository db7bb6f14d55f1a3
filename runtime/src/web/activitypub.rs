//! ActivityPub endpoints (R-AP-1, SPEC.md §9): WebFinger, actor documents and collections,
//! and the two inboxes, which verify the HTTP Signature, store the activity once, enqueue its
//! processing and answer 202.
//!
//! Inbox checks, cheapest first: unknown account 404 → signature header and date window 401
//! (before the body is read) → body over 1 MiB 413 → `Digest` 401 → malformed JSON or
//! activity, or a NUL character in it, 400 → the signer's key (cached, refetched when the
//! signature stops verifying) 401 → signer is the activity's actor 401.
//!
//! The instance actor (`GET /actor`, an `Application`) signs the key fetches of the shared
//! inbox, which has no account to sign with, so authorized-fetch servers answer them.

use std::sync::Arc;
use std::time::SystemTime;

use axum::extract::{Path, Query, Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};

use super::body::{parse_json, read_limited};
use super::{ApiError, AppState};
use crate::federation::accounts::{self, Account};
use crate::federation::actor::{self, id_of};
use crate::federation::context;
use crate::federation::fetch::{ACTIVITY_JSON, FetchError};
use crate::federation::iri::same_origin;
use crate::federation::keys;
use crate::federation::signature::{self, PendingVerification};
use crate::federation::{
    Federation, activity, instance, normalize, profiles, rfc9421, schemes, statuses, webfinger,
};
use crate::federation::{proof_keys, proofs};
use uuid::Uuid;

/// Largest activity the inbox accepts; Mastodon's own limit is about this size.
pub const MAX_INBOX_BYTES: usize = 1024 * 1024;
/// A key that fails to verify is refetched only if our copy is older than this, so forged
/// requests cannot make us hammer the key's server.
const KEY_REFETCH_AFTER_SECONDS: f64 = 60.0;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/.well-known/webfinger", get(webfinger_handler))
        .route("/users/{name}", get(actor_handler))
        .route("/users/{name}/outbox", get(outbox_handler))
        .route("/users/{name}/statuses/{id}", get(status_handler))
        .route("/users/{name}/followers", get(followers_handler))
        .route("/users/{name}/following", get(following_handler))
        .route("/users/{name}/inbox", post(user_inbox))
        .route("/inbox", post(shared_inbox))
        .route("/actor", get(instance_actor_handler))
        .route("/actor/outbox", get(instance_outbox_handler))
        // The instance actor has no inbox of its own: what is sent to it is handled as the shared
        // inbox handles it (verified, stored once, processed for whomever it concerns).
        .route("/actor/inbox", post(shared_inbox))
}

pub(super) fn federation(s: &AppState) -> Result<&Arc<Federation>, ApiError> {
    s.fed.as_ref().ok_or_else(|| {
        ApiError(
            StatusCode::SERVICE_UNAVAILABLE,
            "federation is disabled on this node: set SECRET_KEY".into(),
        )
    })
}

fn activity_json(v: Value) -> Response {
    ([(header::CONTENT_TYPE, ACTIVITY_JSON)], Json(v)).into_response()
}

async fn account_named(s: &AppState, name: &str) -> Result<Account, ApiError> {
    accounts::by_username(&s.pool, name)
        .await?
        .ok_or_else(|| ApiError(StatusCode::NOT_FOUND, format!("no account {name:?}")))
}

#[derive(Deserialize)]
struct WebFingerQuery {
    resource: Option<String>,
}

async fn webfinger_handler(
    State(s): State<AppState>,
    Query(q): Query<WebFingerQuery>,
) -> Result<Response, ApiError> {
    let fed = federation(&s)?;
    let resource = q
        .resource
        .ok_or_else(|| ApiError(StatusCode::BAD_REQUEST, "missing resource parameter".into()))?;
    // The instance actor: acct:<domain>@<domain> (account names cannot contain a dot or a
    // colon, so no account shadows it), or its IRI.
    let instance = resource == fed.instance_actor_iri()
        || webfinger::parse_acct(&resource).is_some_and(|(name, domain)| {
            name.eq_ignore_ascii_case(&fed.domain) && domain.eq_ignore_ascii_case(&fed.domain)
        });
    if instance {
        return Ok((
            [(header::CONTENT_TYPE, webfinger::JRD_JSON)],
            Json(webfinger::instance_jrd(fed)),
        )
            .into_response());
    }
    // acct:name@our-domain, or the actor IRI itself.
    let name = match webfinger::parse_acct(&resource) {
        Some((name, domain)) if domain.eq_ignore_ascii_case(&fed.domain) => name.to_string(),
        Some(_) => {
            return Err(ApiError(
                StatusCode::NOT_FOUND,
                "not an account of this server".into(),
            ));
        }
        None => fed
            .local_username(&resource)
            .ok_or_else(|| ApiError(StatusCode::NOT_FOUND, "unknown resource".into()))?
            .to_string(),
    };
    let account = account_named(&s, &name).await?;
    Ok((
        [(header::CONTENT_TYPE, webfinger::JRD_JSON)],
        Json(webfinger::jrd(fed, &account)),
    )
        .into_response())
}

async fn actor_handler(
    State(s): State<AppState>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let fed = federation(&s)?;
    let account = account_named(&s, &name).await?;
    let profile = profiles::load(&s.pool, account.id)
        .await?
        .ok_or_else(|| ApiError(StatusCode::NOT_FOUND, format!("no account {name:?}")))?;
    // The FEP-8b32 proof key, made here on first use for accounts older than proofs.
    let mut conn = s.pool.acquire().await?;
    let key = fed.proof_key(&mut conn, account.id).await.map_err(|e| {
        tracing::error!(account = %account.username, error = %format!("{e:#}"), "proof key");
        ApiError(
            StatusCode::SERVICE_UNAVAILABLE,
            "account key unavailable".into(),
        )
    })?;
    Ok(activity_json(actor::local_actor_document(
        fed, &account, &profile, &key,
    )))
}

/// A local status's URI serves its object (`Note`, or `Question` with current counts), so
/// remote servers can fetch what our `Create` announced, or what someone looks up.
async fn status_handler(
    State(s): State<AppState>,
    Path((name, id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let fed = federation(&s)?;
    let not_found = || ApiError(StatusCode::NOT_FOUND, "no such status".into());
    let id = Uuid::parse_str(&id).map_err(|_| not_found())?;
    let mut conn = s.pool.acquire().await?;
    let uri = fed.status_iri(&name, id);
    let Some(status) = statuses::load(&mut conn, Some(&s.drive), id)
        .await?
        .filter(|st| st.username == name && st.uri == uri)
    else {
        // A deleted status answers 410 with a Tombstone, as Mastodon's do.
        let gone: Option<chrono::DateTime<chrono::Utc>> =
            sqlx::query_scalar("SELECT deleted_at FROM status_tombstones WHERE uri = $1")
                .bind(&uri)
                .fetch_optional(&mut *conn)
                .await?;
        return match gone {
            Some(at) => {
                let mut r = activity_json(json!({
                    "@context": context::ld(),
                    "id": uri, "type": "Tombstone", "deleted": at,
                }));
                *r.status_mut() = StatusCode::GONE;
                Ok(r)
            }
            None => Err(not_found()),
        };
    };
    // Followers-only and direct statuses are not served to anyone: signed-fetch
    // authorisation of the requester is not implemented, so they answer as unknown.
    if !matches!(
        status.visibility,
        crate::statuses::Visibility::Public | crate::statuses::Visibility::Unlisted
    ) {
        return Err(not_found());
    }
    Ok(activity_json(statuses::object(fed, &status)))
}

async fn instance_actor_handler(State(s): State<AppState>) -> Result<Response, ApiError> {
    let fed = federation(&s)?;
    let key = fed
        .instance_key(&s.pool)
        .await
        .map_err(instance_key_error)?;
    Ok(activity_json(instance::document(fed, key)))
}

async fn instance_outbox_handler(State(s): State<AppState>) -> Result<Response, ApiError> {
    let fed = federation(&s)?;
    Ok(collection(fed.instance_outbox(), 0))
}

fn instance_key_error(e: anyhow::Error) -> ApiError {
    tracing::error!(error = %format!("{e:#}"), "cannot load the instance actor's key");
    ApiError(
        StatusCode::SERVICE_UNAVAILABLE,
        "the instance actor's key is unavailable".into(),
    )
}

fn collection(id: String, total: i64) -> Response {
    activity_json(json!({
        "@context": context::ld(), "id": id, "type": "OrderedCollection", "totalItems": total,
    }))
}

async fn outbox_handler(
    State(s): State<AppState>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let fed = federation(&s)?;
    let account = account_named(&s, &name).await?;
    // Only public posts would be listed here; this runtime does not author posts yet.
    Ok(collection(fed.outbox(&account.username), 0))
}

async fn followers_handler(
    State(s): State<AppState>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let fed = federation(&s)?;
    let account = account_named(&s, &name).await?;
    let (n, _) = follow_counts(&s, account.id).await?;
    Ok(collection(fed.followers(&account.username), n))
}

async fn following_handler(
    State(s): State<AppState>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let fed = federation(&s)?;
    let account = account_named(&s, &name).await?;
    let (_, n) = follow_counts(&s, account.id).await?;
    Ok(collection(fed.following(&account.username), n))
}

/// An account's (followers, following) counts, kept by triggers in `account_stats`
/// (anonymous requests must not cost a count of its followers); none kept yet is zero.
async fn follow_counts(s: &AppState, account: uuid::Uuid) -> Result<(i64, i64), ApiError> {
    let counts: Option<(i64, i64)> =
        sqlx::query_as("SELECT followers, following FROM account_stats WHERE account_id = $1")
            .bind(account)
            .fetch_optional(&s.pool)
            .await?;
    Ok(counts.unwrap_or_default())
}

async fn user_inbox(
    State(s): State<AppState>,
    Path(name): Path<String>,
    req: Request,
) -> Result<Response, ApiError> {
    federation(&s)?;
    let account = account_named(&s, &name).await?;
    receive(&s, Some(account), req).await
}

async fn shared_inbox(State(s): State<AppState>, req: Request) -> Result<Response, ApiError> {
    receive(&s, None, req).await
}

fn unauthorized(msg: impl Into<String>) -> ApiError {
    ApiError(StatusCode::UNAUTHORIZED, msg.into())
}

fn bad_request(msg: impl Into<String>) -> ApiError {
    ApiError(StatusCode::BAD_REQUEST, msg.into())
}

async fn receive(
    s: &AppState,
    account: Option<Account>,
    req: Request,
) -> Result<Response, ApiError> {
    let fed = federation(s)?;
    let (parts, body) = req.into_parts();
    let path = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or_else(|| parts.uri.path());
    // RFC 9421 (Signature-Input) or draft-cavage: the signature's fields, coverage and time
    // are checked before the body is read, so an unsigned or stale request is refused without
    // reading it; the digest needs the body.
    let rfc9421 = rfc9421::is_signed(&parts.headers);
    let target_uri = format!("{}{path}", fed.origin);
    let prepare = |body: Option<&[u8]>| {
        if rfc9421 {
            let target = rfc9421::Target {
                method: "POST",
                uri: &target_uri,
            };
            rfc9421::prepare(&target, &parts.headers, body, SystemTime::now())
        } else {
            signature::prepare_verification("POST", path, &parts.headers, body, SystemTime::now())
        }
        .map_err(|e| unauthorized(e.to_string()))
    };
    prepare(None)?;
    let bytes = read_limited(&parts.headers, body, MAX_INBOX_BYTES, s.http.body_timeout).await?;
    let pending = prepare(Some(&bytes))?;

    let activity: Value = parse_json(&bytes, StatusCode::BAD_REQUEST)?;
    if let Some(why) = normalize::malformed_context(&activity) {
        return Err(bad_request(why));
    }
    // A proof (FEP-8b32) signs the document as its author sent it, so it is checked on that.
    let proof = proofs::claim(&activity);
    let original = activity.clone();
    // Whatever compaction the sender chose, what is stored and processed has one shape.
    let activity = normalize::normalize(activity);
    let id = activity
        .get("id")
        .and_then(Value::as_str)
        .ok_or_else(|| bad_request("activity has no id"))?;
    let ty = activity
        .get("type")
        .and_then(Value::as_str)
        .ok_or_else(|| bad_request("activity has no type"))?;
    let actor_iri = activity
        .get("actor")
        .and_then(id_of)
        .ok_or_else(|| bad_request("activity has no actor"))?;
    if !same_origin(id, actor_iri) {
        return Err(bad_request("activity id is not on its actor's origin"));
    }

    let owner = verified_owner(s, fed, &pending, account.as_ref()).await?;
    let proven = match proof {
        Ok(None) => false,
        Ok(Some(claim)) => {
            let signer = fetch_signer(s, fed, account.as_ref()).await;
            proof_keys::check(&s.pool, fed, &original, &claim, actor_iri, signer.as_ref())
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
    if rfc9421 {
        // It signs with RFC 9421, so it reads it: our deliveries to it knock that way first.
        schemes::learned_from_request(&s.pool, fed, &pending.key_id).await;
    }
    let fresh = activity::store_incoming(
        &s.pool,
        account.as_ref().map(|a| a.id),
        &pending.key_id,
        id,
        ty,
        actor_iri,
        &activity,
    )
    .await?;
    tracing::debug!(
        activity = id,
        kind = ty,
        fresh,
        "inbox accepted an activity"
    );
    Ok((StatusCode::ACCEPTED, Json(json!({}))).into_response())
}

/// Checks the signature against the signer's key and returns the key's owner. A cached key
/// that fails is refetched once (the remote may have rotated it). The fetch is signed with the
/// addressed account's key, or, at the shared inbox, with the instance actor's, so servers in
/// authorized-fetch mode answer it.
async fn verified_owner(
    s: &AppState,
    fed: &Federation,
    pending: &PendingVerification,
    account: Option<&Account>,
) -> Result<String, ApiError> {
    if let Some(k) = fed.verified_keys.get(&pending.key_id)
        && pending.verify(&k.key).is_ok()
    {
        return Ok(k.owner);
    }
    let cached = actor::cached_key(&s.pool, &pending.key_id).await?;
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
    let signer = fetch_signer(s, fed, account).await;
    let key = actor::fetch_key(&s.pool, fed, &pending.key_id, signer.as_ref())
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
fn key_fetch_failed(
    key_id: &str,
    signer: Option<&signature::SigningKey>,
    e: &actor::ActorError,
) -> ApiError {
    let how = match signer {
        Some(k) => format!("signed as {}", k.key_id),
        None => "unsigned".to_string(),
    };
    tracing::info!(key = key_id, error = %e, "inbox: cannot fetch or trust the signer's key");
    let why = match e {
        actor::ActorError::Fetch(FetchError::Status(code @ (401 | 403))) => {
            format!("HTTP {code} (the key's server refused our signed fetch)")
        }
        actor::ActorError::Fetch(FetchError::Status(code)) => format!("HTTP {code}"),
        actor::ActorError::Fetch(FetchError::TooManyRequests(_)) => "HTTP 429".into(),
        actor::ActorError::Invalid(_) | actor::ActorError::Fetch(FetchError::Invalid(_)) => {
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
    s: &AppState,
    fed: &Federation,
    account: Option<&Account>,
) -> Option<signature::SigningKey> {
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
    match fed.instance_key(&s.pool).await {
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
