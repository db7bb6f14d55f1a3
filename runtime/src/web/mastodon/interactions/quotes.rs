//! Quotes of one's statuses (Mastodon 4.5): `GET /api/v1/statuses/{id}/quotes`, the statuses
//! quoting it (its author only, as Mastodon's), and
//! `POST /api/v1/statuses/{id}/quotes/{quoting_status_id}/revoke`, withdrawing one
//! (`quotes::local::revoke`: the state, our authorization, the `Delete` sent), which answers
//! the quoting status as it now shows; and `PUT /api/v1/statuses/{id}/interaction_policy`
//! (`quote_approval_policy`), the author changing who may quote, federated as an `Update`.
//! All render through the one visibility rule.

use axum::extract::{Path, State};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use serde::Deserialize;
use uuid::Uuid;

use super::status;
use crate::federation::outbound::statuses::{self as ap, Announce};
use crate::mastodon::Status;
use crate::quotes::Policy;
use crate::quotes::local::{self, RevokeError};
use crate::web::activitypub::federation;
use crate::web::auth::{Needs, need};
use crate::web::mastodon::statuses::body::StatusBody;
use crate::web::mastodon::{RecordId, record_id};
use crate::web::{ApiError, AppState};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/statuses/{id}/quotes", get(list))
        .route(
            "/api/v1/statuses/{id}/quotes/{quoting}/revoke",
            post(revoke),
        )
        .route("/api/v1/statuses/{id}/interaction_policy", put(set_policy))
}

impl From<RevokeError> for ApiError {
    fn from(e: RevokeError) -> Self {
        match e {
            RevokeError::NotFound => ApiError::record_not_found(),
            RevokeError::Db(e) => e.into(),
        }
    }
}

/// The most quotes one page shows.
const LIMIT: i64 = 40;

async fn list(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::ReadStatuses>,
    RecordId(status_id): RecordId,
) -> Result<Json<Vec<Status>>, ApiError> {
    let mut conn = s.pool.acquire().await?;
    let uri: Option<String> =
        sqlx::query_scalar("SELECT uri FROM statuses WHERE id = $1 AND account_id = $2")
            .bind(status_id)
            .bind(account.id)
            .fetch_optional(&mut *conn)
            .await?;
    let uri = uri.ok_or_else(ApiError::record_not_found)?;
    let ids: Vec<Uuid> = sqlx::query_scalar(
        "SELECT post_id FROM quotes WHERE quoted_uri = $1 AND state = 'accepted'
          ORDER BY post_id DESC LIMIT $2",
    )
    .bind(&uri)
    .bind(LIMIT)
    .fetch_all(&mut *conn)
    .await?;
    let statuses =
        crate::mastodon::status::render(&mut conn, s.site(), Some(account.id), &ids).await?;
    Ok(Json(statuses))
}

async fn revoke(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteStatuses>,
    Path((raw, quoting)): Path<(String, String)>,
) -> Result<Json<Status>, ApiError> {
    let fed = federation(&s)?;
    let (status_id, quoting) = (record_id(&raw)?, record_id(&quoting)?);
    let mut tx = s.pool.begin().await?;
    local::revoke(&mut tx, fed, &account, status_id, quoting).await?;
    tx.commit().await?;
    status(&s, account.id, quoting).await
}

#[derive(Debug, Deserialize)]
struct PolicyBody {
    #[serde(default)]
    quote_approval_policy: Option<String>,
}

async fn set_policy(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteStatuses>,
    RecordId(status_id): RecordId,
    StatusBody(body): StatusBody<PolicyBody>,
) -> Result<Json<Status>, ApiError> {
    let asked = body.quote_approval_policy.unwrap_or_default();
    let policy = Policy::parse(asked.trim()).ok_or_else(|| {
        ApiError::unprocessable(format!(
            "Validation failed: quote_approval_policy {asked:?} is not one of public, followers, nobody"
        ))
    })?;
    let mut tx = s.pool.begin().await?;
    if !local::set_policy(&mut tx, account.id, status_id, policy).await? {
        return Err(ApiError::record_not_found());
    }
    if let Some(f) = s.fed.as_deref() {
        // Every server holding the note learns its new `interactionPolicy`.
        let tag = format!("policy-{}", Uuid::now_v7());
        ap::publish(
            &mut tx,
            f,
            Some(&s.drive),
            account.id,
            status_id,
            Announce::Update { tag: &tag },
        )
        .await?;
    }
    tx.commit().await?;
    status(&s, account.id, status_id).await
}
