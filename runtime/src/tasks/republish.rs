//! Sends one of our statuses again once a remote author approved it — a task rather than the
//! inbox's own transaction because the note carries its media, whose URLs only a node with the
//! drive makes. The activity is queued in the transaction that completes the message, so each
//! inbox gets it once however often the message runs. Two kinds, one per approval:
//!
//! - `hollo.approved-reply.v1 {statusId}`: our reply, once the remote parent's author approved it
//!   (`approvals::answers`) — its `Create` again, now carrying `approvedBy`, to everyone it had
//!   not gone to (until then only that author had it);
//! - `hollo.quote-update.v1 {statusId}`: our quote, once the quoted author's
//!   `QuoteAuthorization` arrived (`quotes::inbound::answered`) — an `Update`, so every server
//!   that has the note learns the quote is approved (FEP-044f); its id is the authorization's,
//!   so the same approval is announced once.

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

/// What was approved, and so which activity goes out again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Approved {
    /// A reply its remote parent's author approved: the `Create` to its whole audience.
    Reply,
    /// A quote the quoted author authorized: an `Update` carrying the authorization.
    Quote,
}

impl Approved {
    const ALL: [Approved; 2] = [Approved::Reply, Approved::Quote];

    pub fn kind(self) -> &'static str {
        match self {
            Approved::Reply => "hollo.approved-reply.v1",
            Approved::Quote => "hollo.quote-update.v1",
        }
    }

    fn coalesce_key(self, status: Uuid) -> String {
        match self {
            Approved::Reply => format!("approved-reply:{status}"),
            Approved::Quote => format!("quote-update:{status}"),
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Payload {
    pub status_id: Uuid,
}

pub fn spec(what: Approved) -> KindSpec {
    KindSpec::new(what.kind(), QueueName::Task)
        .retry(RetryPolicy::exponential(Duration::from_secs(2), 8))
        .timeout(Duration::from_secs(60))
}

/// Queues sending `status` again for `what` (in the caller's transaction).
pub async fn enqueue_for(
    tx: &mut PgConnection,
    what: Approved,
    status: Uuid,
) -> Result<(), sqlx::Error> {
    let data = serde_json::to_value(Payload { status_id: status }).unwrap_or_default();
    let message = NewMessage::new(what.kind(), data).coalesce(what.coalesce_key(status));
    enqueue(tx, QueueName::Task, &message).await?;
    Ok(())
}

pub fn register(reg: &mut Registry, fed: Arc<Federation>, drive: Arc<Drive>) {
    for what in Approved::ALL {
        let (fed, drive) = (fed.clone(), drive.clone());
        reg.register(spec(what), move |ctx: JobContext, p: Payload| {
            let (fed, drive) = (fed.clone(), drive.clone());
            async move { handle(ctx, &fed, &drive, what, p.status_id).await }
        });
    }
}

async fn handle(
    ctx: JobContext,
    fed: &Federation,
    drive: &Drive,
    what: Approved,
    status: Uuid,
) -> Result<(), TaskError> {
    let mut tx = ctx.pool.begin().await?;
    let still = still_approved(&mut tx, what, status).await?;
    if !ctx.complete_in(&mut tx).await? {
        return Ok(());
    }
    if let Some((author, quote_tag)) = still {
        let announce = match &quote_tag {
            Some(tag) => Announce::Update { tag },
            None => Announce::Approved,
        };
        ap::publish(&mut tx, fed, Some(drive), author, status, announce).await?;
    }
    tx.commit().await?;
    Ok(())
}

/// The status's author when it is still there and still approved (a rejection, revocation or
/// deletion since sends nothing); for a quote, also the `Update`'s id tag, one per authorization.
async fn still_approved(
    tx: &mut PgConnection,
    what: Approved,
    status: Uuid,
) -> Result<Option<(Uuid, Option<String>)>, sqlx::Error> {
    match what {
        Approved::Reply => {
            let author: Option<Uuid> = sqlx::query_scalar(
                "SELECT account_id FROM statuses
                  WHERE id = $1 AND NOT pending_approval AND approved_by IS NOT NULL",
            )
            .bind(status)
            .fetch_optional(&mut *tx)
            .await?;
            Ok(author.map(|a| (a, None)))
        }
        Approved::Quote => {
            let row: Option<(Uuid, Option<String>)> = sqlx::query_as(
                "SELECT s.account_id, q.authorization_iri FROM statuses s
                   JOIN quotes q ON q.post_id = s.id AND q.state = 'accepted'
                  WHERE s.id = $1",
            )
            .bind(status)
            .fetch_optional(&mut *tx)
            .await?;
            Ok(row.and_then(|(account, authorization)| {
                let authorization = authorization?;
                let digest = sha2::Sha256::digest(authorization.as_bytes());
                let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
                Some((account, Some(format!("quote-{hex}"))))
            }))
        }
    }
}
