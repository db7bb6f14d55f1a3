//! Mastodon's grouped notifications (4.3, <https://docs.joinmastodon.org/methods/grouped_notifications/>):
//! `NotificationGroup` and `GroupedNotificationsResults` — the groups of a page with the
//! accounts and statuses they name, each once.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgPool;
use uuid::Uuid;

use super::Site;
use super::account::Account;
use super::notification::{self, Row};
use super::status::Status;
use crate::filters::active::Active;

/// How many of a group's most recent accounts it names (Mastodon's `SAMPLE_ACCOUNTS_SIZE`).
pub const SAMPLE_ACCOUNTS: i64 = 8;

#[derive(Clone, Debug, Serialize)]
pub struct NotificationGroup {
    pub group_key: String,
    pub notifications_count: i64,
    #[serde(rename = "type")]
    pub kind: String,
    pub most_recent_notification_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page_min_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page_max_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latest_page_notification_at: Option<DateTime<Utc>>,
    pub sample_account_ids: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status_id: Option<String>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct GroupedNotificationsResults {
    pub accounts: Vec<Arc<Account>>,
    pub statuses: Vec<Status>,
    pub notification_groups: Vec<NotificationGroup>,
}

/// Why [`results`] has none.
#[derive(Debug, thiserror::Error)]
pub enum ResultsError {
    #[error(transparent)]
    Db(#[from] sqlx::Error),
    #[error(transparent)]
    Filters(#[from] crate::filters::active::Unfinished),
}

/// One group as a page (or a single-group request) found it.
#[derive(Clone, Debug)]
pub struct Found {
    /// Its `group_key`: the stored group's, or `ungrouped-<id>` when the request does not group
    /// its type.
    pub key: String,
    /// The group's newest notification within the page (or the group's newest).
    pub head: Row,
    /// The page's window of the group (`None` outside a paged list).
    pub page: Option<(i64, i64)>,
    pub count: i64,
    pub most_recent: i64,
    /// Its most recent accounts, newest first.
    pub sample: Vec<Uuid>,
}

/// The results for `groups` (newest first) as `viewer` sees them: a group about a status the
/// viewer can no longer read is left out (the status goes through the one visibility check),
/// and one whose status a `hide` filter of the notifications context takes out too; a `warn`
/// filter marks the status.
pub async fn results(
    pool: &PgPool,
    site: Site<'_>,
    viewer: Uuid,
    filters: &Active,
    groups: Vec<Found>,
) -> Result<GroupedNotificationsResults, ResultsError> {
    let sample_ids: Vec<Uuid> = groups.iter().flat_map(|g| g.sample.clone()).collect();
    let accounts = notification::accounts(pool, site, &sample_ids).await?;
    let heads: Vec<Row> = groups.iter().map(|g| g.head.clone()).collect();
    // The heads rendered as notifications: their statuses checked for the viewer, filtered.
    let rendered = notification::render(pool, site, viewer, heads).await?;
    let shown: HashMap<String, notification::Notification> = filters
        .apply_notifications(rendered)
        .await?
        .into_iter()
        .map(|n| (n.id.clone(), n))
        .collect();
    let mut out = GroupedNotificationsResults::default();
    let (mut seen_accounts, mut seen_statuses) = (HashSet::new(), HashSet::new());
    for g in groups {
        let Some(n) = shown.get(&g.head.id.to_string()) else {
            continue;
        };
        let sample: Vec<Uuid> = g
            .sample
            .iter()
            .copied()
            .filter(|id| accounts.contains_key(id))
            .collect();
        for id in &sample {
            if seen_accounts.insert(*id)
                && let Some(a) = accounts.get(id)
            {
                out.accounts.push(a.clone());
            }
        }
        if let Some(s) = &n.status
            && seen_statuses.insert(s.id.clone())
        {
            out.statuses.push(s.clone());
        }
        out.notification_groups.push(NotificationGroup {
            group_key: g.key.clone(),
            notifications_count: g.count,
            kind: g.head.kind.clone(),
            most_recent_notification_id: g.most_recent.to_string(),
            page_min_id: g.page.map(|(min, _)| min.to_string()),
            page_max_id: g.page.map(|(_, max)| max.to_string()),
            latest_page_notification_at: g.page.map(|_| g.head.created_at),
            sample_account_ids: sample.iter().map(Uuid::to_string).collect(),
            status_id: n.status.as_ref().map(|s| s.id.clone()),
        });
    }
    Ok(out)
}
