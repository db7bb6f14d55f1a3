//! Notifications (R-MAPI-4): `GET /api/v1/notifications` (`types[]`,
//! `exclude_types[]`, `account_id`, Mastodon's pagination by notification id), `GET /:id`,
//! `POST /:id/dismiss`, `POST /clear` and `GET /unread_count` (past the `notifications`
//! marker). Every producer writes through `statuses::notify`, so this module only reads and
//! removes; an account only ever sees and removes its own.

use axum::extract::{Path, State};
use axum::http::Uri;
use axum::routing::{get, post};
use axum::{Json, Router};
use sqlx::Postgres;
use sqlx::postgres::PgArguments;
use sqlx::query::{QueryAs, QueryScalar};
use uuid::Uuid;

use super::pagination::{Page, Paged, param, params};
use crate::filters::active::Active;
use crate::statuses::hidden::Hidden;
use crate::statuses::notify::Kind;
use crate::web::auth::{Needs, need};
use crate::web::mastodon::pagination::BindPage;
use crate::web::{ApiError, AppState};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/notifications", get(list))
        .route("/api/v1/notifications/unread_count", get(unread_count))
        .route("/api/v1/notifications/clear", post(clear))
        .route("/api/v1/notifications/{id}", get(show))
        .route("/api/v1/notifications/{id}/dismiss", post(dismiss))
}

/// Most notifications (or groups) `unread_count` counts (Mastodon caps it too; apps show
/// "1000+").
const UNREAD_CAP: i64 = 1000;

/// The `limit` of an `unread_count` request: `default` when absent, clamped to 1..=`cap`.
pub(super) fn unread_limit(
    params: &[(String, String)],
    default: i64,
    cap: i64,
) -> Result<i64, ApiError> {
    Ok(match param(params, "limit").filter(|v| !v.is_empty()) {
        None => default,
        Some(v) => v
            .parse::<i64>()
            .map_err(|_| ApiError::unprocessable("limit must be a number"))?,
    }
    .clamp(1, cap))
}

/// The condition "newer than the account `$1`'s `notifications` marker" on `notifications n`
/// (all of them without a marker, or with one that is not a notification id).
pub(super) const PAST_THE_MARKER: &str =
    "n.id > coalesce((SELECT CASE WHEN last_read_id ~ '^[0-9]{1,18}$'
                                         THEN last_read_id::bigint END
                               FROM markers WHERE account_id = $1
                                AND timeline = 'notifications'), 0)";

use crate::mastodon::notification::{self, COLUMNS, Notification, READABLE, Row};
use crate::mastodon::{Empty, UnreadCount};

/// The types a request names under `key` (`types[]=a&types[]=b`, or `types=a`); an unknown
/// type is a 422 rather than a filter that silently matches nothing.
pub(super) fn kinds(
    params: &[(String, String)],
    key: &str,
) -> Result<Option<Vec<&'static str>>, ApiError> {
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
            )
        })
        .map(|t| {
            Kind::parse(t).map(Kind::as_str).ok_or_else(|| {
                ApiError::unprocessable(format!("{key}: unknown notification type {t:?}"))
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// What a list or count of the account `$1`'s notifications selects (`types[]`,
/// `exclude_types[]`, `account_id`), less what the reader mutes, blocks or cannot read any
/// more: one condition for v1 and v2, lists and counts.
pub(super) struct Selection {
    types: Option<Vec<&'static str>>,
    exclude: Vec<&'static str>,
    from: Option<Uuid>,
    hidden: Hidden,
}

impl Selection {
    pub(super) async fn of(
        s: &AppState,
        viewer: Uuid,
        params: &[(String, String)],
    ) -> Result<Self, ApiError> {
        let from = match param(params, "account_id").filter(|v| !v.is_empty()) {
            None => None,
            Some(v) => Some(super::record_id(v)?),
        };
        Ok(Selection {
            types: kinds(params, "types")?,
            exclude: kinds(params, "exclude_types")?.unwrap_or_default(),
            from,
            hidden: Hidden::of(&s.pool, s.site().urls, Some(viewer)).await?,
        })
    }

    /// The conditions on `notifications n` of the account `$1`, its five parameters from
    /// `$first` on (bind them with [`BindSelection::bind_selection`]).
    pub(super) fn sql(&self, first: u32) -> String {
        format!(
            "n.account_id = $1 AND (${a}::text[] IS NULL OR n.type = ANY(${a}))
             AND NOT (n.type = ANY(${b})) AND (${c}::uuid IS NULL OR n.from_account_id = ${c})
             {} AND {}",
            self.hidden.notification_sql("n", first + 3, first + 4),
            *READABLE,
            a = first,
            b = first + 1,
            c = first + 2,
        )
    }
}

/// Binding a [`Selection`]'s parameters in the order its `sql` numbers them.
pub(super) trait BindSelection<'q>: Sized {
    fn bind_selection(self, sel: &'q Selection) -> Self;
}

macro_rules! bind_selection_for {
    ($query:ty) => {
        impl<'q, O> BindSelection<'q> for $query {
            fn bind_selection(self, sel: &'q Selection) -> Self {
                self.bind(&sel.types)
                    .bind(&sel.exclude)
                    .bind(sel.from)
                    .bind(&sel.hidden.quiet)
                    .bind(&sel.hidden.domains)
            }
        }
    };
}

bind_selection_for!(QueryAs<'q, Postgres, O, PgArguments>);
bind_selection_for!(QueryScalar<'q, Postgres, O, PgArguments>);

async fn list(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::ReadNotifications>,
    uri: Uri,
) -> Result<Paged<Notification>, ApiError> {
    let params = params(&uri);
    let page: Page<i64> = Page::from_params(&params)?;
    let sel = Selection::of(&s, account.id, &params).await?;
    let sql = format!(
        "SELECT {COLUMNS} FROM notifications n WHERE {} AND {}",
        sel.sql(5),
        page.keyset("n.id", 2)
    );
    let rows: Vec<Row> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(account.id)
        .bind_cursors(&page)
        .bind_selection(&sel)
        .fetch_all(&s.pool)
        .await?;
    let rows = page.finish(rows);
    let keys: Vec<String> = rows.iter().map(|r| r.id.to_string()).collect();
    let filters = Active::of(&s.pool, Some(account.id)).await?;
    let items = filters
        .apply_notifications(notification::render(&s.pool, s.site(), account.id, rows).await?)
        .await?;
    Ok(Paged::new(items, &keys, &s.public_origin, &uri))
}

fn notification_id(raw: &str) -> Result<i64, ApiError> {
    raw.parse().map_err(|_| ApiError::record_not_found())
}

async fn show(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::ReadNotifications>,
    Path(raw): Path<String>,
) -> Result<Json<Notification>, ApiError> {
    let id = notification_id(&raw)?;
    let filters = Active::of(&s.pool, Some(account.id)).await?;
    let found = notification::one(&s.pool, s.site(), account.id, id).await?;
    filters
        .apply_notifications(found.into_iter().collect())
        .await?
        .pop()
        .map(Json)
        .ok_or_else(ApiError::record_not_found)
}

async fn dismiss(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteNotifications>,
    Path(raw): Path<String>,
) -> Result<Json<Empty>, ApiError> {
    super::delete_own(&s, "notifications", notification_id(&raw)?, account.id).await
}

async fn clear(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteNotifications>,
) -> Result<Json<Empty>, ApiError> {
    sqlx::query("DELETE FROM notifications WHERE account_id = $1")
        .bind(account.id)
        .execute(&s.pool)
        .await?;
    Ok(Json(Empty {}))
}

/// Notifications newer than the `notifications` marker (all of them without one), at most
/// `limit` (default and cap 1000), filtered by `types[]`/`exclude_types[]` like the list.
async fn unread_count(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::ReadNotifications>,
    uri: Uri,
) -> Result<Json<UnreadCount>, ApiError> {
    count_unread(&s, account.id, &uri, None).await
}

/// What `unread_count` counts, notifications or (`groups`: the grouped API's kinds and group
/// key) groups of them, past the `notifications` marker under the request's selection, at
/// most `limit` (default: the cap for notifications, `default` for groups; cap 1000).
pub(super) async fn count_unread(
    s: &AppState,
    account: Uuid,
    uri: &Uri,
    groups: Option<Groups>,
) -> Result<Json<UnreadCount>, ApiError> {
    let params = params(uri);
    let sel = Selection::of(s, account, &params).await?;
    let (sql, grouped, default) = match groups {
        None => (
            format!(
                "SELECT count(*) FROM (
             SELECT 1 FROM notifications n WHERE {} AND {PAST_THE_MARKER} LIMIT $2) u",
                sel.sql(3),
            ),
            None,
            UNREAD_CAP,
        ),
        Some(g) => (
            format!(
                "SELECT count(*) FROM (
             SELECT DISTINCT gkey FROM (
                 SELECT {key} AS gkey FROM notifications n
                  WHERE {cond} AND {PAST_THE_MARKER}
                  ORDER BY n.id DESC LIMIT {walk}) w
              LIMIT $2) u",
                key = g.key_sql,
                cond = sel.sql(4),
                walk = g.walk_cap,
            ),
            Some((g.kinds)(&params)?),
            g.default,
        ),
    };
    let limit = unread_limit(&params, default, UNREAD_CAP)?;
    let mut query = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
        .bind(account)
        .bind(limit);
    if let Some(grouped) = grouped {
        query = query.bind(grouped);
    }
    let count: i64 = query.bind_selection(&sel).fetch_one(&s.pool).await?;
    Ok(Json(UnreadCount { count }))
}

/// What reads the grouped API's `grouped_types[]` from a request's parameters.
pub(super) type KindsOf = fn(&[(String, String)]) -> Result<Vec<&'static str>, ApiError>;

/// How the grouped API counts unread groups: its `grouped_types[]` (bound at `$3`), the SQL
/// of a notification's group key, the notifications walked at most, its default limit.
pub(super) struct Groups {
    pub kinds: KindsOf,
    pub key_sql: String,
    pub walk_cap: i64,
    pub default: i64,
}
