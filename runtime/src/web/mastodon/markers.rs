//! `GET`/`POST /api/v1/markers` (R-MAPI-4): where the account stopped
//! reading its `home` timeline and its `notifications`, shared by all its apps. Each save
//! bumps the marker's `version`, as Mastodon's does, so apps can tell a newer position.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::http::Uri;
use axum::routing::get;
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::Value;
use uuid::Uuid;

use super::pagination::params;
use super::statuses::body::StatusBody;
use crate::mastodon::Marker;
use crate::web::auth::{Needs, need};
use crate::web::{ApiError, AppState};

pub fn routes() -> Router<AppState> {
    Router::new().route("/api/v1/markers", get(show).post(save))
}

const TIMELINES: [&str; 2] = ["home", "notifications"];

/// Longest `last_read_id` kept (ids are UUIDs or integers; anything longer is not an id).
const MAX_ID_LEN: usize = 64;

async fn markers(
    s: &AppState,
    account: Uuid,
    which: &[&str],
) -> Result<BTreeMap<String, Marker>, ApiError> {
    let rows: Vec<(String, String, i32, DateTime<Utc>)> = sqlx::query_as(
        "SELECT timeline, last_read_id, version, updated_at FROM markers
          WHERE account_id = $1 AND timeline = ANY($2)",
    )
    .bind(account)
    .bind(which)
    .fetch_all(&s.pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(timeline, last_read_id, version, updated_at)| {
            let marker = Marker {
                last_read_id,
                updated_at,
                version,
            };
            (timeline, marker)
        })
        .collect())
}

/// `timeline[]=home&timeline[]=notifications` (either spelling); none asks for both.
async fn show(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::ReadStatuses>,
    uri: Uri,
) -> Result<Json<BTreeMap<String, Marker>>, ApiError> {
    let asked: Vec<&str> = TIMELINES
        .into_iter()
        .filter(|t| {
            params(&uri)
                .iter()
                .any(|(k, v)| (k == "timeline[]" || k == "timeline") && v == t)
        })
        .collect();
    let which = if asked.is_empty() {
        TIMELINES.to_vec()
    } else {
        asked
    };
    Ok(Json(markers(&s, account.id, &which).await?))
}

#[derive(Debug, Deserialize)]
struct Position {
    last_read_id: Value,
}

#[derive(Debug, Deserialize)]
struct SaveRequest {
    #[serde(default)]
    home: Option<Position>,
    #[serde(default)]
    notifications: Option<Position>,
}

/// `home[last_read_id]=…` and/or `notifications[last_read_id]=…` (JSON or form).
async fn save(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteStatuses>,
    StatusBody(req): StatusBody<SaveRequest>,
) -> Result<Json<BTreeMap<String, Marker>>, ApiError> {
    let given = [("home", req.home), ("notifications", req.notifications)];
    let mut saved = Vec::new();
    let mut tx = s.pool.begin().await?;
    for (timeline, pos) in given {
        let Some(pos) = pos else { continue };
        let id = match &pos.last_read_id {
            Value::String(v) => v.clone(),
            Value::Number(n) => n.to_string(),
            _ => String::new(),
        };
        if id.is_empty() || id.len() > MAX_ID_LEN {
            return Err(ApiError::unprocessable(format!(
                "Validation failed: {timeline} last_read_id must be an id"
            )));
        }
        sqlx::query(
            "INSERT INTO markers (account_id, timeline, last_read_id) VALUES ($1, $2, $3)
             ON CONFLICT (account_id, timeline) DO UPDATE
                SET last_read_id = EXCLUDED.last_read_id, version = markers.version + 1,
                    updated_at = now()",
        )
        .bind(account.id)
        .bind(timeline)
        .bind(&id)
        .execute(&mut *tx)
        .await?;
        saved.push(timeline);
    }
    tx.commit().await?;
    if saved.is_empty() {
        return Err(ApiError::unprocessable(
            "Validation failed: give home or notifications",
        ));
    }
    Ok(Json(markers(&s, account.id, &saved).await?))
}
