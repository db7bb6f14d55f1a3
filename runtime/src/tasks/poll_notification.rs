//! `hollo.poll-notification.v1 {pollId}` (R-POLL-1, R-POLL-2, R-POLL-3, R-POLL-5).
//!
//! One transaction, with the poll row locked (votes and expiry edits take the same lock): the
//! message's completion, then either the next wakeup (not expired yet: the expiry may have
//! moved later, or this is a ≤ 7-day chunk of a far expiry) or the notifications of the current
//! local recipients plus `notified_at`. So a notification is never written before the expiry
//! read under the lock, and a duplicate or redelivered message finds `notified_at` set and the
//! unique (poll, account) key in place. With federation the same transaction queues the
//! poll's closing `Update` to followers and remote voters.
//!
//! A remote poll (`polls::question`) notifies its local voters only: its author is not ours,
//! and its end is its author's to announce.

use std::sync::Arc;
use std::time::Duration;

use uuid::Uuid;

use crate::federation::Federation;
use crate::federation::outbound::statuses::{self, Announce};
use crate::metrics::{OutcomeLabels, POLL_ENQUEUE_ATTEMPTS};
use crate::polls::{KIND, LOG_TARGET, PollPayload, coalesce_key, payload};
use crate::queue::{
    JobContext, KindSpec, NewMessage, QueueName, Registry, RetryPolicy, TaskError, enqueue,
};

/// Three executions in total, 1 s then 2 s apart; after that recovery schedules it again.
pub fn spec() -> KindSpec {
    KindSpec::new(KIND, QueueName::Task)
        .retry(RetryPolicy::exponential(Duration::from_secs(1), 3))
        .timeout(Duration::from_secs(60))
}

/// With federation, the end of a poll is also sent out (an `Update` of the `Question`).
pub fn register(reg: &mut Registry, chunk: Duration, fed: Option<Arc<Federation>>) {
    reg.register(spec(), move |ctx: JobContext, p: PollPayload| {
        let fed = fed.clone();
        async move { handle(ctx, p.poll_id, chunk, fed.as_deref()).await }
    });
}

#[derive(sqlx::FromRow)]
struct Current {
    left: f64,
    expired: bool,
    notified: bool,
    /// Our status, for a poll of ours.
    status_id: Option<Uuid>,
    /// The remote post, for a remote poll.
    remote_post_id: Option<Uuid>,
    /// Our status's author (`None` for a remote poll).
    author: Option<Uuid>,
}

async fn handle(
    ctx: JobContext,
    poll_id: Uuid,
    chunk: Duration,
    fed: Option<&Federation>,
) -> Result<(), TaskError> {
    let mut tx = ctx.pool.begin().await?;
    let current: Option<Current> = sqlx::query_as(
        "SELECT GREATEST(EXTRACT(EPOCH FROM p.expires_at - now()), 0)::float8 AS left,
                p.expires_at <= now() AS expired, p.notified_at IS NOT NULL AS notified,
                p.status_id, p.remote_post_id, s.account_id AS author
           FROM polls p LEFT JOIN statuses s ON s.id = p.status_id
          WHERE p.id = $1 AND p.expires_at IS NOT NULL FOR UPDATE OF p",
    )
    .bind(poll_id)
    .fetch_optional(&mut *tx)
    .await?;
    if !ctx.complete_in(&mut tx).await? {
        // Our lease was lost: another worker runs this message now; write nothing.
        return Ok(());
    }
    let Some(c) = current else {
        // The poll (or its status) was deleted, or a remote poll has no end any more.
        tx.commit().await?;
        return Ok(());
    };
    if c.notified {
        tx.commit().await?; // a duplicate: the notifications exist
        return Ok(());
    }
    if !c.expired {
        // Replace our (just deleted) message by the next wakeup: never a net new stored
        // message, so the cap of 100 holds without the admission lock. If a wakeup of this
        // poll is stored already (this was a duplicate), the engine keeps the earlier one.
        let delay = Duration::from_secs_f64(c.left.min(chunk.as_secs_f64()));
        enqueue(
            &mut *tx,
            QueueName::Task,
            &NewMessage::new(KIND, payload(poll_id))
                .delay(delay)
                .coalesce(coalesce_key(poll_id)),
        )
        .await?;
        tx.commit().await?;
        POLL_ENQUEUE_ATTEMPTS
            .get_or_create(&OutcomeLabels {
                outcome: "rescheduled".into(),
            })
            .inc();
        tracing::debug!(target: LOG_TARGET, poll = %poll_id, wake_in_s = delay.as_secs_f64(), "poll not expired yet; rescheduled");
        return Ok(());
    }
    let stored: Vec<(Uuid, i64)> = sqlx::query_as(
        "INSERT INTO notifications (account_id, type, poll_id, status_id, post_id)
         SELECT r.account_id, 'poll', $1, $2, $4
           FROM (SELECT $3::uuid AS account_id WHERE $3::uuid IS NOT NULL
                 UNION SELECT account_id FROM poll_votes WHERE poll_id = $1 AND account_id IS NOT NULL) r
         ON CONFLICT (poll_id, account_id) WHERE type = 'poll' DO NOTHING
         RETURNING account_id, id",
    )
    .bind(poll_id)
    .bind(c.status_id)
    .bind(c.author)
    .bind(c.remote_post_id)
    .fetch_all(&mut *tx)
    .await?;
    crate::streaming::emit::notified(&mut tx, &stored).await?;
    let written = stored.len();
    sqlx::query("UPDATE polls SET notified_at = now() WHERE id = $1")
        .bind(poll_id)
        .execute(&mut *tx)
        .await?;
    if let (Some(fed), Some(author), Some(status)) = (fed, c.author, c.status_id) {
        // One end per poll (its expiry cannot move afterwards): a stable activity id.
        let end = Announce::Update { tag: "closed" };
        statuses::publish(&mut tx, fed, None, author, status, end).await?;
    }
    tx.commit().await?;
    tracing::debug!(target: LOG_TARGET, poll = %poll_id, notifications = written, "poll ended; notified");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_executions_with_exponential_back_off() {
        let retry = spec().retry;
        let first = retry.next_delay(1, 0.5);
        let second = retry.next_delay(2, 0.5);
        assert!(
            first.is_some_and(|d| d >= Duration::from_millis(900)),
            "{first:?}"
        );
        assert!(
            second.is_some_and(|d| d >= Duration::from_millis(1800)),
            "{second:?}"
        );
        assert_eq!(retry.next_delay(3, 0.5), None, "the third failure is final");
    }
}
