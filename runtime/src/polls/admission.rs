//! Admission of poll-notification wakeups (R-POLL-6, R-POLL-7, R-POLL-9).
//!
//! One transaction with `lock_timeout = 1s` and one transaction-level advisory lock serialises
//! every admission across nodes, so the count of stored poll messages it reads cannot grow
//! behind its back. Inside it:
//! - the poll's *current* expiry is re-read; the wakeup is `min(chunk, expires − now)` away;
//! - a stored message of the poll (its coalescing key) is only ever moved earlier;
//! - otherwise, below the cap of 100 stored poll messages a new one is inserted; at the cap the
//!   latest-due idle one that is due later than the new wakeup is evicted, else the new wakeup
//!   is deferred. A lock timeout defers too. Deferred and evicted polls are found again by the
//!   recovery scan once they have expired, so deferring never loses a notification.
//!
//! The only other writer of poll messages is the handler, which replaces its own message by
//! its next wakeup in one transaction (never a net new row), so the cap holds without it
//! taking this lock.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

use sqlx::PgPool;
use uuid::Uuid;

use super::{KIND, LOG_TARGET, coalesce_key, payload};
use crate::metrics::{OutcomeLabels, POLL_ENQUEUE_ATTEMPTS};
use crate::queue::{Enqueued, NewMessage, QueueName, enqueue};

/// At most this many poll messages are stored (delayed, ready, running and retries).
pub const STORED_CAP: i64 = 100;

/// The admission lock: one key for the whole cluster (both halves are fixed numbers).
const LOCK_CLASS: i32 = 0x686f6c6c; // "holl"
const LOCK_ID: i32 = 0x706f6c6c; // "poll"

/// What happened to one scheduling attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// A new stored wakeup.
    Inserted,
    /// The poll's stored wakeup was moved earlier.
    Advanced,
    /// The poll's stored wakeup is due no later (or is running): kept as it is.
    Coalesced,
    /// At the cap: the latest-due idle wakeup (of `evicted`) made room for this one.
    Evicted { evicted: Option<Uuid> },
    /// At the cap with nothing due later: not stored; recovery finds the poll after expiry.
    DeferredCapacity,
    /// The admission lock was not free within 1 s: not stored; recovery finds it.
    LockTimeout,
    /// The poll is gone or already notified.
    NotNeeded,
}

impl Admission {
    pub fn as_str(self) -> &'static str {
        match self {
            Admission::Inserted => "inserted",
            Admission::Advanced => "advanced",
            Admission::Coalesced => "coalesced",
            Admission::Evicted { .. } => "evicted",
            Admission::DeferredCapacity => "deferred-capacity",
            Admission::LockTimeout => "lock-timeout",
            Admission::NotNeeded => "not-needed",
        }
    }
}

/// Reasons of the rate-limited warnings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reason {
    DeferredCapacity,
    EvictedLaterWakeup,
    LockTimeout,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::DeferredCapacity => "deferred-capacity",
            Reason::EvictedLaterWakeup => "evicted-later-wakeup",
            Reason::LockTimeout => "lock-timeout",
        }
    }
}

/// At most one warning per reason per `every`; counts what it swallowed in between. The clock
/// is the caller's, so the limiter is tested without waiting.
pub struct WarnLimiter {
    every: Duration,
    state: Mutex<HashMap<Reason, (Instant, u64)>>,
}

impl WarnLimiter {
    pub fn new(every: Duration) -> Self {
        WarnLimiter {
            every,
            state: Mutex::new(HashMap::new()),
        }
    }

    /// `Some(suppressed since the last warning)` when a warning for `reason` may be logged now.
    pub fn check(&self, reason: Reason, now: Instant) -> Option<u64> {
        // A poisoned lock only means another thread panicked mid-update of a counter: the
        // map is still usable, and a lost warning is better than a crash.
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        match state.get_mut(&reason) {
            Some((last, suppressed)) if now.saturating_duration_since(*last) < self.every => {
                *suppressed += 1;
                None
            }
            Some((last, suppressed)) => {
                let n = *suppressed;
                *last = now;
                *suppressed = 0;
                Some(n)
            }
            None => {
                state.insert(reason, (now, 0));
                Some(0)
            }
        }
    }
}

/// The process's limiter: "at most once per minute per reason per process".
static WARNINGS: LazyLock<WarnLimiter> =
    LazyLock::new(|| WarnLimiter::new(Duration::from_secs(60)));

fn warn(reason: Reason, poll: Uuid, detail: &str) {
    if let Some(suppressed) = WARNINGS.check(reason, Instant::now()) {
        tracing::warn!(target: LOG_TARGET, reason = reason.as_str(), poll = %poll, suppressed,
            "poll notification not stored as scheduled: {detail}; recovery finds it after expiry");
    }
}

fn is_lock_timeout(e: &sqlx::Error) -> bool {
    // 55P03 lock_not_available: what `lock_timeout` raises.
    matches!(e, sqlx::Error::Database(d) if d.code().as_deref() == Some("55P03"))
}

/// Schedules the poll's notification wakeup (see the module docs). Database errors other than
/// a lock timeout are returned; callers on the request path log them and carry on, because the
/// recovery scan finds any poll whose scheduling failed.
pub async fn schedule(
    pool: &PgPool,
    poll_id: Uuid,
    chunk: Duration,
) -> Result<Admission, sqlx::Error> {
    let outcome = match admit(pool, poll_id, chunk).await {
        Ok(a) => a,
        Err(e) if is_lock_timeout(&e) => Admission::LockTimeout,
        Err(e) => {
            POLL_ENQUEUE_ATTEMPTS
                .get_or_create(&OutcomeLabels {
                    outcome: "error".into(),
                })
                .inc();
            return Err(e);
        }
    };
    POLL_ENQUEUE_ATTEMPTS
        .get_or_create(&OutcomeLabels {
            outcome: outcome.as_str().into(),
        })
        .inc();
    match outcome {
        Admission::LockTimeout => warn(
            Reason::LockTimeout,
            poll_id,
            "the admission lock was busy for 1 s",
        ),
        Admission::DeferredCapacity => warn(
            Reason::DeferredCapacity,
            poll_id,
            "100 poll messages are stored and none is due later",
        ),
        Admission::Evicted { evicted } => {
            if let Some(ev) = evicted {
                tracing::debug!(target: LOG_TARGET, poll = %poll_id, evicted = %ev, "evicted a later wakeup");
            }
            warn(
                Reason::EvictedLaterWakeup,
                evicted.unwrap_or(poll_id),
                "evicted by an earlier wakeup at the cap of 100",
            )
        }
        _ => {}
    }
    Ok(outcome)
}

async fn admit(pool: &PgPool, poll_id: Uuid, chunk: Duration) -> Result<Admission, sqlx::Error> {
    let t = QueueName::Task.table();
    let mut tx = pool.begin().await?;
    sqlx::query("SET LOCAL lock_timeout = '1s'")
        .execute(&mut *tx)
        .await?;
    sqlx::query("SELECT pg_advisory_xact_lock($1, $2)")
        .bind(LOCK_CLASS)
        .bind(LOCK_ID)
        .execute(&mut *tx)
        .await?;

    // The current expiry, read now: whatever the caller saw may have changed since. A remote
    // poll without end needs no wakeup (its author's closing `Update` ends it; recovery finds
    // it then).
    let poll: Option<(f64, bool)> = sqlx::query_as(
        "SELECT GREATEST(EXTRACT(EPOCH FROM expires_at - now()), 0)::float8, notified_at IS NOT NULL
           FROM polls WHERE id = $1 AND expires_at IS NOT NULL",
    )
    .bind(poll_id)
    .fetch_optional(&mut *tx)
    .await?;
    let Some((left, notified)) = poll else {
        return Ok(Admission::NotNeeded);
    };
    if notified {
        return Ok(Admission::NotNeeded);
    }
    let delay = Duration::from_secs_f64(left.min(chunk.as_secs_f64()).max(0.0));
    let msg = NewMessage::new(KIND, payload(poll_id))
        .delay(delay)
        .coalesce(coalesce_key(poll_id));

    // The poll's own stored wakeup, locked so a completing handler cannot delete it between
    // here and the enqueue below (which would then insert without the cap check).
    let existing: Option<Uuid> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT id FROM {t} WHERE coalesce_key = $1 FOR UPDATE"
    )))
    .bind(coalesce_key(poll_id))
    .fetch_optional(&mut *tx)
    .await?;
    if existing.is_some() {
        let r = enqueue(&mut *tx, QueueName::Task, &msg).await?;
        tx.commit().await?;
        return Ok(match r {
            Enqueued::Advanced(_) => Admission::Advanced,
            Enqueued::Inserted(_) => Admission::Inserted,
            Enqueued::Coalesced => Admission::Coalesced,
        });
    }

    let stored: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT count(*) FROM {t} WHERE kind = $1"
    )))
    .bind(KIND)
    .fetch_one(&mut *tx)
    .await?;
    let mut outcome = Admission::Inserted;
    if stored >= STORED_CAP {
        // The latest-due idle wakeup that is due later than ours. Running (leased) messages are
        // never evicted; SKIP LOCKED leaves one a consumer is claiming right now.
        let victim: Option<(Uuid, Option<String>)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT id, message->'data'->>'pollId' FROM {t}
              WHERE kind = $1 AND lease_owner IS NULL AND due > now() + $2 * interval '1 second'
              ORDER BY due DESC LIMIT 1 FOR UPDATE SKIP LOCKED"
        )))
        .bind(KIND)
        .bind(delay.as_secs_f64())
        .fetch_optional(&mut *tx)
        .await?;
        let Some((victim, victim_poll)) = victim else {
            tx.commit().await?;
            return Ok(Admission::DeferredCapacity);
        };
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "DELETE FROM {t} WHERE id = $1"
        )))
        .bind(victim)
        .execute(&mut *tx)
        .await?;
        outcome = Admission::Evicted {
            evicted: victim_poll.and_then(|p| p.parse().ok()),
        };
    }
    enqueue(&mut *tx, QueueName::Task, &msg).await?;
    tx.commit().await?;
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_are_limited_to_one_per_minute_per_reason() {
        let limiter = WarnLimiter::new(Duration::from_secs(60));
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        assert_eq!(limiter.check(Reason::LockTimeout, at(0)), Some(0));
        assert_eq!(limiter.check(Reason::LockTimeout, at(1)), None);
        assert_eq!(limiter.check(Reason::LockTimeout, at(59)), None);
        // Other reasons have their own minute.
        assert_eq!(limiter.check(Reason::DeferredCapacity, at(30)), Some(0));
        assert_eq!(limiter.check(Reason::DeferredCapacity, at(31)), None);
        assert_eq!(limiter.check(Reason::EvictedLaterWakeup, at(31)), Some(0));
        // A minute after the last warning: allowed again, with what was swallowed.
        assert_eq!(limiter.check(Reason::LockTimeout, at(60)), Some(2));
        assert_eq!(limiter.check(Reason::LockTimeout, at(61)), None);
        assert_eq!(limiter.check(Reason::DeferredCapacity, at(90)), Some(1));
        // A burst logs once per minute: 10 minutes of one attempt per second → 10 warnings.
        let limiter = WarnLimiter::new(Duration::from_secs(60));
        let logged = (0..600)
            .filter(|s| limiter.check(Reason::DeferredCapacity, at(*s)).is_some())
            .count();
        assert_eq!(logged, 10);
    }
}
