//! Statuses with polls, votes, expiry edits and notifications, in Mastodon's paths and shapes
//! (R-API, issue 6). Every write commits first and schedules the poll's wakeup after; a failed
//! or deferred scheduling is logged and left to the recovery scan, never turned into an error
//! for a write that already happened.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::Value;
use uuid::Uuid;

use super::api::require_account;
use super::{ApiError, AppState};
use crate::polls::{self, PollError, admission};

/// Poll requests are a few hundred bytes; anything near this is not a poll.
const MAX_BODY: usize = 64 * 1024;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/statuses", post(create_status))
        .route("/api/v1/statuses/{id}", get(show_status).put(edit_status))
        .route("/api/v1/polls/{id}", get(show_poll))
        .route("/api/v1/polls/{id}/votes", post(vote))
        .route("/api/v1/notifications", get(notifications))
}

impl From<PollError> for ApiError {
    fn from(e: PollError) -> Self {
        match e {
            PollError::NotFound(m) => ApiError(StatusCode::NOT_FOUND, m),
            PollError::Forbidden(m) => ApiError(StatusCode::FORBIDDEN, m),
            PollError::Invalid(m) => ApiError(StatusCode::UNPROCESSABLE_ENTITY, m),
            PollError::Db(e) => e.into(),
        }
    }
}

fn json_body(body: Result<Bytes, BytesRejection>) -> Result<Value, ApiError> {
    let body = body.map_err(|e| ApiError(e.status(), format!("unreadable body: {e}")))?;
    if body.len() > MAX_BODY {
        return Err(ApiError(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("body larger than {MAX_BODY} bytes"),
        ));
    }
    serde_json::from_slice(&body)
        .map_err(|e| ApiError(StatusCode::BAD_REQUEST, format!("body is not JSON: {e}")))
}

fn bad(msg: String) -> ApiError {
    ApiError(StatusCode::UNPROCESSABLE_ENTITY, msg)
}

fn id(raw: &str, what: &str) -> Result<Uuid, ApiError> {
    raw.parse()
        .map_err(|_| ApiError(StatusCode::NOT_FOUND, format!("{what} not found")))
}

/// After the write committed: ask for a wakeup. Errors only log (recovery covers them).
async fn schedule(s: &AppState, poll_id: Uuid) {
    if let Err(e) = admission::schedule(&s.pool, poll_id, polls::wakeup_chunk()).await {
        tracing::warn!(target: polls::LOG_TARGET, poll = %poll_id, error = %e,
            "scheduling the poll notification failed; recovery schedules it after expiry");
    }
}

async fn status_response(
    s: &AppState,
    status: Uuid,
    viewer: Uuid,
) -> Result<Json<Value>, ApiError> {
    let mut conn = s.pool.acquire().await?;
    polls::status_json(&mut conn, status, Some(viewer))
        .await?
        .map(Json)
        .ok_or_else(|| ApiError(StatusCode::NOT_FOUND, "status not found".into()))
}

async fn create_status(
    State(s): State<AppState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let account = require_account(&s, &headers).await?;
    let (text, poll) = polls::parse_create(&json_body(body)?).map_err(bad)?;
    let actor = s.fed.as_ref().map(|f| f.actor_iri(&account.username));
    let (status, poll_id) = polls::create_status(
        &s.pool,
        account.id,
        actor.as_deref(),
        &text,
        poll.as_ref(),
        s.fed.as_deref(),
    )
    .await?;
    // The author is local: every new poll is scheduled.
    if let Some(p) = poll_id {
        schedule(&s, p).await;
    }
    status_response(&s, status, account.id).await
}

async fn show_status(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path(raw): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let account = require_account(&s, &headers).await?;
    status_response(&s, id(&raw, "status")?, account.id).await
}

async fn edit_status(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path(raw): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let account = require_account(&s, &headers).await?;
    let status = id(&raw, "status")?;
    let edit = polls::parse_edit(&json_body(body)?).map_err(bad)?;
    let poll_id = polls::edit_status(&s.pool, status, account.id, &edit, s.fed.as_deref()).await?;
    if let (Some(p), Some(_)) = (poll_id, edit.expires_in) {
        // An earlier expiry pulls the stored wakeup earlier; a later one is re-read when the
        // current wakeup runs (it reschedules).
        schedule(&s, p).await;
    }
    status_response(&s, status, account.id).await
}

async fn show_poll(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path(raw): Path<String>,
) -> Result<Json<Value>, ApiError> {
    // Anonymous reads are allowed (as on Mastodon); a token adds `voted`/`own_votes`.
    let viewer = if headers.contains_key(axum::http::header::AUTHORIZATION) {
        Some(require_account(&s, &headers).await?.id)
    } else {
        None
    };
    let poll = id(&raw, "poll")?;
    let mut conn = s.pool.acquire().await?;
    polls::poll_json(&mut conn, poll, viewer)
        .await?
        .map(Json)
        .ok_or_else(|| ApiError(StatusCode::NOT_FOUND, "poll not found".into()))
}

async fn vote(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path(raw): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let account = require_account(&s, &headers).await?;
    let poll = id(&raw, "poll")?;
    let choices = polls::parse_choices(&json_body(body)?).map_err(bad)?;
    polls::vote(&s.pool, poll, account.id, &choices).await?;
    // A local voter is a recipient: schedule (coalesces with the stored wakeup).
    schedule(&s, poll).await;
    let mut conn = s.pool.acquire().await?;
    polls::poll_json(&mut conn, poll, Some(account.id))
        .await?
        .map(Json)
        .ok_or_else(|| ApiError(StatusCode::NOT_FOUND, "poll not found".into()))
}

#[derive(Deserialize)]
struct Page {
    limit: Option<String>,
    max_id: Option<String>,
}

async fn notifications(
    State(s): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<Page>,
) -> Result<Json<Value>, ApiError> {
    let account = require_account(&s, &headers).await?;
    let limit = match q.limit.as_deref() {
        None => 40,
        Some(l) => l
            .parse::<i64>()
            .ok()
            .filter(|l| *l > 0)
            .ok_or_else(|| {
                ApiError(
                    StatusCode::BAD_REQUEST,
                    "limit must be a positive integer".into(),
                )
            })?
            .min(80),
    };
    let max_id = match q.max_id.as_deref() {
        None | Some("") => None,
        Some(m) => Some(m.parse::<i64>().map_err(|_| {
            ApiError(
                StatusCode::BAD_REQUEST,
                "max_id must be a notification id".into(),
            )
        })?),
    };
    Ok(Json(Value::Array(
        polls::notifications_json(&s.pool, account.id, limit, max_id).await?,
    )))
}
