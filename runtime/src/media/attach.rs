//! What statuses do with uploads: attach them to a new status (in the status's transaction),
//! and read them back as Mastodon entities or ActivityPub documents, in attach order.

use serde_json::Value;
use sqlx::{AssertSqlSafe, PgConnection};
use uuid::Uuid;

use super::entity::{self, COLUMNS, MediaRow};
use super::storage::Drive;

/// Media attachments one status may have (Mastodon's `max_media_attachments`).
pub const MAX_PER_STATUS: usize = 4;

/// Why `attach` refused; every variant but `Db` is the client's mistake (422).
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    #[error("Validation failed: a status can have at most {MAX_PER_STATUS} media attachments")]
    TooMany,
    #[error("Validation failed: media attachment {0} not found")]
    NotFound(Uuid),
    #[error("Validation failed: media attachment {0} is already attached to another status")]
    AttachedElsewhere(Uuid),
    #[error("Validation failed: media attachment {0} failed processing and cannot be attached")]
    Failed(Uuid),
    #[error("Cannot attach files that have not finished processing. Try again in a moment!")]
    NotReady(Uuid),
    #[error("database: {0}")]
    Db(#[from] sqlx::Error),
}

impl AttachError {
    /// Whether this is the client's mistake (422) rather than the database's (503).
    pub fn is_client_error(&self) -> bool {
        !matches!(self, AttachError::Db(_))
    }
}

/// Attaches `ids` (in this order) to `status`, inside the caller's transaction. Every id must
/// name an upload of `account` that is ready (Mastodon refuses ones still processing), not
/// attached to another status and not kept for a scheduled one; at most [`MAX_PER_STATUS`]; a
/// repeated id counts once. The rows are locked, so two statuses cannot take the same upload.
pub async fn attach(
    tx: &mut PgConnection,
    account: Uuid,
    status: Uuid,
    ids: &[Uuid],
) -> Result<(), AttachError> {
    let unique = check(tx, account, Some(status), None, ids).await?;
    if unique.is_empty() {
        return Ok(());
    }
    sqlx::query(
        "UPDATE media_attachments m SET status_id = $1, position = o.n - 1
           FROM unnest($2::uuid[]) WITH ORDINALITY AS o(id, n) WHERE m.id = o.id",
    )
    .bind(status)
    .bind(&unique)
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// Keeps `ids` for the scheduled status `scheduled` (the same rules as [`attach`]): the
/// stale-upload cleanup leaves them, and no other status may take them, until it is published
/// ([`release`], then `attach`) or cancelled (the column is set to NULL with its row).
pub async fn reserve(
    tx: &mut PgConnection,
    account: Uuid,
    scheduled: Uuid,
    ids: &[Uuid],
) -> Result<Vec<Uuid>, AttachError> {
    let unique = check(tx, account, None, Some(scheduled), ids).await?;
    sqlx::query("UPDATE media_attachments SET scheduled_status_id = $1 WHERE id = ANY($2)")
        .bind(scheduled)
        .bind(&unique)
        .execute(&mut *tx)
        .await?;
    Ok(unique)
}

/// Gives back what [`reserve`] kept for `scheduled`, so its publication can [`attach`] it.
pub async fn release(tx: &mut PgConnection, scheduled: Uuid) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE media_attachments SET scheduled_status_id = NULL WHERE scheduled_status_id = $1",
    )
    .bind(scheduled)
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// The rules of `attach` and `reserve`: the unique ids, in order, each an upload of `account`
/// that is ready and taken by nothing but `status` / `scheduled`. Locks the rows.
async fn check(
    tx: &mut PgConnection,
    account: Uuid,
    status: Option<Uuid>,
    scheduled: Option<Uuid>,
    ids: &[Uuid],
) -> Result<Vec<Uuid>, AttachError> {
    let mut unique: Vec<Uuid> = Vec::with_capacity(ids.len());
    for id in ids {
        if !unique.contains(id) {
            unique.push(*id);
        }
    }
    if unique.len() > MAX_PER_STATUS {
        return Err(AttachError::TooMany);
    }
    if unique.is_empty() {
        return Ok(unique);
    }
    let rows: Vec<(MediaRow, Option<Uuid>)> = sqlx::query_as::<_, Kept>(AssertSqlSafe(format!(
        "SELECT {COLUMNS}, scheduled_status_id FROM media_attachments
          WHERE id = ANY($1) AND account_id = $2 FOR UPDATE"
    )))
    .bind(&unique)
    .bind(account)
    .fetch_all(&mut *tx)
    .await?
    .into_iter()
    .map(|k| (k.row, k.scheduled_status_id))
    .collect();
    for id in &unique {
        let (row, kept_for) = rows
            .iter()
            .find(|(r, _)| r.id == *id)
            .ok_or(AttachError::NotFound(*id))?;
        if row.status_id.is_some_and(|s| Some(s) != status)
            || kept_for.is_some_and(|k| Some(k) != scheduled)
        {
            return Err(AttachError::AttachedElsewhere(*id));
        }
        match row.state.as_str() {
            "failed" => return Err(AttachError::Failed(*id)),
            "processing" => return Err(AttachError::NotReady(*id)),
            _ => {}
        }
    }
    Ok(unique)
}

/// A row with the scheduled status it is kept for.
#[derive(sqlx::FromRow)]
struct Kept {
    #[sqlx(flatten)]
    row: MediaRow,
    scheduled_status_id: Option<Uuid>,
}

/// The uploads kept for each of `scheduled`, in the order the request gave them.
pub async fn rows_kept_for(
    conn: &mut PgConnection,
    scheduled: &[Uuid],
) -> Result<Vec<(Uuid, MediaRow)>, sqlx::Error> {
    let kept: Vec<Kept> = sqlx::query_as(AssertSqlSafe(format!(
        "SELECT {COLUMNS}, scheduled_status_id FROM media_attachments
          WHERE scheduled_status_id = ANY($1) ORDER BY scheduled_status_id, created_at, id"
    )))
    .bind(scheduled)
    .fetch_all(conn)
    .await?;
    Ok(kept
        .into_iter()
        .filter_map(|k| k.scheduled_status_id.map(|s| (s, k.row)))
        .collect())
}

pub(crate) async fn rows_of(
    conn: &mut PgConnection,
    statuses: &[Uuid],
) -> Result<Vec<MediaRow>, sqlx::Error> {
    sqlx::query_as(AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM media_attachments WHERE status_id = ANY($1)
          ORDER BY status_id, position, id"
    )))
    .bind(statuses)
    .fetch_all(conn)
    .await
}

/// The ActivityPub `attachment` documents of one status, attach order.
pub async fn documents_for(
    conn: &mut PgConnection,
    drive: &Drive,
    status: Uuid,
) -> Result<Vec<Value>, sqlx::Error> {
    Ok(rows_of(conn, &[status])
        .await?
        .iter()
        .map(|row| entity::document(drive, row))
        .collect())
}
