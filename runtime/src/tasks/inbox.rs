//! `hollo.inbox.v1 {activityId}`: applies a stored incoming activity (R-AP-1). Remote fetches
//! happen first, outside any transaction; then the effects, the `processed_at` mark and the
//! queue message's completion commit together, with the activity row locked, so a redelivered
//! or duplicated message never applies an activity twice.

use std::sync::Arc;
use std::time::Duration;

use crate::federation::Federation;
use crate::federation::inbound::Activity;
use crate::federation::inbound::incoming::{self, INBOX_KIND, InboxPayload};
use crate::federation::inbound::process::{self, ProcessError};
use crate::queue::{JobContext, KindSpec, QueueName, Registry, RetryPolicy, TaskError};

pub fn spec() -> KindSpec {
    KindSpec::new(INBOX_KIND, QueueName::Activity)
        .retry(RetryPolicy::exponential(Duration::from_secs(1), 10))
        .timeout(Duration::from_secs(120))
}

pub fn register(reg: &mut Registry, fed: Arc<Federation>) {
    reg.register(spec(), move |ctx: JobContext, p: InboxPayload| {
        let fed = fed.clone();
        async move { handle(ctx, &fed, p).await }
    });
}

async fn handle(ctx: JobContext, fed: &Federation, p: InboxPayload) -> Result<(), TaskError> {
    let Some((inc, actor_known)) = incoming::load_with_actor(&ctx.pool, &p.activity_id).await?
    else {
        return Err(TaskError::Permanent(format!(
            "no stored activity {}",
            p.activity_id
        )));
    };
    if inc.processed_at.is_some() {
        return Ok(());
    }
    let activity = Activity::of(&inc);
    let prepared = process::prepare(&ctx.pool, fed, &inc, &activity, actor_known)
        .await
        .map_err(|ProcessError::Transient(e)| TaskError::Transient(e))?;
    let mut tx = ctx.pool.begin().await?;
    // The activity row locked and the message completed in one statement (one round trip per
    // activity, R-AP-1). The completion's condition reads `act`, so the activity is locked
    // before the message row is touched: two workers holding the same activity through two
    // messages always take the locks in the same order.
    //
    // The same statement makes this transaction commit without waiting for its WAL flush
    // (`synchronous_commit = off`, this transaction only). Everything it writes is derived
    // from rows that are already durable: the stored activity (committed synchronously before
    // the sender got its 202) and its queue message. A PostgreSQL crash can lose only the
    // last such commits, each whole, and then the message row (undeleted) is claimed again and
    // the activity (not marked processed) is applied again. The sender loses nothing; the
    // worker no longer waits on a disk flush per activity.
    let sql = format!(
        "WITH act AS (SELECT processed_at FROM inbox_activities WHERE id = $1 FOR UPDATE), {}
         SELECT EXISTS (SELECT 1 FROM done), EXISTS (SELECT 1 FROM act),
                (SELECT processed_at FROM act),
                set_config('synchronous_commit', 'off', true)",
        ctx.completion_cte(2, "(SELECT count(*) FROM act) >= 0")
    );
    let (msg, claims, node) = ctx.completion_args();
    let (done, stored, processed_at, _): (
        bool,
        bool,
        Option<chrono::DateTime<chrono::Utc>>,
        String,
    ) = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(&inc.id)
        .bind(msg)
        .bind(claims)
        .bind(node)
        .fetch_one(&mut *tx)
        .await?;
    if !ctx.completed(done) {
        // Our lease was lost: another worker runs this message now.
        return Ok(());
    }
    if stored && processed_at.is_none() {
        let outcome = process::apply(&mut tx, fed, &inc, &activity, prepared)
            .await?
            .to_string();
        incoming::mark_processed(&mut tx, &inc.id, &outcome).await?;
        tracing::debug!(activity = %inc.id, kind = %inc.ty, %outcome, "inbox activity processed");
    }
    tx.commit().await?;
    Ok(())
}
