//! Uploads: checking, storing and processing a file, and the owner's reads and edits of an
//! unattached upload. Order of effects: nothing is written before the file passed every check
//! (type, size, pixels — and, when processed at once, decoding); files are written before their
//! rows commit, so a crash in between leaves only unregistered files, which the media cleanup
//! removes (its grace period covers the window).

use sqlx::{AssertSqlSafe, PgConnection, PgPool};
use uuid::Uuid;

use super::entity::{COLUMNS, MediaRow};
use super::processing::{self, Format, Probe, ProcessError, Processed};
use super::storage::{Drive, DriveError};
use crate::config::MediaConfig;
use crate::queue::{NewMessage, QueueName, enqueue};

/// Mastodon's limit on a description (alt text), in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 1500;

/// The task kind that processes uploads stored raw (`tasks::media`).
pub const PROCESS_KIND: &str = "hollo.media.process.v1";

/// What a client sent.
#[derive(Clone, Debug, Default)]
pub struct Upload {
    pub file: Vec<u8>,
    /// A custom preview (`thumbnail`); used for the small version instead of the file.
    pub thumbnail: Option<Vec<u8>>,
    pub description: Option<String>,
    pub focus: (f32, f32),
}

/// `/api/v1/media` always processes at once; `/api/v2/media` defers big files to a worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Sync,
    Auto,
}

#[derive(Debug, thiserror::Error)]
pub enum UploadError {
    /// The client's mistake (422), nothing stored.
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Drive(#[from] DriveError),
    #[error("database: {0}")]
    Db(#[from] sqlx::Error),
}

impl From<ProcessError> for UploadError {
    fn from(e: ProcessError) -> Self {
        UploadError::Invalid(e.to_string())
    }
}

/// `"x,y"` with both in -1..1 (Mastodon's focal point).
pub fn parse_focus(raw: &str) -> Result<(f32, f32), UploadError> {
    let bad = || {
        UploadError::Invalid(format!(
            "Validation failed: focus {raw:?} must be \"x,y\" with both from -1.0 to 1.0"
        ))
    };
    let (x, y) = raw.split_once(',').ok_or_else(bad)?;
    let x: f32 = x.trim().parse().map_err(|_| bad())?;
    let y: f32 = y.trim().parse().map_err(|_| bad())?;
    if !(-1.0..=1.0).contains(&x) || !(-1.0..=1.0).contains(&y) {
        return Err(bad());
    }
    Ok((x, y))
}

/// A description as stored: at most 1,500 characters, no NUL; blank is none.
pub fn check_description(raw: Option<String>) -> Result<Option<String>, UploadError> {
    match raw {
        None => Ok(None),
        Some(d) if d.contains('\0') => Err(UploadError::Invalid(
            "Validation failed: description contains a NUL character".into(),
        )),
        Some(d) if d.chars().count() > MAX_DESCRIPTION_CHARS => Err(UploadError::Invalid(format!(
            "Validation failed: Description is too long (maximum is {MAX_DESCRIPTION_CHARS} characters)"
        ))),
        Some(d) if d.trim().is_empty() => Ok(None),
        Some(d) => Ok(Some(d)),
    }
}

fn key(id: Uuid, name: &str, format: Format) -> String {
    format!("media/{id}/{name}.{}", format.ext())
}

async fn run_processing(
    drive: &Drive,
    file: Vec<u8>,
    probe: Probe,
    max_pixels: u64,
    preview: Option<(Vec<u8>, Probe)>,
) -> Result<(Vec<u8>, Processed), UploadError> {
    drive
        .decode_slots()
        .run(move || {
            let out = processing::process(
                &file,
                probe,
                max_pixels,
                preview.as_ref().map(|(b, p)| (b.as_slice(), *p)),
            );
            out.map(|p| (file, p))
        })
        .await
        .map_err(UploadError::from)
}

/// Checks, stores and (now or later) processes an upload of `account`. `Ok` is the new row:
/// `ready`, or `processing` with a `hollo.media.process.v1` task enqueued in the same
/// transaction.
pub async fn create(
    pool: &PgPool,
    drive: &Drive,
    cfg: &MediaConfig,
    account: Uuid,
    upload: Upload,
    mode: Mode,
) -> Result<MediaRow, UploadError> {
    if !drive.is_enabled() {
        return Err(DriveError::Disabled.into());
    }
    let description = check_description(upload.description)?;
    let probe = processing::probe(&upload.file, cfg.max_bytes, cfg.max_pixels)?;
    let preview = match upload.thumbnail {
        Some(t) => {
            let p = processing::probe(&t, cfg.max_bytes, cfg.max_pixels)?;
            Some((t, p))
        }
        None => None,
    };
    let id = Uuid::now_v7();
    let file_key = key(id, "original", probe.format);
    let size = upload.file.len() as i64;
    let now = mode == Mode::Sync || upload.file.len() <= cfg.sync_max_bytes;
    let new_row = NewRow {
        id,
        account,
        probe,
        file_key: &file_key,
        size,
        description: &description,
        focus: upload.focus,
    };
    if now {
        let (file, mut done) =
            run_processing(drive, upload.file, probe, cfg.max_pixels, preview).await?;
        let thumbnail = std::mem::take(&mut done.thumbnail);
        let small_key = key(id, "small", done.thumbnail_format);
        let written = [file_key.clone(), small_key.clone()];
        let stored = async {
            drive.put(&file_key, file, probe.format.mime()).await?;
            drive
                .put(&small_key, thumbnail, done.thumbnail_format.mime())
                .await?;
            let mut tx = pool.begin().await?;
            let row = insert(&mut tx, new_row).await?;
            mark_ready(&mut tx, id, &small_key, &done, account).await?;
            tx.commit().await?;
            Ok::<MediaRow, UploadError>(row)
        }
        .await;
        forget_unless_stored(drive, &written, stored).await?;
        return find(pool, id)
            .await?
            .ok_or(UploadError::Db(sqlx::Error::RowNotFound));
    }
    // Deferred: the raw file (and a custom preview) now, the rest on a worker.
    let preview_key = preview.as_ref().map(|(_, p)| key(id, "preview", p.format));
    let written: Vec<String> = std::iter::once(file_key.clone())
        .chain(preview_key.clone())
        .collect();
    let stored = async {
        drive
            .put(&file_key, upload.file, probe.format.mime())
            .await?;
        if let (Some((bytes, p)), Some(k)) = (preview, &preview_key) {
            drive.put(k, bytes, p.format.mime()).await?;
        }
        let mut tx = pool.begin().await?;
        let row = insert(&mut tx, new_row).await?;
        if let Some(k) = &preview_key {
            // Held in `thumbnail_key` until processing replaces it with the small version.
            sqlx::query("UPDATE media_attachments SET thumbnail_key = $2 WHERE id = $1")
                .bind(id)
                .bind(k)
                .execute(&mut *tx)
                .await?;
            register_file(&mut tx, k, account).await?;
        }
        enqueue(
            &mut *tx,
            QueueName::Task,
            &NewMessage::new(PROCESS_KIND, serde_json::json!({ "mediaId": id })),
        )
        .await?;
        tx.commit().await?;
        Ok::<MediaRow, UploadError>(row)
    }
    .await;
    forget_unless_stored(drive, &written, stored).await
}

/// `stored` as it is; when it failed, the files `written` for it are removed first (their
/// rows did not commit).
async fn forget_unless_stored<T>(
    drive: &Drive,
    written: &[String],
    stored: Result<T, UploadError>,
) -> Result<T, UploadError> {
    if stored.is_err() {
        forget(drive, written).await;
    }
    stored
}

/// Best-effort removal of files whose rows did not commit (the cleanup catches the rest).
pub(crate) async fn forget(drive: &Drive, keys: &[String]) {
    for k in keys {
        if let Err(e) = drive.delete(k).await {
            tracing::warn!(key = %k, error = %e, "could not remove an unregistered media file");
        }
    }
}

struct NewRow<'a> {
    id: Uuid,
    account: Uuid,
    probe: Probe,
    file_key: &'a str,
    size: i64,
    description: &'a Option<String>,
    focus: (f32, f32),
}

async fn register_file(tx: &mut PgConnection, key: &str, account: Uuid) -> Result<(), sqlx::Error> {
    sqlx::query("INSERT INTO media_files (key, account_id) VALUES ($1, $2) ON CONFLICT DO NOTHING")
        .bind(key)
        .bind(account)
        .execute(&mut *tx)
        .await?;
    Ok(())
}

async fn insert(tx: &mut PgConnection, r: NewRow<'_>) -> Result<MediaRow, sqlx::Error> {
    register_file(tx, r.file_key, r.account).await?;
    sqlx::query_as(AssertSqlSafe(format!(
        "INSERT INTO media_attachments
            (id, account_id, content_type, file_key, size, width, height, description,
             focus_x, focus_y, state)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 'processing')
         RETURNING {COLUMNS}"
    )))
    .bind(r.id)
    .bind(r.account)
    .bind(r.probe.format.mime())
    .bind(r.file_key)
    .bind(r.size)
    .bind(r.probe.width as i32)
    .bind(r.probe.height as i32)
    .bind(r.description)
    .bind(r.focus.0)
    .bind(r.focus.1)
    .fetch_one(&mut *tx)
    .await
}

/// Records a finished processing (only of a row still `processing`); `false` when the row is
/// gone or no longer processing.
pub async fn mark_ready(
    tx: &mut PgConnection,
    id: Uuid,
    small_key: &str,
    done: &Processed,
    account: Uuid,
) -> Result<bool, sqlx::Error> {
    register_file(tx, small_key, account).await?;
    let updated = sqlx::query(
        "UPDATE media_attachments
            SET state = 'ready', thumbnail_key = $2, thumbnail_width = $3, thumbnail_height = $4,
                blurhash = $5, processed_at = now(), error = NULL
          WHERE id = $1 AND state = 'processing'",
    )
    .bind(id)
    .bind(small_key)
    .bind(done.thumbnail_width as i32)
    .bind(done.thumbnail_height as i32)
    .bind(&done.blurhash)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    Ok(updated == 1)
}

/// Marks a processing row failed with the reason (shown to its owner).
pub async fn mark_failed(
    conn: &mut PgConnection,
    id: Uuid,
    reason: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE media_attachments SET state = 'failed', error = $2, processed_at = now()
          WHERE id = $1 AND state = 'processing'",
    )
    .bind(id)
    .bind(reason)
    .execute(conn)
    .await?;
    Ok(())
}

pub async fn find(pool: &PgPool, id: Uuid) -> Result<Option<MediaRow>, sqlx::Error> {
    sqlx::query_as(AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM media_attachments WHERE id = $1"
    )))
    .bind(id)
    .fetch_optional(pool)
    .await
}

/// An upload of `account` not attached to a status: what `GET`/`PUT`/`DELETE
/// /api/v1/media/:id` may see (Mastodon's scope: an attached one is the status's now).
pub async fn find_own(
    pool: &PgPool,
    account: Uuid,
    id: Uuid,
) -> Result<Option<MediaRow>, sqlx::Error> {
    sqlx::query_as(AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM media_attachments
          WHERE id = $1 AND account_id = $2 AND status_id IS NULL"
    )))
    .bind(id)
    .bind(account)
    .fetch_optional(pool)
    .await
}

/// Changes the description (`Some(None)` clears it) and/or the focus of an own, unattached
/// upload; `None` when there is no such upload.
pub async fn update(
    pool: &PgPool,
    account: Uuid,
    id: Uuid,
    description: Option<Option<String>>,
    focus: Option<(f32, f32)>,
) -> Result<Option<MediaRow>, sqlx::Error> {
    let set_description = description.is_some();
    sqlx::query_as(AssertSqlSafe(format!(
        "UPDATE media_attachments
            SET description = CASE WHEN $3 THEN $4 ELSE description END,
                focus_x = COALESCE($5, focus_x), focus_y = COALESCE($6, focus_y)
          WHERE id = $1 AND account_id = $2 AND status_id IS NULL
          RETURNING {COLUMNS}"
    )))
    .bind(id)
    .bind(account)
    .bind(set_description)
    .bind(description.flatten())
    .bind(focus.map(|f| f.0))
    .bind(focus.map(|f| f.1))
    .fetch_optional(pool)
    .await
}

/// Deletes an own, unattached upload and its files; `None` when there is no such upload.
pub async fn delete(
    pool: &PgPool,
    drive: &Drive,
    account: Uuid,
    id: Uuid,
) -> Result<Option<MediaRow>, UploadError> {
    let mut tx = pool.begin().await?;
    let row: Option<MediaRow> = sqlx::query_as(AssertSqlSafe(format!(
        "DELETE FROM media_attachments WHERE id = $1 AND account_id = $2 AND status_id IS NULL
            AND scheduled_status_id IS NULL
         RETURNING {COLUMNS}"
    )))
    .bind(id)
    .bind(account)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let keys: Vec<String> = std::iter::once(row.file_key.clone())
        .chain(row.thumbnail_key.clone())
        .collect();
    sqlx::query("DELETE FROM media_files WHERE key = ANY($1)")
        .bind(&keys)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    forget(drive, &keys).await;
    Ok(Some(row))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn focus_is_two_numbers_within_one() {
        assert_eq!(parse_focus("0.5,-1").ok(), Some((0.5, -1.0)));
        assert_eq!(parse_focus(" -0.25 , 1.0 ").ok(), Some((-0.25, 1.0)));
        for bad in ["", "1", "1.5,0", "0,-1.01", "a,b", "0,0,0", "NaN,0"] {
            assert!(parse_focus(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn descriptions_are_bounded() {
        assert_eq!(check_description(Some(" ".into())).ok(), Some(None));
        assert!(check_description(Some("x".repeat(1500))).is_ok());
        assert!(check_description(Some("x".repeat(1501))).is_err());
        assert!(check_description(Some("a\0b".into())).is_err());
    }
}
