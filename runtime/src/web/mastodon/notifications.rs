//! Notifications (R-MAPI-4, issue 19 item 3): `GET /api/v1/notifications` (`types[]`,
//! `exclude_types[]`, `account_id`, Mastodon's pagination by notification id), `GET /:id`,
//! `POST /:id/dismiss`, `POST /clear` and `GET /unread_count` (past the `notifications`
//! marker). Every producer writes through `statuses::notify`, so this module only reads and
//! removes; an account only ever sees and removes its own.

use std::collections::HashMap;

use axum::extract::{Path, State};
use axum::http::{StatusCode, Uri};
use axum::routing::{get, post};
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use uuid::Uuid;

use super::entities;
use super::pagination::{Page, Paged, param, params};
use super::statuses::render;
use crate::federation::directory;
use crate::statuses::access;
use crate::statuses::notify::Kind;
use crate::web::auth::{Needs, need};
use crate::web::{ApiError, AppState};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/notifications", get(list))
        .route("/api/v1/notifications/unread_count", get(unread_count))
        .route("/api/v1/notifications/clear", post(clear))
        .route("/api/v1/notifications/{id}", get(show))
        .route("/api/v1/notifications/{id}/dismiss", post(dismiss))
}

/// Most notifications `unread_count` counts (Mastodon caps it too; apps show "1000+").
const UNREAD_CAP: i64 = 1000;

#[derive(sqlx::FromRow)]
struct Row {
    id: i64,
    r#type: String,
    created_at: DateTime<Utc>,
    from_account_id: Option<Uuid>,
    /// The post it is about; older poll notifications name it by `status_id` only.
    post: Option<Uuid>,
}

const COLUMNS: &str =
    "n.id, n.type, n.created_at, n.from_account_id, coalesce(n.post_id, n.status_id) AS post";

/// The condition a notification `n` of the account bound as `$1` must meet to be shown or
/// counted (R-MAPI-VIS): it is about no status, or about one the account may read now. As on
/// Mastodon, a notification whose status the account can no longer read (edited out of a
/// direct message, a poll of a status it was never addressed) is dropped, not shown empty.
static READABLE: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "(coalesce(n.post_id, n.status_id) IS NULL OR {})",
        access::entry_visible_sql("coalesce(n.post_id, n.status_id)", 1)
    )
});

fn not_found() -> ApiError {
    ApiError(StatusCode::NOT_FOUND, "Record not found".into())
}

/// The types a request names under `key` (`types[]=a&types[]=b`, or `types=a`); an unknown
/// type is a 422 rather than a filter that silently matches nothing.
fn kinds(params: &[(String, String)], key: &str) -> Result<Option<Vec<&'static str>>, ApiError> {
    let bracketed = format!("{key}[]");
    let given: Vec<&str> = params
        .iter()
        .filter(|(k, _)| *k == key || *k == bracketed)
        .map(|(_, v)| v.as_str())
        .collect();
    if given.is_empty() {
        return Ok(None);
    }
    given
        .into_iter()
        // Types Mastodon has that nothing here produces select nothing, as there.
        .filter(|t| {
            !matches!(
                *t,
                "admin.sign_up"
                    | "admin.report"
                    | "severed_relationships"
                    | "moderation_warning"
                    | "annual_report"
                    | "quote"
                    | "quoted_update"
            )
        })
        .map(|t| {
            Kind::parse(t).map(Kind::as_str).ok_or_else(|| {
                ApiError(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    format!("{key}: unknown notification type {t:?}"),
                )
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

async fn list(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::ReadNotifications>,
    uri: Uri,
) -> Result<Paged, ApiError> {
    let params = params(&uri);
    let page: Page<i64> = Page::from_params(&params)?;
    let types = kinds(&params, "types")?;
    let exclude = kinds(&params, "exclude_types")?.unwrap_or_default();
    let from = match param(&params, "account_id").filter(|v| !v.is_empty()) {
        None => None,
        Some(v) => Some(Uuid::parse_str(v).map_err(|_| not_found())?),
    };
    let sql = format!(
        "SELECT {COLUMNS} FROM notifications n
          WHERE n.account_id = $1 AND ($5::text[] IS NULL OR n.type = ANY($5))
            AND NOT (n.type = ANY($6)) AND ($7::uuid IS NULL OR n.from_account_id = $7)
            AND {} AND {}",
        *READABLE,
        page.keyset("n.id", 2)
    );
    let rows: Vec<Row> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(account.id)
        .bind(page.max)
        .bind(page.since)
        .bind(page.min)
        .bind(types)
        .bind(exclude)
        .bind(from)
        .fetch_all(&s.pool)
        .await?;
    let rows = page.finish(rows);
    let keys: Vec<String> = rows.iter().map(|r| r.id.to_string()).collect();
    let items = entities_of(&s, account.id, rows).await?;
    Ok(Paged::new(items, &keys, &s.public_origin, &uri))
}

/// Notification entities, in order: the account that caused each (a poll's notification
/// names the poll's author, as Mastodon's does) and the status it is about, as the notified
/// account sees it.
async fn entities_of(s: &AppState, viewer: Uuid, rows: Vec<Row>) -> Result<Vec<Value>, ApiError> {
    let posts: Vec<Uuid> = rows.iter().filter_map(|r| r.post).collect();
    let mut conn = s.pool.acquire().await?;
    let statuses: HashMap<String, Value> = render(s, &mut conn, Some(viewer), &posts)
        .await?
        .into_iter()
        .filter_map(|v| Some((v["id"].as_str()?.to_string(), v)))
        .collect();
    drop(conn);
    // Every account the page names, looked up together (not one query per entry).
    let mut ids: Vec<Uuid> = rows.iter().filter_map(|r| r.from_account_id).collect();
    ids.sort_unstable();
    ids.dedup();
    let mut accounts: HashMap<Uuid, Value> = HashMap::new();
    if let Some(fed) = &s.fed {
        for (id, found) in directory::by_ids(&s.pool, &ids).await? {
            accounts.insert(id, entities::account(&s.pool, fed, &found).await?);
        }
    }
    let mut out = Vec::with_capacity(rows.len());
    for r in rows {
        let status = match r.post {
            None => Value::Null,
            // Unreadable since the query (a race with an edit or a delete): left out.
            Some(p) => match statuses.get(&p.to_string()) {
                Some(v) => v.clone(),
                None => continue,
            },
        };
        let account = r
            .from_account_id
            .and_then(|id| accounts.get(&id).cloned())
            .unwrap_or(Value::Null);
        let account = if account.is_null() {
            status.get("account").cloned().unwrap_or(Value::Null)
        } else {
            account
        };
        out.push(json!({
            "id": r.id.to_string(), "type": r.r#type, "created_at": r.created_at,
            "group_key": format!("ungrouped-{}", r.id),
            "account": account, "status": status,
        }));
    }
    Ok(out)
}

fn notification_id(raw: &str) -> Result<i64, ApiError> {
    raw.parse().map_err(|_| not_found())
}

async fn show(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::ReadNotifications>,
    Path(raw): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let id = notification_id(&raw)?;
    let row: Option<Row> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM notifications n WHERE n.account_id = $1 AND n.id = $2 AND {}",
        *READABLE
    )))
    .bind(account.id)
    .bind(id)
    .fetch_optional(&s.pool)
    .await?;
    let row = row.ok_or_else(not_found)?;
    entities_of(&s, account.id, vec![row])
        .await?
        .pop()
        .map(Json)
        .ok_or_else(not_found)
}

async fn dismiss(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteNotifications>,
    Path(raw): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let id = notification_id(&raw)?;
    let gone = sqlx::query("DELETE FROM notifications WHERE id = $1 AND account_id = $2")
        .bind(id)
        .bind(account.id)
        .execute(&s.pool)
        .await?
        .rows_affected();
    if gone == 0 {
        return Err(not_found());
    }
    Ok(Json(json!({})))
}

async fn clear(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteNotifications>,
) -> Result<Json<Value>, ApiError> {
    sqlx::query("DELETE FROM notifications WHERE account_id = $1")
        .bind(account.id)
        .execute(&s.pool)
        .await?;
    Ok(Json(json!({})))
}

/// Notifications newer than the `notifications` marker (all of them without one), at most
/// `limit` (default and cap 1000), filtered by `types[]`/`exclude_types[]` like the list.
async fn unread_count(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::ReadNotifications>,
    uri: Uri,
) -> Result<Json<Value>, ApiError> {
    let params = params(&uri);
    let types = kinds(&params, "types")?;
    let exclude = kinds(&params, "exclude_types")?.unwrap_or_default();
    let limit = match param(&params, "limit").filter(|v| !v.is_empty()) {
        None => UNREAD_CAP,
        Some(v) => v.parse::<i64>().map_err(|_| {
            ApiError(
                StatusCode::UNPROCESSABLE_ENTITY,
                "limit must be a number".into(),
            )
        })?,
    }
    .clamp(1, UNREAD_CAP);
    let count: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT count(*) FROM (
             SELECT 1 FROM notifications n
              WHERE n.account_id = $1 AND {}
                AND n.id > coalesce((SELECT CASE WHEN last_read_id ~ '^[0-9]{{1,18}}$'
                                                 THEN last_read_id::bigint END
                                       FROM markers WHERE account_id = $1
                                        AND timeline = 'notifications'), 0)
                AND ($2::text[] IS NULL OR n.type = ANY($2)) AND NOT (n.type = ANY($3))
              LIMIT $4) u",
        *READABLE
    )))
    .bind(account.id)
    .bind(types)
    .bind(exclude)
    .bind(limit)
    .fetch_one(&s.pool)
    .await?;
    Ok(Json(json!({ "count": count })))
}
