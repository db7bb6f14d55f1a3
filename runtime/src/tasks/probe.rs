//! `hollo.probe.v1 {key, sleepMs, failTimes}`: sleeps, fails transiently on its first
//! `failTimes` attempts, then records `(key, attempts, node)` in the same transaction that
//! completes the message, so a recorded probe can never be recorded twice by a redelivery.
//! Operators use it to prove workers consume; tests and benchmarks use it to drive load.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use sqlx::PgPool;

use crate::queue::{JobContext, KindSpec, NewMessage, QueueName, Registry, RetryPolicy, TaskError};

pub const KIND: &str = "hollo.probe.v1";

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Probe {
    pub key: String,
    #[serde(default)]
    pub sleep_ms: u64,
    #[serde(default)]
    pub fail_times: u32,
}

pub fn register(reg: &mut Registry) {
    for queue in QueueName::ALL {
        // The same kind runs on both queues so either queue's limits can be exercised.
        let spec =
            KindSpec::new(KIND, queue).retry(RetryPolicy::fixed(Duration::from_millis(200), 5));
        if queue == QueueName::Task {
            reg.register(spec, handle);
        } else {
            reg.register(
                KindSpec {
                    name: ACTIVITY_KIND,
                    ..spec
                },
                handle,
            );
        }
    }
}

/// The activity-queue twin (kind names are unique across queues).
pub const ACTIVITY_KIND: &str = "hollo.probe-activity.v1";

async fn handle(ctx: JobContext, p: Probe) -> Result<(), TaskError> {
    if p.sleep_ms > 0 {
        tokio::time::sleep(Duration::from_millis(p.sleep_ms)).await;
    }
    if (ctx.msg.attempts as u32) < p.fail_times {
        return Err(TaskError::Transient(format!(
            "probe {} fails on purpose (attempt {})",
            p.key,
            ctx.msg.attempt()
        )));
    }
    let mut tx = ctx.pool.begin().await?;
    if !ctx.complete_in(&mut tx).await? {
        // Our lease was lost and another worker runs it now: record nothing.
        return Ok(());
    }
    sqlx::query(
        "INSERT INTO hollo_probe_result (key, attempts, node_id, enqueued_at) VALUES ($1, $2, $3, $4)
         ON CONFLICT (key) DO UPDATE SET duplicates = hollo_probe_result.duplicates + 1",
    )
    .bind(&p.key)
    .bind(ctx.msg.attempt())
    .bind(ctx.node_id)
    .bind(ctx.msg.created)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(())
}

/// Enqueues `count` probes in batches; keys are `<prefix>-<n>`.
pub async fn enqueue(
    pool: &PgPool,
    queue: QueueName,
    prefix: &str,
    count: u64,
    sleep_ms: u64,
    fail_times: u32,
    delay: Duration,
) -> Result<u64, sqlx::Error> {
    let kind = if queue == QueueName::Task {
        KIND
    } else {
        ACTIVITY_KIND
    };
    let mut written = 0;
    let mut n = 0;
    while n < count {
        let batch: Vec<NewMessage> = (n..(n + 5000).min(count))
            .map(|i| {
                let p = Probe {
                    key: format!("{prefix}-{i}"),
                    sleep_ms,
                    fail_times,
                };
                NewMessage::new(kind, serde_json::to_value(p).unwrap_or_default()).delay(delay)
            })
            .collect();
        n += batch.len() as u64;
        let mut tx = pool.begin().await?;
        let w = crate::queue::enqueue_many(&mut *tx, queue, &batch).await?;
        sqlx::query(
            "INSERT INTO hollo_probe_counter (name, value) VALUES ('enqueued', $1)
             ON CONFLICT (name) DO UPDATE SET value = hollo_probe_counter.value + EXCLUDED.value",
        )
        .bind(w as i64)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        written += w;
    }
    Ok(written)
}

#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct ProbeStats {
    pub enqueued: i64,
    pub completed: i64,
    pub pending: i64,
    pub failed: i64,
    pub duplicates: i64,
}

pub async fn stats(pool: &PgPool) -> Result<ProbeStats, sqlx::Error> {
    let (enqueued, completed, pending, failed, duplicates): (i64, i64, i64, i64, i64) =
        sqlx::query_as(
            "SELECT COALESCE((SELECT value FROM hollo_probe_counter WHERE name = 'enqueued'), 0),
                (SELECT count(*) FROM hollo_probe_result),
                (SELECT count(*) FROM hollo_task_message_v1 WHERE kind = $1)
                  + (SELECT count(*) FROM hollo_activity_message_v1 WHERE kind = $2),
                (SELECT count(*) FROM hollo_failed_message WHERE kind IN ($1, $2)),
                COALESCE((SELECT sum(duplicates) FROM hollo_probe_result), 0)::bigint",
        )
        .bind(KIND)
        .bind(ACTIVITY_KIND)
        .fetch_one(pool)
        .await?;
    Ok(ProbeStats {
        enqueued,
        completed,
        pending,
        failed,
        duplicates,
    })
}
