//! `hollo.quote-update.v1 {statusId}`: sends our status again as an `Update` once the quoted
//! author's `QuoteAuthorization` arrived (`quotes::inbound::answered`), so every server that
//! has the note learns the quote is approved (FEP-044f). A task rather than the inbox's own
//! transaction because the note carries its media, whose URLs only a node with the drive
//! makes. The activity is queued in the transaction that completes the message; its id is
//! the authorization's, so a redelivered message queues nothing twice.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sha2::Digest;
use sqlx::PgConnection;
use uuid::Uuid;

use crate::federation::Federation;
use crate::federation::outbound::statuses::{self as ap, Announce};
use crate::media::Drive;
use crate::queue::{
    JobContext, KindSpec, NewMessage, QueueName, Registry, RetryPolicy, TaskError, enqueue,
};

pub const KIND: &str = "hollo.quote-update.v1";

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

/// Queues the `Update` of our status `status` (in the caller's transaction).
pub async fn enqueue_for(tx: &mut PgConnection, status: Uuid) -> Result<(), sqlx::Error> {
    let data = serde_json::to_value(Payload { status_id: status }).unwrap_or_default();
    enqueue(
        tx,
        QueueName::Task,
        &NewMessage::new(KIND, data).coalesce(format!("quote-update:{status}")),
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
    let row: Option<(Uuid, Option<String>)> = sqlx::query_as(
        "SELECT s.account_id, q.authorization_iri FROM statuses s
           JOIN quotes q ON q.post_id = s.id AND q.state = 'accepted'
          WHERE s.id = $1",
    )
    .bind(status)
    .fetch_optional(&mut *tx)
    .await?;
    if !ctx.complete_in(&mut tx).await? {
        return Ok(());
    }
    if let Some((account, Some(authorization))) = row {
        // One id per authorization: the same approval is announced once.
        let digest = sha2::Sha256::digest(authorization.as_bytes());
        let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
        let tag = format!("quote-{hex}");
        ap::publish(
            &mut tx,
            fed,
            Some(drive),
            account,
            status,
            Announce::Update { tag: &tag },
        )
        .await?;
    }
    tx.commit().await?;
    Ok(())
}
