//! Scheduled statuses (R-MAPI-6, Mastodon's `scheduled_at`): a status written later by a
//! worker, never early and never twice — unlike upstream Hollo, which posts at once.
//!
//! Scheduling checks the request as a post would be checked (text, poll, media, reply), keeps
//! its uploads from the stale-upload cleanup, stores the parameters and queues
//! `hollo.scheduled-status.v1` for `scheduled_at`, all in one transaction: a row without its
//! wakeup cannot exist. Publishing (`tasks::scheduled_status`) locks the row, completes the
//! message and writes the status in one transaction that also deletes the row, so a
//! redelivered message or a second worker finds nothing to publish, and a worker killed
//! half-way leaves the row and its message to the next lease. Changing the time re-queues
//! the wakeup under the same coalescing key; an early wakeup (the time was moved later) only
//! waits again.
//!
//! Mastodon's limits: at most [`TOTAL_LIMIT`] pending per account and [`DAILY_LIMIT`] on one
//! (UTC) day; `scheduled_at` at least the configured offset ahead (five minutes by
//! default), and a time already past publishes at once, as Mastodon does.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use super::Visibility;
use super::write::{NewStatus, WriteError, check_new};
use crate::media;
use crate::polls::NewPoll;
use crate::queue::{LONGEST_WAIT, NewMessage, QueueName, enqueue};

/// The task that publishes one.
pub const KIND: &str = "hollo.scheduled-status.v1";

/// Pending scheduled statuses one account may have (Mastodon's `TOTAL_LIMIT`).
pub const TOTAL_LIMIT: i64 = 300;

/// Scheduled statuses one account may have on one day (Mastodon's `DAILY_LIMIT`).
pub const DAILY_LIMIT: i64 = 25;

/// `hollo.scheduled-status.v1`'s payload.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Payload {
    pub scheduled_status_id: Uuid,
}

/// One wakeup per scheduled status: a changed time replaces the stored one.
pub fn wakeup_key(id: Uuid) -> String {
    format!("scheduled-status:{id}")
}

/// The poll of a scheduled status, as Mastodon's `params.poll` shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PollParams {
    pub options: Vec<String>,
    pub expires_in: i64,
    pub multiple: bool,
    pub hide_totals: bool,
}

/// What the status will be, as stored (`params`) and as Mastodon's `ScheduledStatus.params`
/// shows it: the request after validation and the author's defaults.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Params {
    pub text: String,
    pub visibility: Visibility,
    pub spoiler_text: Option<String>,
    pub sensitive: bool,
    pub language: Option<String>,
    pub in_reply_to_id: Option<Uuid>,
    pub poll: Option<PollParams>,
    pub media_ids: Option<Vec<Uuid>>,
    /// The status it will quote (Mastodon 4.5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quoted_status_id: Option<Uuid>,
    /// Who may quote it (`quotes::Policy`); absent: the default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quote_approval_policy: Option<String>,
}

impl Params {
    pub fn of(n: &NewStatus) -> Params {
        Params {
            text: n.text.clone(),
            visibility: n.visibility,
            spoiler_text: Some(n.spoiler_text.clone()).filter(|s| !s.is_empty()),
            sensitive: n.sensitive,
            language: n.language.clone(),
            in_reply_to_id: n.in_reply_to,
            poll: n.poll.as_ref().map(|p| PollParams {
                options: p.options.clone(),
                expires_in: p.expires_in,
                multiple: p.multiple,
                hide_totals: false,
            }),
            media_ids: Some(n.media_ids.clone()).filter(|m| !m.is_empty()),
            quoted_status_id: n.quoted,
            quote_approval_policy: n.quote_policy.map(|p| p.as_str().to_string()),
        }
    }

    /// The status to write when the time comes.
    pub fn to_new(&self) -> NewStatus {
        NewStatus {
            text: self.text.clone(),
            visibility: self.visibility,
            spoiler_text: self.spoiler_text.clone().unwrap_or_default(),
            sensitive: self.sensitive,
            language: self.language.clone(),
            in_reply_to: self.in_reply_to_id,
            poll: self.poll.as_ref().map(|p| NewPoll {
                options: p.options.clone(),
                expires_in: p.expires_in,
                multiple: p.multiple,
            }),
            media_ids: self.media_ids.clone().unwrap_or_default(),
            idempotency_key: None,
            quoted: self.quoted_status_id,
            quote_policy: self
                .quote_approval_policy
                .as_deref()
                .and_then(crate::quotes::Policy::parse),
        }
    }
}

/// A stored scheduled status.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct Scheduled {
    pub id: Uuid,
    pub account_id: Uuid,
    pub scheduled_at: DateTime<Utc>,
    #[sqlx(json)]
    pub params: Params,
}

const COLUMNS: &str = "id, account_id, scheduled_at, params";

/// Keeps `n` for `at`; `min_offset` is how far ahead `at` must be. A repeated
/// `Idempotency-Key` answers the first one and stores nothing.
pub async fn schedule(
    pool: &PgPool,
    account: Uuid,
    n: &NewStatus,
    at: DateTime<Utc>,
    min_offset: Duration,
) -> Result<Scheduled, WriteError> {
    check_new(n)?;
    check_time(at, Utc::now(), min_offset)?;
    if let Some(key) = &n.idempotency_key
        && let Some(first) = by_key(pool, account, key).await?
    {
        return Ok(first);
    }
    if let Some(parent) = n.in_reply_to {
        let mut conn = pool.acquire().await?;
        if !super::access::can_see(&mut conn, Some(account), parent).await? {
            return Err(WriteError::NotFound);
        }
    }
    let mut tx = pool.begin().await?;
    // The limits are counted under the account's row lock, so parallel requests cannot all
    // pass them.
    crate::accounts::lock(&mut *tx, account).await?;
    check_limits(&mut tx, account, at, None).await?;
    let id = Uuid::now_v7();
    let params = Params::of(n);
    let stored: Option<Scheduled> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "INSERT INTO scheduled_statuses (id, account_id, scheduled_at, params, idempotency_key)
         VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (account_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
         RETURNING {COLUMNS}"
    )))
    .bind(id)
    .bind(account)
    .bind(at)
    .bind(sqlx::types::Json(&params))
    .bind(&n.idempotency_key)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(stored) = stored else {
        // A concurrent retry with the same key stored first.
        tx.rollback().await?;
        let key = n.idempotency_key.as_deref().unwrap_or_default();
        return by_key(pool, account, key)
            .await?
            .ok_or(WriteError::NotFound);
    };
    media::attach::reserve(&mut tx, account, id, &n.media_ids).await?;
    wake(&mut tx, id, at).await?;
    tx.commit().await?;
    Ok(stored)
}

/// Mastodon's rule: a time in the past is "now" (the caller publishes at once); a future one
/// must be at least `min_offset` ahead.
pub fn check_time(
    at: DateTime<Utc>,
    now: DateTime<Utc>,
    min_offset: Duration,
) -> Result<(), WriteError> {
    let ahead = at - now;
    if ahead > chrono::TimeDelta::zero()
        && ahead < chrono::TimeDelta::from_std(min_offset).unwrap_or(chrono::TimeDelta::MAX)
    {
        return Err(WriteError::Invalid(format!(
            "Validation failed: Scheduled at The scheduled date must be at least {} seconds in the future",
            min_offset.as_secs()
        )));
    }
    Ok(())
}

/// Whether `at` is already past (then the request is an ordinary post).
pub fn is_past(at: DateTime<Utc>) -> bool {
    at <= Utc::now()
}

async fn check_limits(
    tx: &mut PgConnection,
    account: Uuid,
    at: DateTime<Utc>,
    except: Option<Uuid>,
) -> Result<(), WriteError> {
    let (total, that_day): (i64, i64) = sqlx::query_as(
        "SELECT count(*),
                count(*) FILTER (WHERE date_trunc('day', scheduled_at AT TIME ZONE 'UTC')
                                     = date_trunc('day', $2::timestamptz AT TIME ZONE 'UTC'))
           FROM scheduled_statuses WHERE account_id = $1 AND id IS DISTINCT FROM $3",
    )
    .bind(account)
    .bind(at)
    .bind(except)
    .fetch_one(&mut *tx)
    .await?;
    if total >= TOTAL_LIMIT {
        return Err(WriteError::Invalid(format!(
            "Validation failed: You have exceeded the limit of {TOTAL_LIMIT} scheduled statuses"
        )));
    }
    if that_day >= DAILY_LIMIT {
        return Err(WriteError::Invalid(format!(
            "Validation failed: You have exceeded the limit of {DAILY_LIMIT} scheduled statuses per day"
        )));
    }
    Ok(())
}

/// Queues (or moves) the wakeup of `id` for `at`, at most [`LONGEST_WAIT`] ahead.
pub async fn wake(tx: &mut PgConnection, id: Uuid, at: DateTime<Utc>) -> Result<(), sqlx::Error> {
    let left = (at - Utc::now())
        .to_std()
        .unwrap_or_default()
        .min(LONGEST_WAIT);
    let payload = Payload {
        scheduled_status_id: id,
    };
    let data = serde_json::to_value(payload).unwrap_or_default();
    enqueue(
        &mut *tx,
        QueueName::Task,
        &NewMessage::new(KIND, data)
            .delay(left)
            .coalesce(wakeup_key(id)),
    )
    .await?;
    Ok(())
}

async fn by_key(pool: &PgPool, account: Uuid, key: &str) -> Result<Option<Scheduled>, sqlx::Error> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM scheduled_statuses WHERE account_id = $1 AND idempotency_key = $2"
    )))
    .bind(account)
    .bind(key)
    .fetch_optional(pool)
    .await
}

/// One of the account's scheduled statuses; another account's is the same `None` as none.
pub async fn find(
    conn: &mut PgConnection,
    account: Uuid,
    id: Uuid,
) -> Result<Option<Scheduled>, sqlx::Error> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM scheduled_statuses WHERE id = $1 AND account_id = $2"
    )))
    .bind(id)
    .bind(account)
    .fetch_optional(conn)
    .await
}

/// Moves one to `at` (the same time rules as scheduling); `None` when there is no such row.
pub async fn reschedule(
    pool: &PgPool,
    account: Uuid,
    id: Uuid,
    at: DateTime<Utc>,
    min_offset: Duration,
) -> Result<Option<Scheduled>, WriteError> {
    check_time(at, Utc::now(), min_offset)?;
    let mut tx = pool.begin().await?;
    crate::accounts::lock(&mut *tx, account).await?;
    let Some(current) = find(&mut tx, account, id).await? else {
        return Ok(None);
    };
    // The moved row is counted on its new day without itself.
    check_limits(&mut tx, account, at, Some(current.id)).await?;
    let moved: Scheduled = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "UPDATE scheduled_statuses SET scheduled_at = $2 WHERE id = $1 RETURNING {COLUMNS}"
    )))
    .bind(id)
    .bind(at)
    .fetch_one(&mut *tx)
    .await?;
    wake(&mut tx, id, at).await?;
    tx.commit().await?;
    Ok(Some(moved))
}

/// Cancels one (its uploads become ordinary unattached uploads again); whether it existed.
pub async fn cancel(pool: &PgPool, account: Uuid, id: Uuid) -> Result<bool, sqlx::Error> {
    let gone = sqlx::query("DELETE FROM scheduled_statuses WHERE id = $1 AND account_id = $2")
        .bind(id)
        .bind(account)
        .execute(pool)
        .await?
        .rows_affected();
    // The wakeup finds no row and does nothing; it is not worth a second statement here.
    Ok(gone == 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new() -> NewStatus {
        NewStatus {
            text: "later".into(),
            visibility: Visibility::Unlisted,
            spoiler_text: String::new(),
            sensitive: false,
            language: Some("en".into()),
            in_reply_to: None,
            poll: Some(NewPoll {
                options: vec!["a".into(), "b".into()],
                expires_in: 600,
                multiple: true,
            }),
            media_ids: Vec::new(),
            idempotency_key: Some("k".into()),
            quoted: None,
            quote_policy: None,
        }
    }

    #[test]
    fn params_keep_what_the_status_will_be() {
        let n = new();
        let p = Params::of(&n);
        let back = p.to_new();
        assert_eq!(back.text, n.text);
        assert_eq!(back.visibility, n.visibility);
        assert_eq!(back.poll, n.poll);
        assert_eq!(back.language, n.language);
        // The key named the request, not the status it becomes.
        assert_eq!(back.idempotency_key, None);
        let json = serde_json::to_value(&p).unwrap();
        assert_eq!(json["visibility"], "unlisted");
        assert!(json["spoiler_text"].is_null() && json["media_ids"].is_null());
        assert_eq!(json["poll"]["hide_totals"], false);
    }

    #[test]
    fn times_follow_mastodons_rule() {
        let now = Utc::now();
        let five = Duration::from_secs(300);
        assert!(check_time(now + chrono::TimeDelta::seconds(301), now, five).is_ok());
        assert!(check_time(now + chrono::TimeDelta::seconds(299), now, five).is_err());
        assert!(check_time(now + chrono::TimeDelta::seconds(1), now, five).is_err());
        // Past (or now): an ordinary post, not an error.
        assert!(check_time(now - chrono::TimeDelta::seconds(5), now, five).is_ok());
        assert!(check_time(now, now, five).is_ok());
        assert!(check_time(now + chrono::TimeDelta::seconds(1), now, Duration::ZERO).is_ok());
    }
}
