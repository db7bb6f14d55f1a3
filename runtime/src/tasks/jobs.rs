//! The job engine shared by imports and cleanups (SPEC.md §5, R-JOB-1…12).
//!
//! A job has items. The web node writes the job, every item and the first dispatch message in
//! one transaction. Two task kinds per family run it on workers:
//!
//! - **dispatch** `{jobId}` (one transaction, job row locked): a first dispatch checks that the
//!   upload is complete (else the job fails asking to resubmit, R-JOB-10); a job whose items are
//!   all final is completed; otherwise up to [`RESERVE`] due items are reserved
//!   (`next_dispatch_at` a minute out, `SKIP LOCKED`) and one item message is enqueued for each.
//!   Nothing is reserved while the ready depth is ≥ [`DEPTH_PAUSE`].
//! - **item** `{jobId, itemId}` (one transaction on one of the item-lock connections, R-DB-1):
//!   the item's row lock *is* its lease. Success, permanent failure, cancellation or the 5th
//!   recorded failure make it final; other failures put it back with `attempts + 1`, due again
//!   in 5 s. A killed process rolls the transaction back, so it never consumes an attempt.
//!
//! Recovery ([`recover`]) only enqueues dispatches; it never runs an item (R-JOB-4).

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sqlx::{AssertSqlSafe, PgConnection, PgPool};
use uuid::Uuid;

use crate::queue::stats::ready_depth;
use crate::queue::{
    JobContext, KindSpec, NewMessage, QueueName, Registry, RetryPolicy, TaskError, enqueue,
    enqueue_many,
};

/// Items a job may have reserved (queued or running) at once.
pub const RESERVE: i64 = 50;
/// Recovery and dispatch pause while this many messages are ready (R-JOB-4, as R-POLL-8).
pub const DEPTH_PAUSE: i64 = 200;
/// Jobs per family one recovery pass looks at (R-JOB-4).
pub const RECOVERY_PAGE: i64 = 100;
/// Recorded failures after which an item fails (R-JOB-3).
pub const MAX_FAILURES: i32 = 5;
/// Delay between an item's recorded failure and its next attempt (R-JOB-3).
pub const RETRY_DELAY: Duration = Duration::from_secs(5);

/// The message left by a job whose items were not all stored (an upload cut off by an older
/// version that staged files); it cannot be recovered (R-JOB-10).
pub const RESUBMIT: &str = "the upload was not stored completely (interrupted, e.g. by an upgrade); please resubmit the file";

/// One family of jobs: its tables and task kinds.
#[derive(Clone, Copy, Debug)]
pub struct Family {
    pub name: &'static str,
    pub jobs: &'static str,
    pub items: &'static str,
    pub dispatch_kind: &'static str,
    pub item_kind: &'static str,
    /// Per-kind time limit of one item run (R-JOB-12); over it the run is a recorded failure.
    pub item_limit: Duration,
}

pub const ACTIVE: &str = "('pending', 'processing')";

/// What an item's work sees of its job.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct JobRow {
    pub id: Uuid,
    pub account_id: Option<Uuid>,
    pub kind: String,
    pub mode: String,
    pub params: Value,
    pub environment: Option<String>,
}

/// Why an item's work did not succeed.
#[derive(Debug)]
pub enum ItemError {
    /// Worth retrying (network trouble, a 5xx): a recorded failure.
    Transient(String),
    /// Retrying cannot help (unknown account, invalid row): the item fails now.
    Permanent(String),
}

impl From<sqlx::Error> for ItemError {
    fn from(e: sqlx::Error) -> Self {
        ItemError::Transient(format!("database: {e}"))
    }
}

/// What one item does. `tx` is a savepoint inside the item's transaction: its writes commit
/// with the item's outcome and vanish if the work fails. `pool` is the general pool, for work
/// that must not wait on the item's transaction (e.g. caching a fetched actor). `result` is stored with the item
/// (e.g. the resolved actor IRI), for the job's finish step.
pub trait Work: Send + Sync + 'static {
    fn run<'a>(
        &'a self,
        tx: &'a mut PgConnection,
        pool: &'a PgPool,
        job: &'a JobRow,
        item_id: i32,
        data: &'a Value,
    ) -> BoxFuture<'a, Result<Option<String>, ItemError>>;

    /// Called once, in the dispatch transaction that completes a job that was not cancelled
    /// (e.g. `mode=overwrite` removes what the upload did not contain).
    fn finish<'a>(
        &'a self,
        _tx: &'a mut PgConnection,
        _job: &'a JobRow,
    ) -> BoxFuture<'a, Result<(), sqlx::Error>> {
        Box::pin(async { Ok(()) })
    }
}

/// Settings of this node the handlers need.
#[derive(Clone, Debug)]
pub struct JobsConfig {
    /// `RUNTIME_ENV` (R-JOB-9).
    pub environment: String,
    /// `FS_STORAGE_PATH`: the media cleanup's root; `None` when unset.
    pub storage_path: Option<std::path::PathBuf>,
    /// The media drive: the media cleanup deletes stale uploads' objects through it when the
    /// drive is S3 (an fs drive's files are found by listing `storage_path`).
    pub drive: Option<std::sync::Arc<crate::media::Drive>>,
}

impl Default for JobsConfig {
    fn default() -> Self {
        JobsConfig {
            environment: "production".into(),
            storage_path: None,
            drive: None,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DispatchPayload {
    pub job_id: Uuid,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ItemPayload {
    pub job_id: Uuid,
    pub item_id: i32,
}

impl Family {
    fn sql(&self, template: &str) -> AssertSqlSafe<String> {
        // Table names are constants of this module, never input.
        AssertSqlSafe(
            template
                .replace("{jobs}", self.jobs)
                .replace("{items}", self.items)
                .replace("{active}", ACTIVE),
        )
    }

    pub fn dispatch_message(&self, job: Uuid) -> NewMessage {
        NewMessage::new(self.dispatch_kind, json!({ "jobId": job }))
            .coalesce(format!("{}:{job}", self.dispatch_kind))
    }

    pub fn item_message(&self, job: Uuid, item: i32) -> NewMessage {
        NewMessage::new(self.item_kind, json!({ "jobId": job, "itemId": item }))
            .coalesce(format!("{}:{job}:{item}", self.item_kind))
    }
}

/// Registers the family's dispatch and item kinds.
pub fn register(reg: &mut Registry, fam: Family, work: Arc<dyn Work>, cfg: JobsConfig) {
    let retry = RetryPolicy::fixed(RETRY_DELAY, MAX_FAILURES as u32);
    let cfg = Arc::new(cfg);
    reg.register(
        KindSpec::new(fam.dispatch_kind, QueueName::Task)
            .retry(retry.clone())
            .timeout(Duration::from_secs(60)),
        {
            let work = work.clone();
            move |ctx: JobContext, p: DispatchPayload| {
                let (work, cfg) = (work.clone(), cfg.clone());
                async move { dispatch(ctx, fam, work, &cfg, p.job_id).await }
            }
        },
    );
    // The handler enforces the item limit itself (and records the failure on the item); the
    // engine's limit is only a backstop a little later.
    reg.register(
        KindSpec::new(fam.item_kind, QueueName::Task)
            .retry(retry)
            .timeout(fam.item_limit + Duration::from_secs(30)),
        move |ctx: JobContext, p: ItemPayload| {
            let work = work.clone();
            async move { run_item(ctx, fam, work, p).await }
        },
    );
}

// ---------------------------------------------------------------------------------------------
// Registration (web node).

pub struct NewJob {
    pub account_id: Option<Uuid>,
    pub kind: String,
    pub mode: String,
    pub params: Value,
    pub content_sha256: Option<String>,
    pub environment: String,
    pub items: Vec<Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Created {
    New(Uuid),
    /// The same content is already queued, running or done (R-JOB-7): nothing was written.
    Existing(Uuid),
}

/// Writes the job, its items and its first dispatch in the caller's transaction.
pub async fn create(
    tx: &mut PgConnection,
    fam: Family,
    job: NewJob,
) -> Result<Created, sqlx::Error> {
    let id = Uuid::now_v7();
    // A partial unique index holds the de-duplication, so two identical uploads racing each
    // other still end with one job; ON CONFLICT without a target covers it.
    let inserted: Option<Uuid> = sqlx::query_scalar(fam.sql(
        "INSERT INTO {jobs} (id, account_id, kind, mode, params, content_sha256, environment, total_items)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
         ON CONFLICT DO NOTHING RETURNING id",
    ))
    .bind(id)
    .bind(job.account_id)
    .bind(&job.kind)
    .bind(&job.mode)
    .bind(&job.params)
    .bind(&job.content_sha256)
    .bind(&job.environment)
    .bind(job.items.len() as i32)
    .fetch_optional(&mut *tx)
    .await?;
    if inserted.is_none() {
        let existing: Option<Uuid> = sqlx::query_scalar(fam.sql(
            "SELECT id FROM {jobs} WHERE account_id IS NOT DISTINCT FROM $1 AND kind = $2
                AND content_sha256 = $3 AND status IN ('pending', 'processing', 'completed')",
        ))
        .bind(job.account_id)
        .bind(&job.kind)
        .bind(&job.content_sha256)
        .fetch_optional(&mut *tx)
        .await?;
        return match existing {
            Some(id) => Ok(Created::Existing(id)),
            None => Err(sqlx::Error::Protocol(
                "job conflicted but no existing job was found".into(),
            )),
        };
    }
    sqlx::query(fam.sql(
        "INSERT INTO {items} (job_id, id, data)
         SELECT $1, ord::int, d FROM unnest($2::jsonb[]) WITH ORDINALITY AS u(d, ord)",
    ))
    .bind(id)
    .bind(&job.items)
    .execute(&mut *tx)
    .await?;
    enqueue(&mut *tx, QueueName::Task, &fam.dispatch_message(id)).await?;
    Ok(Created::New(id))
}

/// A job as the API shows it: counts are final outcomes only (R-JOB-2).
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
#[serde(rename_all = "camelCase")]
pub struct JobView {
    pub id: Uuid,
    #[serde(rename = "type")]
    pub kind: String,
    pub mode: String,
    pub status: String,
    pub total: i64,
    pub succeeded: i64,
    pub failed: i64,
    pub cancelled: i64,
    pub error: Option<String>,
    pub environment: Option<String>,
    pub created_at: chrono::DateTime<chrono::Utc>,
    pub updated_at: chrono::DateTime<chrono::Utc>,
    pub finished_at: Option<chrono::DateTime<chrono::Utc>>,
    #[serde(skip)]
    pub account_id: Option<Uuid>,
}

pub async fn show(pool: &PgPool, fam: Family, id: Uuid) -> Result<Option<JobView>, sqlx::Error> {
    sqlx::query_as(fam.sql(
        "SELECT j.id, j.kind, j.mode, j.status, j.total_items::bigint AS total,
                count(i.id) FILTER (WHERE i.status = 'completed') AS succeeded,
                count(i.id) FILTER (WHERE i.status = 'failed') AS failed,
                count(i.id) FILTER (WHERE i.status = 'cancelled') AS cancelled,
                j.error, j.environment, j.created_at, j.updated_at, j.finished_at, j.account_id
           FROM {jobs} j LEFT JOIN {items} i ON i.job_id = j.id
          WHERE j.id = $1
          GROUP BY j.id",
    ))
    .bind(id)
    .fetch_optional(pool)
    .await
}

/// Cancels an active job: no new item starts; items running right now finish (their effects
/// stand, R-JOB-5) and every other pending item is cancelled. Returns false when the job was
/// not active.
pub async fn cancel(pool: &PgPool, fam: Family, id: Uuid) -> Result<bool, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let hit = sqlx::query(fam.sql(
        "UPDATE {jobs} SET status = 'cancelled', finished_at = now(), updated_at = now()
          WHERE id = $1 AND status IN {active}",
    ))
    .bind(id)
    .execute(&mut *tx)
    .await?
    .rows_affected()
        == 1;
    if hit {
        cancel_pending_items(&mut tx, fam, id).await?;
    }
    tx.commit().await?;
    Ok(hit)
}

/// Pending items not running right now (a running item holds its row lock) become cancelled.
async fn cancel_pending_items(
    tx: &mut PgConnection,
    fam: Family,
    id: Uuid,
) -> Result<u64, sqlx::Error> {
    Ok(sqlx::query(fam.sql(
        "UPDATE {items} SET status = 'cancelled', finished_at = now(), updated_at = now()
          WHERE job_id = $1 AND id IN (SELECT id FROM {items} WHERE job_id = $1 AND status = 'pending'
                                        FOR UPDATE SKIP LOCKED)",
    ))
    .bind(id)
    .execute(&mut *tx)
    .await?
    .rows_affected())
}

// ---------------------------------------------------------------------------------------------
// Dispatch.

async fn dispatch(
    ctx: JobContext,
    fam: Family,
    work: Arc<dyn Work>,
    cfg: &JobsConfig,
    job_id: Uuid,
) -> Result<(), TaskError> {
    let mut tx = ctx.pool.begin().await?;
    let job: Option<(String, i32, bool, Option<String>)> = sqlx::query_as(fam.sql(
        "SELECT status, total_items, dispatched, environment FROM {jobs} WHERE id = $1 FOR UPDATE",
    ))
    .bind(job_id)
    .fetch_optional(&mut *tx)
    .await?;
    let Some((status, total, dispatched, env)) = job else {
        return finish_message(&ctx, tx).await;
    };
    match status.as_str() {
        "pending" | "processing" => {}
        "cancelled" => {
            // Items that were running at cancellation and then died are still pending.
            cancel_pending_items(&mut tx, fam, job_id).await?;
            return finish_message(&ctx, tx).await;
        }
        _ => return finish_message(&ctx, tx).await,
    }
    let stored: i64 = sqlx::query_scalar(fam.sql("SELECT count(*) FROM {items} WHERE job_id = $1"))
        .bind(job_id)
        .fetch_one(&mut *tx)
        .await?;
    if !dispatched {
        let mine = env.as_deref().unwrap_or("production") == cfg.environment;
        if stored < i64::from(total) {
            if mine {
                tracing::warn!(family = fam.name, job = %job_id, stored, total, "incomplete upload: failing the job (resubmit)");
                sqlx::query(fam.sql(
                    "UPDATE {jobs} SET status = 'failed', error = $2, finished_at = now(), updated_at = now()
                      WHERE id = $1",
                ))
                .bind(job_id)
                .bind(RESUBMIT)
                .execute(&mut *tx)
                .await?;
                // What was stored of it is not run either: a partial import helps nobody.
                sqlx::query(fam.sql(
                    "UPDATE {items} SET status = 'failed', error = $2, finished_at = now(), updated_at = now()
                      WHERE job_id = $1 AND status = 'pending'",
                ))
                .bind(job_id)
                .bind(RESUBMIT)
                .execute(&mut *tx)
                .await?;
            }
            // Another environment's job is its own recovery's business (R-JOB-9).
            return finish_message(&ctx, tx).await;
        }
        sqlx::query(fam.sql(
            "UPDATE {jobs} SET dispatched = true, status = 'processing', updated_at = now() WHERE id = $1",
        ))
        .bind(job_id)
        .execute(&mut *tx)
        .await?;
    }
    let (pending, reserved): (i64, i64) = sqlx::query_as(fam.sql(
        "SELECT count(*), count(*) FILTER (WHERE next_dispatch_at > now())
           FROM {items} WHERE job_id = $1 AND status = 'pending'",
    ))
    .bind(job_id)
    .fetch_one(&mut *tx)
    .await?;
    if pending == 0 {
        let row: JobRow = sqlx::query_as(fam.sql(
            "SELECT id, account_id, kind, mode, params, environment FROM {jobs} WHERE id = $1",
        ))
        .bind(job_id)
        .fetch_one(&mut *tx)
        .await?;
        work.finish(&mut tx, &row).await?;
        sqlx::query(fam.sql(
            "UPDATE {jobs} SET status = 'completed', finished_at = now(), updated_at = now() WHERE id = $1",
        ))
        .bind(job_id)
        .execute(&mut *tx)
        .await?;
        return finish_message(&ctx, tx).await;
    }
    let room = RESERVE - reserved;
    let mut next = Duration::from_secs(60);
    if room > 0 {
        if ready_depth(&mut *tx).await? >= DEPTH_PAUSE {
            next = Duration::from_secs(5);
        } else {
            let ids: Vec<i32> = sqlx::query_scalar(fam.sql(
                "UPDATE {items} SET next_dispatch_at = now() + interval '1 minute'
                  WHERE job_id = $1 AND id IN (
                        SELECT id FROM {items} WHERE job_id = $1 AND status = 'pending' AND next_dispatch_at <= now()
                         ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED)
                  RETURNING id",
            ))
            .bind(job_id)
            .bind(room)
            .fetch_all(&mut *tx)
            .await?;
            let msgs: Vec<NewMessage> = ids.iter().map(|i| fam.item_message(job_id, *i)).collect();
            enqueue_many(&mut *tx, QueueName::Task, &msgs).await?;
        }
    }
    // Item outcomes enqueue the next dispatch; this delayed one is the safety net.
    sqlx::query(fam.sql(
        "UPDATE {jobs} SET next_dispatch_at = now() + interval '1 minute', updated_at = now() WHERE id = $1",
    ))
    .bind(job_id)
    .execute(&mut *tx)
    .await?;
    if !ctx.complete_in(&mut tx).await? {
        return Ok(());
    }
    // After our own message is gone, so the coalescing key is free again.
    enqueue(
        &mut *tx,
        QueueName::Task,
        &fam.dispatch_message(job_id).delay(next),
    )
    .await?;
    tx.commit().await?;
    Ok(())
}

/// Completes the running message inside `tx` and commits; a lost lease rolls back.
async fn finish_message(
    ctx: &JobContext,
    mut tx: sqlx::Transaction<'static, sqlx::Postgres>,
) -> Result<(), TaskError> {
    if ctx.complete_in(&mut tx).await? {
        tx.commit().await?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Items.

enum Outcome {
    Done(Option<String>),
    Failed(String),
    Retry(String),
}

type ItemRow = (String, i32, Value, String);

async fn run_item(
    ctx: JobContext,
    fam: Family,
    work: Arc<dyn Work>,
    p: ItemPayload,
) -> Result<(), TaskError> {
    // The item-lock connections bound a worker to 4 items at once (R-JOB-1, R-DB-1).
    let src = ctx.item_locks.clone().unwrap_or_else(|| ctx.pool.clone());
    let mut tx = src.begin().await?;
    let row: Option<ItemRow> = sqlx::query_as(fam.sql(
        "SELECT i.status, i.attempts, i.data, j.status
           FROM {items} i JOIN {jobs} j ON j.id = i.job_id
          WHERE i.job_id = $1 AND i.id = $2
          FOR UPDATE OF i SKIP LOCKED",
    ))
    .bind(p.job_id)
    .bind(p.item_id)
    .fetch_optional(&mut *tx)
    .await?;
    // Locked: another run holds it (its outcome or death decides); gone or final: done.
    let Some((status, attempts, data, job_status)) = row else {
        return finish_message(&ctx, tx).await;
    };
    if status != "pending" {
        return finish_message(&ctx, tx).await;
    }
    let outcome = if job_status != "pending" && job_status != "processing" {
        // Cancelled (or failed): no new item work starts (R-JOB-5).
        set_item(&mut tx, fam, &p, "cancelled", None, None, attempts).await?;
        touch_job(&mut tx, fam, p.job_id).await?;
        if !ctx.complete_in(&mut tx).await? {
            return Ok(());
        }
        tx.commit().await?;
        return Ok(());
    } else {
        let job: JobRow = sqlx::query_as(fam.sql(
            "SELECT id, account_id, kind, mode, params, environment FROM {jobs} WHERE id = $1",
        ))
        .bind(p.job_id)
        .fetch_one(&mut *tx)
        .await?;
        let mut sp = sqlx::Connection::begin(&mut *tx).await?;
        match tokio::time::timeout(
            fam.item_limit,
            work.run(&mut sp, &ctx.pool, &job, p.item_id, &data),
        )
        .await
        {
            Ok(Ok(result)) => {
                sp.commit().await?;
                Outcome::Done(result)
            }
            Ok(Err(e)) => {
                sp.rollback().await?;
                match e {
                    ItemError::Permanent(e) => Outcome::Failed(e),
                    ItemError::Transient(e) => Outcome::Retry(e),
                }
            }
            Err(_) => {
                // Abandon everything the run did (its query may be cut mid-way) and record the
                // failure in a fresh transaction under the same row lock.
                drop(sp);
                drop(tx);
                tx = src.begin().await?;
                let still: Option<i32> = sqlx::query_scalar(fam.sql(
                    "SELECT attempts FROM {items} WHERE job_id = $1 AND id = $2 AND status = 'pending' FOR UPDATE",
                ))
                .bind(p.job_id)
                .bind(p.item_id)
                .fetch_optional(&mut *tx)
                .await?;
                if still != Some(attempts) {
                    return finish_message(&ctx, tx).await;
                }
                Outcome::Retry(format!(
                    "timed out after {} s (item time limit)",
                    fam.item_limit.as_secs()
                ))
            }
        }
    };
    let mut retry = false;
    match outcome {
        Outcome::Done(result) => {
            set_item(&mut tx, fam, &p, "completed", None, result, attempts).await?;
        }
        Outcome::Failed(e) => {
            set_item(&mut tx, fam, &p, "failed", Some(e), None, attempts + 1).await?;
        }
        Outcome::Retry(e) if attempts + 1 >= MAX_FAILURES => {
            let e = format!("{e} (failed {MAX_FAILURES} times)");
            set_item(&mut tx, fam, &p, "failed", Some(e), None, attempts + 1).await?;
        }
        Outcome::Retry(e) => {
            tracing::info!(family = fam.name, job = %p.job_id, item = p.item_id, attempt = attempts + 1, error = %e, "item failed; retrying in 5 s");
            sqlx::query(fam.sql(
                "UPDATE {items} SET attempts = attempts + 1, error = $3, updated_at = now(),
                        next_dispatch_at = now() + interval '65 seconds'
                  WHERE job_id = $1 AND id = $2",
            ))
            .bind(p.job_id)
            .bind(p.item_id)
            .bind(&e)
            .execute(&mut *tx)
            .await?;
            retry = true;
        }
    }
    touch_job(&mut tx, fam, p.job_id).await?;
    if !ctx.complete_in(&mut tx).await? {
        return Ok(());
    }
    let next = if retry {
        fam.item_message(p.job_id, p.item_id).delay(RETRY_DELAY)
    } else {
        fam.dispatch_message(p.job_id)
    };
    enqueue(&mut *tx, QueueName::Task, &next).await?;
    tx.commit().await?;
    Ok(())
}

async fn set_item(
    tx: &mut PgConnection,
    fam: Family,
    p: &ItemPayload,
    status: &str,
    error: Option<String>,
    result: Option<String>,
    attempts: i32,
) -> Result<(), sqlx::Error> {
    sqlx::query(fam.sql(
        "UPDATE {items} SET status = $3, error = $4, result = $5, attempts = $6,
                updated_at = now(), finished_at = now()
          WHERE job_id = $1 AND id = $2",
    ))
    .bind(p.job_id)
    .bind(p.item_id)
    .bind(status)
    .bind(error)
    .bind(result)
    .bind(attempts)
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// The progress heartbeat (R-JOB-8): a job that moves is not due for recovery.
async fn touch_job(tx: &mut PgConnection, fam: Family, job: Uuid) -> Result<(), sqlx::Error> {
    sqlx::query(fam.sql(
        "UPDATE {jobs} SET updated_at = now(),
                next_dispatch_at = GREATEST(next_dispatch_at, now() + interval '1 minute'),
                status = CASE WHEN status = 'pending' THEN 'processing' ELSE status END
          WHERE id = $1",
    ))
    .bind(job)
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// Appends items to a running job (a cleanup's enumeration), with deterministic ids so a
/// re-run adds nothing twice. Returns how many were new.
pub async fn add_items(
    tx: &mut PgConnection,
    fam: Family,
    job: Uuid,
    first_id: i32,
    items: &[Value],
) -> Result<u64, sqlx::Error> {
    let n = sqlx::query(fam.sql(
        "INSERT INTO {items} (job_id, id, data)
         SELECT $1, $2 + ord::int - 1, d FROM unnest($3::jsonb[]) WITH ORDINALITY AS u(d, ord)
         ON CONFLICT DO NOTHING",
    ))
    .bind(job)
    .bind(first_id)
    .bind(items)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    sqlx::query(fam.sql(
        "UPDATE {jobs} SET total_items = (SELECT count(*) FROM {items} WHERE job_id = $1) WHERE id = $1",
    ))
    .bind(job)
    .execute(&mut *tx)
    .await?;
    Ok(n)
}

// ---------------------------------------------------------------------------------------------
// Recovery.

/// One recovery pass for a family in environment `env` (R-JOB-4, R-JOB-8, R-JOB-9): up to 100
/// active jobs of this environment whose dispatch is due — no dispatch and no item progress for
/// a minute, so never a job another worker is moving — get a dispatch (coalesced: a queued one
/// is kept). Cancelled jobs with items left pending by a dead run get one too. The pass never
/// runs an item and never fails a job. Returns the number of jobs it enqueued, or `None` when
/// it paused because the ready depth is ≥ 200.
pub async fn recover(pool: &PgPool, fam: Family, env: &str) -> Result<Option<usize>, sqlx::Error> {
    if ready_depth(pool).await? >= DEPTH_PAUSE {
        return Ok(None);
    }
    let mut tx = pool.begin().await?;
    let ids: Vec<Uuid> = sqlx::query_scalar(fam.sql(
        "SELECT id FROM {jobs} j
          WHERE COALESCE(environment, 'production') = $1 AND next_dispatch_at <= now()
            AND (status IN {active}
                 OR (status = 'cancelled'
                     AND EXISTS (SELECT 1 FROM {items} i WHERE i.job_id = j.id AND i.status = 'pending')))
          ORDER BY next_dispatch_at LIMIT $2 FOR UPDATE SKIP LOCKED",
    ))
    .bind(env)
    .bind(RECOVERY_PAGE)
    .fetch_all(&mut *tx)
    .await?;
    if ids.is_empty() {
        tx.rollback().await?;
        return Ok(Some(0));
    }
    sqlx::query(fam.sql(
        "UPDATE {jobs} SET next_dispatch_at = now() + interval '1 minute' WHERE id = ANY($1)",
    ))
    .bind(&ids)
    .execute(&mut *tx)
    .await?;
    let msgs: Vec<NewMessage> = ids.iter().map(|id| fam.dispatch_message(*id)).collect();
    enqueue_many(&mut *tx, QueueName::Task, &msgs).await?;
    tx.commit().await?;
    Ok(Some(ids.len()))
}
