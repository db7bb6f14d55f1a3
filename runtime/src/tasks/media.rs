//! `hollo.media.process.v1 {mediaId}`: processes an upload that `POST /api/v2/media` stored
//! raw (R-MAPI-3). The row becomes `ready` in the transaction that completes the message, so a
//! redelivered message finds it ready and does nothing. A file that cannot be processed, or a
//! run that keeps failing on storage until its last attempt, marks the row `failed` with the
//! reason, which `GET /api/v1/media/:id` reports.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::config::MediaConfig;
use crate::media::deferred::{self, Outcome};
use crate::media::{Drive, upload};
use crate::queue::{JobContext, KindSpec, QueueName, Registry, RetryPolicy, TaskError};

pub use crate::media::upload::PROCESS_KIND as KIND;

/// Attempts before a storage failure becomes the row's failure.
pub const MAX_ATTEMPTS: u32 = 5;

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Payload {
    pub media_id: Uuid,
}

pub fn register(reg: &mut Registry, drive: Arc<Drive>, cfg: Arc<MediaConfig>) {
    reg.register(
        KindSpec::new(KIND, QueueName::Task)
            .retry(RetryPolicy::exponential(
                Duration::from_secs(2),
                MAX_ATTEMPTS,
            ))
            .timeout(Duration::from_secs(300)),
        move |ctx: JobContext, p: Payload| {
            let (drive, cfg) = (drive.clone(), cfg.clone());
            async move { handle(ctx, &drive, &cfg, p.media_id).await }
        },
    );
}

async fn handle(
    ctx: JobContext,
    drive: &Drive,
    cfg: &MediaConfig,
    id: Uuid,
) -> Result<(), TaskError> {
    let prepared = match deferred::prepare(&ctx.pool, drive, cfg, id).await {
        Ok(p) => p,
        Err(e) if ctx.msg.attempt() as u32 >= MAX_ATTEMPTS => {
            return finish_failed(&ctx, id, &format!("storage kept failing: {e}")).await;
        }
        Err(e) => return Err(TaskError::transient(e)),
    };
    match prepared {
        Err(Outcome::Gone) => {
            let mut tx = ctx.pool.begin().await?;
            if ctx.complete_in(&mut tx).await? {
                tx.commit().await?;
            }
            Ok(())
        }
        Err(Outcome::Failed(reason)) => finish_failed(&ctx, id, &reason).await,
        Ok((row, small_key, done)) => {
            let mut tx = ctx.pool.begin().await?;
            if !ctx.complete_in(&mut tx).await? {
                return Ok(()); // another worker owns the message now
            }
            upload::mark_ready(&mut tx, id, &small_key, &done, row.account_id).await?;
            let preview = deferred::preview_key(&row).map(str::to_string);
            if let Some(k) = &preview {
                sqlx::query("DELETE FROM media_files WHERE key = $1")
                    .bind(k)
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await?;
            if let Some(k) = preview
                && let Err(e) = drive.delete(&k).await
            {
                // Unregistered now: the media cleanup removes it later.
                tracing::warn!(key = %k, error = %e, "could not remove a used preview");
            }
            Ok(())
        }
    }
}

async fn finish_failed(ctx: &JobContext, id: Uuid, reason: &str) -> Result<(), TaskError> {
    tracing::info!(media = %id, reason, "media processing failed");
    let mut tx = ctx.pool.begin().await?;
    if ctx.complete_in(&mut tx).await? {
        upload::mark_failed(&mut tx, id, reason).await?;
        tx.commit().await?;
    }
    Ok(())
}
