//! Mastodon's `Notification` entity: the account that caused it (a poll's end names the
//! poll's author, as Mastodon's does) and the status it is about, as the notified account sees
//! it — for the notifications API and the streaming `notification` event alike.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgPool;
use uuid::Uuid;

use super::Site;
use super::account::{self, Account};
use super::status::{self, Status};
use crate::federation::actors::directory::{self, Found};
use crate::statuses::access;

#[derive(Clone, Debug, Serialize)]
pub struct Notification {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub created_at: DateTime<Utc>,
    /// The group it belongs to (`/api/v2/notifications`): favourites or boosts of one post and
    /// follows within hours of each other share one; any other is `ungrouped-<id>`.
    pub group_key: String,
    pub account: Option<Arc<Account>>,
    pub status: Option<Status>,
}

impl Notification {
    /// The notification as shown where the viewer's `filters` apply (the `notifications`
    /// context): `None` when a `hide` filter takes its status out, else its status carries
    /// `filtered`.
    pub fn filtered(mut self, filters: &crate::filters::active::Active) -> Option<Notification> {
        if let Some(s) = self.status.take() {
            self.status = Some(filters.apply_one(crate::filters::Context::Notifications, s)?);
        }
        Some(self)
    }
}

/// A notification as stored; select it with [`COLUMNS`] from `notifications n`.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct Row {
    pub id: i64,
    #[sqlx(rename = "type")]
    pub kind: String,
    pub created_at: DateTime<Utc>,
    pub from_account_id: Option<Uuid>,
    /// The post it is about; older poll notifications name it by `status_id` only.
    pub post: Option<Uuid>,
    pub group_prefix: Option<String>,
    pub group_bucket: Option<i32>,
}

impl Row {
    /// Mastodon's `group_key`.
    pub fn group_key(&self) -> String {
        group_key(self.id, self.group_prefix.as_deref(), self.group_bucket)
    }
}

/// The key of a notification's group: `<prefix>-<hour>` when it has one, else its own.
pub fn group_key(id: i64, prefix: Option<&str>, bucket: Option<i32>) -> String {
    match (prefix, bucket) {
        (Some(p), Some(b)) => format!("{p}-{b}"),
        _ => format!("ungrouped-{id}"),
    }
}

pub const COLUMNS: &str = "n.id, n.type, n.created_at, n.from_account_id,
     coalesce(n.post_id, n.status_id) AS post, n.group_prefix, n.group_bucket";

/// The condition a notification `n` of the account bound as `$1` must meet to be shown or
/// counted (R-MAPI-VIS): it is about no status, or about one the account may read now. As on
/// Mastodon, a notification whose status the account can no longer read (edited out of a
/// direct message, a poll of a status it was never addressed) is dropped, not shown empty.
pub static READABLE: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "(coalesce(n.post_id, n.status_id) IS NULL OR {})",
        access::entry_visible_sql("coalesce(n.post_id, n.status_id)", 1)
    )
});

/// Notification entities of `rows`, in order. One about a status `viewer` may no longer read
/// (a race with an edit or a delete since the query) is left out.
pub async fn render(
    pool: &PgPool,
    site: Site<'_>,
    viewer: Uuid,
    rows: Vec<Row>,
) -> Result<Vec<Notification>, sqlx::Error> {
    let posts: Vec<Uuid> = rows.iter().filter_map(|r| r.post).collect();
    let ids: Vec<Uuid> = rows.iter().filter_map(|r| r.from_account_id).collect();
    let accounts = accounts(pool, site, &ids).await?;
    let mut conn = pool.acquire().await?;
    let statuses: HashMap<Uuid, Status> = status::render(&mut conn, site, Some(viewer), &posts)
        .await?
        .into_iter()
        .filter_map(|s| Some((s.uuid()?, s)))
        .collect();
    drop(conn);
    let mut out = Vec::with_capacity(rows.len());
    for r in rows {
        // Cloned: the same post may be named by several notifications of the page.
        let status = match r.post {
            None => None,
            Some(p) => match statuses.get(&p) {
                Some(s) => Some(s.clone()),
                None => continue,
            },
        };
        let account = r
            .from_account_id
            .and_then(|id| accounts.get(&id).cloned())
            .or_else(|| status.as_ref().map(|s| s.account.clone()));
        out.push(Notification {
            id: r.id.to_string(),
            group_key: r.group_key(),
            kind: r.kind,
            created_at: r.created_at,
            account,
            status,
        });
    }
    Ok(out)
}

/// The Account entities of `ids` (local accounts and remote actors), looked up together — not
/// one query per entry — and before the caller holds a connection: holding one while the pool
/// hands out another can wait for ever once every connection is held by a render doing the
/// same. Unknown ids are left out.
pub async fn accounts(
    pool: &PgPool,
    site: Site<'_>,
    ids: &[Uuid],
) -> Result<HashMap<Uuid, Arc<Account>>, sqlx::Error> {
    let mut ids = ids.to_vec();
    ids.sort_unstable();
    ids.dedup();
    let found = directory::by_ids(pool, &ids).await?;
    let local: Vec<Uuid> = found
        .iter()
        .filter(|(_, f)| matches!(f, Found::Local(_)))
        .map(|(id, _)| *id)
        .collect();
    let mut conn = pool.acquire().await?;
    let mut out: HashMap<Uuid, Arc<Account>> = account::locals(&mut conn, site.urls, &local)
        .await?
        .into_iter()
        .map(|(id, a)| (id, Arc::new(a)))
        .collect();
    for (id, f) in &found {
        if let Found::Remote(r) = f {
            out.insert(*id, Arc::new(account::remote(site.urls, r)));
        }
    }
    Ok(out)
}

/// One of `viewer`'s notifications, if it exists and what it is about is readable.
pub async fn one(
    pool: &PgPool,
    site: Site<'_>,
    viewer: Uuid,
    id: i64,
) -> Result<Option<Notification>, sqlx::Error> {
    let row: Option<Row> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM notifications n WHERE n.account_id = $1 AND n.id = $2 AND {}",
        *READABLE
    )))
    .bind(viewer)
    .bind(id)
    .fetch_optional(pool)
    .await?;
    match row {
        Some(row) => Ok(render(pool, site, viewer, vec![row]).await?.pop()),
        None => Ok(None),
    }
}
