//! Grouped notifications (R-MAPI-6, Mastodon 4.3's `/api/v2/notifications`): the same
//! notifications as `/api/v1/notifications` — the same filters, mutes, domain blocks and
//! visibility check — in groups: favourites of one post, boosts of one post and follows, each
//! within a 12-hour span (`statuses::notify` stores the group with the notification), unless
//! `grouped_types[]` leaves their type out. `GET /api/v2/notifications` pages groups by their
//! notifications' ids; `GET /:group_key`, `GET /:group_key/accounts`, `POST
//! /:group_key/dismiss` and `GET /unread_count` (groups past the `notifications` marker).
//!
//! A page walks the account's notifications newest first and stops at the `limit`-th group;
//! every group is shown with its notifications in that window (`page_min_id`..`page_max_id`),
//! its total count and its latest accounts up to the page's newest notification. The walk
//! reads at most [`WALK_CAP`] notifications, so a flood of one group (ten thousand
//! favourites) makes a short page, never a long query; the next page goes on below it.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use uuid::Uuid;

use super::notifications::{BindSelection, Groups, Selection, count_unread, kinds};
use super::pagination::{BindPage, Page, Paged, params};
use crate::filters::active::Active;
use crate::mastodon::notification::{COLUMNS, READABLE, Row};
use crate::mastodon::notification_group::{
    self, Found, GroupedNotificationsResults, SAMPLE_ACCOUNTS,
};
use crate::mastodon::{Account, Empty, UnreadCount};
use crate::statuses::hidden::Hidden;
use crate::statuses::notify::GROUPABLE;
use crate::web::auth::{Needs, need};
use crate::web::{ApiError, AppState};

impl From<crate::mastodon::notification_group::ResultsError> for ApiError {
    fn from(e: crate::mastodon::notification_group::ResultsError) -> Self {
        use crate::mastodon::notification_group::ResultsError;
        match e {
            ResultsError::Db(e) => e.into(),
            ResultsError::Filters(e) => e.into(),
        }
    }
}

/// Most notifications one page reads to find its groups.
pub const WALK_CAP: i64 = 2000;

/// Groups `unread_count` counts by default (as Mastodon; at most the same 1000 as for
/// notifications).
const UNREAD_DEFAULT: i64 = 100;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v2/notifications", get(list))
        .route("/api/v2/notifications/unread_count", get(unread_count))
        .route("/api/v2/notifications/{group_key}", get(show))
        .route("/api/v2/notifications/{group_key}/accounts", get(accounts))
        .route("/api/v2/notifications/{group_key}/dismiss", post(dismiss))
}

/// The kinds grouped (`grouped_types[]`): Mastodon groups favourites, boosts and follows
/// unless told which.
fn grouped_kinds(params: &[(String, String)]) -> Result<Vec<&'static str>, ApiError> {
    Ok(kinds(params, "grouped_types")?
        .unwrap_or_else(|| GROUPABLE.iter().map(|k| k.as_str()).collect()))
}

/// The `group_key` of `notifications n`, the grouped types bound at `$param`.
fn key_sql(param: u32) -> String {
    format!(
        "CASE WHEN n.group_prefix IS NOT NULL AND n.type = ANY(${param})
              THEN n.group_prefix || '-' || n.group_bucket ELSE 'ungrouped-' || n.id END"
    )
}

/// A key as clients send it back: one notification, or a stored group.
enum Key {
    One(i64),
    Group { prefix: String, bucket: i32 },
}

fn parse_key(raw: &str) -> Result<Key, ApiError> {
    let bad = ApiError::record_not_found;
    if let Some(id) = raw.strip_prefix("ungrouped-") {
        return id.parse().map(Key::One).map_err(|_| bad());
    }
    let (prefix, bucket) = raw.rsplit_once('-').ok_or_else(bad)?;
    Ok(Key::Group {
        prefix: prefix.to_string(),
        bucket: bucket.parse().map_err(|_| bad())?,
    })
}

/// What the rest of the page needs to know of a group: its key, window and newest row.
#[derive(sqlx::FromRow)]
struct Window {
    gkey: String,
    page_max_id: i64,
    page_min_id: i64,
}

async fn list(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::ReadNotifications>,
    uri: Uri,
) -> Result<Response, ApiError> {
    let params = params(&uri);
    let page: Page<i64> = Page::from_params(&params)?;
    let sel = Selection::of(&s, account.id, &params).await?;
    let grouped = grouped_kinds(&params)?;
    // Walking down from `max_id` (or the top) finds each group's newest notification first;
    // up from `min_id`, its oldest. The window ends at the `limit`-th group's first one.
    let up = page.min.is_some();
    let (order, first, edge, cmp) = if up {
        ("ASC", "min", "max", "<=")
    } else {
        ("DESC", "max", "min", ">=")
    };
    let mut cursors = Vec::new();
    if page.max.is_some() {
        cursors.push("n.id < $2");
    }
    if page.since.is_some() {
        cursors.push("n.id > $3");
    }
    if page.min.is_some() {
        cursors.push("n.id > $4");
    }
    let cursors = if cursors.is_empty() {
        "true".to_string()
    } else {
        cursors.join(" AND ")
    };
    let sql = format!(
        "WITH walk AS MATERIALIZED (
             SELECT n.id, {key} AS gkey FROM notifications n
              WHERE {cond} AND {cursors}
              ORDER BY n.id {order} LIMIT {WALK_CAP}
         ), firsts AS (
             SELECT gkey, {first}(id) AS first FROM walk GROUP BY gkey
              ORDER BY first {order} LIMIT {limit}
         )
         SELECT w.gkey, max(w.id) AS page_max_id, min(w.id) AS page_min_id
           FROM walk w JOIN firsts f USING (gkey)
          WHERE w.id {cmp} (SELECT {edge}(first) FROM firsts)
          GROUP BY w.gkey ORDER BY max(w.id) DESC",
        key = key_sql(5),
        cond = sel.sql(6),
        limit = page.limit,
    );
    let windows: Vec<Window> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(account.id)
        .bind_cursors(&page)
        .bind(&grouped)
        .bind_selection(&sel)
        .fetch_all(&s.pool)
        .await?;
    let (newest, oldest) = match (windows.first(), windows.iter().map(|w| w.page_min_id).min()) {
        (Some(first), Some(oldest)) => (
            windows
                .iter()
                .map(|w| w.page_max_id)
                .max()
                .unwrap_or(first.page_max_id),
            oldest,
        ),
        _ => return Ok(Json(GroupedNotificationsResults::default()).into_response()),
    };
    let groups = found(&s, account.id, &sel, &windows, newest).await?;
    let filters = Active::of(&s.pool, Some(account.id)).await?;
    let results =
        notification_group::results(&s.pool, s.site(), account.id, &filters, groups).await?;
    // The next page goes on below the window, the previous one above it.
    let link = Paged::<()>::link(
        &[newest.to_string(), oldest.to_string()],
        &s.public_origin,
        &uri,
    );
    let mut headers = HeaderMap::new();
    if let Some(link) = link {
        headers.insert(header::LINK, link);
    }
    Ok((headers, Json(results)).into_response())
}

/// Each window's group: its newest row in the window, its count, newest id and latest
/// accounts up to `top` (the page's newest notification), under the same selection.
async fn found(
    s: &AppState,
    viewer: Uuid,
    sel: &Selection,
    windows: &[Window],
    top: i64,
) -> Result<Vec<Found>, ApiError> {
    let heads: Vec<i64> = windows.iter().map(|w| w.page_max_id).collect();
    let rows: Vec<Row> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM notifications n WHERE n.account_id = $1 AND n.id = ANY($2)"
    )))
    .bind(viewer)
    .bind(&heads)
    .fetch_all(&s.pool)
    .await?;
    let (mut keys, mut prefixes, mut buckets) = (Vec::new(), Vec::new(), Vec::new());
    for w in windows {
        if let Ok(Key::Group { prefix, bucket }) = parse_key(&w.gkey) {
            keys.push(w.gkey.clone());
            prefixes.push(prefix);
            buckets.push(bucket);
        }
    }
    let stats: Vec<(String, i64, i64, Vec<Uuid>)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT g.key,
                (SELECT count(*) FROM notifications n
                  WHERE n.group_prefix = g.prefix AND n.group_bucket = g.bucket AND n.id <= $2
                    AND {cond}),
                (SELECT max(n.id) FROM notifications n
                  WHERE n.group_prefix = g.prefix AND n.group_bucket = g.bucket AND n.id <= $2
                    AND {cond}),
                array(SELECT n.from_account_id FROM notifications n
                       WHERE n.group_prefix = g.prefix AND n.group_bucket = g.bucket
                         AND n.id <= $2 AND n.from_account_id IS NOT NULL AND {cond}
                       ORDER BY n.id DESC LIMIT {SAMPLE_ACCOUNTS})
           FROM unnest($8::text[], $9::text[], $10::integer[]) AS g(key, prefix, bucket)",
        cond = sel.sql(3),
    )))
    .bind(viewer)
    .bind(top)
    .bind_selection(sel)
    .bind(&keys)
    .bind(&prefixes)
    .bind(&buckets)
    .fetch_all(&s.pool)
    .await?;
    let mut out = Vec::with_capacity(windows.len());
    for w in windows {
        let Some(head) = rows.iter().find(|r| r.id == w.page_max_id).cloned() else {
            continue;
        };
        let (count, most_recent, sample) = match stats.iter().find(|(k, ..)| *k == w.gkey) {
            Some((_, count, most_recent, sample)) => (*count, *most_recent, sample.clone()),
            None => (1, head.id, head.from_account_id.into_iter().collect()),
        };
        out.push(Found {
            key: w.gkey.clone(),
            head,
            page: Some((w.page_min_id, w.page_max_id)),
            count,
            most_recent,
            sample,
        });
    }
    Ok(out)
}

/// The account's notifications of one group (all of them, newest first), as the v1 list
/// would show them.
async fn members(s: &AppState, viewer: Uuid, key: &Key) -> Result<Vec<Row>, ApiError> {
    let hidden = Hidden::of(&s.pool, s.site().urls, Some(viewer)).await?;
    let (cond, prefix, bucket, id) = match key {
        Key::One(id) => ("n.id = $4", None, None, Some(*id)),
        Key::Group { prefix, bucket } => (
            "n.group_prefix = $2 AND n.group_bucket = $3",
            Some(prefix.clone()),
            Some(*bucket),
            None,
        ),
    };
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM notifications n
          WHERE n.account_id = $1 AND {cond} {} AND {}
          ORDER BY n.id DESC",
        hidden.notification_sql("n", 5, 6),
        *READABLE
    )))
    .bind(viewer)
    .bind(prefix)
    .bind(bucket)
    .bind(id)
    .bind(&hidden.quiet)
    .bind(&hidden.domains)
    .fetch_all(&s.pool)
    .await?)
}

async fn show(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::ReadNotifications>,
    Path(raw): Path<String>,
) -> Result<Json<GroupedNotificationsResults>, ApiError> {
    let key = parse_key(&raw)?;
    let rows = members(&s, account.id, &key).await?;
    let Some(head) = rows.first().cloned() else {
        return Err(ApiError::record_not_found());
    };
    let mut sample: Vec<Uuid> = Vec::new();
    for id in rows.iter().filter_map(|r| r.from_account_id) {
        if sample.len() < SAMPLE_ACCOUNTS as usize && !sample.contains(&id) {
            sample.push(id);
        }
    }
    let group = Found {
        key: raw,
        most_recent: head.id,
        head,
        page: None,
        count: rows.len() as i64,
        sample,
    };
    let filters = Active::of(&s.pool, Some(account.id)).await?;
    let results =
        notification_group::results(&s.pool, s.site(), account.id, &filters, vec![group]).await?;
    if results.notification_groups.is_empty() {
        return Err(ApiError::record_not_found());
    }
    Ok(Json(results))
}

async fn accounts(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::ReadNotifications>,
    Path(raw): Path<String>,
) -> Result<Json<Vec<Account>>, ApiError> {
    let rows = members(&s, account.id, &parse_key(&raw)?).await?;
    if rows.is_empty() {
        return Err(ApiError::record_not_found());
    }
    let mut ids: Vec<Uuid> = Vec::new();
    for id in rows.iter().filter_map(|r| r.from_account_id) {
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    let found = crate::mastodon::notification::accounts(&s.pool, s.site(), &ids).await?;
    Ok(Json(
        ids.iter()
            .filter_map(|id| found.get(id).map(|a| a.as_ref().clone()))
            .collect(),
    ))
}

/// Removes the group's notifications. As on Mastodon, a group with nothing left is not an
/// error; a key that cannot be one is the same 404 as elsewhere.
async fn dismiss(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteNotifications>,
    Path(raw): Path<String>,
) -> Result<Json<Empty>, ApiError> {
    match parse_key(&raw)? {
        Key::One(id) => {
            sqlx::query("DELETE FROM notifications WHERE account_id = $1 AND id = $2")
                .bind(account.id)
                .bind(id)
                .execute(&s.pool)
                .await?
        }
        Key::Group { prefix, bucket } => {
            sqlx::query(
                "DELETE FROM notifications
                  WHERE account_id = $1 AND group_prefix = $2 AND group_bucket = $3",
            )
            .bind(account.id)
            .bind(prefix)
            .bind(bucket)
            .execute(&s.pool)
            .await?
        }
    };
    Ok(Json(Empty {}))
}

/// Groups with a notification past the `notifications` marker, at most `limit` (default 100,
/// cap 1000), under the same selection as the list.
async fn unread_count(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::ReadNotifications>,
    uri: Uri,
) -> Result<Json<UnreadCount>, ApiError> {
    let groups = Groups {
        kinds: grouped_kinds,
        key_sql: key_sql(3),
        walk_cap: WALK_CAP,
        default: UNREAD_DEFAULT,
    };
    count_unread(&s, account.id, &uri, Some(groups)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_parse_as_stored_groups_or_single_notifications() {
        assert!(matches!(parse_key("ungrouped-42"), Ok(Key::One(42))));
        match parse_key("favourite-0190f3c2-7c2e-7000-8000-000000000001-493123") {
            Ok(Key::Group { prefix, bucket }) => {
                assert_eq!(prefix, "favourite-0190f3c2-7c2e-7000-8000-000000000001");
                assert_eq!(bucket, 493123);
            }
            _ => panic!("a favourite group"),
        }
        assert!(matches!(
            parse_key("follow-493123"),
            Ok(Key::Group { bucket: 493123, .. })
        ));
        for bad in ["", "ungrouped-", "ungrouped-x", "follow", "follow-x", "-"] {
            assert!(parse_key(bad).is_err(), "{bad:?}");
        }
    }
}
