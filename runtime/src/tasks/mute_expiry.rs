//! `hollo.mute-expiry.v1 {accountId, targetIri}` (R-MAPI-6): removes a mute once its
//! `expires_at` has passed.
//!
//! The same standard as poll expiry (R-POLL-2): one transaction with the mute row locked (a
//! new mute of the same account takes the same lock), the message's completion, then either
//! the next wakeup (not expired yet: the mute was renewed for longer, or this is a ≤ 7-day
//! chunk of a far end) or the removal. So a mute is never removed before its end read under
//! the lock, a redelivered or duplicate message finds nothing left to remove, and a worker
//! killed mid-way leaves the message to be leased again. Readers stop honouring a mute at its
//! end whether or not this has run (`statuses::hidden`); this makes it gone for good.

use crate::mutes::{EXPIRY_KIND, ExpiryPayload, expiry_key};
use crate::queue::{JobContext, KindSpec, Registry, TaskError};

pub fn spec() -> KindSpec {
    super::expiry_spec(EXPIRY_KIND)
}

pub fn register(reg: &mut Registry) {
    reg.register(spec(), |ctx: JobContext, p: ExpiryPayload| async move {
        handle(ctx, p).await
    });
}

async fn handle(ctx: JobContext, p: ExpiryPayload) -> Result<(), TaskError> {
    let mut tx = ctx.pool.begin().await?;
    // (seconds left, expired); no row: unmuted meanwhile; NULL end: made permanent.
    let current: Option<(Option<f64>, Option<bool>)> = sqlx::query_as(
        "SELECT GREATEST(EXTRACT(EPOCH FROM expires_at - now()), 0)::float8,
                expires_at <= now()
           FROM account_mutes WHERE account_id = $1 AND target_iri = $2 FOR UPDATE",
    )
    .bind(p.account_id)
    .bind(&p.target_iri)
    .fetch_optional(&mut *tx)
    .await?;
    if !ctx.complete_in(&mut tx).await? {
        // Our lease was lost: another worker runs this message now; write nothing.
        return Ok(());
    }
    match current {
        None | Some((None, _)) => {}
        Some((Some(_), Some(true))) => {
            sqlx::query("DELETE FROM account_mutes WHERE account_id = $1 AND target_iri = $2")
                .bind(p.account_id)
                .bind(&p.target_iri)
                .execute(&mut *tx)
                .await?;
            crate::streaming::emit::relationship(&mut tx, p.account_id).await?;
            tracing::debug!(account = %p.account_id, target = %p.target_iri, "mute expired");
        }
        Some((Some(left), _)) => {
            let key = expiry_key(p.account_id, &p.target_iri);
            super::expiry_wake_again(&mut tx, EXPIRY_KIND, &p, left, key).await?;
        }
    }
    tx.commit().await?;
    Ok(())
}
