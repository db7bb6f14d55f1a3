//! Polls and votes, in Mastodon's paths and shapes (R-API, R-POLL); statuses
//! (with their polls and expiry edits) are `web::mastodon::statuses`. Every write commits first and schedules the poll's wakeup after; a failed
//! or deferred scheduling is logged and left to the recovery scan, never turned into an error
//! for a write that already happened.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use uuid::Uuid;

use super::auth::{MaybeCaller, Needs, need};
use super::body::{ApiJson, RequestBody};
use super::{ApiError, AppState, parse_id};
use crate::mastodon::Poll;
use crate::polls::validation::{Invalid, VoteRequest};
use crate::polls::{self, PollError, admission};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/polls/{id}", get(show_poll))
        .route("/api/v1/polls/{id}/votes", post(vote))
}

// Poll requests answer a body of the wrong shape with 422, as Mastodon does.
impl RequestBody for VoteRequest {
    const SHAPE_STATUS: StatusCode = StatusCode::UNPROCESSABLE_ENTITY;
}

impl From<Invalid> for ApiError {
    fn from(e: Invalid) -> Self {
        ApiError::unprocessable(e.to_string())
    }
}

impl From<PollError> for ApiError {
    fn from(e: PollError) -> Self {
        match e {
            PollError::NotFound(_) => ApiError::not_found(e.to_string()),
            PollError::NotAuthor | PollError::AcrossBlock => ApiError::forbidden(e.to_string()),
            PollError::Invalid(e) => e.into(),
            PollError::Db(e) => e.into(),
        }
    }
}

/// After the write committed: ask for a wakeup. Errors only log (recovery covers them).
pub(crate) async fn schedule(s: &AppState, poll_id: Uuid) {
    if let Err(e) = admission::schedule(&s.pool, poll_id, s.poll_wakeup_chunk).await {
        tracing::warn!(target: polls::LOG_TARGET, poll = %poll_id, error = %e,
            "scheduling the poll notification failed; recovery schedules it after expiry");
    }
}

async fn show_poll(
    State(s): State<AppState>,
    MaybeCaller(viewer): MaybeCaller,
    Path(raw): Path<String>,
) -> Result<Json<Poll>, ApiError> {
    // Anonymous reads are allowed (as on Mastodon); a token adds `voted`/`own_votes`.
    let viewer = viewer.map(|a| a.id);
    let poll = parse_id(&raw, "poll")?;
    let mut conn = s.pool.acquire().await?;
    crate::mastodon::poll::of_poll(&mut conn, poll, viewer)
        .await?
        .map(Json)
        .ok_or_else(|| ApiError::not_found("poll not found"))
}

async fn vote(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteStatuses>,
    Path(raw): Path<String>,
    ApiJson(req): ApiJson<VoteRequest>,
) -> Result<Json<Poll>, ApiError> {
    let poll = parse_id(&raw, "poll")?;
    let choices = req.validate()?;
    polls::vote(&s.pool, s.fed.as_deref(), poll, account.id, &choices).await?;
    // A local voter is a recipient: schedule (coalesces with the stored wakeup; a remote poll
    // without end has none).
    schedule(&s, poll).await;
    let mut conn = s.pool.acquire().await?;
    crate::mastodon::poll::of_poll(&mut conn, poll, Some(account.id))
        .await?
        .map(Json)
        .ok_or_else(|| ApiError::not_found("poll not found"))
}
