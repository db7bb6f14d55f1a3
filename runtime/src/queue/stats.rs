//! Queue depth, with the numbers of the seed's monitoring SQL (R-POLL-10): `queued`, `ready`
//! (`created + delay <= now`), `delayed` (the rest: waiting *or* leased by a running worker),
//! plus `inFlight` (the leased part of `delayed`) and `pendingPolls`.

use serde::Serialize;
use sqlx::AssertSqlSafe;
use sqlx::PgExecutor;

use super::message::QueueName;

#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct QueueStats {
    pub queue: QueueName,
    pub queued: i64,
    pub ready: i64,
    pub delayed: i64,
    pub in_flight: i64,
    pub pending_polls: i64,
    pub failed: i64,
}

pub async fn queue_stats<'e, E: PgExecutor<'e>>(
    exec: E,
    queue: QueueName,
) -> Result<QueueStats, sqlx::Error> {
    let sql = format!(
        "SELECT count(*) AS queued,
                count(*) FILTER (WHERE created + delay <= CURRENT_TIMESTAMP) AS ready,
                count(*) FILTER (WHERE created + delay > CURRENT_TIMESTAMP) AS delayed,
                count(*) FILTER (WHERE created + delay > CURRENT_TIMESTAMP AND lease_owner IS NOT NULL) AS in_flight,
                count(*) FILTER (WHERE message->>'type' = 'task'
                                   AND message->>'taskName' = 'hollo.poll-notification.v1') AS pending_polls,
                (SELECT count(*) FROM hollo_failed_message WHERE queue = $1) AS failed
           FROM {}",
        queue.table()
    );
    let (queued, ready, delayed, in_flight, pending_polls, failed): (i64, i64, i64, i64, i64, i64) =
        sqlx::query_as(AssertSqlSafe(sql))
            .bind(queue.as_str())
            .fetch_one(exec)
            .await?;
    Ok(QueueStats {
        queue,
        queued,
        ready,
        delayed,
        in_flight,
        pending_polls,
        failed,
    })
}

/// Ready messages across both queues: recovery scans pause while this is ≥ 200.
pub async fn ready_depth<'e, E: PgExecutor<'e>>(exec: E) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT (SELECT count(*) FROM hollo_task_message_v1 WHERE due <= now())
              + (SELECT count(*) FROM hollo_activity_message_v1 WHERE due <= now())",
    )
    .fetch_one(exec)
    .await
}
