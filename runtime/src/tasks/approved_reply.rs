//! `hollo.approved-reply.v1 {statusId}`: sends our reply to its whole audience once the remote
//! parent's author approved it (`approvals::answers`) — its `Create` again, now carrying
//! `approvedBy`, to everyone it had not gone to (until then only that author had it). A task
//! rather than the inbox's own transaction because the note carries its media, whose URLs
//! only a node with the drive makes. The activity is queued in the transaction that completes
//! the message, and each inbox gets it once however often the message runs.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sqlx::PgConnection;
use uuid::Uuid;

use crate::federation::Federation;
use crate::federation::outbound::statuses::{self as ap, Announce};
use crate::media::Drive;
use crate::queue::{
    JobContext, KindSpec, NewMessage, QueueName, Registry, RetryPolicy, TaskError, enqueue,
};

pub const KIND: &str = "hollo.approved-reply.v1";

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Payload {
    pub status_id: Uuid,
}

pub fn spec() -> KindSpec {
    KindSpec::new(KIND, QueueName::Task)
        .retry(RetryPolicy::exponential(Duration::from_secs(2), 8))
        .timeout(Duration::from_secs(60))
}

/// Queues the approved `status`'s `Create` (in the caller's transaction).
pub async fn enqueue_for(tx: &mut PgConnection, status: Uuid) -> Result<(), sqlx::Error> {
    let data = serde_json::to_value(Payload { status_id: status }).unwrap_or_default();
    enqueue(
        tx,
        QueueName::Task,
        &NewMessage::new(KIND, data).coalesce(format!("approved-reply:{status}")),
    )
    .await?;
    Ok(())
}

pub fn register(reg: &mut Registry, fed: Arc<Federation>, drive: Arc<Drive>) {
    reg.register(spec(), move |ctx: JobContext, p: Payload| {
        let (fed, drive) = (fed.clone(), drive.clone());
        async move { handle(ctx, &fed, &drive, p.status_id).await }
    });
}

async fn handle(
    ctx: JobContext,
    fed: &Federation,
    drive: &Drive,
    status: Uuid,
) -> Result<(), TaskError> {
    let mut tx = ctx.pool.begin().await?;
    // Still there and approved (a rejection or a deletion since sends nothing).
    let author: Option<Uuid> = sqlx::query_scalar(
        "SELECT account_id FROM statuses
          WHERE id = $1 AND NOT pending_approval AND approved_by IS NOT NULL",
    )
    .bind(status)
    .fetch_optional(&mut *tx)
    .await?;
    if !ctx.complete_in(&mut tx).await? {
        return Ok(());
    }
    if let Some(author) = author {
        ap::publish(
            &mut tx,
            fed,
            Some(drive),
            author,
            status,
            Announce::Approved,
        )
        .await?;
    }
    tx.commit().await?;
    Ok(())
}
