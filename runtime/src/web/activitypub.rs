//! ActivityPub endpoints (R-AP-1, SPEC.md §9): WebFinger, actor documents and collections,
//! and the two inboxes, which verify the HTTP Signature, store the activity once, enqueue its
//! processing and answer 202.
//!
//! Inbox checks, cheapest first: unknown account 404 → signature header and date window 401
//! (before the body is read) → body over 1 MiB 413 → `Digest` 401 → malformed JSON or
//! activity, or a NUL character in it, 400 → the signer's key (cached, refetched when the
//! signature stops verifying) 401 → signer is the activity's actor 401. Everything after
//! reading the body is `federation::inbound::accept`.
//!
//! The instance actor (`GET /actor`, an `Application`) signs the key fetches of the shared
//! inbox, which has no account to sign with, so authorized-fetch servers answer them.

use std::sync::Arc;

use axum::extract::{FromRequestParts, Path, Query, Request, State};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};

use super::body::{parse_json, read_limited};
use super::{ApiError, AppState};
use crate::accounts::{self, Account};
use crate::federation::context;
use crate::federation::transport::fetch::ACTIVITY_JSON;
use crate::federation::{
    Federation, actors::instance, actors::profiles, actors::webfinger, inbound, outbound::statuses,
};
use crate::statuses::access;
use uuid::Uuid;

/// Largest activity the inbox accepts; Mastodon's own limit is about this size.
pub const MAX_INBOX_BYTES: usize = 1024 * 1024;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/.well-known/webfinger", get(webfinger_handler))
        .route("/users/{name}/outbox", get(outbox_handler))
        .route(
            "/users/{name}/quote_authorizations/{id}",
            get(quote_authorization_handler),
        )
        .route("/users/{name}/approvals/{id}", get(approval_handler))
        .route(
            "/users/{name}/approvals/{id}/accept",
            get(approval_accept_handler),
        )
        .route("/users/{name}/followers", get(followers_handler))
        .route("/users/{name}/following", get(following_handler))
        .route("/users/{name}/collections/featured", get(featured_handler))
        .route("/users/{name}/collections/tags", get(featured_tags_handler))
        .route("/users/{name}/inbox", post(user_inbox))
        .route("/inbox", post(shared_inbox))
        .route("/actor", get(instance_actor_handler))
        .route("/actor/outbox", get(instance_outbox_handler))
        // The instance actor has no inbox of its own: what is sent to it is handled as the shared
        // inbox handles it (verified, stored once, processed for whomever it concerns).
        .route("/actor/inbox", post(shared_inbox))
}

pub(super) fn federation(s: &AppState) -> Result<&Arc<Federation>, ApiError> {
    s.fed
        .as_ref()
        .ok_or_else(|| ApiError::unavailable("federation is disabled on this node: set SECRET_KEY"))
}

fn activity_json(v: Value) -> Response {
    ([(header::CONTENT_TYPE, ACTIVITY_JSON)], Json(v)).into_response()
}

async fn account_named(s: &AppState, name: &str) -> Result<Account, ApiError> {
    accounts::by_username(&s.pool, name)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("no account {name:?}")))
}

/// The local account a `/users/{name}/…` path names, on a node that federates: 503 without
/// federation (asked first), 404 for no such account.
struct Named {
    fed: Arc<Federation>,
    account: Account,
}

impl FromRequestParts<AppState> for Named {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, s: &AppState) -> Result<Self, ApiError> {
        let fed = federation(s)?.clone();
        let Path(name) = Path::<String>::from_request_parts(parts, s)
            .await
            .map_err(|e| ApiError::not_found(e.body_text()))?;
        let account = account_named(s, &name).await?;
        Ok(Named { fed, account })
    }
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
        .ok_or_else(|| ApiError::bad_request("missing resource parameter"))?;
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
            return Err(ApiError::not_found("not an account of this server"));
        }
        None => fed
            .local_username(&resource)
            .ok_or_else(|| ApiError::not_found("unknown resource"))?
            .to_string(),
    };
    let account = account_named(&s, &name).await?;
    Ok((
        [(header::CONTENT_TYPE, webfinger::JRD_JSON)],
        Json(webfinger::jrd(fed, &account)),
    )
        .into_response())
}

/// The actor document of our account `name` (`/users/{name}` and `/@name`, see `permalinks`).
pub(crate) async fn actor_document(s: &AppState, name: &str) -> Result<Response, ApiError> {
    let fed = federation(s)?;
    let account = account_named(s, name).await?;
    let profile = profiles::load(&s.pool, account.id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("no account {name:?}")))?;
    // The FEP-8b32 proof key, made here on first use for accounts older than proofs.
    let mut conn = s.pool.acquire().await?;
    let key = fed.proof_key(&mut conn, account.id).await.map_err(|e| {
        tracing::error!(account = %account.username, error = %format!("{e:#}"), "proof key");
        ApiError::unavailable("account key unavailable")
    })?;
    Ok(activity_json(profiles::local_actor_document(
        fed, &account, &profile, &key,
    )))
}

/// A `QuoteAuthorization` we granted (FEP-044f), while it is not revoked: how any server
/// checks a quote of our status.
async fn quote_authorization_handler(
    State(s): State<AppState>,
    Path((name, id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let fed = federation(&s)?;
    let missing = || ApiError::not_found("no such quote authorization");
    let id = uuid::Uuid::parse_str(&id).map_err(|_| missing())?;
    let doc = crate::quotes::authorization::document(&s.pool, fed, &name, id)
        .await?
        .ok_or_else(missing)?;
    Ok(activity_json(doc))
}

/// An approval we granted of a like of, or reply to, one of our followers-only statuses
/// (`approvals::granted`): how GoToSocial and the servers its interaction reaches check the
/// interaction's `approvedBy`. 404 for one we never granted or no longer stands, and for a
/// fetch signed by someone the status's author blocks.
async fn approval_handler(
    State(s): State<AppState>,
    Path((name, id)): Path<(String, String)>,
    uri: axum::http::Uri,
    headers: axum::http::HeaderMap,
) -> Result<Response, ApiError> {
    approval(&s, &name, &id, false, &uri, &headers).await
}

/// The `Accept` that gave an approval ([`approval_handler`]), at its own id.
async fn approval_accept_handler(
    State(s): State<AppState>,
    Path((name, id)): Path<(String, String)>,
    uri: axum::http::Uri,
    headers: axum::http::HeaderMap,
) -> Result<Response, ApiError> {
    approval(&s, &name, &id, true, &uri, &headers).await
}

async fn approval(
    s: &AppState,
    name: &str,
    id: &str,
    accept: bool,
    uri: &axum::http::Uri,
    headers: &axum::http::HeaderMap,
) -> Result<Response, ApiError> {
    let fed = federation(s)?;
    let missing = || ApiError::not_found("no such approval");
    let id = Uuid::parse_str(id).map_err(|_| missing())?;
    let (author, doc) = crate::approvals::granted::document(&s.pool, fed, name, id, accept)
        .await?
        .ok_or_else(missing)?;
    if signed_by_blocked(s, fed, author, uri, headers).await? {
        return Err(missing());
    }
    Ok(activity_json(doc))
}

/// Whether the GET (`uri`, `headers`) of a document of our account `author` is signed by a
/// remote actor that account blocks, or from a server it blocks: then its statuses are not
/// that reader's, public ones included, and it is answered as if they did not exist (as
/// Mastodon answers it). Who signed is found out only for an author who blocks anyone; an
/// unsigned request, or one whose signature does not verify, is an anonymous reader's.
pub(crate) async fn signed_by_blocked(
    s: &AppState,
    fed: &Federation,
    author: Uuid,
    uri: &axum::http::Uri,
    headers: &axum::http::HeaderMap,
) -> Result<bool, ApiError> {
    if !access::blocks_anyone(&mut *s.pool.acquire().await?, author).await? {
        return Ok(false);
    }
    let path = uri.path_and_query().map_or(uri.path(), |p| p.as_str());
    let request = inbound::SignedRequest::get(fed, path, headers);
    let Some(signer) = inbound::signer_of_get(&s.pool, fed, &request).await? else {
        return Ok(false);
    };
    Ok(access::blocks_remote_reader(&mut *s.pool.acquire().await?, author, &signer).await?)
}

/// The object of our status `id` of `name` (`Note`, or `Question` with current counts), so
/// remote servers can fetch what our `Create` announced (`/users/{name}/statuses/{id}` and
/// `/@name/{id}`, see `permalinks`): public and unlisted ones only, a Tombstone (410) for a
/// deleted one.
pub(crate) async fn status_document(
    s: &AppState,
    name: &str,
    id: &str,
) -> Result<Response, ApiError> {
    let fed = federation(s)?;
    let not_found = || ApiError::not_found("no such status");
    let id = Uuid::parse_str(id).map_err(|_| not_found())?;
    let mut conn = s.pool.acquire().await?;
    let uri = fed.status_iri(name, id);
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
    ApiError::unavailable("the instance actor's key is unavailable")
}

fn collection(id: String, total: i64) -> Response {
    activity_json(json!({
        "@context": context::ld(), "id": id, "type": "OrderedCollection", "totalItems": total,
    }))
}

async fn outbox_handler(Named { fed, account }: Named) -> Result<Response, ApiError> {
    // Only public posts would be listed here; this runtime does not author posts yet.
    Ok(collection(fed.outbox(&account.username), 0))
}

/// The account's pinned statuses (R-MAPI-6), embedded as Mastodon serves them so a
/// peer needs no second fetch; only public and unlisted ones, as the statuses themselves.
async fn featured_handler(
    State(s): State<AppState>,
    Named { fed, account }: Named,
    uri: axum::http::Uri,
    headers: axum::http::HeaderMap,
) -> Result<Response, ApiError> {
    // Someone the account blocks gets the collection empty, as Mastodon serves it.
    let pinned = match signed_by_blocked(&s, &fed, account.id, &uri, &headers).await? {
        true => Vec::new(),
        false => crate::statuses::pins::of_local(&mut *s.pool.acquire().await?, account.id).await?,
    };
    let mut conn = s.pool.acquire().await?;
    let mut items = Vec::new();
    for id in pinned {
        if let Some(st) = statuses::load(&mut conn, Some(&s.drive), id).await?
            && matches!(
                st.visibility,
                crate::statuses::Visibility::Public | crate::statuses::Visibility::Unlisted
            )
        {
            let mut note = statuses::object(&fed, &st);
            if let Some(o) = note.as_object_mut() {
                o.remove("@context");
            }
            items.push(note);
        }
    }
    Ok(activity_json(json!({
        "@context": context::ld(), "id": fed.featured(&account.username),
        "type": "OrderedCollection", "totalItems": items.len(), "orderedItems": items,
    })))
}

/// The account's featured hashtags (R-MAPI-6) as `Hashtag` objects.
async fn featured_tags_handler(
    State(s): State<AppState>,
    Named { fed, account }: Named,
) -> Result<Response, ApiError> {
    let mut conn = s.pool.acquire().await?;
    let items: Vec<Value> = crate::tags::featured::of(&mut conn, account.id)
        .await?
        .into_iter()
        .map(|t| {
            json!({ "type": "Hashtag", "href": fed.urls().tag(&t.name), "name": format!("#{}", t.name) })
        })
        .collect();
    Ok(activity_json(json!({
        "@context": context::ld(), "id": fed.featured_tags(&account.username),
        "type": "Collection", "totalItems": items.len(), "items": items,
    })))
}

async fn followers_handler(
    State(s): State<AppState>,
    Named { fed, account }: Named,
) -> Result<Response, ApiError> {
    let (n, _) = follow_counts(&s, account.id).await?;
    Ok(collection(fed.followers(&account.username), n))
}

async fn following_handler(
    State(s): State<AppState>,
    Named { fed, account }: Named,
) -> Result<Response, ApiError> {
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
    Named { account, .. }: Named,
    req: Request,
) -> Result<Response, ApiError> {
    receive(&s, Some(account), req).await
}

async fn shared_inbox(State(s): State<AppState>, req: Request) -> Result<Response, ApiError> {
    receive(&s, None, req).await
}

impl From<inbound::InboxError> for ApiError {
    fn from(e: inbound::InboxError) -> Self {
        match e {
            inbound::InboxError::Unauthorized(why) => ApiError::unauthorized(why),
            inbound::InboxError::Malformed(why) => ApiError::bad_request(why),
            inbound::InboxError::Database(e) => e.into(),
        }
    }
}

/// The inbox's HTTP side: the body is read within its limits between the signature checks
/// that need it and those that do not; `inbound::accept` does the rest.
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
        .map_or(parts.uri.path(), |p| p.as_str());
    let signed = inbound::SignedRequest::new(fed, path, &parts.headers);
    signed.check(None)?;
    let bytes = read_limited(&parts.headers, body, MAX_INBOX_BYTES, s.http.body_timeout).await?;
    let pending = signed.check(Some(&bytes))?;
    let activity: Value = parse_json(&bytes, StatusCode::BAD_REQUEST)?;
    let accepted =
        inbound::accept(&s.pool, fed, account.as_ref(), &signed, &pending, activity).await?;
    tracing::debug!(activity = %accepted.id, kind = %accepted.ty, fresh = accepted.fresh,
        "inbox accepted an activity");
    Ok((StatusCode::ACCEPTED, Json(json!({}))).into_response())
}
