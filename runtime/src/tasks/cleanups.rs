//! Cleanups (R-JOB-11): delete data past a retention window in batches, as jobs of the same
//! engine as imports (`hollo.cleanup-dispatch.v1`, `hollo.cleanup-item.v1`).
//!
//! - `remote_posts {olderThanDays}`: remote posts received before the cutoff that no local
//!   account bookmarked. Each item deletes one batch of 500 after a key cursor and, when the
//!   batch was full, adds the next item (deterministic id `n + 1`), so the work is split in
//!   batches without enumerating millions of rows in the request.
//! - `media`: files under `FS_STORAGE_PATH` whose key no `media_files` row names. The first
//!   item lists the directory and adds one item per 1,000 keys (ids from 2, deterministic);
//!   each of those deletes the keys that are still orphaned. Only keys of the strict shape
//!   `media/<uuid>/<name>.<ext>` are ever considered, and only files older than an hour (an
//!   upload may be written before its row commits). The first item also deletes uploads no
//!   status took within a day ([`STALE_UPLOAD`]): their `media_attachments` and `media_files`
//!   rows go in its transaction, so their files are orphans in the same listing. With an S3
//!   drive (no directory to list) those uploads' keys are the items, deleted through the drive.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::future::BoxFuture;
use serde_json::{Value, json};
use sqlx::{PgConnection, PgPool};

use super::jobs::{self, Family, ItemError, JobRow, JobsConfig, Work};
use crate::queue::Registry;

pub const DISPATCH_KIND: &str = "hollo.cleanup-dispatch.v1";
pub const ITEM_KIND: &str = "hollo.cleanup-item.v1";

pub const FAMILY: Family = Family {
    name: "cleanup",
    jobs: "cleanup_jobs",
    items: "cleanup_job_items",
    dispatch_kind: DISPATCH_KIND,
    item_kind: ITEM_KIND,
    // A batch of 500 deletions or 1,000 file removals; a directory listing of a large store.
    item_limit: Duration::from_secs(600),
};

pub const POST_BATCH: i64 = 500;
pub const KEYS_PER_ITEM: usize = 1000;
/// Files younger than this are never orphans: their row may not have committed yet.
pub const MEDIA_GRACE: Duration = Duration::from_secs(3600);
/// Uploads not attached to a status within this long are abandoned (R-MAPI-3).
pub const STALE_UPLOAD: Duration = Duration::from_secs(86_400);

/// `media/<uuid>/<name>.<ext>`: lowercase hex UUID, a short name of `[a-z0-9_-]`, an extension
/// of 1–5 `[a-z0-9]`. Nothing else under the storage path is ever deleted.
pub fn valid_media_key(key: &str) -> bool {
    let mut parts = key.split('/');
    let (Some("media"), Some(id), Some(file), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    let uuid_ok = id.len() == 36
        && id.char_indices().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => c == '-',
            _ => c.is_ascii_digit() || ('a'..='f').contains(&c),
        });
    let Some((name, ext)) = file.rsplit_once('.') else {
        return false;
    };
    uuid_ok
        && !name.is_empty()
        && name.len() <= 32
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
        && (1..=5).contains(&ext.len())
        && ext
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
}

/// What `hollo cleanup` starts (R-OP-OPS: the operator's `spec.maintenance` CronJobs):
/// the same job `POST /api/v1/admin/cleanups` creates, in one transaction with its first
/// dispatch, for the workers to run. `older_than_days` is required for `remote_posts` (1–36,500).
pub async fn start(
    pool: &PgPool,
    environment: &str,
    kind: &str,
    older_than_days: Option<i64>,
) -> Result<jobs::Created, anyhow::Error> {
    let params = match kind {
        "remote_posts" => {
            let days = older_than_days
                .filter(|d| (1..=36_500).contains(d))
                .ok_or_else(|| anyhow::anyhow!("--older-than-days must be 1 to 36500"))?;
            let cutoff = chrono::Utc::now() - chrono::Duration::days(days);
            json!({ "olderThanDays": days, "cutoff": cutoff })
        }
        "media" => json!({}),
        other => anyhow::bail!("unknown cleanup kind {other:?} (remote_posts or media)"),
    };
    let mut tx = pool.begin().await?;
    let created = jobs::create(
        &mut tx,
        FAMILY,
        jobs::NewJob {
            account_id: None,
            kind: kind.into(),
            mode: "delete".into(),
            params,
            content_sha256: None,
            environment: environment.into(),
            items: vec![first_item(kind)],
        },
    )
    .await?;
    tx.commit().await?;
    Ok(created)
}

/// The first item of a new cleanup job.
pub fn first_item(kind: &str) -> Value {
    match kind {
        "media" => json!({ "op": "media_scan" }),
        _ => json!({ "op": "remote_posts", "after": null }),
    }
}

pub fn register(reg: &mut Registry, cfg: JobsConfig) {
    let work = CleanupWork {
        storage: cfg.storage_path.clone(),
        drive: cfg.drive.clone(),
    };
    jobs::register(reg, FAMILY, Arc::new(work), cfg);
}

struct CleanupWork {
    storage: Option<PathBuf>,
    drive: Option<Arc<crate::media::Drive>>,
}

impl CleanupWork {
    async fn item(
        &self,
        tx: &mut PgConnection,
        job: &JobRow,
        item_id: i32,
        data: &Value,
    ) -> Result<Option<String>, ItemError> {
        match data.get("op").and_then(Value::as_str) {
            Some("remote_posts") => self.remote_posts(tx, job, item_id, data).await,
            Some("media_scan") => self.media_scan(tx, job, item_id).await,
            Some("media_delete") => self.media_delete(tx, data).await,
            other => Err(ItemError::Permanent(format!(
                "unknown cleanup step {other:?}"
            ))),
        }
    }

    async fn remote_posts(
        &self,
        tx: &mut PgConnection,
        job: &JobRow,
        item_id: i32,
        data: &Value,
    ) -> Result<Option<String>, ItemError> {
        let days = job
            .params
            .get("olderThanDays")
            .and_then(Value::as_i64)
            .ok_or_else(|| ItemError::Permanent("job has no olderThanDays".into()))?;
        // The cutoff is fixed when the job is created, so batches agree on it.
        let cutoff: chrono::DateTime<chrono::Utc> = job
            .params
            .get("cutoff")
            .and_then(|v| serde_json::from_value(v.clone()).ok())
            .unwrap_or_else(|| chrono::Utc::now() - chrono::Duration::days(days));
        let after = data.get("after").and_then(Value::as_str);
        let deleted: Vec<String> = sqlx::query_scalar(
            "WITH batch AS (
                SELECT iri FROM remote_posts p
                 WHERE p.created_at < $1 AND ($2::text IS NULL OR p.iri > $2)
                   AND NOT EXISTS (SELECT 1 FROM bookmarks b WHERE b.post_iri = p.iri)
                 ORDER BY p.iri LIMIT $3 FOR UPDATE SKIP LOCKED)
             DELETE FROM remote_posts p USING batch WHERE p.iri = batch.iri RETURNING p.iri",
        )
        .bind(cutoff)
        .bind(after)
        .bind(POST_BATCH)
        .fetch_all(&mut *tx)
        .await?;
        if deleted.len() as i64 == POST_BATCH {
            let last = deleted.iter().max().cloned();
            jobs::add_items(
                tx,
                FAMILY,
                job.id,
                item_id + 1,
                &[json!({ "op": "remote_posts", "after": last })],
            )
            .await?;
        }
        Ok(Some(format!("deleted {}", deleted.len())))
    }

    fn root(&self) -> Result<&Path, ItemError> {
        self.storage
            .as_deref()
            .ok_or_else(|| ItemError::Permanent("FS_STORAGE_PATH is not set on this worker".into()))
    }

    /// An S3 drive, when there is no directory to list.
    fn object_drive(&self) -> Option<&Arc<crate::media::Drive>> {
        self.drive
            .as_ref()
            .filter(|d| self.storage.is_none() && d.kind() == crate::media::DriveKind::S3)
    }

    /// Deletes uploads no status took within [`STALE_UPLOAD`] with their `media_files` rows;
    /// returns their keys.
    async fn drop_stale_uploads(&self, tx: &mut PgConnection) -> Result<Vec<String>, ItemError> {
        let keys: Vec<String> = sqlx::query_scalar(
            "WITH gone AS (
                DELETE FROM media_attachments
                 WHERE status_id IS NULL AND scheduled_status_id IS NULL
                   AND created_at < now() - $1 * interval '1 second'
                RETURNING file_key, thumbnail_key)
             SELECT k FROM gone, LATERAL (VALUES (file_key), (thumbnail_key)) AS v(k)
              WHERE k IS NOT NULL",
        )
        .bind(STALE_UPLOAD.as_secs_f64())
        .fetch_all(&mut *tx)
        .await?;
        sqlx::query("DELETE FROM media_files WHERE key = ANY($1)")
            .bind(&keys)
            .execute(&mut *tx)
            .await?;
        Ok(keys)
    }

    async fn media_scan(
        &self,
        tx: &mut PgConnection,
        job: &JobRow,
        item_id: i32,
    ) -> Result<Option<String>, ItemError> {
        if self.object_drive().is_some() {
            let stale = self.drop_stale_uploads(tx).await?;
            let items: Vec<Value> = stale
                .chunks(KEYS_PER_ITEM)
                .map(|c| json!({ "op": "media_delete", "keys": c }))
                .collect();
            jobs::add_items(tx, FAMILY, job.id, item_id + 1, &items).await?;
            return Ok(Some(format!("{} stale upload files", stale.len())));
        }
        let root = self.root()?.to_path_buf();
        let stale = self.drop_stale_uploads(tx).await?;
        let keys = tokio::task::spawn_blocking(move || list_old_keys(&root))
            .await
            .map_err(|e| ItemError::Transient(format!("listing the storage: {e}")))?
            .map_err(|e| ItemError::Transient(format!("listing the storage: {e}")))?;
        let known: Vec<String> =
            sqlx::query_scalar("SELECT key FROM media_files WHERE key = ANY($1)")
                .bind(&keys)
                .fetch_all(&mut *tx)
                .await?;
        let orphans: Vec<&String> = keys.iter().filter(|k| !known.contains(k)).collect();
        let items: Vec<Value> = orphans
            .chunks(KEYS_PER_ITEM)
            .map(|c| json!({ "op": "media_delete", "keys": c }))
            .collect();
        jobs::add_items(tx, FAMILY, job.id, item_id + 1, &items).await?;
        Ok(Some(format!(
            "{} orphaned of {} ({} stale upload files)",
            orphans.len(),
            keys.len(),
            stale.len()
        )))
    }

    async fn media_delete(
        &self,
        tx: &mut PgConnection,
        data: &Value,
    ) -> Result<Option<String>, ItemError> {
        let keys: Vec<String> = data
            .get("keys")
            .and_then(|k| serde_json::from_value(k.clone()).ok())
            .ok_or_else(|| ItemError::Permanent("item has no keys".into()))?;
        // Stored keys are checked again: the pattern, not the database, is the authority.
        let keys: Vec<String> = keys.into_iter().filter(|k| valid_media_key(k)).collect();
        let known: Vec<String> =
            sqlx::query_scalar("SELECT key FROM media_files WHERE key = ANY($1) FOR SHARE")
                .bind(&keys)
                .fetch_all(&mut *tx)
                .await?;
        let doomed: Vec<String> = keys.into_iter().filter(|k| !known.contains(k)).collect();
        if let Some(drive) = self.object_drive() {
            for key in &doomed {
                drive
                    .delete(key)
                    .await
                    .map_err(|e| ItemError::Transient(format!("deleting {key}: {e}")))?;
            }
            return Ok(Some(format!("deleted {}", doomed.len())));
        }
        let root = self.root()?.to_path_buf();
        let n = tokio::task::spawn_blocking(move || delete_keys(&root, &doomed))
            .await
            .map_err(|e| ItemError::Transient(format!("deleting files: {e}")))?
            .map_err(|e| ItemError::Transient(format!("deleting files: {e}")))?;
        Ok(Some(format!("deleted {n}")))
    }
}

/// Keys of the media shape under `root` whose files are older than the grace period.
fn list_old_keys(root: &Path) -> std::io::Result<Vec<String>> {
    let mut keys = Vec::new();
    let media = root.join("media");
    let dirs = match std::fs::read_dir(&media) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(keys),
        Err(e) => return Err(e),
    };
    let now = SystemTime::now();
    for dir in dirs {
        let dir = dir?;
        if !dir.file_type()?.is_dir() {
            continue;
        }
        for file in std::fs::read_dir(dir.path())? {
            let file = file?;
            let meta = file.metadata()?;
            if !meta.is_file() {
                continue;
            }
            let old = meta
                .modified()
                .ok()
                .and_then(|m| now.duration_since(m).ok())
                .is_some_and(|age| age >= MEDIA_GRACE);
            let key = format!(
                "media/{}/{}",
                dir.file_name().to_string_lossy(),
                file.file_name().to_string_lossy()
            );
            if old && valid_media_key(&key) {
                keys.push(key);
            }
        }
    }
    keys.sort();
    Ok(keys)
}

fn delete_keys(root: &Path, keys: &[String]) -> std::io::Result<usize> {
    let mut n = 0;
    for key in keys {
        // The key shape has no `..` and no leading `/`, so the path stays under the root; a
        // symlinked file is removed as a link, never followed.
        match std::fs::remove_file(root.join(key)) {
            Ok(()) => n += 1,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

impl Work for CleanupWork {
    fn run<'a>(
        &'a self,
        tx: &'a mut PgConnection,
        _pool: &'a PgPool,
        job: &'a JobRow,
        item_id: i32,
        data: &'a Value,
    ) -> BoxFuture<'a, Result<Option<String>, ItemError>> {
        Box::pin(self.item(tx, job, item_id, data))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_strict_media_keys_are_accepted() {
        assert!(valid_media_key(
            "media/0193f1f2-7b3c-7a00-8000-0123456789ab/original.png"
        ));
        for bad in [
            "media/../etc/passwd",
            "media/0193f1f2-7b3c-7a00-8000-0123456789ab/../x.png",
            "/media/0193f1f2-7b3c-7a00-8000-0123456789ab/original.png",
            "media/0193F1F2-7B3C-7A00-8000-0123456789AB/original.png",
            "media/0193f1f2-7b3c-7a00-8000-0123456789ab/original",
            "media/0193f1f2-7b3c-7a00-8000-0123456789ab/.png",
            "media/0193f1f2-7b3c-7a00-8000-0123456789ab/a/b.png",
            "media/not-a-uuid/original.png",
            "other/0193f1f2-7b3c-7a00-8000-0123456789ab/original.png",
        ] {
            assert!(!valid_media_key(bad), "{bad}");
        }
    }
}
