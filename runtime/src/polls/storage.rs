//! Statuses and polls in PostgreSQL (votes are `voting`'s). The writes run in the caller's
//! transaction (`insert_status`, `update_status`) so the caller can queue the status's delivery
//! in the same commit; `create_status`/`edit_status` are the same writes in a transaction of their
//! own. Each commits before anyone schedules: admission is its own transaction, so a busy
//! admission lock can only defer a wakeup, never fail or slow down the user's write.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use sqlx::{PgConnection, PgExecutor, PgPool};
use uuid::Uuid;

use super::validation::{Invalid, NewPoll, StatusEdit};

#[derive(Debug, thiserror::Error)]
pub enum PollError {
    /// What is missing: "poll" or "status" (404).
    #[error("{0} not found")]
    NotFound(&'static str),
    /// Someone else's status (403).
    #[error("only the author can edit this status")]
    NotAuthor,
    /// A vote across a block, either way (403, Mastodon's words).
    #[error("This action is not allowed")]
    AcrossBlock,
    /// Well-formed but not acceptable (422).
    #[error(transparent)]
    Invalid(#[from] Invalid),
    #[error("database: {0}")]
    Db(#[from] sqlx::Error),
}

/// Inserts a status (and its poll) in the caller's transaction. `actor_iri` is the author's
/// ActivityPub id when federation is on (the status id derives from it, and remote votes reply
/// to it). Returns the status and poll ids.
pub async fn insert_status(
    tx: &mut PgConnection,
    account_id: Uuid,
    actor_iri: Option<&str>,
    content: &str,
    poll: Option<&NewPoll>,
) -> Result<(Uuid, Option<Uuid>), sqlx::Error> {
    let status_id = Uuid::now_v7();
    let uri = match actor_iri {
        Some(a) => format!("{a}/statuses/{status_id}"),
        None => format!("urn:uuid:{status_id}"),
    };
    sqlx::query("INSERT INTO statuses (id, account_id, uri, content) VALUES ($1, $2, $3, $4)")
        .bind(status_id)
        .bind(account_id)
        .bind(&uri)
        .bind(content)
        .execute(&mut *tx)
        .await?;
    let mut poll_id = None;
    if let Some(p) = poll {
        let id = Uuid::now_v7();
        sqlx::query(
            "INSERT INTO polls (id, status_id, options, multiple, expires_at)
             VALUES ($1, $2, $3, $4, now() + $5 * interval '1 second')",
        )
        .bind(id)
        .bind(status_id)
        .bind(json!(p.options))
        .bind(p.multiple)
        .bind(p.expires_in as f64)
        .execute(&mut *tx)
        .await?;
        poll_id = Some(id);
    }
    Ok((status_id, poll_id))
}

/// [`insert_status`] in a transaction of its own (nothing published).
pub async fn create_status(
    pool: &PgPool,
    account_id: Uuid,
    actor_iri: Option<&str>,
    content: &str,
    poll: Option<&NewPoll>,
) -> Result<(Uuid, Option<Uuid>), sqlx::Error> {
    let mut tx = pool.begin().await?;
    let ids = insert_status(&mut tx, account_id, actor_iri, content, poll).await?;
    tx.commit().await?;
    Ok(ids)
}

/// What an edit did.
pub struct Edited {
    /// The status's poll, if it has one (to reschedule its wakeup).
    pub poll_id: Option<Uuid>,
    /// Whether the text or the end time changed, so remote copies need an `Update`.
    pub changed: bool,
}

/// Edits a status of `account_id` in the caller's transaction.
pub async fn update_status(
    tx: &mut PgConnection,
    status_id: Uuid,
    account_id: Uuid,
    edit: &StatusEdit,
) -> Result<Edited, PollError> {
    let owner: Option<Uuid> =
        sqlx::query_scalar("SELECT account_id FROM statuses WHERE id = $1 FOR UPDATE")
            .bind(status_id)
            .fetch_optional(&mut *tx)
            .await?;
    match owner {
        None => return Err(PollError::NotFound("status")),
        Some(o) if o != account_id => return Err(PollError::NotAuthor),
        Some(_) => {}
    }
    let poll: Option<(Uuid, Value, bool, bool)> = sqlx::query_as(
        "SELECT id, options, multiple, expires_at <= now() FROM polls WHERE status_id = $1 FOR UPDATE",
    )
    .bind(status_id)
    .fetch_optional(&mut *tx)
    .await?;
    if edit.has_poll {
        let Some((poll_id, options, multiple, expired)) = &poll else {
            return Err(Invalid::NoPoll.into());
        };
        let stored: Vec<String> = serde_json::from_value(options.clone()).unwrap_or_default();
        if edit.options.as_ref().is_some_and(|o| *o != stored)
            || edit.multiple.is_some_and(|m| m != *multiple)
        {
            return Err(Invalid::OptionsFixed.into());
        }
        if let Some(secs) = edit.expires_in {
            if *expired {
                return Err(Invalid::Ended.into());
            }
            sqlx::query(
                "UPDATE polls SET expires_at = now() + $2 * interval '1 second' WHERE id = $1",
            )
            .bind(poll_id)
            .bind(secs as f64)
            .execute(&mut *tx)
            .await?;
        }
    }
    let changed = edit.content.is_some() || edit.expires_in.is_some();
    if changed {
        sqlx::query(
            "UPDATE statuses SET content = COALESCE($2, content), edited_at = now() WHERE id = $1",
        )
        .bind(status_id)
        .bind(&edit.content)
        .execute(&mut *tx)
        .await?;
    }
    Ok(Edited {
        poll_id: poll.map(|p| p.0),
        changed,
    })
}

/// [`update_status`] in a transaction of its own (nothing published); returns the poll id.
pub async fn edit_status(
    pool: &PgPool,
    status_id: Uuid,
    account_id: Uuid,
    edit: &StatusEdit,
) -> Result<Option<Uuid>, PollError> {
    let mut tx = pool.begin().await?;
    let edited = update_status(&mut tx, status_id, account_id, edit).await?;
    tx.commit().await?;
    Ok(edited.poll_id)
}

/// A poll with its current counts: what the Mastodon entity and the ActivityPub `Question`
/// both show. Ours counts its votes; a remote one shows its origin's counts
/// (`polls::question`) with our users' votes since (`polls::voting`).
pub struct PollTally {
    pub id: Uuid,
    pub options: Vec<String>,
    pub multiple: bool,
    /// `None`: a remote poll without end.
    pub expires_at: Option<DateTime<Utc>>,
    pub expired: bool,
    /// Votes per option, in option order.
    pub counts: Vec<i64>,
    /// Distinct voters (local accounts and remote actors); `None` for a remote poll of
    /// several choices whose origin does not say.
    pub voters: Option<i64>,
}

#[derive(sqlx::FromRow)]
struct PollRow {
    id: Uuid,
    options: Value,
    multiple: bool,
    expires_at: Option<DateTime<Utc>>,
    expired: bool,
    remote: bool,
    remote_counts: Option<Vec<i64>>,
    /// A remote poll's `votersCount`, or our poll's distinct voters.
    voters: Option<i64>,
}

/// The poll and its counts, read in the caller's connection.
pub async fn tally(
    conn: &mut PgConnection,
    poll_id: Uuid,
) -> Result<Option<PollTally>, sqlx::Error> {
    let row: Option<PollRow> = sqlx::query_as(
        "SELECT p.id, p.options, p.multiple, p.expires_at,
                coalesce(p.expires_at <= now(), false) AS expired,
                p.remote_post_id IS NOT NULL AS remote, p.remote_counts,
                CASE WHEN p.remote_post_id IS NULL
                     THEN (SELECT count(DISTINCT COALESCE(v.account_id::text, v.actor_iri))
                             FROM poll_votes v WHERE v.poll_id = p.id)
                     ELSE p.remote_voters END AS voters
           FROM polls p WHERE p.id = $1",
    )
    .bind(poll_id)
    .fetch_optional(&mut *conn)
    .await?;
    let Some(p) = row else { return Ok(None) };
    let options: Vec<String> = serde_json::from_value(p.options).unwrap_or_default();
    let (counts, voters) = if p.remote {
        let stored = p.remote_counts.unwrap_or_default();
        let counts: Vec<i64> = (0..options.len())
            .map(|i| stored.get(i).copied().unwrap_or(0))
            .collect();
        // One choice each: as many voters as votes.
        let voters = match (p.voters, p.multiple) {
            (Some(n), _) => Some(n),
            (None, false) => Some(counts.iter().sum()),
            (None, true) => None,
        };
        (counts, voters)
    } else {
        (local_counts(conn, poll_id, options.len()).await?, p.voters)
    };
    Ok(Some(PollTally {
        id: p.id,
        options,
        multiple: p.multiple,
        expires_at: p.expires_at,
        expired: p.expired,
        counts,
        voters,
    }))
}

/// Our poll's votes per option (of `n`).
async fn local_counts(
    conn: &mut PgConnection,
    poll_id: Uuid,
    n: usize,
) -> Result<Vec<i64>, sqlx::Error> {
    let by_choice: Vec<(i32, i64)> = sqlx::query_as(
        "SELECT choice, count(*) FROM poll_votes WHERE poll_id = $1 GROUP BY choice",
    )
    .bind(poll_id)
    .fetch_all(&mut *conn)
    .await?;
    let counts = (0..n)
        .map(|i| {
            by_choice
                .iter()
                .find(|(c, _)| *c as usize == i)
                .map_or(0, |(_, n)| *n)
        })
        .collect();
    Ok(counts)
}

/// Expired polls that have no notifications yet (what recovery looks for).
pub async fn unnotified_expired<'e>(exec: impl PgExecutor<'e>) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT count(*) FROM polls WHERE notified_at IS NULL AND expires_at <= now()",
    )
    .fetch_one(exec)
    .await
}
