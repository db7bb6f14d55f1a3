//! Processing of an upload stored raw (a v2 upload over `MEDIA_SYNC_MAX_BYTES`), run by the
//! `hollo.media.process.v1` task on a worker: read the file back from the drive, make the
//! thumbnail and BlurHash, store the thumbnail, and mark the row ready in the transaction that
//! completes the message. A file that cannot be processed marks the row failed with the reason.

use sqlx::PgPool;
use uuid::Uuid;

use super::entity::MediaRow;
use super::processing;
use super::storage::{Drive, DriveError};
use super::upload;
use crate::config::MediaConfig;

/// What one run did.
#[derive(Debug)]
pub enum Outcome {
    /// The file cannot be processed; the caller marks the row failed with this reason.
    Failed(String),
    /// Nothing to do (the row is gone or no longer processing).
    Gone,
}

/// Why a run should be tried again (storage or database trouble).
#[derive(Debug, thiserror::Error)]
pub enum RetryableError {
    #[error(transparent)]
    Drive(#[from] DriveError),
    #[error("database: {0}")]
    Db(#[from] sqlx::Error),
}

/// The work of one run up to, not including, the row update: returns the thumbnail key and
/// the processing result to record, or the outcome when there is nothing to record.
pub async fn prepare(
    pool: &PgPool,
    drive: &Drive,
    cfg: &MediaConfig,
    id: Uuid,
) -> Result<Result<(MediaRow, String, processing::Processed), Outcome>, RetryableError> {
    let Some(row) = upload::find(pool, id).await? else {
        return Ok(Err(Outcome::Gone));
    };
    if row.state != "processing" {
        return Ok(Err(Outcome::Gone));
    }
    let file = match drive.get(&row.file_key).await {
        Ok(f) => f,
        Err(DriveError::NotFound) => {
            return Ok(Err(Outcome::Failed(
                "the uploaded file is missing from storage".into(),
            )));
        }
        Err(e) => return Err(e.into()),
    };
    let preview = match &row.thumbnail_key {
        Some(k) => match drive.get(k).await {
            Ok(b) => Some(b),
            Err(DriveError::NotFound) => None,
            Err(e) => return Err(e.into()),
        },
        None => None,
    };
    // The size was checked at upload; a limit lowered since must not fail a stored file.
    let (max_bytes, max_pixels) = (cfg.max_bytes.max(file.len()), cfg.max_pixels);
    let result = drive
        .decode_slots()
        .run(move || {
            let probe = processing::probe(&file, max_bytes, max_pixels)?;
            let preview = match &preview {
                Some(b) => Some((b.as_slice(), processing::probe(b, max_bytes, max_pixels)?)),
                None => None,
            };
            processing::process(&file, probe, max_pixels, preview)
        })
        .await;
    let done = match result {
        Ok(done) => done,
        Err(e) => return Ok(Err(Outcome::Failed(e.to_string()))),
    };
    let small_key = format!("media/{}/small.{}", row.id, done.thumbnail_format.ext());
    drive
        .put(
            &small_key,
            done.thumbnail.clone(),
            done.thumbnail_format.mime(),
        )
        .await?;
    Ok(Ok((row, small_key, done)))
}

/// The custom preview a deferred upload held in `thumbnail_key`, to drop once the small
/// version replaced it (its key is `preview.<ext>`, never `small.<ext>`).
pub fn preview_key(row: &MediaRow) -> Option<&str> {
    row.thumbnail_key.as_deref().filter(|k| {
        k.rsplit('/')
            .next()
            .is_some_and(|f| f.starts_with("preview."))
    })
}
