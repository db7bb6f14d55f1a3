//! `hollo.deliver.v1 {activityId, inbox}`: POSTs one stored activity to one inbox, signed with
//! its author's key (R-AP-2). The body is read from `outbox_activities`, so every retry and
//! every redelivery after a crash sends the same activity id.
//!
//! Outcomes: 2xx → delivered; 410 → the recipient is marked gone; 429 → put back after
//! `Retry-After` (a fresh delayed message with the same payload, completed-and-enqueued in one
//! transaction, since the engine's retry delay is its own); 408, 5xx and network errors →
//! transient (exponential 1 s ×2 with jitter, 10 attempts, 12 h cap); other 4xx and SSRF
//! refusals → permanent. A busy host (R-AP-3) puts the delivery back for a second or two
//! rather than holding one of the activity slots while waiting.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rand::Rng;
use uuid::Uuid;

use super::delivered::Delivered;
use crate::federation::Federation;
use crate::federation::outbound::delivery::{DELIVER_KIND, DeliverPayload};
use crate::federation::transport::fetch::FetchError;
use crate::queue::{
    JobContext, KindSpec, NewMessage, QueueName, Registry, RetryPolicy, TaskError, enqueue,
};

pub const MAX_ATTEMPTS: u32 = 10;
/// How often a delivery may be put back for 429 or a busy host before it counts as a failure.
const MAX_DEFERRALS: u32 = 50;
const HOST_WAIT: Duration = Duration::from_secs(2);
const DEFAULT_RATE_LIMIT_DELAY: Duration = Duration::from_secs(60);

pub fn spec() -> KindSpec {
    KindSpec::new(DELIVER_KIND, QueueName::Activity)
        .retry(RetryPolicy::exponential(
            Duration::from_secs(1),
            MAX_ATTEMPTS,
        ))
        .timeout(Duration::from_secs(90))
        .slot_pool(super::DELIVERY_POOL)
}

pub fn register(reg: &mut Registry, fed: Arc<Federation>) {
    // The success recorder starts with the first delivery, on the consumer's pool.
    let delivered: Arc<OnceLock<Delivered>> = Arc::default();
    reg.register(spec(), move |ctx: JobContext, p: DeliverPayload| {
        let (fed, delivered) = (fed.clone(), delivered.clone());
        async move {
            let recorder = delivered.get_or_init(|| Delivered::start(ctx.pool.clone()));
            handle(ctx, &fed, recorder, p).await
        }
    });
}

async fn handle(
    ctx: JobContext,
    fed: &Federation,
    delivered: &Delivered,
    p: DeliverPayload,
) -> Result<(), TaskError> {
    // The body as PostgreSQL's text: sent as is, never parsed and re-serialized per delivery
    // (a fan-out sends one stored activity to thousands of inboxes; R-AP-2).
    // (state, the sending account — none for the instance actor —, body, actor, attempts)
    type Row = (String, Option<Uuid>, String, Option<String>, i32);
    let row: Option<Row> = sqlx::query_as(
        "SELECT d.state, o.account_id, o.body::text, d.actor_iri, d.attempts
           FROM deliveries d JOIN outbox_activities o ON o.id = d.activity_id
          WHERE d.activity_id = $1 AND d.inbox = $2",
    )
    .bind(&p.activity_id)
    .bind(&p.inbox)
    .fetch_optional(&ctx.pool)
    .await?;
    let Some((state, account_id, body, actor_iri, failed_before)) = row else {
        return Err(TaskError::Permanent(format!(
            "no stored delivery of {} to {}",
            p.activity_id, p.inbox
        )));
    };
    if state != "pending" {
        return Ok(());
    }
    // The politeness key is the authority (host and non-default port): one remote service.
    let host = url::Url::parse(&p.inbox)
        .ok()
        .filter(|u| u.host_str().is_some())
        .map(|u| crate::federation::transport::signature::host_header(&u))
        .ok_or_else(|| TaskError::Permanent(format!("bad inbox URL {}", p.inbox)))?;
    let Some(_permit) = fed.hosts.acquire(&host, HOST_WAIT).await else {
        let delay = Duration::from_millis(rand::thread_rng().gen_range(1000..3000));
        return defer(&ctx, &p, delay, "host busy").await;
    };
    // No account: the instance actor's activity (a forwarded report's `Flag`).
    let key = match account_id {
        Some(account_id) => fed.signing_key_of(&ctx.pool, account_id).await,
        None => fed.instance_key(&ctx.pool).await.map(|k| k.signing.clone()),
    }
    .map_err(|e| TaskError::Permanent(format!("{e:#}")))?;
    let bytes = body.into_bytes();
    // The delivery's own count, not the queue message's: a 429 or busy-host put-back starts a
    // fresh message, and the retry budget must not start over with it.
    let attempt = (failed_before.max(0) as u32 + 1).max(ctx.msg.attempt() as u32);
    let (answer, _scheme) = crate::federation::transport::schemes::post_activity(
        &ctx.pool, fed, &p.inbox, &bytes, &key,
    )
    .await;
    match answer {
        Ok(out) if out.status.is_success() => {
            // Recorded (group-committed with other successes, see `delivered`) before the
            // handler returns; the message is then completed by the batcher with the next
            // claim. Should the process die in between, the message runs again, finds the
            // delivery no longer pending and sends nothing.
            delivered
                .record(&p.activity_id, &p.inbox, out.status.as_u16())
                .await
                .map_err(|e| TaskError::Transient(format!("recording the delivery: {e}")))?;
            Ok(())
        }
        Ok(out) if out.status.as_u16() == 410 => {
            let mut tx = ctx.pool.begin().await?;
            if !ctx.complete_in(&mut tx).await? {
                return Ok(());
            }
            record(&mut tx, &p, "gone", Some(410), "410 Gone").await?;
            sqlx::query(
                "UPDATE remote_actors SET gone_at = now()
                  WHERE gone_at IS NULL AND (iri = $1 OR inbox = $2 OR shared_inbox = $2)",
            )
            .bind(actor_iri)
            .bind(&p.inbox)
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
            tracing::info!(inbox = %p.inbox, "remote inbox answered 410 Gone; actor marked gone");
            Ok(())
        }
        Ok(out) if out.status.as_u16() == 429 && p.deferrals < MAX_DEFERRALS => {
            // `parse_retry_after` has clamped the remote's value already.
            let delay = out.retry_after.unwrap_or(DEFAULT_RATE_LIMIT_DELAY);
            defer(&ctx, &p, delay, "429 Too Many Requests").await
        }
        Ok(out) => {
            let code = out.status.as_u16();
            let error = format!("HTTP {code}");
            if code == 408 || code == 429 || out.status.is_server_error() {
                transient(&ctx, &p, attempt, Some(code), error).await
            } else {
                let mut conn = ctx.pool.acquire().await?;
                record(&mut conn, &p, "failed", Some(code), &error).await?;
                Err(TaskError::Permanent(error))
            }
        }
        Err(e @ FetchError::Refused(_)) => {
            let mut conn = ctx.pool.acquire().await?;
            record(&mut conn, &p, "failed", None, &e.to_string()).await?;
            Err(TaskError::Permanent(e.to_string()))
        }
        Err(e) => transient(&ctx, &p, attempt, None, e.to_string()).await,
    }
}

/// Records a failed attempt; on the last one (counted over the delivery's whole life, put-backs
/// included) the delivery is marked failed for good and the message gives up.
async fn transient(
    ctx: &JobContext,
    p: &DeliverPayload,
    attempt: u32,
    status: Option<u16>,
    error: String,
) -> Result<(), TaskError> {
    let state = if attempt >= MAX_ATTEMPTS {
        "failed"
    } else {
        "pending"
    };
    let mut conn = ctx.pool.acquire().await?;
    record(&mut conn, p, state, status, &error).await?;
    if attempt >= MAX_ATTEMPTS {
        return Err(TaskError::Permanent(format!(
            "{error} (attempt {attempt} of {MAX_ATTEMPTS})"
        )));
    }
    Err(TaskError::Transient(error))
}

async fn record(
    conn: &mut sqlx::PgConnection,
    p: &DeliverPayload,
    state: &str,
    status: Option<u16>,
    error: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE deliveries SET state = $3, attempts = attempts + 1, last_status = $4,
                last_error = $5, updated_at = now()
          WHERE activity_id = $1 AND inbox = $2",
    )
    .bind(&p.activity_id)
    .bind(&p.inbox)
    .bind(state)
    .bind(status.map(i32::from))
    .bind(error)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Puts the delivery back for `delay` without recording a failure: completes this message and
/// enqueues its successor in one transaction, so exactly one of them exists at any time.
async fn defer(
    ctx: &JobContext,
    p: &DeliverPayload,
    delay: Duration,
    why: &str,
) -> Result<(), TaskError> {
    let mut tx = ctx.pool.begin().await?;
    if !ctx.complete_in(&mut tx).await? {
        return Ok(());
    }
    let next = DeliverPayload {
        deferrals: p.deferrals + 1,
        ..p.clone()
    };
    enqueue(
        &mut *tx,
        QueueName::Activity,
        &NewMessage::new(
            DELIVER_KIND,
            serde_json::to_value(&next).map_err(|e| TaskError::Permanent(e.to_string()))?,
        )
        .delay(delay),
    )
    .await?;
    sqlx::query(
        "UPDATE deliveries SET last_error = $3, updated_at = now() WHERE activity_id = $1 AND inbox = $2",
    )
    .bind(&p.activity_id)
    .bind(&p.inbox)
    .bind(format!("{why}; again in {} s", delay.as_secs()))
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(())
}
