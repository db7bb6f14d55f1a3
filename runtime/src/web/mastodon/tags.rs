//! Hashtags in the client API (R-MAPI-6): `GET /api/v1/tags/:name`, follow and
//! unfollow, `GET /api/v1/followed_tags`, featured tags (`/api/v1/featured_tags`, their
//! suggestions, and `GET /api/v1/accounts/:id/featured_tags`). What following does to home is
//! `tags::fan_out`'s; the rules are `tags`'.

use axum::extract::{Path, State};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use serde_json::{Map, Value};

use super::RecordId;
use super::found;
use super::pagination::{Paged, Paging};
use super::statuses::body::StatusBody;
use crate::federation::actors::directory::Found;
use crate::mastodon::Empty;
use crate::mastodon::tag::{FeaturedTag, Tag};
use crate::tags::{self, featured};
use crate::web::auth::{MaybeNeeds, Needs, need};
use crate::web::{ApiError, AppState};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/tags/{name}", get(show))
        .route("/api/v1/tags/{name}/follow", post(follow))
        .route("/api/v1/tags/{name}/unfollow", post(unfollow))
        .route("/api/v1/followed_tags", get(followed))
        .route("/api/v1/featured_tags", get(featured_index).post(feature))
        .route("/api/v1/featured_tags/suggestions", get(suggestions))
        .route("/api/v1/featured_tags/{id}", delete(unfeature))
        .route("/api/v1/accounts/{id}/featured_tags", get(of_account))
}

/// The tag a path names; one that is not a hashtag name is the same 404 as Mastodon's.
fn name_of(raw: &str) -> Result<String, ApiError> {
    tags::normalize(raw).ok_or_else(ApiError::record_not_found)
}

/// The Tag entity of `name`, `following` for a signed-in viewer.
async fn entity(s: &AppState, name: &str, viewer: Option<uuid::Uuid>) -> Result<Tag, ApiError> {
    let mut conn = s.pool.acquire().await?;
    let history = tags::history(&mut conn, name).await?;
    let following = match viewer {
        Some(v) => Some(
            !tags::followed_among(&mut conn, v, &[name.to_string()])
                .await?
                .is_empty(),
        ),
        None => None,
    };
    Ok(Tag::new(s.site().urls, name, &history, following))
}

async fn show(
    State(s): State<AppState>,
    MaybeNeeds(viewer, _): MaybeNeeds<need::ReadFollows>,
    Path(raw): Path<String>,
) -> Result<Json<Tag>, ApiError> {
    let name = name_of(&raw)?;
    Ok(Json(entity(&s, &name, viewer.map(|a| a.id)).await?))
}

async fn follow(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteFollows>,
    Path(raw): Path<String>,
) -> Result<Json<Tag>, ApiError> {
    set_followed(&s, account.id, &raw, true).await
}

async fn unfollow(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteFollows>,
    Path(raw): Path<String>,
) -> Result<Json<Tag>, ApiError> {
    set_followed(&s, account.id, &raw, false).await
}

/// Follows (or unfollows) the tag `raw` names for `account`; the tag entity as it now is.
async fn set_followed(
    s: &AppState,
    account: uuid::Uuid,
    raw: &str,
    follow: bool,
) -> Result<Json<Tag>, ApiError> {
    let name = name_of(raw)?;
    let mut tx = s.pool.begin().await?;
    if follow {
        tags::follow(&mut tx, account, &name).await?;
    } else {
        tags::unfollow(&mut tx, account, &name).await?;
    }
    tx.commit().await?;
    Ok(Json(entity(s, &name, Some(account)).await?))
}

/// The followed tags, the latest followed first, paged by when each was followed.
async fn followed(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::ReadFollows>,
    Paging { page, uri }: Paging<i64>,
) -> Result<Paged<Tag>, ApiError> {
    let rows: Vec<(i64, String)> = page
        .fetch_by_id(
            &s.pool,
            "SELECT id, tag FROM tag_follows WHERE account_id = $1 AND",
            account.id,
        )
        .await?;
    let keys: Vec<String> = rows.iter().map(|(id, _)| id.to_string()).collect();
    let mut conn = s.pool.acquire().await?;
    let mut items = Vec::with_capacity(rows.len());
    for (_, name) in &rows {
        let history = tags::history(&mut conn, name).await?;
        items.push(Tag::new(s.site().urls, name, &history, Some(true)));
    }
    Ok(Paged::new(items, &keys, &s.public_origin, &uri))
}

async fn featured_index(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::ReadAccounts>,
) -> Result<Json<Vec<FeaturedTag>>, ApiError> {
    let mut conn = s.pool.acquire().await?;
    let all = featured::of(&mut conn, account.id).await?;
    Ok(Json(
        all.iter()
            .map(|f| FeaturedTag::new(s.site().urls, f))
            .collect(),
    ))
}

/// `name`, as JSON or a form.
async fn feature(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteAccounts>,
    StatusBody(body): StatusBody<Map<String, Value>>,
) -> Result<Json<FeaturedTag>, ApiError> {
    let name = body
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let mut tx = s.pool.begin().await?;
    let f = featured::add(&mut tx, account.id, &name)
        .await
        .map_err(|e| match e {
            featured::FeaturedError::Refused(m) => ApiError::unprocessable(m),
            featured::FeaturedError::Db(e) => e.into(),
        })?;
    tx.commit().await?;
    Ok(Json(FeaturedTag::new(s.site().urls, &f)))
}

async fn unfeature(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteAccounts>,
    RecordId(id): RecordId,
) -> Result<Json<Empty>, ApiError> {
    let mut tx = s.pool.begin().await?;
    if !featured::remove(&mut tx, account.id, id).await? {
        return Err(ApiError::record_not_found());
    }
    tx.commit().await?;
    Ok(Json(Empty {}))
}

async fn suggestions(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::ReadAccounts>,
) -> Result<Json<Vec<Tag>>, ApiError> {
    let mut conn = s.pool.acquire().await?;
    let names = featured::suggestions(&mut conn, account.id).await?;
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        let history = tags::history(&mut conn, &name).await?;
        out.push(Tag::new(s.site().urls, &name, &history, None));
    }
    Ok(Json(out))
}

/// An account's featured tags; anyone may read them (ours only: a remote account's
/// `featuredTags` collection is not fetched, so it has none here).
async fn of_account(
    State(s): State<AppState>,
    Path(raw): Path<String>,
) -> Result<Json<Vec<FeaturedTag>>, ApiError> {
    let out = match found(&s, &raw).await? {
        Found::Local(a) => {
            let mut conn = s.pool.acquire().await?;
            featured::of(&mut conn, a.id)
                .await?
                .iter()
                .map(|f| FeaturedTag::new(s.site().urls, f))
                .collect()
        }
        Found::Remote(_) => Vec::new(),
    };
    Ok(Json(out))
}
