//! Favourites, boosts and bookmarks in Mastodon's paths and shapes (R-MAPI-3): the
//! actions on a status (`actions`) and the lists they make (`lists`). Storage and
//! local side effects are `statuses::interact`; what is sent, `federation::interactions`.

use axum::Json;
use axum::Router;
use sqlx::PgConnection;
use uuid::Uuid;

use crate::accounts::Account;
use crate::mastodon::status::{self, Status};
use crate::statuses::interact::{self, Post};
use crate::web::mastodon::record_id;
use crate::web::{ApiError, AppState};

mod actions;
mod lists;
mod quotes;
mod reactions;

pub fn routes() -> Router<AppState> {
    Router::new()
        .merge(actions::routes())
        .merge(lists::routes())
        .merge(reactions::routes())
        .merge(quotes::routes())
}

/// The post a path id names for `viewer` (a boost's id names the boosted post); unknown,
/// malformed and unreadable ids are the same 404.
async fn target(
    conn: &mut PgConnection,
    viewer: Option<Uuid>,
    raw: &str,
) -> Result<Post, ApiError> {
    let id = record_id(raw)?;
    interact::find(conn, viewer, id)
        .await?
        .ok_or_else(ApiError::record_not_found)
}

/// Whether an action engages the post's author — a favourite, a boost, a reaction: refused
/// across a block either way (`statuses::post::blocked`, Mastodon's 403) — or only keeps the
/// post for the caller (a bookmark, a mute, a pin, any undo).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Touch {
    Engages,
    Keeps,
}

/// begin → the status the caller can see (`target`), not across a block if `touch` engages
/// its author → `act` → commit → render the status `act` names (the post itself, or the
/// boost `reblog` made).
async fn on_status(
    s: &AppState,
    account: &Account,
    raw: &str,
    touch: Touch,
    act: impl AsyncFnOnce(&mut PgConnection, &Post) -> Result<Uuid, ApiError>,
) -> Result<Json<Status>, ApiError> {
    let mut tx = s.pool.begin().await?;
    let post = target(&mut tx, Some(account.id), raw).await?;
    if touch == Touch::Engages
        && let Some(fed) = s.fed.as_deref()
        && crate::statuses::post::blocked(&mut tx, fed, account, &post).await?
    {
        return Err(ApiError::forbidden("This action is not allowed"));
    }
    let shown = act(&mut tx, &post).await?;
    tx.commit().await?;
    status(s, account.id, shown).await
}

/// The Status entity of `id` as `viewer` sees it.
async fn status(s: &AppState, viewer: Uuid, id: Uuid) -> Result<Json<Status>, ApiError> {
    let mut conn = s.pool.acquire().await?;
    status::render_one(&mut conn, s.site(), Some(viewer), id)
        .await?
        .map(Json)
        .ok_or_else(ApiError::record_not_found)
}
