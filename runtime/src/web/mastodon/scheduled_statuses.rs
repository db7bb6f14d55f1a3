//! Scheduled statuses in the client API (R-MAPI-6): `GET /api/v1/scheduled_statuses` (the
//! caller's, newest first, paged by id), `GET`, `PUT` (a new `scheduled_at`) and `DELETE
//! /api/v1/scheduled_statuses/:id`. Another account's is the same 404 as none. Scheduling
//! itself is `POST /api/v1/statuses` with `scheduled_at`; the rules are
//! `statuses::scheduled`'s.

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::routing::get;
use chrono::{DateTime, Utc};
use serde::Deserialize;
use uuid::Uuid;

use super::RecordId;
use super::pagination::{Paged, Paging};
use super::statuses::body::StatusBody;
use crate::mastodon::Empty;
use crate::mastodon::scheduled_status::{self as entity, ScheduledStatus};
use crate::statuses::scheduled::{self, Scheduled};
use crate::web::auth::{Needs, need};
use crate::web::{ApiError, AppState};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/scheduled_statuses", get(index))
        .route(
            "/api/v1/scheduled_statuses/{id}",
            get(show).put(update).delete(cancel),
        )
}

/// A `scheduled_at` as clients send it: an ISO 8601 / RFC 3339 time.
pub fn parse_time(raw: &str) -> Result<DateTime<Utc>, ApiError> {
    DateTime::parse_from_rfc3339(raw.trim())
        .map(|t| t.with_timezone(&Utc))
        .map_err(|_| {
            ApiError::unprocessable(format!(
                "Validation failed: scheduled_at {raw:?} is not an ISO 8601 time"
            ))
        })
}

async fn one(s: &AppState, row: Scheduled) -> Result<Json<ScheduledStatus>, ApiError> {
    let mut conn = s.pool.acquire().await?;
    entity::render(&mut conn, &s.drive, &[row])
        .await?
        .pop()
        .map(Json)
        .ok_or_else(ApiError::record_not_found)
}

async fn index(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::ReadStatuses>,
    Paging { page, uri }: Paging<Uuid>,
) -> Result<Paged<ScheduledStatus>, ApiError> {
    let rows: Vec<Scheduled> = page
        .fetch_by_id(
            &s.pool,
            "SELECT id, account_id, scheduled_at, params FROM scheduled_statuses
              WHERE account_id = $1 AND",
            account.id,
        )
        .await?;
    let keys: Vec<String> = rows.iter().map(|r| r.id.to_string()).collect();
    let mut conn = s.pool.acquire().await?;
    let items = entity::render(&mut conn, &s.drive, &rows).await?;
    Ok(Paged::new(items, &keys, &s.public_origin, &uri))
}

async fn show(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::ReadStatuses>,
    RecordId(id): RecordId,
) -> Result<Json<ScheduledStatus>, ApiError> {
    let mut conn = s.pool.acquire().await?;
    let row = scheduled::find(&mut conn, account.id, id)
        .await?
        .ok_or_else(ApiError::record_not_found)?;
    drop(conn);
    one(&s, row).await
}

#[derive(Debug, Deserialize)]
pub struct UpdateRequest {
    #[serde(default)]
    scheduled_at: Option<String>,
}

async fn update(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteStatuses>,
    RecordId(id): RecordId,
    StatusBody(req): StatusBody<UpdateRequest>,
) -> Result<Json<ScheduledStatus>, ApiError> {
    let at = req
        .scheduled_at
        .as_deref()
        .filter(|t| !t.trim().is_empty())
        .ok_or_else(|| ApiError::unprocessable("Validation failed: scheduled_at is missing"))?;
    let at = parse_time(at)?;
    if scheduled::is_past(at) {
        return Err(ApiError::unprocessable(
            "Validation failed: Scheduled at The scheduled date must be in the future",
        ));
    }
    let moved = scheduled::reschedule(&s.pool, account.id, id, at, s.writes.scheduled_min_offset)
        .await?
        .ok_or_else(ApiError::record_not_found)?;
    one(&s, moved).await
}

async fn cancel(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteStatuses>,
    RecordId(id): RecordId,
) -> Result<Json<Empty>, ApiError> {
    if !scheduled::cancel(&s.pool, account.id, id).await? {
        return Err(ApiError::record_not_found());
    }
    Ok(Json(Empty {}))
}
