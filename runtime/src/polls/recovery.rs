//! The poll recovery scan (R-POLL-4, R-POLL-8): a page of at most 100 expired polls without
//! notifications after a shared `(expires_at, id)` cursor, each handed to admission. The
//! cursor advances whatever admission does with them (coalesced with a waiting message,
//! deferred at the cap, …), so a backlog of any size drains page by page, and it wraps to the
//! start when a page comes back short. The scan writes no notification: only the handler does.

use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use uuid::Uuid;

use super::admission::{self, Admission};

pub const PAGE: i64 = 100;
const CURSOR: &str = "poll-notifications";

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PageReport {
    /// Polls on this page.
    pub examined: usize,
    /// Of them, newly stored or moved earlier.
    pub scheduled: usize,
    /// The page was short: the cursor went back to the start.
    pub wrapped: bool,
    /// Another node held the cursor: nothing done.
    pub busy: bool,
}

/// One page. Only one node scans at a time (the cursor row is locked, others skip).
pub async fn scan_page(pool: &PgPool, chunk: Duration) -> Result<PageReport, sqlx::Error> {
    let mut tx = pool.begin().await?;
    sqlx::query("INSERT INTO hollo_recovery_cursor (name) VALUES ($1) ON CONFLICT DO NOTHING")
        .bind(CURSOR)
        .execute(&mut *tx)
        .await?;
    let cursor: Option<(Option<DateTime<Utc>>, Option<Uuid>)> = sqlx::query_as(
        "SELECT after_expires, after_id FROM hollo_recovery_cursor WHERE name = $1
           FOR UPDATE SKIP LOCKED",
    )
    .bind(CURSOR)
    .fetch_optional(&mut *tx)
    .await?;
    let Some((after_expires, after_id)) = cursor else {
        return Ok(PageReport {
            busy: true,
            ..PageReport::default()
        });
    };
    let page: Vec<(Uuid, DateTime<Utc>)> = sqlx::query_as(
        "SELECT id, expires_at FROM polls
          WHERE notified_at IS NULL AND expires_at <= now()
            AND ($1::timestamptz IS NULL OR (expires_at, id) > ($1, $2))
          ORDER BY expires_at, id LIMIT $3",
    )
    .bind(after_expires)
    .bind(after_id)
    .bind(PAGE)
    .fetch_all(&mut *tx)
    .await?;
    let wrapped = (page.len() as i64) < PAGE;
    let (next_expires, next_id) = match page.last() {
        Some((id, exp)) if !wrapped => (Some(*exp), Some(*id)),
        _ => (None, None),
    };
    sqlx::query(
        "UPDATE hollo_recovery_cursor SET after_expires = $2, after_id = $3, updated_at = now()
          WHERE name = $1",
    )
    .bind(CURSOR)
    .bind(next_expires)
    .bind(next_id)
    .execute(&mut *tx)
    .await?;
    // The cursor commits before admissions run: a crash in between only means these polls
    // are met again after the next wrap.
    tx.commit().await?;

    let mut scheduled = 0;
    for (id, _) in &page {
        match admission::schedule(pool, *id, chunk).await {
            Ok(Admission::Inserted | Admission::Advanced | Admission::Evicted { .. }) => {
                scheduled += 1
            }
            Ok(_) => {}
            // One poll's failure must not cost the rest of the page; it is met after the wrap.
            Err(e) => {
                tracing::warn!(target: super::LOG_TARGET, poll = %id, error = %e, "recovery could not schedule a poll")
            }
        }
    }
    Ok(PageReport {
        examined: page.len(),
        scheduled,
        wrapped,
        busy: false,
    })
}
