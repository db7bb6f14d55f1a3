//! Reply-collection recovery (R-RPL-4, R-RPL-5): one `Scan` of the shared recovery loop
//! (`crate::recovery`), at start and every `RECOVERY_INTERVAL_SECONDS` on consuming nodes. It only touches rows and enqueues wake-ups; it never fetches anything,
//! which is why it takes no federation handle at all.
//!
//! Each step is one short statement or transaction with `SKIP LOCKED`, so scans on many
//! workers at once share the work instead of queueing behind each other.

use serde::Serialize;
use sqlx::PgPool;
use uuid::Uuid;

use super::{KIND, message_key};
use crate::config::ReplyConfig;
use crate::queue::{NewMessage, QueueName, enqueue_many, stats};

/// Per-scan bounds (SPEC.md §6).
pub const EXPIRED_PER_SCAN: i64 = 100;
pub const ORPHANS_PER_SCAN: i64 = 100;
pub const DISPATCH_PER_SCAN: i64 = 50;
/// Recovery pauses while this many messages are ready (R-Q backpressure).
pub const PAUSE_AT_READY: i64 = 200;

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ScanReport {
    /// Ready depth was at or above `PAUSE_AT_READY`: nothing was done.
    pub paused: bool,
    /// Processing jobs whose lease had expired, returned to waiting.
    pub expired: u64,
    /// Host leases whose job no longer runs, cleared.
    pub orphaned: u64,
    /// Runnable waiting jobs enqueued, at most one per host.
    pub dispatched: u64,
}

pub async fn scan(pool: &PgPool, cfg: &ReplyConfig) -> Result<ScanReport, sqlx::Error> {
    let mut report = ScanReport::default();
    if stats::ready_depth(pool).await? >= PAUSE_AT_READY {
        report.paused = true;
        return Ok(report);
    }
    // A crashed worker's job: its lease ran out without a heartbeat. Back to waiting; the
    // next claim bumps the fence, so the old owner (if it was only slow) can write nothing.
    report.expired = sqlx::query(
        "UPDATE reply_collection_jobs j
            SET status = 'waiting', claimed_by = NULL, lease_until = NULL, updated_at = now(),
                next_attempt_at = now(), next_dispatch_at = now()
           FROM (SELECT id FROM reply_collection_jobs
                  WHERE status = 'processing' AND lease_until < now()
                  ORDER BY lease_until LIMIT $1 FOR UPDATE SKIP LOCKED) x
          WHERE j.id = x.id",
    )
    .bind(EXPIRED_PER_SCAN)
    .execute(pool)
    .await?
    .rows_affected();
    // A host leased to a job that is not processing under a live lease is free again.
    report.orphaned = sqlx::query(
        "UPDATE reply_collection_hosts h
            SET processing_job_id = NULL, processing_started_at = NULL
           FROM (SELECT host FROM reply_collection_hosts o
                  WHERE processing_job_id IS NOT NULL
                    AND NOT EXISTS (SELECT 1 FROM reply_collection_jobs j
                                     WHERE j.id = o.processing_job_id AND j.status = 'processing'
                                       AND j.lease_until > now())
                  LIMIT $1 FOR UPDATE SKIP LOCKED) x
          WHERE h.host = x.host",
    )
    .bind(ORPHANS_PER_SCAN)
    .execute(pool)
    .await?
    .rows_affected();
    // Runnable jobs, the most overdue per host, on hosts neither leased nor backing off. Only
    // committed jobs are visible here, which is what makes a job created inside a caller's
    // transaction safe to dispatch (R-RPL-5). `next_dispatch_at` moves one period out so the
    // next scan does not enqueue the same job again while its wake-up waits.
    let mut tx = pool.begin().await?;
    let ids: Vec<Uuid> = sqlx::query_scalar(
        "WITH cand AS (
            SELECT id, next_dispatch_at FROM (
                SELECT DISTINCT ON (j.host) j.id, j.next_dispatch_at
                  FROM reply_collection_jobs j
                  LEFT JOIN reply_collection_hosts h ON h.host = j.host
                 WHERE j.status = 'waiting' AND j.next_attempt_at <= now()
                   AND j.next_dispatch_at <= now()
                   AND (h.host IS NULL OR ((h.cooldown_until IS NULL OR h.cooldown_until <= now())
                        AND NOT EXISTS (SELECT 1 FROM reply_collection_jobs r
                                         WHERE r.id = h.processing_job_id AND r.status = 'processing'
                                           AND r.lease_until > now())))
                   -- one per host: none while another job of the host already has a wake-up
                   AND NOT EXISTS (SELECT 1 FROM reply_collection_jobs d
                                    WHERE d.host = j.host AND d.id <> j.id AND d.status = 'waiting'
                                      AND d.next_dispatch_at > now())
                 ORDER BY j.host, j.next_attempt_at, j.created_at) per_host
             ORDER BY next_dispatch_at LIMIT $1
         )
         UPDATE reply_collection_jobs j SET next_dispatch_at = now() + $2 * interval '1 second'
           FROM (SELECT id FROM reply_collection_jobs
                  WHERE id IN (SELECT id FROM cand) AND status = 'waiting'
                  FOR UPDATE SKIP LOCKED) x
          WHERE j.id = x.id
         RETURNING j.id",
    )
    .bind(DISPATCH_PER_SCAN)
    .bind(cfg.recovery_interval.as_secs_f64())
    .fetch_all(&mut *tx)
    .await?;
    let msgs: Vec<NewMessage> = ids
        .iter()
        .map(|id| {
            NewMessage::new(KIND, serde_json::json!({ "jobId": id })).coalesce(message_key(*id))
        })
        .collect();
    enqueue_many(&mut *tx, QueueName::Task, &msgs).await?;
    tx.commit().await?;
    report.dispatched = ids.len() as u64;
    Ok(report)
}
