//! Reports (R-MAPI-6): an account's complaint about another, with the statuses it is about, for
//! the admin to act on — made here (`POST /api/v1/reports`) or received from another server as
//! an ActivityPub `Flag` about one of ours.
//!
//! As Mastodon's `ReportService`: the statuses must be the target's and readable by the
//! reporter (else the same 404 as an unknown one); a report about a remote account may be
//! forwarded to its server as a `Flag` of the account and the statuses with the comment,
//! sent by the instance actor so the reporter is not named there. The report row and its
//! `Flag` commit together. A received `Flag` gives one report per local account it names
//! (directly or through a status of theirs), once per `Flag` id.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use crate::accounts::Account;
use crate::federation::Federation;
use crate::federation::actors::directory::{self, Found};
use crate::federation::outbound::delivery::{Recipient, queue_instance_activity};
use crate::statuses::access;

/// The longest comment a local report takes (Mastodon's).
pub const MAX_COMMENT_CHARS: usize = 1000;

/// A received `Flag`'s comment is kept up to this many characters.
pub const MAX_RECEIVED_COMMENT_CHARS: usize = 5000;

/// The most statuses one report names.
pub const MAX_STATUSES: usize = 100;

/// Mastodon's report categories.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Category {
    Spam,
    Legal,
    Violation,
    Other,
}

impl Category {
    pub fn parse(raw: &str) -> Option<Category> {
        match raw {
            "spam" => Some(Category::Spam),
            "legal" => Some(Category::Legal),
            "violation" => Some(Category::Violation),
            "other" => Some(Category::Other),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Category::Spam => "spam",
            Category::Legal => "legal",
            Category::Violation => "violation",
            Category::Other => "other",
        }
    }
}

/// A report as a local account asks for it.
#[derive(Clone, Debug)]
pub struct NewReport {
    /// The reported account's Account entity id (local, or a stored remote actor).
    pub target: Uuid,
    pub status_ids: Vec<Uuid>,
    pub comment: String,
    pub category: Category,
    /// Send it to the target's server too (only a remote target has one).
    pub forward: bool,
}

/// A stored report.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct Report {
    pub id: Uuid,
    /// The local reporter; `None` for a received `Flag` (then `reporter_iri`).
    pub account_id: Option<Uuid>,
    pub reporter_iri: Option<String>,
    pub target_account_id: Uuid,
    pub target_iri: String,
    pub status_ids: Vec<Uuid>,
    pub comment: String,
    pub category: String,
    pub forwarded: bool,
    pub action_taken_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

pub const COLUMNS: &str = "id, account_id, reporter_iri, target_account_id, target_iri, status_ids,
     comment, category, forwarded, action_taken_at, created_at, updated_at";

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// No such account, or a status that is not the target's or not readable by the reporter.
    #[error("Record not found")]
    NotFound,
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Db(#[from] sqlx::Error),
}

/// Checks what needs no database: the comment's length and the number of statuses.
pub fn check(req: &NewReport) -> Result<(), ReportError> {
    let chars = req.comment.chars().count();
    if chars > MAX_COMMENT_CHARS {
        return Err(ReportError::Invalid(format!(
            "Validation failed: Comment is too long (maximum is {MAX_COMMENT_CHARS} characters, got {chars})"
        )));
    }
    if req.status_ids.len() > MAX_STATUSES {
        return Err(ReportError::Invalid(format!(
            "Validation failed: at most {MAX_STATUSES} statuses per report"
        )));
    }
    Ok(())
}

/// `reporter` reports; the report (and, when forwarded, its `Flag`) is stored in one
/// transaction. `fed` is needed only to forward.
pub async fn create(
    pool: &PgPool,
    fed: Option<&Federation>,
    reporter: &Account,
    mut req: NewReport,
) -> Result<Report, ReportError> {
    check(&req)?;
    let target = directory::by_id(pool, req.target)
        .await?
        .ok_or(ReportError::NotFound)?;
    if matches!(&target, Found::Local(a) if a.id == reporter.id) {
        return Err(ReportError::Invalid(
            "Validation failed: you cannot report yourself".into(),
        ));
    }
    req.status_ids.sort();
    req.status_ids.dedup();
    let mut conn = pool.acquire().await?;
    let uris = statuses_of(&mut conn, reporter.id, req.target, &req.status_ids).await?;
    drop(conn);
    let remote = match &target {
        Found::Remote(r) => Some(r),
        Found::Local(_) => None,
    };
    let forward = req.forward && remote.is_some() && fed.is_some();
    let target_iri = match (&target, fed) {
        (Found::Remote(r), _) => r.iri.clone(),
        (Found::Local(a), Some(fed)) => fed.actor_iri(&a.username),
        (Found::Local(a), None) => a.username.clone(),
    };
    let id = Uuid::now_v7();
    let mut tx = pool.begin().await?;
    let report: Report = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "INSERT INTO reports (id, account_id, target_account_id, target_iri, status_ids, comment,
                              category, forwarded)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING {COLUMNS}"
    )))
    .bind(id)
    .bind(reporter.id)
    .bind(req.target)
    .bind(&target_iri)
    .bind(&req.status_ids)
    .bind(&req.comment)
    .bind(req.category.as_str())
    .bind(forward)
    .fetch_one(&mut *tx)
    .await?;
    if let (true, Some(fed), Some(remote)) = (forward, fed, remote) {
        let flag = flag(fed, id, &target_iri, &uris, &req.comment);
        queue_instance_activity(&mut tx, &flag, &[Recipient::from(&remote.actor())]).await?;
    }
    tx.commit().await?;
    Ok(report)
}

/// The URIs of `ids`, each a post by `target` that `reporter` may read; any other id is a 404,
/// as Mastodon finds them among the target's statuses.
async fn statuses_of(
    conn: &mut PgConnection,
    reporter: Uuid,
    target: Uuid,
    ids: &[Uuid],
) -> Result<Vec<String>, ReportError> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let readable = access::visible(&mut *conn, Some(reporter), ids).await?;
    let theirs: Vec<(Uuid, String)> =
        sqlx::query_as("SELECT id, uri FROM posts WHERE id = ANY($1) AND author_id = $2")
            .bind(ids)
            .bind(target)
            .fetch_all(&mut *conn)
            .await?;
    if theirs.len() != ids.len() || theirs.iter().any(|(id, _)| !readable.contains(id)) {
        return Err(ReportError::NotFound);
    }
    Ok(theirs.into_iter().map(|(_, uri)| uri).collect())
}

/// The `Flag` Mastodon sends for a forwarded report: the instance actor flags the account and
/// the statuses, with the comment as `content`.
pub fn flag(
    fed: &Federation,
    report: Uuid,
    target: &str,
    statuses: &[String],
    comment: &str,
) -> Value {
    let mut object = vec![target.to_string()];
    object.extend(statuses.iter().cloned());
    json!({
        "@context": "https://www.w3.org/ns/activitystreams",
        "id": format!("{}/reports/{report}", fed.origin),
        "type": "Flag",
        "actor": fed.instance_actor_iri(),
        "content": comment,
        "object": object,
    })
}

/// A `Flag` received from `reporter` naming `objects` (actor and status IRIs): one report per
/// local account named, directly or by one of its statuses; a `Flag` id seen before stores
/// nothing. Returns how many reports were stored.
pub async fn received(
    tx: &mut PgConnection,
    fed: &Federation,
    flag_id: &str,
    reporter: &str,
    objects: &[String],
    comment: &str,
) -> Result<usize, sqlx::Error> {
    // Our accounts named directly, and our posts named (with their authors).
    let mut targets: Vec<(Uuid, String, Vec<Uuid>)> = Vec::new();
    let named: Vec<&str> = objects
        .iter()
        .filter_map(|iri| fed.local_username(iri))
        .collect();
    let accounts: Vec<(Uuid, String)> =
        sqlx::query_as("SELECT id, username FROM accounts WHERE username = ANY($1)")
            .bind(&named)
            .fetch_all(&mut *tx)
            .await?;
    for (id, username) in accounts {
        targets.push((id, fed.actor_iri(&username), Vec::new()));
    }
    let posts: Vec<(Uuid, Uuid, String)> = sqlx::query_as(
        "SELECT s.id, a.id, a.username FROM statuses s JOIN accounts a ON a.id = s.account_id
          WHERE s.uri = ANY($1)",
    )
    .bind(objects)
    .fetch_all(&mut *tx)
    .await?;
    for (post, account, username) in posts {
        match targets.iter_mut().find(|(id, _, _)| *id == account) {
            Some((_, _, statuses)) => statuses.push(post),
            None => targets.push((account, fed.actor_iri(&username), vec![post])),
        }
    }
    let comment: String = comment.chars().take(MAX_RECEIVED_COMMENT_CHARS).collect();
    let mut stored = 0;
    for (account, iri, statuses) in targets {
        stored += sqlx::query(
            "INSERT INTO reports (id, reporter_iri, target_account_id, target_iri, status_ids,
                                  comment, flag_id)
             VALUES ($1, $2, $3, $4, $5, $6, $7)
             ON CONFLICT (flag_id, target_account_id) WHERE flag_id IS NOT NULL DO NOTHING",
        )
        .bind(Uuid::now_v7())
        .bind(reporter)
        .bind(account)
        .bind(&iri)
        .bind(&statuses)
        .bind(&comment)
        .bind(flag_id)
        .execute(&mut *tx)
        .await?
        .rows_affected() as usize;
    }
    Ok(stored)
}

/// One report by id.
pub async fn find(pool: &PgPool, id: Uuid) -> Result<Option<Report>, sqlx::Error> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM reports WHERE id = $1"
    )))
    .bind(id)
    .fetch_optional(pool)
    .await
}

/// Marks a report resolved (`true`) or open again; `None` when there is no such report.
pub async fn set_resolved(
    pool: &PgPool,
    id: Uuid,
    resolved: bool,
) -> Result<Option<Report>, sqlx::Error> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "UPDATE reports
            SET action_taken_at = CASE WHEN $2 THEN coalesce(action_taken_at, now()) END,
                updated_at = now()
          WHERE id = $1 RETURNING {COLUMNS}"
    )))
    .bind(id)
    .bind(resolved)
    .fetch_optional(pool)
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(comment: &str, statuses: usize) -> NewReport {
        NewReport {
            target: Uuid::nil(),
            status_ids: (0..statuses).map(|_| Uuid::now_v7()).collect(),
            comment: comment.into(),
            category: Category::Other,
            forward: false,
        }
    }

    #[test]
    fn comments_and_statuses_are_bounded() {
        assert!(check(&req(&"é".repeat(MAX_COMMENT_CHARS), MAX_STATUSES)).is_ok());
        assert!(matches!(
            check(&req(&"é".repeat(MAX_COMMENT_CHARS + 1), 0)),
            Err(ReportError::Invalid(_))
        ));
        assert!(matches!(
            check(&req("", MAX_STATUSES + 1)),
            Err(ReportError::Invalid(_))
        ));
    }

    #[test]
    fn categories_are_mastodons() {
        for c in ["spam", "legal", "violation", "other"] {
            assert_eq!(Category::parse(c).map(Category::as_str), Some(c));
        }
        assert_eq!(Category::parse("Spam"), None);
        assert_eq!(Category::parse(""), None);
    }
}
