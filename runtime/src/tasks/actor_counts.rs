//! `hollo.actor-counts.v1 {iri}` (R-MAPI-6): a remote account's follower, following
//! and post counts, as its server publishes them — the `totalItems` of the `followers`,
//! `following` and `outbox` collections its actor document names — so profiles show real
//! numbers, not 0.
//!
//! Queued when someone looks at the account ([`request`]) and what we have is older than
//! [`FRESH_FOR`] or missing, one message per actor (coalesced); fetched signed by the
//! instance actor through the guarded fetcher (SSRF rules, same-origin answers). A collection
//! that cannot be read (hidden, gone, not a collection) leaves that count unknown, shown as 0,
//! and is not retried before the next day: the counts are a courtesy, never worth a retry
//! storm against a server that hides them.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use sqlx::PgConnection;

use crate::federation::Federation;
use crate::federation::actors::actor::id_of;
use crate::queue::{
    JobContext, KindSpec, NewMessage, QueueName, Registry, RetryPolicy, TaskError, enqueue,
};

pub const KIND: &str = "hollo.actor-counts.v1";

/// How long fetched counts are shown before a view asks for new ones.
pub const FRESH_FOR: Duration = Duration::from_secs(24 * 3600);

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Payload {
    pub iri: String,
}

pub fn spec() -> KindSpec {
    KindSpec::new(KIND, QueueName::Task)
        .retry(RetryPolicy::exponential(Duration::from_secs(5), 3))
        .timeout(Duration::from_secs(60))
}

pub fn register(reg: &mut Registry, fed: Arc<Federation>) {
    reg.register(spec(), move |ctx: JobContext, p: Payload| {
        let fed = fed.clone();
        async move { handle(ctx, &fed, p).await }
    });
}

/// Queues a count fetch for the remote actor `iri` if its counts are missing or stale (a
/// view of its profile). One message per actor at a time.
pub async fn request(conn: &mut PgConnection, iri: &str) -> Result<(), sqlx::Error> {
    let stale: bool = sqlx::query_scalar(
        "SELECT coalesce(counts_fetched_at < now() - make_interval(secs => $2), true)
           FROM remote_actors WHERE iri = $1 AND gone_at IS NULL",
    )
    .bind(iri)
    .bind(FRESH_FOR.as_secs_f64())
    .fetch_optional(&mut *conn)
    .await?
    .unwrap_or(false);
    if stale {
        let data = serde_json::to_value(Payload {
            iri: iri.to_string(),
        })
        .unwrap_or_default();
        enqueue(
            &mut *conn,
            QueueName::Task,
            &NewMessage::new(KIND, data).coalesce(format!("{KIND}:{iri}")),
        )
        .await?;
    }
    Ok(())
}

/// A collection's `totalItems`, if it is one we can read.
fn total(doc: &Value) -> Option<i64> {
    doc.get("totalItems")
        .and_then(Value::as_i64)
        .filter(|n| *n >= 0)
}

async fn handle(ctx: JobContext, fed: &Federation, p: Payload) -> Result<(), TaskError> {
    let doc: Option<Value> =
        sqlx::query_scalar("SELECT document FROM remote_actors WHERE iri = $1 AND gone_at IS NULL")
            .bind(&p.iri)
            .fetch_optional(&ctx.pool)
            .await?;
    let Some(doc) = doc else {
        let mut tx = ctx.pool.begin().await?;
        ctx.complete_in(&mut tx).await?;
        tx.commit().await?;
        return Ok(());
    };
    let signer = fed
        .instance_key(&ctx.pool)
        .await
        .map_err(|e| TaskError::transient(format!("the instance key: {e:#}")))?
        .signing
        .clone();
    let mut counts = [None, None, None];
    for (slot, field) in counts.iter_mut().zip(["followers", "following", "outbox"]) {
        let Some(url) = doc.get(field).and_then(id_of) else {
            continue;
        };
        match fed.fetch.get_object(url, Some(&signer)).await {
            Ok(fetched) => *slot = total(&fetched.doc),
            Err(e) => tracing::debug!(actor = %p.iri, collection = %url, error = %e,
                "a collection's count could not be read"),
        }
    }
    let mut tx = ctx.pool.begin().await?;
    if !ctx.complete_in(&mut tx).await? {
        return Ok(());
    }
    sqlx::query(
        "UPDATE remote_actors SET followers_count = $2, following_count = $3,
                statuses_count = $4, counts_fetched_at = now()
          WHERE iri = $1",
    )
    .bind(&p.iri)
    .bind(counts[0])
    .bind(counts[1])
    .bind(counts[2])
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_a_count_is_a_count() {
        assert_eq!(total(&json!({"totalItems": 12})), Some(12));
        assert_eq!(total(&json!({"totalItems": -1})), None);
        assert_eq!(total(&json!({"totalItems": "12"})), None);
        assert_eq!(total(&json!({})), None);
    }
}
