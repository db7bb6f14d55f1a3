//! `/api/v1/*`: every endpoint acts as the account whose bearer token it gets.
//! `POST /api/v1/follows {"account":"name@host"}` resolves the account within the request
//! (WebFinger + actor fetch through the guard; unknown, unreachable or refused → 422 with the
//! reason), stores a pending relationship and queues the `Follow` — what imports call per row.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Value, json};

use super::activitypub::federation;
use super::{ApiError, AppState};
use crate::federation::accounts::{self, Account};
use crate::federation::follows;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/api/v1/accounts/verify_credentials",
            get(verify_credentials),
        )
        .route("/api/v1/follows", post(follow))
        .route("/api/v1/admin/{*rest}", axum::routing::any(admin_fallback))
}

/// `/api/v1/admin/*` takes `ADMIN_TOKEN`, not account tokens (403 while it is unset); no such
/// endpoint exists yet, so an authorised caller gets 404.
async fn admin_fallback(State(s): State<AppState>, headers: HeaderMap) -> ApiError {
    match super::require_admin(&s, &headers) {
        Err(e) => e,
        Ok(()) => ApiError(StatusCode::NOT_FOUND, "not found".into()),
    }
}

/// The account of `Authorization: Bearer <token>`, or 401.
pub async fn require_account(s: &AppState, headers: &HeaderMap) -> Result<Account, ApiError> {
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| ApiError(StatusCode::UNAUTHORIZED, "missing bearer token".into()))?;
    accounts::by_token(&s.pool, token)
        .await?
        .ok_or_else(|| ApiError(StatusCode::UNAUTHORIZED, "invalid bearer token".into()))
}

async fn verify_credentials(
    State(s): State<AppState>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    let account = require_account(&s, &headers).await?;
    Ok(Json(json!({
        "id": account.id, "username": account.username, "acct": account.username,
        "admin": account.admin,
    })))
}

fn unprocessable(msg: impl Into<String>) -> ApiError {
    ApiError(StatusCode::UNPROCESSABLE_ENTITY, msg.into())
}

async fn follow(
    State(s): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let account = require_account(&s, &headers).await?;
    let fed = federation(&s)?;
    let req: Value = serde_json::from_slice(&body)
        .map_err(|e| ApiError(StatusCode::BAD_REQUEST, format!("body is not JSON: {e}")))?;
    let handle = req
        .get("account")
        .and_then(Value::as_str)
        .map(|h| h.trim().trim_start_matches('@').to_string())
        .ok_or_else(|| {
            ApiError(
                StatusCode::BAD_REQUEST,
                "expected {\"account\": \"name@host\"}".into(),
            )
        })?;
    let target = follows::resolve_account(&s.pool, fed, &account, &handle)
        .await
        .map_err(|e| unprocessable(e.message))?;
    let mut tx = s.pool.begin().await?;
    let (id, state) = follows::follow_in(&mut tx, fed, &account, &target).await?;
    tx.commit().await?;
    Ok(Json(relationship(&id, &handle, &target.iri, &state)))
}

fn relationship(id: &str, handle: &str, iri: &str, state: &str) -> Value {
    json!({ "id": id, "account": handle, "actor": iri, "state": state })
}
