//! Imports of Mastodon CSV exports (R-JOB-11): following, blocks, mutes, bookmarks, lists.
//! The web node parses the upload (`parse`) and registers one item per row; the worker runs
//! `hollo.import-item.v1` per row through the job engine (`tasks::jobs`).
//!
//! Following an account reuses the federation's follow: WebFinger + actor document through the
//! fetch guard, the relationship stored and the `Follow` stored with its stable id and queued
//! for delivery — all inside the item's transaction, so a confirmed follow's activity is stored
//! exactly once and is delivered even if the job is cancelled afterwards (R-JOB-5/6).

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use super::jobs::{self, Family, ItemError, JobRow, JobsConfig, Work};
use crate::accounts::{self, Account};
use crate::federation::Federation;
use crate::federation::actors::actor::RemoteActor;
use crate::federation::context;
use crate::federation::outbound::delivery::{Recipient, queue_activity};
use crate::federation::outbound::follows;
use crate::queue::Registry;

pub const DISPATCH_KIND: &str = "hollo.import-dispatch.v1";
pub const ITEM_KIND: &str = "hollo.import-item.v1";

pub const FAMILY: Family = Family {
    name: "import",
    jobs: "import_jobs",
    items: "import_job_items",
    dispatch_kind: DISPATCH_KIND,
    item_kind: ITEM_KIND,
    // One row is a WebFinger lookup, an actor fetch (20 s each at most) and a transaction.
    item_limit: Duration::from_secs(120),
};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImportType {
    Following,
    Blocks,
    Mutes,
    Bookmarks,
    Lists,
}

impl ImportType {
    pub const NAMES: &'static str = "following, blocks, mutes, bookmarks, lists";

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "following" => Self::Following,
            "blocks" => Self::Blocks,
            "mutes" => Self::Mutes,
            "bookmarks" => Self::Bookmarks,
            "lists" => Self::Lists,
            _ => return None,
        })
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Following => "following",
            Self::Blocks => "blocks",
            Self::Mutes => "mutes",
            Self::Bookmarks => "bookmarks",
            Self::Lists => "lists",
        }
    }
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `name@host` (a leading `@` allowed): the shape of Mastodon's "Account address".
fn valid_handle(s: &str) -> bool {
    let s = s.strip_prefix('@').unwrap_or(s);
    let Some((name, host)) = s.split_once('@') else {
        return false;
    };
    !name.is_empty()
        && name.len() <= 100
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
        && !host.is_empty()
        && host.len() <= 253
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']'))
}

/// Longest bookmark URL an import accepts (what browsers and Mastodon handle).
pub const MAX_URL_BYTES: usize = 2048;
/// Characters of a bad cell an error message quotes: enough to find it, never the whole cell.
const EXCERPT_CHARS: usize = 80;

/// A cell as quoted in an error: at most [`EXCERPT_CHARS`] characters, `…` when cut.
pub fn excerpt(s: &str) -> String {
    match s.char_indices().nth(EXCERPT_CHARS) {
        None => s.to_string(),
        Some((cut, _)) => format!("{}…", &s[..cut]),
    }
}

/// Why an upload is refused (422), before anything is stored.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum ImportError {
    #[error("the file is empty")]
    Empty,
    #[error("the file is not UTF-8 text (expected a CSV export)")]
    NotUtf8,
    #[error("the file contains a NUL character")]
    Nul,
    #[error("malformed CSV at line {line}: {message}")]
    Csv { line: usize, message: String },
    #[error("line {line}: {problem}")]
    Row { line: usize, problem: RowError },
    #[error("more than {0} rows (IMPORT_MAX_ROWS)")]
    TooManyRows(usize),
    #[error("the file has no rows to import")]
    NoRows,
}

/// What is wrong with one row; cells are quoted as [`excerpt`]s.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum RowError {
    #[error("{0:?} is not an account address (name@host)")]
    NotAHandle(String),
    #[error("expected true or false, got {0:?}")]
    NotABoolean(String),
    #[error("bad language list {0:?}")]
    Languages(String),
    #[error("{0:?} is not an http(s) URL")]
    NotAUrl(String),
    #[error("the URL is longer than {MAX_URL_BYTES} bytes")]
    UrlTooLong,
    #[error("a list name must have 1 to 200 characters")]
    ListName,
}

fn boolean(s: Option<&str>, default: bool) -> Result<bool, RowError> {
    match s.map(str::trim).map(str::to_ascii_lowercase).as_deref() {
        None | Some("") => Ok(default),
        Some("true") | Some("1") | Some("yes") => Ok(true),
        Some("false") | Some("0") | Some("no") => Ok(false),
        Some(other) => Err(RowError::NotABoolean(excerpt(other))),
    }
}

/// Parses a Mastodon export into one item per row. Header rows (Mastodon writes one for
/// following and mutes) are recognised by their first cell. Any bad row rejects the whole
/// upload with its line number: a half-imported file is worse than a clear error.
/// `max_rows` is `IMPORT_MAX_ROWS`: by default (50 000) more than any real export, few enough
/// for the one transaction that registers them.
pub fn parse(ty: ImportType, bytes: &[u8], max_rows: usize) -> Result<Vec<Value>, ImportError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ImportError::Empty);
    }
    let body = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    if std::str::from_utf8(body).is_err() {
        return Err(ImportError::NotUtf8);
    }
    // PostgreSQL cannot store NUL in text: refused here rather than failing at the insert.
    if body.contains(&0) {
        return Err(ImportError::Nul);
    }
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .trim(csv::Trim::All)
        .from_reader(body);
    let mut items = Vec::new();
    for (n, record) in reader.records().enumerate() {
        let line = n + 1;
        let record = record.map_err(|e| ImportError::Csv {
            line,
            message: e.to_string(),
        })?;
        // Our exports mark cells a spreadsheet would run as formulas (`exports`).
        let record: csv::StringRecord = record.iter().map(crate::exports::unmarked).collect();
        if record.iter().all(str::is_empty) {
            continue;
        }
        let first = record.get(0).unwrap_or_default();
        if n == 0
            && matches!(
                first.to_ascii_lowercase().as_str(),
                "account address" | "url"
            )
        {
            continue;
        }
        let item = row(ty, &record).map_err(|problem| ImportError::Row { line, problem })?;
        items.push(item);
        if items.len() > max_rows {
            return Err(ImportError::TooManyRows(max_rows));
        }
    }
    if items.is_empty() {
        return Err(ImportError::NoRows);
    }
    Ok(items)
}

fn handle_at(record: &csv::StringRecord, i: usize) -> Result<String, RowError> {
    let h = record.get(i).unwrap_or_default();
    if !valid_handle(h) {
        return Err(RowError::NotAHandle(excerpt(h)));
    }
    Ok(h.trim_start_matches('@').to_string())
}

fn row(ty: ImportType, r: &csv::StringRecord) -> Result<Value, RowError> {
    Ok(match ty {
        ImportType::Following => {
            let languages: Option<Vec<String>> = r.get(3).filter(|s| !s.is_empty()).map(|s| {
                s.split([',', ' '])
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .map(str::to_string)
                    .collect()
            });
            if let Some(ls) = &languages
                && ls.iter().any(|l| {
                    l.len() > 8 || !l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                })
            {
                return Err(RowError::Languages(excerpt(r.get(3).unwrap_or_default())));
            }
            json!({
                "account": handle_at(r, 0)?,
                "showReblogs": boolean(r.get(1), true)?,
                "notify": boolean(r.get(2), false)?,
                "languages": languages,
            })
        }
        ImportType::Blocks => json!({ "account": handle_at(r, 0)? }),
        ImportType::Mutes => json!({
            "account": handle_at(r, 0)?,
            "hideNotifications": boolean(r.get(1), true)?,
        }),
        ImportType::Bookmarks => {
            let u = r.get(0).unwrap_or_default();
            if u.len() > MAX_URL_BYTES {
                return Err(RowError::UrlTooLong);
            }
            let ok = url::Url::parse(u)
                .ok()
                .filter(|p| matches!(p.scheme(), "https" | "http") && p.host().is_some());
            if ok.is_none() {
                return Err(RowError::NotAUrl(excerpt(u)));
            }
            json!({ "url": u })
        }
        ImportType::Lists => {
            let title = r.get(0).unwrap_or_default();
            if title.is_empty() || title.chars().count() > 200 {
                return Err(RowError::ListName);
            }
            json!({ "list": title, "account": handle_at(r, 1)? })
        }
    })
}

// ---------------------------------------------------------------------------------------------
// Worker side.

pub fn register(reg: &mut Registry, fed: Arc<Federation>, cfg: JobsConfig) {
    jobs::register(reg, FAMILY, Arc::new(ImportWork(fed)), cfg);
}

/// The import work of a node: its federation signs the resolution fetches.
struct ImportWork(Arc<Federation>);

fn str_of<'a>(data: &'a Value, key: &str) -> Result<&'a str, ItemError> {
    data.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| ItemError::Permanent(format!("item has no {key}")))
}

async fn resolve(
    pool: &PgPool,
    fed: &Federation,
    account: &Account,
    handle: &str,
) -> Result<RemoteActor, ItemError> {
    follows::resolve_account(pool, fed, account, handle)
        .await
        .map_err(|e| {
            if e.retryable {
                ItemError::Transient(e.message)
            } else {
                ItemError::Permanent(e.message)
            }
        })
}

/// Records which activity an item stored, in the item's transaction (`import_job_effects`):
/// at most one per item, and the trail of what an import sent.
async fn effect(
    tx: &mut PgConnection,
    job: &JobRow,
    item_id: i32,
    activity_id: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO import_job_effects (job_id, item_id, activity_id) VALUES ($1, $2, $3)
         ON CONFLICT DO NOTHING",
    )
    .bind(job.id)
    .bind(item_id)
    .bind(activity_id)
    .execute(&mut *tx)
    .await?;
    Ok(())
}

impl ImportWork {
    async fn item(
        &self,
        tx: &mut PgConnection,
        pool: &PgPool,
        job: &JobRow,
        item_id: i32,
        data: &Value,
    ) -> Result<Option<String>, ItemError> {
        let fed = &*self.0;
        let ty = ImportType::parse(&job.kind)
            .ok_or_else(|| ItemError::Permanent(format!("unknown import type {}", job.kind)))?;
        let account_id = job
            .account_id
            .ok_or_else(|| ItemError::Permanent("import without an account".into()))?;
        let account = accounts::by_id(&mut *tx, account_id)
            .await?
            .ok_or_else(|| ItemError::Permanent("the account no longer exists".into()))?;
        match ty {
            ImportType::Following => {
                let target = resolve(pool, fed, &account, str_of(data, "account")?).await?;
                let (activity_id, _) = follows::follow_in(&mut *tx, fed, &account, &target).await?;
                let languages: Option<Vec<String>> = data
                    .get("languages")
                    .and_then(|v| serde_json::from_value(v.clone()).ok());
                sqlx::query(
                    "UPDATE follows SET show_reblogs = $3, notify = $4, languages = $5
                      WHERE account_id = $1 AND target_iri = $2",
                )
                .bind(account.id)
                .bind(&target.iri)
                .bind(
                    data.get("showReblogs")
                        .and_then(Value::as_bool)
                        .unwrap_or(true),
                )
                .bind(data.get("notify").and_then(Value::as_bool).unwrap_or(false))
                .bind(languages)
                .execute(&mut *tx)
                .await?;
                effect(tx, job, item_id, &activity_id).await?;
                Ok(Some(target.iri))
            }
            ImportType::Blocks => {
                let target = resolve(pool, fed, &account, str_of(data, "account")?).await?;
                let block_id = fed.new_activity_id();
                let fresh: Option<String> = sqlx::query_scalar(
                    "INSERT INTO account_blocks (account_id, target_iri, block_activity_id) VALUES ($1, $2, $3)
                     ON CONFLICT DO NOTHING RETURNING block_activity_id",
                )
                .bind(account.id)
                .bind(&target.iri)
                .bind(&block_id)
                .fetch_optional(&mut *tx)
                .await?;
                if fresh.is_some() {
                    let block = json!({
                        "@context": context::ld(), "id": block_id, "type": "Block",
                        "actor": fed.actor_iri(&account.username), "object": target.iri,
                        "to": [target.iri],
                    });
                    queue_activity(
                        &mut *tx,
                        fed,
                        account.id,
                        &block,
                        &[Recipient::from(&target)],
                    )
                    .await?;
                    effect(tx, job, item_id, &block_id).await?;
                }
                Ok(Some(target.iri))
            }
            ImportType::Mutes => {
                let target = resolve(pool, fed, &account, str_of(data, "account")?).await?;
                sqlx::query(
                    "INSERT INTO account_mutes (account_id, target_iri, notifications) VALUES ($1, $2, $3)
                     ON CONFLICT (account_id, target_iri) DO UPDATE SET notifications = EXCLUDED.notifications",
                )
                .bind(account.id)
                .bind(&target.iri)
                .bind(data.get("hideNotifications").and_then(Value::as_bool).unwrap_or(true))
                .execute(&mut *tx)
                .await?;
                Ok(Some(target.iri))
            }
            ImportType::Bookmarks => {
                let url = str_of(data, "url")?;
                sqlx::query(
                    "INSERT INTO bookmarks (account_id, post_iri) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                )
                .bind(account.id)
                .bind(url)
                .execute(&mut *tx)
                .await?;
                Ok(Some(url.to_string()))
            }
            ImportType::Lists => {
                let title = str_of(data, "list")?;
                let target = resolve(pool, fed, &account, str_of(data, "account")?).await?;
                let list: Uuid = sqlx::query_scalar(
                    "INSERT INTO lists (id, account_id, title) VALUES ($1, $2, $3)
                     ON CONFLICT (account_id, title) DO UPDATE SET title = EXCLUDED.title
                     RETURNING id",
                )
                .bind(Uuid::now_v7())
                .bind(account.id)
                .bind(title)
                .fetch_one(&mut *tx)
                .await?;
                sqlx::query(
                    "INSERT INTO list_members (list_id, target_iri) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                )
                .bind(list)
                .bind(&target.iri)
                .execute(&mut *tx)
                .await?;
                Ok(Some(target.iri))
            }
        }
    }

    /// `mode=overwrite`: what the account had that the upload did not bring is removed once
    /// every row is final. Local-only relationships are deleted; follows and blocks, which the
    /// remote side knows about, are undone with an `Undo` delivered to the remote actor (stored
    /// with a stable id like any activity).
    async fn overwrite(&self, tx: &mut PgConnection, job: &JobRow) -> Result<(), sqlx::Error> {
        let Some(account_id) = job.account_id else {
            return Ok(());
        };
        let kept = "SELECT result FROM import_job_items WHERE job_id = $2 AND status = 'completed' AND result IS NOT NULL";
        let sql = match ImportType::parse(&job.kind) {
            Some(ImportType::Mutes) => format!(
                "DELETE FROM account_mutes WHERE account_id = $1 AND target_iri NOT IN ({kept})"
            ),
            Some(ImportType::Bookmarks) => {
                format!("DELETE FROM bookmarks WHERE account_id = $1 AND post_iri NOT IN ({kept})")
            }
            Some(ImportType::Lists) => "DELETE FROM list_members m USING lists l
                  WHERE m.list_id = l.id AND l.account_id = $1
                    AND NOT EXISTS (SELECT 1 FROM import_job_items i
                                     WHERE i.job_id = $2 AND i.status = 'completed'
                                       AND i.data->>'list' = l.title AND i.result = m.target_iri)"
                .to_string(),
            Some(ImportType::Following) => {
                return self.undo_others(tx, job, account_id, Undone::Follows).await;
            }
            Some(ImportType::Blocks) => {
                return self.undo_others(tx, job, account_id, Undone::Blocks).await;
            }
            None => return Ok(()),
        };
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(account_id)
            .bind(job.id)
            .execute(&mut *tx)
            .await?;
        Ok(())
    }

    /// Deletes the follows or blocks the upload did not bring and queues an `Undo` of each
    /// one's stored activity to its target, in the caller's transaction.
    async fn undo_others(
        &self,
        tx: &mut PgConnection,
        job: &JobRow,
        account_id: Uuid,
        what: Undone,
    ) -> Result<(), sqlx::Error> {
        let fed = &*self.0;
        let Some(account) = accounts::by_id(&mut *tx, account_id).await? else {
            return Ok(());
        };
        let (table, id_column, object_type) = match what {
            Undone::Follows => ("follows", "follow_activity_id", "Follow"),
            Undone::Blocks => ("account_blocks", "block_activity_id", "Block"),
        };
        let sql = format!(
            "DELETE FROM {table} f WHERE f.account_id = $1
                AND f.target_iri NOT IN (SELECT result FROM import_job_items
                                          WHERE job_id = $2 AND status = 'completed' AND result IS NOT NULL)
             RETURNING f.target_iri, f.{id_column},
                       (SELECT inbox FROM remote_actors a WHERE a.iri = f.target_iri),
                       (SELECT shared_inbox FROM remote_actors a WHERE a.iri = f.target_iri)"
        );
        let gone: Vec<(String, String, Option<String>, Option<String>)> =
            sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(account_id)
                .bind(job.id)
                .fetch_all(&mut *tx)
                .await?;
        for (target, activity_id, inbox, shared_inbox) in gone {
            // Without a known inbox there is nowhere to send the Undo; the local row is gone
            // either way.
            let Some(inbox) = inbox else { continue };
            let actor = fed.actor_iri(&account.username);
            let undo = json!({
                "@context": context::ld(), "id": fed.new_activity_id(), "type": "Undo", "actor": actor,
                "object": { "id": activity_id, "type": object_type, "actor": actor, "object": target },
                "to": [target],
            });
            let to = Recipient {
                actor_iri: target.clone(),
                inbox,
                shared_inbox,
            };
            queue_activity(&mut *tx, fed, account.id, &undo, &[to]).await?;
        }
        Ok(())
    }
}

/// Relationships an overwrite import undoes remotely.
#[derive(Clone, Copy)]
enum Undone {
    Follows,
    Blocks,
}

impl Work for ImportWork {
    fn run<'a>(
        &'a self,
        tx: &'a mut PgConnection,
        pool: &'a PgPool,
        job: &'a JobRow,
        item_id: i32,
        data: &'a Value,
    ) -> BoxFuture<'a, Result<Option<String>, ItemError>> {
        Box::pin(self.item(tx, pool, job, item_id, data))
    }

    fn finish<'a>(
        &'a self,
        tx: &'a mut PgConnection,
        job: &'a JobRow,
    ) -> BoxFuture<'a, Result<(), sqlx::Error>> {
        Box::pin(async move {
            if job.mode == "overwrite" {
                self.overwrite(tx, job).await?;
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn following_export_with_header_and_options() {
        let csv = "Account address,Show boosts,Notify on new posts,Languages\n\
                   alice@a.example,true,false,\n\
                   @bob@b.example,false,true,\"en,de\"\n";
        let items = parse(ImportType::Following, csv.as_bytes(), 50_000).expect("parses");
        assert_eq!(items.len(), 2);
        assert_eq!(items[0]["account"], "alice@a.example");
        assert_eq!(items[0]["languages"], Value::Null);
        assert_eq!(items[1]["account"], "bob@b.example");
        assert_eq!(items[1]["showReblogs"], false);
        assert_eq!(items[1]["notify"], true);
        assert_eq!(items[1]["languages"], json!(["en", "de"]));
    }

    #[test]
    fn other_exports_parse() {
        assert_eq!(
            parse(ImportType::Blocks, b"a@b.example\nc@d.example\n", 50_000).map(|v| v.len()),
            Ok(2)
        );
        let m = parse(
            ImportType::Mutes,
            b"Account address,Hide notifications\na@b.example,false\n",
            50_000,
        )
        .expect("mutes");
        assert_eq!(m[0]["hideNotifications"], false);
        let b = parse(
            ImportType::Bookmarks,
            b"https://x.example/notes/1\n",
            50_000,
        )
        .expect("bookmarks");
        assert_eq!(b[0]["url"], "https://x.example/notes/1");
        let l = parse(ImportType::Lists, b"Friends,a@b.example\n", 50_000).expect("lists");
        assert_eq!(l[0]["list"], "Friends");
    }

    #[test]
    fn bad_input_is_rejected_with_a_line_number() {
        assert_eq!(
            parse(ImportType::Blocks, b"", 50_000).unwrap_err(),
            ImportError::Empty
        );
        assert_eq!(
            parse(
                ImportType::Following,
                b"Account address,Show boosts\n",
                50_000
            )
            .unwrap_err(),
            ImportError::NoRows
        );
        let e = parse(ImportType::Blocks, b"a@b.example\nnot an address\n", 50_000)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("line 2:"), "{e}");
        let e = parse(ImportType::Following, b"a@b.example,maybe\n", 50_000)
            .unwrap_err()
            .to_string();
        assert!(e.contains("true or false"), "{e}");
        let e = parse(ImportType::Bookmarks, b"javascript:alert(1)\n", 50_000)
            .unwrap_err()
            .to_string();
        assert!(e.contains("http(s) URL"), "{e}");
        assert_eq!(
            parse(ImportType::Blocks, b"\xff\xfe\x00a", 50_000),
            Err(ImportError::NotUtf8)
        );
        assert_eq!(
            parse(ImportType::Blocks, b"a@b.example\x00\n", 50_000),
            Err(ImportError::Nul)
        );
        // A long bad cell is quoted in part, never echoed whole; long URLs are refused.
        let huge = format!("{}\n", "x".repeat(1_000_000));
        let e = parse(ImportType::Blocks, huge.as_bytes(), 50_000)
            .unwrap_err()
            .to_string();
        assert!(e.len() < 200 && e.contains('…'), "{e}");
        let long = format!("https://a.example/{}\n", "p".repeat(MAX_URL_BYTES));
        assert_eq!(
            parse(ImportType::Bookmarks, long.as_bytes(), 50_000),
            Err(ImportError::Row {
                line: 1,
                problem: RowError::UrlTooLong
            })
        );
        // IMPORT_MAX_ROWS: exactly the limit parses, one more is refused by name.
        let three = b"a@b.example\nc@d.example\ne@f.example\n";
        assert_eq!(parse(ImportType::Blocks, three, 3).map(|v| v.len()), Ok(3));
        let e = parse(ImportType::Blocks, three, 2).unwrap_err().to_string();
        assert!(
            e.contains("more than 2 rows") && e.contains("IMPORT_MAX_ROWS"),
            "{e}"
        );
    }
}
