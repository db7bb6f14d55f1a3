//! Single reads: `GET /api/v1/statuses/:id` (any post or boost the viewer may see),
//! `/:id/history` (its versions) and `/:id/source` (the author's text as typed).

use axum::Json;
use axum::extract::{Path, State};
use serde_json::Value;

use crate::mastodon::Status;

use super::{status_id, visible_one};
use crate::statuses::{history as versions, write};
use crate::web::auth::{MaybeNeeds, Needs, need};
use crate::web::{ApiError, AppState};

pub async fn show(
    State(s): State<AppState>,
    MaybeNeeds(viewer, _): MaybeNeeds<need::ReadStatuses>,
    Path(raw): Path<String>,
) -> Result<Json<Status>, ApiError> {
    let id = status_id(&raw)?;
    Ok(Json(visible_one(&s, viewer.map(|a| a.id), id).await?))
}

pub async fn history(
    State(s): State<AppState>,
    MaybeNeeds(viewer, _): MaybeNeeds<need::ReadStatuses>,
    Path(raw): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let id = status_id(&raw)?;
    let current = visible_one(&s, viewer.map(|a| a.id), id).await?;
    // The StatusEdit entities are still built from the Status's JSON.
    let current = serde_json::to_value(&current).map_err(|e| {
        ApiError(
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            format!("rendering the status failed: {e}"),
        )
    })?;
    let mut conn = s.pool.acquire().await?;
    Ok(Json(Value::Array(
        versions::versions(&mut conn, &current).await?,
    )))
}

pub async fn source(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::ReadStatuses>,
    Path(raw): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let id = status_id(&raw)?;
    let mut conn = s.pool.acquire().await?;
    write::source(&mut conn, account.id, id)
        .await?
        .map(Json)
        .ok_or_else(ApiError::record_not_found)
}
