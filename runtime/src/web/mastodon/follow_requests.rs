//! Follow requests of a locked account: `GET /api/v1/follow_requests` (the waiting accounts,
//! paginated by the request) and `POST /api/v1/follow_requests/{account id}/authorize` or
//! `/reject`. A remote requester gets the `Accept` or `Reject` of its Follow through the queue,
//! in the transaction that answers the request.

use axum::extract::{Path, State};
use axum::http::{StatusCode, Uri};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::Value;

use super::accounts::render_rows;
use super::found;
use super::pagination::{Page, Paged, params};
use super::relationships::relationship_of;
use crate::federation::relationships;
use crate::web::activitypub::federation;
use crate::web::auth::{Needs, need};
use crate::web::{ApiError, AppState};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/follow_requests", get(list))
        .route("/api/v1/follow_requests/{id}/authorize", post(authorize))
        .route("/api/v1/follow_requests/{id}/reject", post(reject))
}

async fn list(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::ReadFollows>,
    uri: Uri,
) -> Result<Paged, ApiError> {
    let fed = federation(&s)?;
    let page: Page<i64> = Page::from_params(&params(&uri))?;
    let rows: Vec<(i64, String)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT id, actor_iri FROM follow_requests WHERE account_id = $1 AND {}",
        page.clause("id", 2)
    )))
    .bind(account.id)
    .bind(page.max)
    .bind(page.since)
    .bind(page.min)
    .bind(page.limit)
    .fetch_all(&s.pool)
    .await?;
    let rows = page.finish(rows);
    let (items, keys) = render_rows(&s, fed, &rows).await?;
    Ok(Paged::new(items, &keys, &s.public_origin, &uri))
}

async fn authorize(
    s: State<AppState>,
    who: Needs<need::WriteFollows>,
    id: Path<String>,
) -> Result<Json<Value>, ApiError> {
    answer(s, who, id, true).await
}

async fn reject(
    s: State<AppState>,
    who: Needs<need::WriteFollows>,
    id: Path<String>,
) -> Result<Json<Value>, ApiError> {
    answer(s, who, id, false).await
}

async fn answer(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteFollows>,
    Path(id): Path<String>,
    authorize: bool,
) -> Result<Json<Value>, ApiError> {
    let fed = federation(&s)?;
    let requester = found(&s, &id).await?;
    let mut tx = s.pool.begin().await?;
    let answered =
        relationships::answer_request(&mut tx, fed, &account, &requester.target(), authorize)
            .await?;
    if !answered {
        return Err(ApiError(
            StatusCode::NOT_FOUND,
            "no follow request from this account".into(),
        ));
    }
    tx.commit().await?;
    Ok(Json(relationship_of(&s, &account, &requester).await?))
}
