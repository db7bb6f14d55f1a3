//! Emoji reactions (R-MAPI-6) in the paths clients use: Hollo's and
//! Fedibird's `POST /api/v1/statuses/{id}/react/{emoji}` and `/unreact/{emoji}`, Fedibird's
//! (and upstream Hollo's) `PUT`/`DELETE /api/v1/statuses/{id}/emoji_reactions/{emoji}`, Pleroma's
//! `PUT`/`DELETE /api/v1/pleroma/statuses/{id}/reactions/{emoji}` (each answers the Status
//! entity after the change), and Pleroma's `GET …/reactions[/{emoji}]`, the reactions with
//! their accounts. Works on any status the caller may read; idempotent; begin → act
//! (`reactions`: the row, the notification, the `EmojiReact` queued) → commit → render.

use axum::extract::{Path, State};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use serde::Serialize;
use std::sync::Arc;

use super::{Touch, on_status, target};
use crate::mastodon::Status;
use crate::mastodon::account::Account;
use crate::reactions::{self, ReactionError};
use crate::web::activitypub::federation;
use crate::web::auth::{MaybeNeeds, Needs, need};
use crate::web::{ApiError, AppState};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/statuses/{id}/react/{emoji}", post(react))
        .route("/api/v1/statuses/{id}/unreact/{emoji}", post(unreact))
        .route(
            "/api/v1/statuses/{id}/emoji_reactions/{emoji}",
            put(react).delete(unreact),
        )
        .route(
            "/api/v1/pleroma/statuses/{id}/reactions/{emoji}",
            put(react).delete(unreact).get(list_one),
        )
        .route("/api/v1/pleroma/statuses/{id}/reactions", get(list))
}

impl From<ReactionError> for ApiError {
    fn from(e: ReactionError) -> Self {
        match e {
            ReactionError::Db(e) => e.into(),
            e => ApiError::unprocessable(e.to_string()),
        }
    }
}

async fn react(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteFavourites>,
    Path((raw, emoji)): Path<(String, String)>,
) -> Result<Json<Status>, ApiError> {
    let fed = federation(&s)?;
    on_status(&s, &account, &raw, Touch::Engages, async |tx, post| {
        let reaction = reactions::parse(tx, &emoji).await?;
        reactions::react(tx, fed, &account, post, &reaction).await?;
        Ok(post.id)
    })
    .await
}

async fn unreact(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteFavourites>,
    Path((raw, emoji)): Path<(String, String)>,
) -> Result<Json<Status>, ApiError> {
    let fed = federation(&s)?;
    on_status(&s, &account, &raw, Touch::Keeps, async |tx, post| {
        reactions::unreact(tx, fed, &account, post, &emoji).await?;
        Ok(post.id)
    })
    .await
}

/// Pleroma's reaction with the accounts that made it.
#[derive(Serialize)]
struct WithAccounts {
    name: String,
    count: i64,
    me: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    url: Option<String>,
    accounts: Vec<Arc<Account>>,
}

async fn list(
    State(s): State<AppState>,
    MaybeNeeds(viewer, _): MaybeNeeds<need::ReadStatuses>,
    Path(raw): Path<String>,
) -> Result<Json<Vec<WithAccounts>>, ApiError> {
    listed(&s, viewer.map(|a| a.id), &raw, None).await
}

async fn list_one(
    State(s): State<AppState>,
    MaybeNeeds(viewer, _): MaybeNeeds<need::ReadStatuses>,
    Path((raw, emoji)): Path<(String, String)>,
) -> Result<Json<Vec<WithAccounts>>, ApiError> {
    listed(&s, viewer.map(|a| a.id), &raw, Some(emoji)).await
}

/// The reactions of the status `raw` names, as the viewer may read it (else 404).
async fn listed(
    s: &AppState,
    viewer: Option<uuid::Uuid>,
    raw: &str,
    emoji: Option<String>,
) -> Result<Json<Vec<WithAccounts>>, ApiError> {
    let mut conn = s.pool.acquire().await?;
    let post = target(&mut conn, viewer, raw).await?;
    let mut by_post =
        crate::mastodon::reaction::of_posts(&mut conn, s.site().urls, viewer, &[post.id]).await?;
    drop(conn);
    let wanted = emoji.as_deref().map(|e| e.trim().trim_matches(':'));
    let reactions: Vec<_> = by_post
        .remove(&post.id)
        .unwrap_or_default()
        .into_iter()
        .filter(|r| wanted.is_none_or(|w| r.name == w))
        .collect();
    let ids: Vec<uuid::Uuid> = reactions
        .iter()
        .flat_map(|r| r.account_ids.iter().filter_map(|i| i.parse().ok()))
        .collect();
    let accounts = crate::mastodon::notification::accounts(&s.pool, s.site(), &ids).await?;
    Ok(Json(
        reactions
            .into_iter()
            .map(|r| WithAccounts {
                accounts: r
                    .account_ids
                    .iter()
                    .filter_map(|i| accounts.get(&i.parse().ok()?).cloned())
                    .collect(),
                name: r.name,
                count: r.count,
                me: r.me,
                url: r.url,
            })
            .collect(),
    ))
}
