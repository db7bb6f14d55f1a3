//! Polls on local posts and their expiry notifications (SPEC.md §7, issue 6).
//!
//! Data walk: a web request writes the status/poll/vote/expiry and commits, then asks
//! `admission::schedule` for a wakeup (`hollo.poll-notification.v1 {pollId}`, one stored
//! message per poll). The handler (`tasks::poll_notification`) re-reads the poll under a row
//! lock: not expired yet → it replaces its message by the next wakeup; expired → it writes one
//! notification per local recipient (author + local voters, unique per poll × account) and
//! marks the poll notified, in the transaction that completes its message. Anything that went
//! wrong on the way (deferral at the cap, lock timeout, a crash after commit, exhausted
//! retries) leaves an expired poll without `notified_at`, which `recovery` schedules again.
//!
//! Polls belong to local statuses, so the author is always local: every poll has a local
//! recipient and is scheduled. Remote votes (`remote`) change neither the expiry nor the local
//! recipients, so they schedule nothing; the poll's wakeup already exists or recovery finds it.

pub mod admission;
pub mod recovery;
pub mod remote;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::federation::statuses::{self, Announce};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sqlx::{PgExecutor, PgPool};
use uuid::Uuid;

pub const KIND: &str = "hollo.poll-notification.v1";
pub const LOG_TARGET: &str = "hollo.poll-notifications.queue";

/// Mastodon's defaults: 2–4 options of at most 50 characters, a status of at most 500.
pub const MIN_OPTIONS: usize = 2;
pub const MAX_OPTIONS: usize = 4;
pub const MAX_OPTION_CHARS: usize = 50;
pub const MAX_STATUS_CHARS: usize = 500;
/// Expiry bounds in seconds. Mastodon clients send at least 300; shorter ones are accepted
/// (handy for demos and tests) because nothing here depends on a minimum.
pub const MIN_EXPIRES_IN: i64 = 1;
/// Mastodon's maximum: one month.
pub const MAX_EXPIRES_IN: i64 = 2_629_746;

pub fn coalesce_key(poll_id: Uuid) -> String {
    format!("hollo.poll-notification:{poll_id}")
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PollPayload {
    pub poll_id: Uuid,
}

pub fn payload(poll_id: Uuid) -> Value {
    json!({ "pollId": poll_id })
}

/// The longest wakeup delay (R-POLL-3). Web nodes schedule outside any task context, so the
/// node sets this once at start from `POLL_WAKEUP_CHUNK_SECONDS`.
static WAKEUP_CHUNK_SECS: AtomicU64 = AtomicU64::new(7 * 86_400);

pub fn set_wakeup_chunk(chunk: Duration) {
    WAKEUP_CHUNK_SECS.store(chunk.as_secs().max(1), Ordering::Relaxed);
}

pub fn wakeup_chunk() -> Duration {
    Duration::from_secs(WAKEUP_CHUNK_SECS.load(Ordering::Relaxed))
}

#[derive(Debug, thiserror::Error)]
pub enum PollError {
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Forbidden(String),
    /// Well-formed but not acceptable (422).
    #[error("{0}")]
    Invalid(String),
    #[error("database: {0}")]
    Db(#[from] sqlx::Error),
}

// ---------------------------------------------------------------------------------------------
// Request parsing: pure, so every rejection is tested without a database.

#[derive(Clone, Debug, PartialEq)]
pub struct NewPoll {
    pub options: Vec<String>,
    pub expires_in: i64,
    pub multiple: bool,
}

/// An integer given as a JSON number or a numeric string (Mastodon clients send both).
fn integer(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

pub fn parse_expires_in(v: &Value) -> Result<i64, String> {
    let s = integer(v).ok_or("poll.expires_in must be a whole number of seconds")?;
    if !(MIN_EXPIRES_IN..=MAX_EXPIRES_IN).contains(&s) {
        return Err(format!(
            "poll.expires_in must be from {MIN_EXPIRES_IN} to {MAX_EXPIRES_IN} seconds"
        ));
    }
    Ok(s)
}

fn parse_options(v: &Value) -> Result<Vec<String>, String> {
    let arr = v
        .as_array()
        .ok_or("poll.options must be an array of strings")?;
    if !(MIN_OPTIONS..=MAX_OPTIONS).contains(&arr.len()) {
        return Err(format!(
            "a poll needs {MIN_OPTIONS} to {MAX_OPTIONS} options"
        ));
    }
    let mut out: Vec<String> = Vec::with_capacity(arr.len());
    for o in arr {
        let t = o
            .as_str()
            .map(str::trim)
            .ok_or("poll.options must be an array of strings")?;
        if t.is_empty() || t.chars().count() > MAX_OPTION_CHARS {
            return Err(format!(
                "each poll option needs 1 to {MAX_OPTION_CHARS} characters"
            ));
        }
        if out.iter().any(|x| x == t) {
            return Err(format!("duplicate poll option {t:?}"));
        }
        out.push(t.to_string());
    }
    Ok(out)
}

fn parse_multiple(v: Option<&Value>) -> Result<bool, String> {
    match v {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(Value::String(s)) if s == "true" || s == "false" => Ok(s == "true"),
        Some(_) => Err("poll.multiple must be true or false".into()),
    }
}

pub fn parse_new_poll(v: &Value) -> Result<NewPoll, String> {
    if !v.is_object() {
        return Err("poll must be an object with options and expires_in".into());
    }
    Ok(NewPoll {
        options: parse_options(v.get("options").ok_or("poll.options is required")?)?,
        expires_in: parse_expires_in(v.get("expires_in").ok_or("poll.expires_in is required")?)?,
        multiple: parse_multiple(v.get("multiple"))?,
    })
}

/// `POST /api/v1/statuses` body → (text, poll).
pub fn parse_create(body: &Value) -> Result<(String, Option<NewPoll>), String> {
    if !body.is_object() {
        return Err("expected a JSON object".into());
    }
    let status = match body.get("status") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(_) => return Err("status must be a string".into()),
    };
    if status.chars().count() > MAX_STATUS_CHARS {
        return Err(format!(
            "status is longer than {MAX_STATUS_CHARS} characters"
        ));
    }
    let poll = match body.get("poll") {
        None | Some(Value::Null) => None,
        Some(p) => Some(parse_new_poll(p)?),
    };
    if status.trim().is_empty() && poll.is_none() {
        return Err("a status needs text or a poll".into());
    }
    Ok((status, poll))
}

/// `POST /api/v1/polls/{id}/votes` body → choice indices (shape only; range checks need the
/// poll).
pub fn parse_choices(body: &Value) -> Result<Vec<i64>, String> {
    let arr = body
        .get("choices")
        .and_then(Value::as_array)
        .ok_or("expected {\"choices\": [option indices]}")?;
    if arr.is_empty() {
        return Err("choices must not be empty".into());
    }
    let mut out = Vec::with_capacity(arr.len());
    for c in arr {
        let i = integer(c).ok_or("choices must be option indices")?;
        if out.contains(&i) {
            return Err(format!("choice {i} given twice"));
        }
        out.push(i);
    }
    Ok(out)
}

/// Checks choices against the poll.
pub fn check_choices(choices: &[i64], options: usize, multiple: bool) -> Result<(), String> {
    if !multiple && choices.len() != 1 {
        return Err("this poll allows a single choice".into());
    }
    if let Some(bad) = choices.iter().find(|c| **c < 0 || **c >= options as i64) {
        return Err(format!(
            "choice {bad} is not an option of this poll (0 to {})",
            options.saturating_sub(1)
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Writes. Each commits before the caller schedules: admission is its own transaction, so a
// busy admission lock can only defer a wakeup, never fail or slow down the user's write.

/// Creates a status (and its poll). `actor_iri` is the author's ActivityPub id when federation
/// is on (the status id derives from it, and remote votes reply to it).
pub async fn create_status(
    pool: &PgPool,
    account_id: Uuid,
    actor_iri: Option<&str>,
    content: &str,
    poll: Option<&NewPoll>,
    publish: Option<&crate::federation::Federation>,
) -> Result<(Uuid, Option<Uuid>), sqlx::Error> {
    let status_id = Uuid::now_v7();
    let uri = match actor_iri {
        Some(a) => format!("{a}/statuses/{status_id}"),
        None => format!("urn:uuid:{status_id}"),
    };
    let mut tx = pool.begin().await?;
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
    // Followers get the `Create` (a `Question` for a poll) from the same commit: a status is
    // never stored without its delivery, nor delivered without being stored.
    if let Some(fed) = publish {
        statuses::publish(&mut tx, fed, account_id, status_id, Announce::Create).await?;
    }
    tx.commit().await?;
    Ok((status_id, poll_id))
}

/// A local account votes. The poll row is locked so the expiry check and the vote are one
/// decision against the notification handler (which takes the same lock).
pub async fn vote(
    pool: &PgPool,
    poll_id: Uuid,
    account_id: Uuid,
    choices: &[i64],
) -> Result<(), PollError> {
    let mut tx = pool.begin().await?;
    let row: Option<(Value, bool, bool)> = sqlx::query_as(
        "SELECT options, multiple, expires_at <= now() FROM polls WHERE id = $1 FOR UPDATE",
    )
    .bind(poll_id)
    .fetch_optional(&mut *tx)
    .await?;
    let (options, multiple, expired) =
        row.ok_or_else(|| PollError::NotFound("poll not found".into()))?;
    if expired {
        return Err(PollError::Invalid("the poll has already ended".into()));
    }
    let n = options.as_array().map_or(0, Vec::len);
    check_choices(choices, n, multiple).map_err(PollError::Invalid)?;
    let voted: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM poll_votes WHERE poll_id = $1 AND account_id = $2)",
    )
    .bind(poll_id)
    .bind(account_id)
    .fetch_one(&mut *tx)
    .await?;
    if voted {
        return Err(PollError::Invalid(
            "you have already voted on this poll".into(),
        ));
    }
    let choices32: Vec<i32> = choices.iter().map(|c| *c as i32).collect();
    sqlx::query(
        "INSERT INTO poll_votes (poll_id, account_id, choice) SELECT $1, $2, c FROM unnest($3::int[]) AS c",
    )
    .bind(poll_id)
    .bind(account_id)
    .bind(&choices32)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(())
}

/// What `PUT /api/v1/statuses/{id}` may change.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StatusEdit {
    pub content: Option<String>,
    pub expires_in: Option<i64>,
    /// Given options/multiple must equal the stored ones: changing them is not supported.
    pub options: Option<Vec<String>>,
    pub multiple: Option<bool>,
    pub has_poll: bool,
}

pub fn parse_edit(body: &Value) -> Result<StatusEdit, String> {
    if !body.is_object() {
        return Err("expected a JSON object".into());
    }
    let mut edit = StatusEdit::default();
    match body.get("status") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) if s.chars().count() <= MAX_STATUS_CHARS => {
            edit.content = Some(s.clone())
        }
        Some(Value::String(_)) => {
            return Err(format!(
                "status is longer than {MAX_STATUS_CHARS} characters"
            ));
        }
        Some(_) => return Err("status must be a string".into()),
    }
    match body.get("poll") {
        None | Some(Value::Null) => {}
        Some(p) if p.is_object() => {
            edit.has_poll = true;
            if let Some(e) = p.get("expires_in").filter(|v| !v.is_null()) {
                edit.expires_in = Some(parse_expires_in(e)?);
            }
            if let Some(o) = p.get("options").filter(|v| !v.is_null()) {
                edit.options = Some(parse_options(o)?);
            }
            if p.get("multiple").is_some_and(|v| !v.is_null()) {
                edit.multiple = Some(parse_multiple(p.get("multiple"))?);
            }
        }
        Some(_) => return Err("poll must be an object".into()),
    }
    if edit.content.is_none() && !edit.has_poll {
        return Err("nothing to change: give status and/or poll.expires_in".into());
    }
    Ok(edit)
}

/// Edits a status of `account_id`; returns its poll id when it has one (to reschedule).
pub async fn edit_status(
    pool: &PgPool,
    status_id: Uuid,
    account_id: Uuid,
    edit: &StatusEdit,
    publish: Option<&crate::federation::Federation>,
) -> Result<Option<Uuid>, PollError> {
    let mut tx = pool.begin().await?;
    let owner: Option<Uuid> =
        sqlx::query_scalar("SELECT account_id FROM statuses WHERE id = $1 FOR UPDATE")
            .bind(status_id)
            .fetch_optional(&mut *tx)
            .await?;
    match owner {
        None => return Err(PollError::NotFound("status not found".into())),
        Some(o) if o != account_id => {
            return Err(PollError::Forbidden(
                "only the author can edit this status".into(),
            ));
        }
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
            return Err(PollError::Invalid(
                "this status has no poll; adding one by editing is not supported".into(),
            ));
        };
        let stored: Vec<String> = serde_json::from_value(options.clone()).unwrap_or_default();
        if edit.options.as_ref().is_some_and(|o| *o != stored)
            || edit.multiple.is_some_and(|m| m != *multiple)
        {
            return Err(PollError::Invalid(
                "changing poll options is not supported; only poll.expires_in can change".into(),
            ));
        }
        if let Some(secs) = edit.expires_in {
            if *expired {
                return Err(PollError::Invalid("the poll has already ended".into()));
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
    if edit.content.is_some() || edit.expires_in.is_some() {
        sqlx::query(
            "UPDATE statuses SET content = COALESCE($2, content), edited_at = now() WHERE id = $1",
        )
        .bind(status_id)
        .bind(&edit.content)
        .execute(&mut *tx)
        .await?;
        // Remote copies learn the new text or end time from the same commit.
        if let Some(fed) = publish {
            let tag = Uuid::now_v7().to_string();
            let update = Announce::Update { tag: &tag };
            statuses::publish(&mut tx, fed, account_id, status_id, update).await?;
        }
    }
    tx.commit().await?;
    Ok(poll.map(|p| p.0))
}

// ---------------------------------------------------------------------------------------------
// Reads, in Mastodon's shapes.

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A poll with its current counts: what the Mastodon entity and the ActivityPub `Question`
/// both show.
pub struct PollTally {
    pub id: Uuid,
    pub options: Vec<String>,
    pub multiple: bool,
    pub expires_at: DateTime<Utc>,
    pub expired: bool,
    /// Votes per option, in option order.
    pub counts: Vec<i64>,
    /// Distinct voters (local accounts and remote actors).
    pub voters: i64,
}

#[derive(sqlx::FromRow)]
struct PollRow {
    id: Uuid,
    options: Value,
    multiple: bool,
    expires_at: DateTime<Utc>,
    expired: bool,
    voters: i64,
}

/// The poll and its counts, read in the caller's connection.
pub async fn tally(
    conn: &mut sqlx::PgConnection,
    poll_id: Uuid,
) -> Result<Option<PollTally>, sqlx::Error> {
    let row: Option<PollRow> = sqlx::query_as(
        "SELECT p.id, p.options, p.multiple, p.expires_at, p.expires_at <= now() AS expired,
                (SELECT count(DISTINCT COALESCE(v.account_id::text, v.actor_iri))
                   FROM poll_votes v WHERE v.poll_id = p.id) AS voters
           FROM polls p WHERE p.id = $1",
    )
    .bind(poll_id)
    .fetch_optional(&mut *conn)
    .await?;
    let Some(p) = row else { return Ok(None) };
    let by_choice: Vec<(i32, i64)> = sqlx::query_as(
        "SELECT choice, count(*) FROM poll_votes WHERE poll_id = $1 GROUP BY choice",
    )
    .bind(poll_id)
    .fetch_all(&mut *conn)
    .await?;
    let options: Vec<String> = serde_json::from_value(p.options).unwrap_or_default();
    let counts = (0..options.len())
        .map(|i| {
            by_choice
                .iter()
                .find(|(c, _)| *c as usize == i)
                .map_or(0, |(_, n)| *n)
        })
        .collect();
    Ok(Some(PollTally {
        id: p.id,
        options,
        multiple: p.multiple,
        expires_at: p.expires_at,
        expired: p.expired,
        counts,
        voters: p.voters,
    }))
}

/// Mastodon's Poll entity; `voted`/`own_votes` when a viewer is known.
pub async fn poll_json(
    conn: &mut sqlx::PgConnection,
    poll_id: Uuid,
    viewer: Option<Uuid>,
) -> Result<Option<Value>, sqlx::Error> {
    let Some(p) = tally(&mut *conn, poll_id).await? else {
        return Ok(None);
    };
    let options: Vec<Value> = p
        .options
        .iter()
        .zip(&p.counts)
        .map(|(t, n)| json!({ "title": t, "votes_count": n }))
        .collect();
    let votes: i64 = p.counts.iter().sum();
    let mut v = json!({
        "id": p.id.to_string(),
        "expires_at": p.expires_at,
        "expired": p.expired,
        "multiple": p.multiple,
        "votes_count": votes,
        "voters_count": p.voters,
        "options": options,
        "emojis": [],
    });
    if let Some(viewer) = viewer {
        let own: Vec<i32> = sqlx::query_scalar(
            "SELECT choice FROM poll_votes WHERE poll_id = $1 AND account_id = $2 ORDER BY choice",
        )
        .bind(poll_id)
        .bind(viewer)
        .fetch_all(&mut *conn)
        .await?;
        v["voted"] = json!(!own.is_empty());
        v["own_votes"] = json!(own);
    }
    Ok(Some(v))
}

#[derive(sqlx::FromRow)]
struct StatusRow {
    id: Uuid,
    uri: String,
    content: String,
    created_at: DateTime<Utc>,
    edited_at: Option<DateTime<Utc>>,
    account_id: Uuid,
    username: String,
    poll_id: Option<Uuid>,
}

pub fn account_json(id: Uuid, username: &str) -> Value {
    json!({ "id": id.to_string(), "username": username, "acct": username })
}

/// Mastodon's Status entity (the parts this server has).
pub async fn status_json(
    conn: &mut sqlx::PgConnection,
    status_id: Uuid,
    viewer: Option<Uuid>,
) -> Result<Option<Value>, sqlx::Error> {
    let row: Option<StatusRow> = sqlx::query_as(
        "SELECT s.id, s.uri, s.content, s.created_at, s.edited_at, s.account_id, a.username,
                p.id AS poll_id
           FROM statuses s JOIN accounts a ON a.id = s.account_id
           LEFT JOIN polls p ON p.status_id = s.id
          WHERE s.id = $1",
    )
    .bind(status_id)
    .fetch_optional(&mut *conn)
    .await?;
    let Some(s) = row else { return Ok(None) };
    let poll = match s.poll_id {
        Some(p) => poll_json(conn, p, viewer).await?,
        None => None,
    };
    let content = if s.content.is_empty() {
        String::new()
    } else {
        format!("<p>{}</p>", html_escape(&s.content))
    };
    Ok(Some(json!({
        "id": s.id.to_string(),
        "uri": s.uri,
        "created_at": s.created_at,
        "edited_at": s.edited_at,
        "content": content,
        "visibility": "public",
        "account": account_json(s.account_id, &s.username),
        "poll": poll,
    })))
}

/// `GET /api/v1/notifications`: newest first, `max_id` pages back. Only `poll` exists so far.
pub async fn notifications_json(
    pool: &PgPool,
    account_id: Uuid,
    limit: i64,
    max_id: Option<i64>,
) -> Result<Vec<Value>, sqlx::Error> {
    let rows: Vec<(i64, String, DateTime<Utc>, Option<Uuid>)> = sqlx::query_as(
        "SELECT id, type, created_at, status_id FROM notifications
          WHERE account_id = $1 AND ($2::bigint IS NULL OR id < $2)
          ORDER BY id DESC LIMIT $3",
    )
    .bind(account_id)
    .bind(max_id)
    .bind(limit)
    .fetch_all(pool)
    .await?;
    let mut conn = pool.acquire().await?;
    let mut out = Vec::with_capacity(rows.len());
    for (id, ty, created_at, status_id) in rows {
        let status = match status_id {
            Some(s) => status_json(&mut conn, s, Some(account_id)).await?,
            None => None,
        };
        // Mastodon's poll notification names the poll's author as its account.
        let account = status
            .as_ref()
            .and_then(|s| s.get("account").cloned())
            .unwrap_or(Value::Null);
        out.push(json!({
            "id": id.to_string(), "type": ty, "created_at": created_at,
            "account": account, "status": status,
        }));
    }
    Ok(out)
}

/// Expired polls that have no notifications yet (what recovery looks for).
pub async fn unnotified_expired<'e>(exec: impl PgExecutor<'e>) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT count(*) FROM polls WHERE notified_at IS NULL AND expires_at <= now()",
    )
    .fetch_one(exec)
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_bodies_are_validated() {
        let ok = parse_create(
            &json!({"status": "Tea?", "poll": {"options": ["yes", "no"], "expires_in": 300}}),
        )
        .expect("valid");
        assert_eq!(
            ok.1,
            Some(NewPoll {
                options: vec!["yes".into(), "no".into()],
                expires_in: 300,
                multiple: false
            })
        );
        let s = parse_create(&json!({"status": "x", "poll": {"options": ["a", "b"], "expires_in": "60", "multiple": true}}))
            .expect("string seconds are accepted");
        assert!(s.1.is_some_and(|p| p.multiple && p.expires_in == 60));
        for (body, want) in [
            (json!([]), "JSON object"),
            (json!({}), "text or a poll"),
            (json!({"status": 3}), "status must be a string"),
            (
                json!({"status": "x", "poll": {"options": ["a"], "expires_in": 60}}),
                "2 to 4",
            ),
            (
                json!({"status": "x", "poll": {"options": ["a", "b", "c", "d", "e"], "expires_in": 60}}),
                "2 to 4",
            ),
            (
                json!({"status": "x", "poll": {"options": ["a", "a"], "expires_in": 60}}),
                "duplicate",
            ),
            (
                json!({"status": "x", "poll": {"options": ["a", ""], "expires_in": 60}}),
                "1 to 50",
            ),
            (
                json!({"status": "x", "poll": {"options": ["a", "x".repeat(51)], "expires_in": 60}}),
                "1 to 50",
            ),
            (
                json!({"status": "x", "poll": {"options": ["a", 1], "expires_in": 60}}),
                "array of strings",
            ),
            (
                json!({"status": "x", "poll": {"options": ["a", "b"]}}),
                "expires_in is required",
            ),
            (
                json!({"status": "x", "poll": {"options": ["a", "b"], "expires_in": 0}}),
                "from 1",
            ),
            (
                json!({"status": "x", "poll": {"options": ["a", "b"], "expires_in": 9_999_999}}),
                "from 1",
            ),
            (
                json!({"status": "x", "poll": {"options": ["a", "b"], "expires_in": "soon"}}),
                "whole number",
            ),
            (
                json!({"status": "x", "poll": {"options": ["a", "b"], "expires_in": 60, "multiple": 2}}),
                "true or false",
            ),
            (json!({"status": "x".repeat(501)}), "longer than 500"),
        ] {
            let err = parse_create(&body).expect_err(&body.to_string());
            assert!(err.contains(want), "{body}: {err}");
        }
    }

    #[test]
    fn choices_are_validated() {
        assert_eq!(parse_choices(&json!({"choices": [1, "0"]})), Ok(vec![1, 0]));
        for body in [
            json!({}),
            json!({"choices": []}),
            json!({"choices": ["a"]}),
            json!({"choices": [1, 1]}),
        ] {
            assert!(parse_choices(&body).is_err(), "{body}");
        }
        assert!(check_choices(&[0], 2, false).is_ok());
        assert!(check_choices(&[0, 1], 2, true).is_ok());
        assert!(check_choices(&[0, 1], 2, false).is_err());
        assert!(check_choices(&[2], 2, false).is_err());
        assert!(check_choices(&[-1], 2, true).is_err());
    }

    #[test]
    fn edits_are_validated() {
        let e = parse_edit(&json!({"poll": {"expires_in": 120}})).expect("valid");
        assert_eq!(e.expires_in, Some(120));
        assert!(e.has_poll);
        assert!(parse_edit(&json!({})).is_err());
        assert!(parse_edit(&json!({"poll": {"expires_in": -5}})).is_err());
        assert!(parse_edit(&json!({"poll": 5})).is_err());
        assert!(parse_edit(&json!({"status": false})).is_err());
    }
}
