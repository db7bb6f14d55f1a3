//! `hollo.scheduled-status.v1 {scheduledStatusId}`: publishes a scheduled status at its time
//! (`statuses::scheduled` has the rules and why).
//!
//! The poll-expiry standard: the status is written in one transaction with the row locked,
//! the message completed (fenced on this lease) and the row deleted — so it is never early (an
//! early wakeup only waits again, re-reading the time under the lock), never twice (a
//! redelivered or duplicate message finds no row), and a worker killed mid-way leaves the row
//! and the message for the next lease. Mentions and the parent are settled before the
//! transaction (they may fetch), as a post from the API is; a parent deleted meanwhile makes a
//! post that replies to nothing, as Mastodon's does.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::federation::Federation;
use crate::media::Drive;
use crate::queue::{JobContext, KindSpec, QueueName, Registry, RetryPolicy, TaskError};
use crate::statuses::scheduled::{self, KIND, Payload, Scheduled};
use crate::statuses::write::{self, WriteError};

pub fn spec() -> KindSpec {
    KindSpec::new(KIND, QueueName::Task)
        .retry(RetryPolicy::exponential(Duration::from_secs(2), 8))
        .timeout(Duration::from_secs(120))
}

/// What publishing needs from the node: federation (to deliver and to resolve mentions), the
/// drive (the media's URLs), and the poll wakeup chunk (a published poll is scheduled).
#[derive(Clone)]
pub struct Deps {
    pub fed: Option<Arc<Federation>>,
    pub drive: Arc<Drive>,
    pub poll_chunk: Duration,
}

pub fn register(reg: &mut Registry, deps: Deps) {
    reg.register(spec(), move |ctx: JobContext, p: Payload| {
        let deps = deps.clone();
        async move { handle(ctx, &deps, p).await }
    });
}

async fn handle(ctx: JobContext, deps: &Deps, p: Payload) -> Result<(), TaskError> {
    let id = p.scheduled_status_id;
    let row: Option<Scheduled> = sqlx::query_as(
        "SELECT id, account_id, scheduled_at, params FROM scheduled_statuses WHERE id = $1",
    )
    .bind(id)
    .fetch_optional(&ctx.pool)
    .await?;
    let Some(row) = row else {
        // Cancelled, or published by an earlier delivery of this message.
        return finish(&ctx, id, Then::Done).await;
    };
    if row.scheduled_at > Utc::now() {
        return finish(&ctx, id, Then::WakeAgain).await;
    }
    let Some(author) = crate::accounts::by_id(&ctx.pool, row.account_id).await? else {
        // The author is being deleted; the row goes with it.
        return finish(&ctx, id, Then::Done).await;
    };
    let fed = deps.fed.as_deref();
    let mut new = row.params.to_new();
    let prepared = match write::prepare(&ctx.pool, fed, &author, &new).await {
        Err(WriteError::NotFound | WriteError::Blocked) if new.in_reply_to.is_some() => {
            new.in_reply_to = None;
            write::prepare(&ctx.pool, fed, &author, &new).await
        }
        other => other,
    }
    .map_err(refused)?;
    let mut tx = ctx.pool.begin().await?;
    // `early` compares with the transaction's `now()`, which is the status's `created_at`: the
    // status can never say it was posted before its time.
    let locked: Option<(DateTime<Utc>, bool)> = sqlx::query_as(
        "SELECT scheduled_at, scheduled_at > now() FROM scheduled_statuses WHERE id = $1 FOR UPDATE",
    )
    .bind(id)
    .fetch_optional(&mut *tx)
    .await?;
    if !ctx.complete_in(&mut tx).await? {
        // Our lease was lost: another worker runs this message now; write nothing.
        return Ok(());
    }
    let (at, early) = match locked {
        None => return Ok(tx.commit().await?),
        Some(l) => l,
    };
    if early {
        // Moved later while we prepared: wait again.
        scheduled::wake(&mut tx, id, at).await?;
        return Ok(tx.commit().await?);
    }
    crate::media::attach::release(&mut tx, id).await?;
    let (status, poll) = write::insert(&mut tx, fed, &deps.drive, &author, &new, prepared)
        .await
        .map_err(refused)?;
    sqlx::query("DELETE FROM scheduled_statuses WHERE id = $1")
        .bind(id)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    tracing::info!(scheduled = %id, %status, scheduled_at = %at, "scheduled status published");
    if let Some(poll) = poll
        && let Err(e) = crate::polls::admission::schedule(&ctx.pool, poll, deps.poll_chunk).await
    {
        tracing::warn!(%poll, error = %e, "scheduling the poll notification failed; recovery schedules it after expiry");
    }
    Ok(())
}

/// What a wakeup that publishes nothing leaves behind.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Then {
    /// Nothing: there is no row, or it cannot be published.
    Done,
    /// A new wakeup for the row's time, if the row is still there (an early wakeup: a far
    /// date reached in steps, a time moved later, or a delay counted from a clock read after
    /// the scheduling transaction began).
    WakeAgain,
}

/// Completes the message without publishing, and does what `then` says.
async fn finish(ctx: &JobContext, id: uuid::Uuid, then: Then) -> Result<(), TaskError> {
    let mut tx = ctx.pool.begin().await?;
    let at: Option<DateTime<Utc>> =
        sqlx::query_scalar("SELECT scheduled_at FROM scheduled_statuses WHERE id = $1 FOR UPDATE")
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
    if !ctx.complete_in(&mut tx).await? {
        return Ok(());
    }
    // The caller decided "early"; the clock is not read again here. It was, and a status
    // whose time passed between the two reads lost its only wakeup and was never published.
    // A time that has passed meanwhile makes a wakeup due at once.
    if let (Then::WakeAgain, Some(at)) = (then, at) {
        scheduled::wake(&mut tx, id, at).await?;
    }
    tx.commit().await?;
    Ok(())
}

/// A status that can no longer be written as scheduled (its media gone, say) is not retried:
/// the row stays in the owner's list, where it can be cancelled.
fn refused(e: WriteError) -> TaskError {
    match e {
        WriteError::Db(e) => e.into(),
        e => TaskError::Permanent(format!("the scheduled status cannot be published: {e}")),
    }
}
