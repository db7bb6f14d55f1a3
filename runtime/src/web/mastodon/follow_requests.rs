//! Follow requests of a locked account: `GET /api/v1/follow_requests` (the waiting accounts,
//! paginated by the request) and `POST /api/v1/follow_requests/{account id}/authorize` or
//! `/reject`. A remote requester gets the `Accept` or `Reject` of its Follow through the queue,
//! in the transaction that answers the request.

use crate::mastodon::Relationship;
use axum::extract::{Path, State};
use axum::http::Uri;
use axum::routing::{get, post};
use axum::{Json, Router};

use super::accounts::iri_page;
use super::found;
use super::pagination::Paged;
use super::relationships::relationship_of;
use crate::federation::outbound::relationships;
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
) -> Result<Paged<crate::mastodon::Account>, ApiError> {
    iri_page(
        &s,
        account.id,
        "SELECT id, actor_iri FROM follow_requests WHERE account_id = $1 AND",
        &uri,
    )
    .await
}

async fn authorize(
    s: State<AppState>,
    who: Needs<need::WriteFollows>,
    id: Path<String>,
) -> Result<Json<Relationship>, ApiError> {
    answer(s, who, id, true).await
}

async fn reject(
    s: State<AppState>,
    who: Needs<need::WriteFollows>,
    id: Path<String>,
) -> Result<Json<Relationship>, ApiError> {
    answer(s, who, id, false).await
}

async fn answer(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteFollows>,
    Path(id): Path<String>,
    authorize: bool,
) -> Result<Json<Relationship>, ApiError> {
    let fed = federation(&s)?;
    let requester = found(&s, &id).await?;
    let mut tx = s.pool.begin().await?;
    let answered =
        relationships::answer_request(&mut tx, fed, &account, &requester.target(), authorize)
            .await?;
    if !answered {
        return Err(ApiError::not_found("no follow request from this account"));
    }
    tx.commit().await?;
    Ok(Json(relationship_of(&s, &account, &requester).await?))
}
