//! Accounts by id or address, and their lists: `GET /api/v1/accounts/{id}`, `/lookup?acct=`,
//! `/{id}/statuses`, `/{id}/followers`, `/{id}/following`. Local accounts and stored remote
//! actors alike; a remote account's statuses are the posts of it we stored, its follower lists
//! are empty (we do not fetch its collections).

use axum::extract::{Path, State};
use axum::http::{StatusCode, Uri};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::Value;
use uuid::Uuid;

use super::entities::{self, REMOTE_POST_COLUMNS, RemotePost};
use super::pagination::{Page, Paged, param, params};
use super::{found, unprocessable};
use crate::federation::Federation;
use crate::federation::directory::{self, Found, RemoteAccount};
use crate::polls;
use crate::web::activitypub::federation;
use crate::web::auth::{Needs, need};
use crate::web::{ApiError, AppState};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/accounts/lookup", get(lookup))
        .route("/api/v1/accounts/{id}", get(show))
        .route("/api/v1/accounts/{id}/statuses", get(statuses))
        .route("/api/v1/accounts/{id}/followers", get(followers))
        .route("/api/v1/accounts/{id}/following", get(following))
}

async fn show(
    State(s): State<AppState>,
    _: Needs<need::ReadAccounts>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let fed = federation(&s)?;
    let found = found(&s, &id).await?;
    Ok(Json(entities::account(&s.pool, fed, &found).await?))
}

async fn lookup(
    State(s): State<AppState>,
    _: Needs<need::ReadAccounts>,
    uri: Uri,
) -> Result<Json<Value>, ApiError> {
    let fed = federation(&s)?;
    let params = params(&uri);
    let acct = param(&params, "acct")
        .filter(|a| !a.trim().is_empty())
        .ok_or_else(|| unprocessable("acct is required"))?;
    let found = directory::by_acct(&s.pool, fed, acct)
        .await?
        .ok_or_else(|| ApiError(StatusCode::NOT_FOUND, "Record not found".into()))?;
    Ok(Json(entities::account(&s.pool, fed, &found).await?))
}

/// A local account's statuses, newest first (ids are time-ordered UUIDs).
async fn statuses(
    State(s): State<AppState>,
    Needs(viewer, _): Needs<need::ReadStatuses>,
    Path(id): Path<String>,
    uri: Uri,
) -> Result<Paged, ApiError> {
    let fed = federation(&s)?;
    let found = found(&s, &id).await?;
    let page: Page<Uuid> = Page::from_params(&params(&uri))?;
    let account = match found {
        Found::Local(account) => account,
        Found::Remote(remote) => return remote_statuses(&s, &remote, &page, &uri).await,
    };
    let ids: Vec<Uuid> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT id FROM statuses WHERE account_id = $1 AND {}",
        page.clause("id", 2)
    )))
    .bind(account.id)
    .bind(page.max)
    .bind(page.since)
    .bind(page.min)
    .bind(page.limit)
    .fetch_all(&s.pool)
    .await?;
    let ids = page.finish(ids);
    // The polls module renders a short author; lists show the full Account entity.
    let author = entities::local_account(&mut *s.pool.acquire().await?, fed, &account)
        .await?
        .0;
    let mut conn = s.pool.acquire().await?;
    let mut items = Vec::with_capacity(ids.len());
    for id in &ids {
        if let Some(mut v) = polls::status_json(&mut conn, *id, Some(viewer.id)).await? {
            v["account"] = author.clone();
            items.push(v);
        }
    }
    let keys: Vec<String> = ids.iter().map(Uuid::to_string).collect();
    Ok(Paged::new(items, &keys, &s.public_origin, &uri))
}

/// The posts of a remote account that reached us (its outbox is not fetched), newest first by
/// when they were published (else received); not deleted ones.
async fn remote_statuses(
    s: &AppState,
    remote: &RemoteAccount,
    page: &Page<Uuid>,
    uri: &Uri,
) -> Result<Paged, ApiError> {
    let fed = federation(s)?;
    let cursor = |p: &str| {
        format!("(SELECT COALESCE(published, created_at), id FROM remote_posts WHERE id = {p})")
    };
    let clause = page.clause_by(
        "(COALESCE(published, created_at), id)",
        &["COALESCE(published, created_at)", "id"],
        cursor,
        2,
    );
    let posts: Vec<RemotePost> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {REMOTE_POST_COLUMNS} FROM remote_posts
          WHERE actor = $1 AND deleted_at IS NULL AND {clause}"
    )))
    .bind(&remote.iri)
    .bind(page.max)
    .bind(page.since)
    .bind(page.min)
    .bind(page.limit)
    .fetch_all(&s.pool)
    .await?;
    let posts = page.finish(posts);
    let author = entities::remote_account(fed, remote);
    let keys: Vec<String> = posts.iter().map(|p| p.id.to_string()).collect();
    let items = posts
        .iter()
        .map(|p| entities::remote_status(p, author.clone()))
        .collect();
    Ok(Paged::new(items, &keys, &s.public_origin, uri))
}

/// Which relationship list.
#[derive(Clone, Copy)]
enum List {
    Followers,
    Following,
}

async fn followers(
    State(s): State<AppState>,
    _: Needs<need::ReadAccounts>,
    Path(id): Path<String>,
    uri: Uri,
) -> Result<Paged, ApiError> {
    relationship_list(&s, &id, &uri, List::Followers).await
}

async fn following(
    State(s): State<AppState>,
    _: Needs<need::ReadAccounts>,
    Path(id): Path<String>,
    uri: Uri,
) -> Result<Paged, ApiError> {
    relationship_list(&s, &id, &uri, List::Following).await
}

/// A local account's followers or followed accounts, paginated by the relationship's id.
async fn relationship_list(
    s: &AppState,
    id: &str,
    uri: &Uri,
    list: List,
) -> Result<Paged, ApiError> {
    let fed = federation(s)?;
    let found = found(s, id).await?;
    let page: Page<i64> = Page::from_params(&params(uri))?;
    let Found::Local(account) = found else {
        return Ok(Paged::new(Vec::new(), &[], &s.public_origin, uri));
    };
    let base = match list {
        List::Followers => "SELECT id, actor_iri FROM followers WHERE account_id = $1 AND",
        List::Following => {
            "SELECT id, target_iri FROM follows WHERE account_id = $1 AND state = 'accepted' AND"
        }
    };
    let rows: Vec<(i64, String)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "{base} {}",
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
    let (items, keys) = render_rows(s, fed, &rows).await?;
    Ok(Paged::new(items, &keys, &s.public_origin, uri))
}

/// Account entities for (cursor, actor IRI) rows, in order; actors we no longer know are
/// left out.
pub(crate) async fn render_rows<K: std::fmt::Display>(
    s: &AppState,
    fed: &Federation,
    rows: &[(K, String)],
) -> Result<(Vec<Value>, Vec<String>), ApiError> {
    let mut items = Vec::with_capacity(rows.len());
    let mut keys = Vec::with_capacity(rows.len());
    for (key, iri) in rows {
        if let Some(found) = directory::by_iri(&s.pool, fed, iri).await? {
            items.push(entities::account(&s.pool, fed, &found).await?);
            keys.push(key.to_string());
        }
    }
    Ok((items, keys))
}
