//! Remote reply collection (SPEC.md §6, R-RPL): `hollo.remote-reply-collect.v1 {jobId}`.
//!
//! The job row (`reply_collection_jobs`) and the host row (`reply_collection_hosts`) are the
//! truth, shared by every worker: which job runs (status, lease, fencing `claim`), when a host
//! may be asked again (`next_request_at`), and how long a 429 keeps us away (`cooldown_until`).
//! The queue message only wakes a worker; it is completed in the claim transaction, and from
//! then on the job's own 15-minute heartbeat lease guards it. A message that goes missing costs
//! at most one recovery period, because `recovery::scan` re-dispatches runnable jobs.
//!
//! Data walk: `request` (API or `/context`) → job row + message → `collect::handle` claims the
//! job and the host lease → walks the collection, pacing every request through the host row →
//! completed / partial / failed, or back to waiting (429, shutdown) → next waiting job of the
//! host is dispatched at once.

pub mod collect;
pub mod recovery;

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::{PgConnection, PgPool};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::REPLY_LANE;
use crate::config::ReplyConfig;
use crate::federation::Federation;
use crate::queue::{KindSpec, NewMessage, QueueName, Registry, RetryPolicy, enqueue};

pub const KIND: &str = "hollo.remote-reply-collect.v1";

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CollectPayload {
    pub job_id: Uuid,
}

pub fn spec() -> KindSpec {
    // Retries of the *message* are for database blips only: collection errors are recorded on
    // the job (failed, or waiting after a 429) and the message completes.
    KindSpec::new(KIND, QueueName::Task)
        .lane(REPLY_LANE)
        .retry(RetryPolicy::fixed(Duration::from_secs(5), 5))
        // The job lease, not the handler time limit, bounds a run: a capped job (200 requests
        // 5 s apart) legitimately runs for many minutes.
        .timeout(Duration::from_secs(24 * 3600))
}

/// Registers the collector. `stop` is the node's first shutdown signal: a running collection
/// puts its job back to waiting at the next request boundary instead of being cut off later.
pub fn register(
    reg: &mut Registry,
    fed: Arc<Federation>,
    cfg: ReplyConfig,
    stop: CancellationToken,
) {
    let collector = Arc::new(collect::Collector { fed, cfg, stop });
    reg.register(spec(), move |ctx, p: CollectPayload| {
        let c = collector.clone();
        async move { c.handle(ctx, p).await }
    });
}

/// The coalescing key of a job's wake-up message: at most one queued per job.
pub fn message_key(job: Uuid) -> String {
    format!("{KIND}:{job}")
}

/// Enqueues the job's wake-up `delay` from now, in the caller's transaction (the NOTIFY rides
/// on the commit).
pub async fn dispatch(
    conn: &mut PgConnection,
    job: Uuid,
    delay: Duration,
) -> Result<(), sqlx::Error> {
    enqueue(
        &mut *conn,
        QueueName::Task,
        &NewMessage::new(KIND, serde_json::json!({ "jobId": job }))
            .delay(delay)
            .coalesce(message_key(job)),
    )
    .await?;
    Ok(())
}

/// The authority (`host[:port]`) a job is paced by; `None` for IRIs we would never fetch.
pub fn host_of(iri: &str) -> Option<String> {
    let u = url::Url::parse(iri).ok()?;
    if !matches!(u.scheme(), "http" | "https") {
        return None;
    }
    let host = u.host_str()?.to_ascii_lowercase();
    Some(match u.port() {
        Some(p) => format!("{host}:{p}"),
        None => host,
    })
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Requested {
    /// A new job, or a finished one whose cooldown is over, is waiting now.
    Queued(Uuid),
    /// The job exists and is waiting, running, or cooling down: nothing changed.
    Existing(Uuid),
}

impl Requested {
    pub fn id(&self) -> Uuid {
        match self {
            Requested::Queued(id) | Requested::Existing(id) => *id,
        }
    }
}

/// Creates (or re-arms after its cooldown) the one job of `replies_iri`, inside the caller's
/// transaction, *without* a queue message: recovery dispatches it once the transaction has
/// committed (R-RPL-5). Use this from code that already holds a transaction it may roll back.
pub async fn request_in(
    conn: &mut PgConnection,
    post_iri: &str,
    replies_iri: &str,
    account: Option<Uuid>,
    max_depth: u32,
) -> Result<Requested, RequestError> {
    let host = host_of(replies_iri)
        .ok_or_else(|| RequestError::BadIri(format!("not an http(s) IRI: {replies_iri:?}")))?;
    // Insert, or re-arm a finished job whose cooldown is over; `xmax = 0` tells a fresh insert.
    // A waiting, running or cooling job is left exactly as it is (unique per replies IRI).
    let row: Option<(Uuid, bool)> = sqlx::query_as(
        "INSERT INTO reply_collection_jobs AS j (id, post_iri, replies_iri, host, account_id, max_depth)
         VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (kind, replies_iri) DO UPDATE
            SET status = 'waiting', error = NULL, pages_fetched = 0, requests = 0, items_stored = 0,
                items_skipped = 0, attempts = 0, next_attempt_at = now(), next_dispatch_at = now(),
                account_id = COALESCE(EXCLUDED.account_id, j.account_id), max_depth = EXCLUDED.max_depth,
                finished_at = NULL, frontier = NULL, updated_at = now()
          WHERE j.status IN ('completed', 'partial', 'failed')
            AND (j.cooldown_until IS NULL OR j.cooldown_until <= now())
         RETURNING j.id, (j.xmax = 0)",
    )
    .bind(Uuid::now_v7())
    .bind(post_iri)
    .bind(replies_iri)
    .bind(&host)
    .bind(account)
    .bind(max_depth as i32)
    .fetch_optional(&mut *conn)
    .await?;
    if let Some((id, _)) = row {
        return Ok(Requested::Queued(id));
    }
    let id: Uuid = sqlx::query_scalar(
        "SELECT id FROM reply_collection_jobs WHERE kind = 'replies' AND replies_iri = $1",
    )
    .bind(replies_iri)
    .fetch_one(&mut *conn)
    .await?;
    Ok(Requested::Existing(id))
}

/// Creates or re-arms the job and enqueues its wake-up in one transaction: the message is
/// visible (and its NOTIFY sent) only once the job row is.
pub async fn request(
    pool: &PgPool,
    post_iri: &str,
    replies_iri: &str,
    account: Option<Uuid>,
    max_depth: u32,
) -> Result<Requested, RequestError> {
    let mut tx = pool.begin().await?;
    let r = request_in(&mut tx, post_iri, replies_iri, account, max_depth).await?;
    if let Requested::Queued(id) = r {
        dispatch(&mut tx, id, Duration::ZERO).await?;
    }
    tx.commit().await?;
    Ok(r)
}

#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    #[error("{0}")]
    BadIri(String),
    #[error("database: {0}")]
    Db(#[from] sqlx::Error),
}

/// What `GET /api/v1/reply-collections/{id}` shows.
#[derive(Clone, Debug, Serialize, sqlx::FromRow)]
#[serde(rename_all = "camelCase")]
pub struct JobView {
    pub id: Uuid,
    pub post_iri: String,
    pub replies_iri: String,
    pub host: String,
    pub status: String,
    pub attempts: i32,
    pub pages_fetched: i32,
    pub requests: i32,
    pub items_stored: i32,
    pub items_skipped: i32,
    pub error: Option<String>,
    /// When a waiting job may run next (`null` once it has finished).
    pub next_attempt_at: Option<DateTime<Utc>>,
    pub cooldown_until: Option<DateTime<Utc>>,
    pub lease_until: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
}

pub async fn view(pool: &PgPool, id: Uuid) -> Result<Option<JobView>, sqlx::Error> {
    sqlx::query_as(
        "SELECT id, post_iri, replies_iri, host, status, attempts, pages_fetched, requests, items_stored,
                items_skipped, error,
                CASE WHEN status = 'waiting' THEN next_attempt_at END AS next_attempt_at,
                cooldown_until, lease_until, created_at, started_at, finished_at
           FROM reply_collection_jobs WHERE id = $1",
    )
    .bind(id)
    .fetch_optional(pool)
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_are_paced_by_authority_and_only_http_iris_are_accepted() {
        assert_eq!(
            host_of("https://Social.Example/users/a/statuses/1/replies").as_deref(),
            Some("social.example")
        );
        assert_eq!(
            host_of("http://127.0.0.1:8080/n/replies").as_deref(),
            Some("127.0.0.1:8080")
        );
        for bad in ["ftp://x.example/r", "not a url", "mailto:a@b.example"] {
            assert_eq!(host_of(bad), None, "{bad}");
        }
        let job = Uuid::nil();
        assert_eq!(
            message_key(job),
            format!("hollo.remote-reply-collect.v1:{job}")
        );
    }
}
