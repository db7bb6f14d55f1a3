//! Enqueueing: now, delayed, or coalesced by key; one row or many. Works on a pool or inside the
//! caller's transaction, and the wake-up `NOTIFY` rides in the same statement, so PostgreSQL
//! delivers it only at commit (a worker never wakes for a row it cannot see yet).

use sqlx::AssertSqlSafe;
use std::time::Duration;

use sqlx::PgExecutor;
use uuid::Uuid;

use super::message::{QueueName, envelope};

/// Longest single wait a far due time is scheduled in (scheduled statuses, mute and filter
/// expiry): a task that wakes that far ahead re-queues itself for the rest, so a changed or
/// lost row is noticed within a week rather than at a date months away.
pub const LONGEST_WAIT: Duration = Duration::from_secs(7 * 24 * 3600);

#[derive(Clone, Debug)]
pub struct NewMessage {
    pub kind: String,
    pub data: serde_json::Value,
    pub delay: Duration,
    /// At most one stored message per key; a second enqueue keeps the earlier due time.
    pub coalesce_key: Option<String>,
}

impl NewMessage {
    pub fn new(kind: impl Into<String>, data: serde_json::Value) -> Self {
        NewMessage {
            kind: kind.into(),
            data,
            delay: Duration::ZERO,
            coalesce_key: None,
        }
    }
    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }
    pub fn coalesce(mut self, key: impl Into<String>) -> Self {
        self.coalesce_key = Some(key.into());
        self
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Enqueued {
    /// A new row.
    Inserted(Uuid),
    /// A row with the same coalescing key existed; its wake-up was moved earlier.
    Advanced(Uuid),
    /// A row with the same coalescing key existed and is due no later (or is running): kept.
    Coalesced,
}

impl Enqueued {
    pub fn id(self) -> Option<Uuid> {
        match self {
            Enqueued::Inserted(id) | Enqueued::Advanced(id) => Some(id),
            Enqueued::Coalesced => None,
        }
    }
}

/// Enqueues one message.
pub async fn enqueue<'e, E>(
    exec: E,
    queue: QueueName,
    msg: &NewMessage,
) -> Result<Enqueued, sqlx::Error>
where
    E: PgExecutor<'e>,
{
    let t = queue.table();
    let ch = queue.channel();
    // `xmax = 0` tells a fresh insert from an ON CONFLICT update. A row that is running
    // (leased) is left alone: moving its `due` would cut its lease short.
    let sql = format!(
        "WITH ins AS (
            INSERT INTO {t} AS m (id, message, delay, created, due, ready_at, kind, coalesce_key)
            VALUES ($1, $2, $3 * interval '1 second', now(), now() + $3 * interval '1 second',
                    now() + $3 * interval '1 second', $4, $5)
            ON CONFLICT (coalesce_key) WHERE coalesce_key IS NOT NULL DO UPDATE
               SET due = EXCLUDED.due, delay = EXCLUDED.due - m.created, ready_at = EXCLUDED.due,
                   message = EXCLUDED.message
             WHERE m.lease_owner IS NULL AND EXCLUDED.due < m.due
            RETURNING m.id, (m.xmax = 0) AS inserted, m.due <= now() AS ready
         ), wake AS (SELECT pg_notify('{ch}', $4) FROM ins WHERE ready LIMIT 1)
         SELECT id, inserted, (SELECT count(*) FROM wake) AS woke FROM ins"
    );
    let id = Uuid::now_v7();
    let row: Option<(Uuid, bool, i64)> = sqlx::query_as(AssertSqlSafe(sql))
        .bind(id)
        .bind(envelope(queue, &msg.kind, &msg.data))
        .bind(msg.delay.as_secs_f64())
        .bind(&msg.kind)
        .bind(&msg.coalesce_key)
        .fetch_optional(exec)
        .await?;
    match row {
        Some((id, true, _)) => Ok(Enqueued::Inserted(id)),
        Some((id, false, _)) => Ok(Enqueued::Advanced(id)),
        None => Ok(Enqueued::Coalesced),
    }
}

/// For a statement that enqueues only when its own write happened (one round trip instead of a
/// transaction of two): the CTEs `q_ins`, which enqueues `msg` (ready now) once per row of
/// `source` (a CTE of the caller's statement), and `q_wake`, the consumers' wake-up. The
/// caller's statement must read `q_wake` (a CTE that writes nothing runs only when read).
/// Returns the SQL and the message's three parameters (id, envelope, kind), to be bound as
/// `$first`, `$first+1`, `$first+2`.
pub fn ready_message_ctes(
    queue: QueueName,
    source: &str,
    first: usize,
    msg: &NewMessage,
) -> (String, (Uuid, serde_json::Value, String)) {
    let (t, ch) = (queue.table(), queue.channel());
    let (id, body, kind) = (first, first + 1, first + 2);
    let sql = format!(
        "q_ins AS (
            INSERT INTO {t} (id, message, delay, created, due, ready_at, kind)
            SELECT ${id}, ${body}, interval '0', now(), now(), now(), ${kind} FROM {source}
            RETURNING 1
         ), q_wake AS (SELECT pg_notify('{ch}', ${kind}) FROM q_ins LIMIT 1)"
    );
    (
        sql,
        (
            Uuid::now_v7(),
            envelope(queue, &msg.kind, &msg.data),
            msg.kind.clone(),
        ),
    )
}

/// Enqueues many messages in one statement (no coalescing keys: duplicates are the caller's
/// business here). Returns the number of rows written.
pub async fn enqueue_many<'e, E>(
    exec: E,
    queue: QueueName,
    msgs: &[NewMessage],
) -> Result<u64, sqlx::Error>
where
    E: PgExecutor<'e>,
{
    if msgs.is_empty() {
        return Ok(0);
    }
    let t = queue.table();
    let ch = queue.channel();
    let ids: Vec<Uuid> = msgs.iter().map(|_| Uuid::now_v7()).collect();
    let bodies: Vec<serde_json::Value> = msgs
        .iter()
        .map(|m| envelope(queue, &m.kind, &m.data))
        .collect();
    let delays: Vec<f64> = msgs.iter().map(|m| m.delay.as_secs_f64()).collect();
    let kinds: Vec<&str> = msgs.iter().map(|m| m.kind.as_str()).collect();
    let keys: Vec<Option<&str>> = msgs.iter().map(|m| m.coalesce_key.as_deref()).collect();
    let sql = format!(
        "WITH ins AS (
            INSERT INTO {t} (id, message, delay, created, due, ready_at, kind, coalesce_key)
            SELECT id, body, d * interval '1 second', now(), now() + d * interval '1 second',
                   now() + d * interval '1 second', kind, key
              FROM unnest($1::uuid[], $2::jsonb[], $3::float8[], $4::text[], $5::text[]) AS u(id, body, d, kind, key)
            ON CONFLICT (coalesce_key) WHERE coalesce_key IS NOT NULL DO NOTHING
            RETURNING kind, due <= now() AS ready
         ), wake AS (SELECT pg_notify('{ch}', k.kind)
                       FROM (SELECT DISTINCT kind FROM ins WHERE ready) k)
         SELECT count(*), (SELECT count(*) FROM wake) FROM ins"
    );
    let (n, _): (i64, i64) = sqlx::query_as(AssertSqlSafe(sql))
        .bind(&ids)
        .bind(&bodies)
        .bind(&delays)
        .bind(&kinds)
        .bind(&keys)
        .fetch_one(exec)
        .await?;
    Ok(n as u64)
}
