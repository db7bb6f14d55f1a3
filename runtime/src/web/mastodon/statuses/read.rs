//! Reads: `GET /api/v1/statuses/:id` (any post or boost the viewer may see), several at once
//! (`GET /api/v1/statuses?id[]=…`, Mastodon 4.3), `/:id/history` (its versions) and
//! `/:id/source` (the author's text as typed).

use crate::mastodon::{Status, StatusEdit, StatusSource, status_edit};
use axum::Json;
use axum::extract::State;
use axum::http::Uri;

use super::{render, visible_one};
use crate::statuses::write;
use crate::web::auth::{MaybeNeeds, Needs, need};
use crate::web::mastodon::RecordId;
use crate::web::mastodon::pagination::{MAX_LIMIT, ids_param};
use crate::web::{ApiError, AppState};

pub async fn show(
    State(s): State<AppState>,
    MaybeNeeds(viewer, _): MaybeNeeds<need::ReadStatuses>,
    RecordId(id): RecordId,
) -> Result<Json<Status>, ApiError> {
    Ok(Json(visible_one(&s, viewer.map(|a| a.id), id).await?))
}

/// The statuses the ids name that the viewer may read, in the order asked, each once; the
/// rest (unknown, deleted, not the viewer's to read: R-MAPI-VIS) are left out, as on Mastodon.
pub async fn many(
    State(s): State<AppState>,
    MaybeNeeds(viewer, _): MaybeNeeds<need::ReadStatuses>,
    uri: Uri,
) -> Result<Json<Vec<Status>>, ApiError> {
    let ids = ids_param(&uri, MAX_LIMIT as usize)?;
    let mut conn = s.pool.acquire().await?;
    Ok(Json(
        render(&s, &mut conn, viewer.map(|a| a.id), &ids).await?,
    ))
}

pub async fn history(
    State(s): State<AppState>,
    MaybeNeeds(viewer, _): MaybeNeeds<need::ReadStatuses>,
    RecordId(id): RecordId,
) -> Result<Json<Vec<StatusEdit>>, ApiError> {
    let current = visible_one(&s, viewer.map(|a| a.id), id).await?;
    let mut conn = s.pool.acquire().await?;
    Ok(Json(status_edit::history(&mut conn, &current).await?))
}

pub async fn source(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::ReadStatuses>,
    RecordId(id): RecordId,
) -> Result<Json<StatusSource>, ApiError> {
    let mut conn = s.pool.acquire().await?;
    let (text, spoiler_text) = write::source(&mut conn, account.id, id)
        .await?
        .ok_or_else(ApiError::record_not_found)?;
    Ok(Json(StatusSource {
        id: id.to_string(),
        spoiler_text,
        text,
    }))
}
