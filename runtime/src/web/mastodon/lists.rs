//! Lists in the client API (R-MAPI-6): `GET/POST /api/v1/lists`, `GET/PUT/DELETE
//! /api/v1/lists/:id`, the members (`GET/POST/DELETE /api/v1/lists/:id/accounts`) and
//! `GET /api/v1/accounts/:id/lists`. The list's timeline is `timelines`' and its stream
//! `streaming`'s. Another account's list is the same 404 as none (no existence leak); the
//! rules (followed members only, titles, the limit) are `lists`', answered as 422.

use axum::extract::{Path, State};
use axum::http::Uri;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::Value;
use uuid::Uuid;

use super::accounts::{iri_page, render_rows};
use super::found;
use super::pagination::{Paged, param, params};
use super::statuses::body::{StatusBody, flag};
use crate::lists::{self, Changes, ListError, RepliesPolicy};
use crate::mastodon::{Account, Empty, List};
use crate::web::activitypub::federation;
use crate::web::auth::{Needs, need};
use crate::web::{ApiError, AppState, parse_id};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/lists", get(index).post(create))
        .route("/api/v1/lists/{id}", get(show).put(update).delete(remove))
        .route(
            "/api/v1/lists/{id}/accounts",
            get(members).post(add_members).delete(remove_members),
        )
        .route("/api/v1/accounts/{id}/lists", get(containing))
}

fn refused(e: ListError) -> ApiError {
    match e {
        ListError::Invalid(m) => ApiError::unprocessable(m),
        ListError::Db(e) => e.into(),
    }
}

/// `title`, `replies_policy`, `exclusive`, as JSON or a form.
#[derive(Debug, Default, serde::Deserialize)]
struct ListBody {
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    replies_policy: Option<String>,
    #[serde(default)]
    exclusive: Option<Value>,
}

impl ListBody {
    fn changes(self) -> Result<Changes, ApiError> {
        let replies_policy = match self.replies_policy.as_deref().filter(|p| !p.is_empty()) {
            None => None,
            Some(p) => Some(RepliesPolicy::parse(p).ok_or_else(|| {
                ApiError::unprocessable(format!(
                    "replies_policy must be one of followed, list, none (got {p:?})"
                ))
            })?),
        };
        Ok(Changes {
            title: self.title,
            replies_policy,
            exclusive: flag("exclusive", self.exclusive.as_ref())?,
        })
    }
}

/// The list the path names, if it is the token holder's.
async fn own(s: &AppState, account: Uuid, raw: &str) -> Result<lists::List, ApiError> {
    let id = parse_id(raw, "list")?;
    let mut conn = s.pool.acquire().await?;
    lists::get(&mut conn, account, id)
        .await?
        .ok_or_else(ApiError::record_not_found)
}

async fn index(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::ReadLists>,
) -> Result<Json<Vec<List>>, ApiError> {
    let mut conn = s.pool.acquire().await?;
    let all = lists::all(&mut conn, account.id).await?;
    Ok(Json(all.iter().map(List::from).collect()))
}

async fn show(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::ReadLists>,
    Path(id): Path<String>,
) -> Result<Json<List>, ApiError> {
    Ok(Json(List::from(&own(&s, account.id, &id).await?)))
}

async fn create(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteLists>,
    StatusBody(body): StatusBody<ListBody>,
) -> Result<Json<List>, ApiError> {
    let changes = body.changes()?;
    let mut tx = s.pool.begin().await?;
    let list = lists::create(&mut tx, account.id, &changes)
        .await
        .map_err(refused)?;
    tx.commit().await?;
    Ok(Json(List::from(&list)))
}

async fn update(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteLists>,
    Path(id): Path<String>,
    StatusBody(body): StatusBody<ListBody>,
) -> Result<Json<List>, ApiError> {
    let id = parse_id(&id, "list")?;
    let changes = body.changes()?;
    let mut conn = s.pool.acquire().await?;
    let list = lists::update(&mut conn, account.id, id, &changes)
        .await
        .map_err(refused)?
        .ok_or_else(ApiError::record_not_found)?;
    Ok(Json(List::from(&list)))
}

async fn remove(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteLists>,
    Path(id): Path<String>,
) -> Result<Json<Empty>, ApiError> {
    let id = parse_id(&id, "list")?;
    let mut conn = s.pool.acquire().await?;
    if !lists::delete(&mut conn, account.id, id).await? {
        return Err(ApiError::record_not_found());
    }
    Ok(Json(Empty {}))
}

/// The list's members, newest first, paged by membership; `limit=0` is Mastodon's "all of
/// them, unpaged" (apps editing a list ask for that).
async fn members(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::ReadLists>,
    Path(id): Path<String>,
    uri: Uri,
) -> Result<Paged<Account>, ApiError> {
    let list = own(&s, account.id, &id).await?;
    if param(&params(&uri), "limit") == Some("0") {
        let rows: Vec<(i64, String)> = sqlx::query_as(
            "SELECT id, target_iri FROM list_members WHERE list_id = $1 ORDER BY id DESC",
        )
        .bind(list.id)
        .fetch_all(&s.pool)
        .await?;
        let (items, _) = render_rows(&s, federation(&s)?, &rows).await?;
        return Ok(Paged::new(items, &[], &s.public_origin, &uri));
    }
    iri_page(&s, list.id, lists::MEMBERS_SELECT, &uri).await
}

/// `account_ids[]` from the body (JSON or form) or, as some apps send a DELETE, the query.
#[derive(Debug, Default, serde::Deserialize)]
struct MembersBody {
    #[serde(default)]
    account_ids: Option<Vec<String>>,
}

/// The actor IRIs of the accounts the request names; an id that names no account is 404, as
/// Mastodon's `Account.find`; none at all is 422.
async fn member_iris(s: &AppState, body: MembersBody, uri: &Uri) -> Result<Vec<String>, ApiError> {
    let fed = federation(s)?;
    let ids: Vec<String> = match body.account_ids {
        Some(ids) => ids,
        None => params(uri)
            .into_iter()
            .filter(|(k, _)| k == "account_ids[]" || k == "account_ids")
            .map(|(_, v)| v)
            .collect(),
    };
    let ids: Vec<String> = ids.into_iter().filter(|i| !i.is_empty()).collect();
    if ids.is_empty() {
        return Err(ApiError::unprocessable("account_ids is missing"));
    }
    let mut iris = Vec::with_capacity(ids.len());
    for id in &ids {
        let iri = found(s, id).await?.iri(fed);
        if !iris.contains(&iri) {
            iris.push(iri);
        }
    }
    Ok(iris)
}

async fn add_members(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteLists>,
    Path(id): Path<String>,
    uri: Uri,
    StatusBody(body): StatusBody<MembersBody>,
) -> Result<Json<Empty>, ApiError> {
    change_members(&s, account.id, &id, body, &uri, true).await
}

async fn remove_members(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteLists>,
    Path(id): Path<String>,
    uri: Uri,
    StatusBody(body): StatusBody<MembersBody>,
) -> Result<Json<Empty>, ApiError> {
    change_members(&s, account.id, &id, body, &uri, false).await
}

/// Adds (or removes) the accounts the request names to (from) `account`'s list `id`.
async fn change_members(
    s: &AppState,
    account: uuid::Uuid,
    id: &str,
    body: MembersBody,
    uri: &Uri,
    add: bool,
) -> Result<Json<Empty>, ApiError> {
    let list = own(s, account, id).await?;
    let iris = member_iris(s, body, uri).await?;
    let mut tx = s.pool.begin().await?;
    if add {
        lists::add_members(&mut tx, account, list.id, &iris)
            .await
            .map_err(refused)?;
    } else {
        lists::remove_members(&mut tx, list.id, &iris).await?;
    }
    tx.commit().await?;
    Ok(Json(Empty {}))
}

/// The token holder's lists that hold the account.
async fn containing(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::ReadLists>,
    Path(id): Path<String>,
) -> Result<Json<Vec<List>>, ApiError> {
    let fed = federation(&s)?;
    let iri = found(&s, &id).await?.iri(fed);
    let mut conn = s.pool.acquire().await?;
    let held = lists::containing(&mut conn, account.id, &iri).await?;
    Ok(Json(held.iter().map(List::from).collect()))
}
