//! The lists interactions make: `GET /api/v1/favourites` and `/api/v1/bookmarks` (the
//! caller's, paginated by the favourite or bookmark, newest first, as Mastodon does), and
//! `GET /api/v1/statuses/{id}/favourited_by` and `/reblogged_by` (Account entities,
//! paginated by the favourite or boost). Every list shows only statuses the reader may see.

use std::collections::HashMap;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::Uri;
use axum::routing::get;
use uuid::Uuid;

use super::target;
use crate::mastodon::status::{self, Status};
use crate::statuses::access::visible_sql;
use crate::web::activitypub::federation;
use crate::web::auth::{MaybeNeeds, Needs, need};
use crate::web::mastodon::accounts::render_rows;
use crate::web::mastodon::pagination::BindPage;
use crate::web::mastodon::pagination::{Page, Paged, Paging, params};
use crate::web::{ApiError, AppState};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/favourites", get(favourites))
        .route("/api/v1/bookmarks", get(bookmarks))
        .route("/api/v1/statuses/{id}/favourited_by", get(favourited_by))
        .route("/api/v1/statuses/{id}/reblogged_by", get(reblogged_by))
}

async fn favourites(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::ReadFavourites>,
    uri: Uri,
) -> Result<Paged<Status>, ApiError> {
    let from = "favourites f JOIN posts p ON p.id = f.post_id";
    statuses_page(&s, account.id, &uri, from, "f").await
}

async fn bookmarks(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::ReadBookmarks>,
    uri: Uri,
) -> Result<Paged<Status>, ApiError> {
    // Imported bookmarks name their post by IRI only, so the join is by IRI.
    let from = "bookmarks b JOIN posts p ON p.uri = b.post_iri";
    statuses_page(&s, account.id, &uri, from, "b").await
}

/// A page of the caller's statuses kept in a table of theirs (favourites, bookmarks): `from`
/// joins the table, as `row`, to its posts, as `p`; the rows are the account's (bound at
/// `$1`) whose post the account may see, paged by the row's id, as Status entities with the
/// row ids as cursors.
async fn statuses_page(
    s: &AppState,
    account: Uuid,
    uri: &Uri,
    from: &str,
    row: &str,
) -> Result<Paged<Status>, ApiError> {
    let page: Page<i64> = Page::from_params(&params(uri))?;
    let sql = format!(
        "SELECT {row}.id, p.id FROM {from}
          WHERE {row}.account_id = $1 AND {visible} AND {clause}",
        visible = visible_sql("p", 1),
        clause = page.clause(&format!("{row}.id"), 2),
    );
    let rows: Vec<(i64, Uuid)> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(account)
        .bind_page(&page)
        .fetch_all(&s.pool)
        .await?;
    let rows = page.finish(rows);
    let (items, keys) = render_statuses(s, account, &rows).await?;
    Ok(Paged::new(items, &keys, &s.public_origin, uri))
}

/// Status entities of `(cursor, post id)` rows, in order, with their cursors; posts that no
/// longer render (deleted meanwhile) are left out with their cursor.
async fn render_statuses(
    s: &AppState,
    viewer: Uuid,
    rows: &[(i64, Uuid)],
) -> Result<(Vec<Status>, Vec<String>), ApiError> {
    let ids: Vec<Uuid> = rows.iter().map(|(_, id)| *id).collect();
    let cursor: HashMap<String, String> = rows
        .iter()
        .map(|(k, id)| (id.to_string(), k.to_string()))
        .collect();
    let mut conn = s.pool.acquire().await?;
    let rendered = status::render(&mut conn, s.site(), Some(viewer), &ids).await?;
    let mut items = Vec::with_capacity(rendered.len());
    let mut keys = Vec::with_capacity(rendered.len());
    for v in rendered {
        if let Some(k) = cursor.get(&v.id) {
            keys.push(k.clone());
            items.push(v);
        }
    }
    Ok((items, keys))
}

/// Who favourited the status: local accounts' favourites and remote `Like`s, one list keyed
/// by the favourite's id (remote Likes share its sequence, see the migration). A favourite
/// still waiting for the author's approval (`approvals`) shows only to whoever made it.
async fn favourited_by(
    State(s): State<AppState>,
    MaybeNeeds(viewer, _): MaybeNeeds<need::ReadAccounts>,
    Path(raw): Path<String>,
    Paging { page, uri }: Paging<i64>,
) -> Result<Paged<crate::mastodon::Account>, ApiError> {
    let fed = federation(&s)?;
    let viewer = viewer.map(|a| a.id);
    let post = {
        let mut conn = s.pool.acquire().await?;
        target(&mut conn, viewer, &raw).await?
    };
    let rows: Vec<(i64, String)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT k, iri FROM (
             SELECT f.id AS k, $6 || '/users/' || a.username AS iri
               FROM favourites f JOIN accounts a ON a.id = f.account_id
              WHERE f.post_id = $1 AND (NOT f.pending_approval OR f.account_id = $8::uuid)
           UNION ALL
             SELECT i.seq, i.actor FROM remote_interactions i
              WHERE i.object = $7 AND i.kind = 'like' AND i.undone_at IS NULL
         ) l WHERE {}",
        page.clause("k", 2)
    )))
    .bind(post.id)
    .bind_page(&page)
    .bind(&fed.origin)
    .bind(&post.uri)
    .bind(viewer)
    .fetch_all(&s.pool)
    .await?;
    let rows = page.finish(rows);
    let (items, keys) = render_rows(&s, fed, &rows).await?;
    Ok(Paged::new(items, &keys, &s.public_origin, &uri))
}

/// Who boosted the status, keyed by the boost's id; a followers-only boost, or one still
/// waiting for the author's approval, shows only to its booster (as `access::can_see` reads
/// boosts).
async fn reblogged_by(
    State(s): State<AppState>,
    MaybeNeeds(viewer, _): MaybeNeeds<need::ReadAccounts>,
    Path(raw): Path<String>,
    Paging { page, uri }: Paging<Uuid>,
) -> Result<Paged<crate::mastodon::Account>, ApiError> {
    let fed = federation(&s)?;
    let viewer = viewer.map(|a| a.id);
    let post = {
        let mut conn = s.pool.acquire().await?;
        target(&mut conn, viewer, &raw).await?
    };
    let rows: Vec<(Uuid, String)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT r.id, coalesce(r.actor_iri, $6 || '/users/' || a.username)
           FROM reblogs r LEFT JOIN accounts a ON a.id = r.account_id
          WHERE r.post_id = $1
            AND ((r.visibility IN ('public', 'unlisted') AND NOT r.pending_approval)
                 OR r.account_id = $7::uuid)
            AND {}",
        page.clause("r.id", 2)
    )))
    .bind(post.id)
    .bind_page(&page)
    .bind(&fed.origin)
    .bind(viewer)
    .fetch_all(&s.pool)
    .await?;
    let rows = page.finish(rows);
    let (items, keys) = render_rows(&s, fed, &rows).await?;
    Ok(Paged::new(items, &keys, &s.public_origin, &uri))
}
