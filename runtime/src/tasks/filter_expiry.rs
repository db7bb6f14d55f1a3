//! `hollo.filter-expiry.v1 {filterId}` (R-MAPI-6): announces a filter's end to its
//! owner's open streams (they reload their filters; `user` streams send `filters_changed`, so
//! apps drop the warnings it put on what they show).
//!
//! Readers stop applying a filter at its `expires_at` whether or not this has run; the filter
//! itself is kept (Mastodon shows ended filters, and a client may renew one). The same
//! standard as poll and mute expiry: one transaction with the filter row locked (every change
//! of the filter takes the same lock), the message's completion, then either the next wakeup
//! (not ended yet: renewed for longer, or a ≤ 7-day chunk of a far end) or the announcement,
//! recorded as `expiry_announced` = the end it announced. So it is never early, a redelivered
//! or duplicate message announces nothing twice, and a worker killed mid-way leaves the
//! message to be leased again.

use chrono::{DateTime, Utc};

use crate::filters::{EXPIRY_KIND, ExpiryPayload, expiry_key};
use crate::queue::{JobContext, KindSpec, Registry, TaskError};

pub fn spec() -> KindSpec {
    super::expiry_spec(EXPIRY_KIND)
}

pub fn register(reg: &mut Registry) {
    reg.register(spec(), |ctx: JobContext, p: ExpiryPayload| async move {
        handle(ctx, p).await
    });
}

/// The filter as the task reads it under its lock.
#[derive(sqlx::FromRow)]
struct Current {
    account_id: uuid::Uuid,
    expires_at: Option<DateTime<Utc>>,
    announced: Option<DateTime<Utc>>,
    /// Seconds until the end (0 once passed).
    left: Option<f64>,
}

async fn handle(ctx: JobContext, p: ExpiryPayload) -> Result<(), TaskError> {
    let mut tx = ctx.pool.begin().await?;
    let current: Option<Current> = sqlx::query_as(
        "SELECT account_id, expires_at, expiry_announced AS announced,
                GREATEST(EXTRACT(EPOCH FROM expires_at - now()), 0)::float8 AS left
           FROM filters WHERE id = $1 FOR UPDATE",
    )
    .bind(p.filter_id)
    .fetch_optional(&mut *tx)
    .await?;
    if !ctx.complete_in(&mut tx).await? {
        // Our lease was lost: another worker runs this message now; write nothing.
        return Ok(());
    }
    match current {
        // Deleted, or made endless meanwhile.
        None => {}
        Some(Current {
            expires_at: None, ..
        }) => {}
        // This end was announced already (a duplicate or redelivered message).
        Some(Current {
            expires_at: Some(end),
            announced: Some(done),
            ..
        }) if done == end => {}
        Some(Current {
            account_id,
            expires_at: Some(end),
            left: Some(left),
            ..
        }) if left <= 0.0 => {
            sqlx::query("UPDATE filters SET expiry_announced = expires_at WHERE id = $1")
                .bind(p.filter_id)
                .execute(&mut *tx)
                .await?;
            crate::streaming::emit::filters(&mut tx, account_id).await?;
            tracing::debug!(filter = %p.filter_id, %end, "filter ended");
        }
        Some(Current { left, .. }) => {
            let left = left.unwrap_or_default();
            let key = expiry_key(p.filter_id);
            super::expiry_wake_again(&mut tx, EXPIRY_KIND, &p, left, key).await?;
        }
    }
    tx.commit().await?;
    Ok(())
}
