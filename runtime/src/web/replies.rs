//! Remote reply collection over HTTP (R-RPL, R-API), every endpoint as the token's account:
//! `POST /api/v1/reply-collections {"url"}` requests a collection of a remote post's replies,
//! `GET /api/v1/reply-collections/{id}` shows a job, and viewing a remote post's thread
//! (`GET /api/v1/statuses/{id}/context`, in `mastodon::statuses`) requests the collection of
//! its replies when it has a `replies` IRI. Bad input is a 4xx `{"error"}` and stores nothing;
//! a post that cannot be fetched is a 502 that says no more.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::Value;
use uuid::Uuid;

use super::auth::{Needs, need};
use super::body::{ApiJson, RequestBody};
use super::{ApiError, AppState, parse_id};
use crate::federation::actors::actor::id_of;
use crate::tasks::replies::{self, RequestError, Requested};

/// Reply levels a request asks for; the worker's `REPLY_MAX_DEPTH` is applied as the job runs
/// only if it is lower, so a job keeps what it was asked for across config changes.
const REQUEST_DEPTH: u32 = 2;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/reply-collections", post(create))
        .route("/api/v1/reply-collections/{id}", get(show))
}

/// Longest post URL a collection is requested for (URLs are stored and fetched).
pub const MAX_URL_BYTES: usize = 2048;

/// `POST /api/v1/reply-collections`.
#[derive(Deserialize)]
pub struct CollectionRequest {
    url: String,
}

impl RequestBody for CollectionRequest {
    const SHAPE_STATUS: StatusCode = StatusCode::BAD_REQUEST;
}

fn request_error(e: RequestError) -> ApiError {
    match e {
        RequestError::BadIri(m) => ApiError::unprocessable(m),
        RequestError::Db(e) => e.into(),
    }
}

async fn job_json(s: &AppState, id: Uuid) -> Result<Value, ApiError> {
    let v = replies::view(&s.pool, id)
        .await?
        .ok_or_else(|| ApiError::not_found("no such reply collection"))?;
    Ok(serde_json::to_value(v).unwrap_or(Value::Null))
}

/// Starting a collection makes this node fetch from a remote server and store what it
/// gets: a write, so it takes `write:statuses` (`write`), not a read scope (R-API).
async fn create(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteStatuses>,
    ApiJson(req): ApiJson<CollectionRequest>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let url = req.url.trim();
    if url.is_empty() {
        return Err(ApiError::bad_request(
            "expected {\"url\": \"<remote post IRI>\"}",
        ));
    }
    if url.len() > MAX_URL_BYTES {
        return Err(ApiError::unprocessable(format!(
            "the url is longer than {MAX_URL_BYTES} bytes"
        )));
    }
    let parsed = url::Url::parse(url)
        .map_err(|e| ApiError::unprocessable(format!("bad url {url:?}: {e}")))?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
        return Err(ApiError::unprocessable(format!(
            "not an http(s) URL: {url:?}"
        )));
    }
    if let Some(fed) = &s.fed
        && replies::host_of(url) == replies::host_of(&fed.origin)
    {
        return Err(ApiError::unprocessable(format!(
            "{url} is a post of this server"
        )));
    }
    // The post as we know it, else fetched (signed, through the SSRF guard) to learn its
    // replies collection; nothing is stored before a job can be made.
    let stored: Option<(Option<String>, Option<chrono::DateTime<chrono::Utc>>)> =
        sqlx::query_as("SELECT replies_iri, deleted_at FROM remote_posts WHERE iri = $1")
            .bind(url)
            .fetch_optional(&s.pool)
            .await?;
    let replies_iri = match stored {
        Some((_, Some(_))) => return Err(ApiError::unprocessable(format!("{url} was deleted"))),
        Some((Some(r), None)) => r,
        _ => {
            let fed = s.fed.as_ref().ok_or_else(|| {
                ApiError::unavailable("federation is disabled on this node (SECRET_KEY is unset)")
            })?;
            let signer = fed.signing_key(&account).map_err(|e| {
                tracing::warn!(account = %account.username, error = %format_args!("{e:#}"), "no signing key for a reply collection");
                ApiError(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "the account's signing key is unusable".into(),
                )
            })?;
            // `get_object` takes only a document of the URL's own origin (id and redirects).
            // Whatever went wrong is one 502: what our guard or resolver found would tell the
            // client what an internal name resolves to (issue 61 F7). The detail is logged.
            let doc = fed
                .fetch
                .get_object(url, Some(&signer))
                .await
                .map_err(|e| {
                    tracing::info!(url, error = %e, "a post could not be fetched for its replies");
                    ApiError(
                        StatusCode::BAD_GATEWAY,
                        "the remote post could not be fetched".into(),
                    )
                })?
                .doc;
            doc.get("replies")
                .and_then(id_of)
                .map(str::to_string)
                .ok_or_else(|| {
                    ApiError::unprocessable(format!("{url} has no replies collection"))
                })?
        }
    };
    let r = replies::request(&s.pool, url, &replies_iri, Some(account.id), REQUEST_DEPTH)
        .await
        .map_err(request_error)?;
    let code = match r {
        Requested::Queued(_) => StatusCode::ACCEPTED,
        Requested::Existing(_) => StatusCode::OK,
    };
    Ok((code, Json(job_json(&s, r.id()).await?)))
}

async fn show(
    State(s): State<AppState>,
    _: Needs<need::ReadStatuses>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let id = parse_id(&id, "reply collection")?;
    Ok(Json(job_json(&s, id).await?))
}

/// Viewing a remote post's thread asks for its replies (`GET /api/v1/statuses/:id/context`
/// calls this): the job's uniqueness and cooldown make repeated views cheap no-ops. The job,
/// if one was requested, is what `replyCollection` shows beside the thread.
pub(crate) async fn request_on_view(
    s: &AppState,
    post: Uuid,
    viewer: Uuid,
) -> Result<Option<Value>, ApiError> {
    let found: Option<(String, Option<String>, bool)> = sqlx::query_as(
        "SELECT iri, replies_iri, deleted_at IS NOT NULL FROM remote_posts WHERE id = $1",
    )
    .bind(post)
    .fetch_optional(&s.pool)
    .await?;
    let Some((iri, Some(replies_iri), false)) = found else {
        return Ok(None);
    };
    match replies::request(&s.pool, &iri, &replies_iri, Some(viewer), REQUEST_DEPTH).await {
        Ok(req) => Ok(Some(job_json(s, req.id()).await?)),
        Err(RequestError::BadIri(_)) => Ok(None),
        Err(RequestError::Db(e)) => Err(e.into()),
    }
}
