//! `/api/v1/*`: every endpoint acts as the account whose bearer token it gets.
//! `POST /api/v1/follows {"account":"name@host"}` resolves the account within the request
//! (WebFinger + actor fetch through the guard; unknown, unreachable or refused → 422 with the
//! reason), stores a pending relationship and queues the `Follow` — what imports call per row.

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};

use super::activitypub::federation;
use super::auth::{Admin, Needs, need};
use super::body::{ApiJson, RequestBody};
use super::{ApiError, AppState};
use crate::federation::outbound::follows;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/follows", post(follow))
        .route("/api/v1/admin/{*rest}", axum::routing::any(admin_fallback))
}

/// `/api/v1/admin/*` takes `ADMIN_TOKEN`, not account tokens (403 while it is unset); no such
/// endpoint exists yet, so an authorised caller gets 404.
async fn admin_fallback(_: Admin) -> ApiError {
    ApiError::not_found("not found")
}

/// `POST /api/v1/follows`.
#[derive(Deserialize)]
pub struct FollowRequest {
    /// `name@host`, with or without a leading `@`.
    account: String,
}

impl RequestBody for FollowRequest {
    const SHAPE_STATUS: StatusCode = StatusCode::BAD_REQUEST;
}

async fn follow(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteFollows>,
    ApiJson(req): ApiJson<FollowRequest>,
) -> Result<Json<Value>, ApiError> {
    let fed = federation(&s)?;
    let handle = req.account.trim().trim_start_matches('@').to_string();
    let target = follows::resolve_account(&s.pool, fed, &account, &handle)
        .await
        .map_err(|e| ApiError::unprocessable(e.message))?;
    let mut tx = s.pool.begin().await?;
    let (id, state) = follows::follow_in(&mut tx, fed, &account, &target).await?;
    tx.commit().await?;
    Ok(Json(relationship(&id, &handle, &target.iri, &state)))
}

fn relationship(id: &str, handle: &str, iri: &str, state: &str) -> Value {
    json!({ "id": id, "account": handle, "actor": iri, "state": state })
}
