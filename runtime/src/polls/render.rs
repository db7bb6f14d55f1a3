//! Polls, statuses and notifications in Mastodon's JSON shapes (the parts this server has).

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use uuid::Uuid;

use super::storage::tally;

/// Mastodon's Poll entity, if the poll exists and `viewer` may read its status (R-MAPI-VIS:
/// a poll of a direct status is no one else's to read); `voted`/`own_votes` when a viewer is
/// known.
pub async fn poll_json(
    conn: &mut sqlx::PgConnection,
    poll_id: Uuid,
    viewer: Option<Uuid>,
) -> Result<Option<Value>, sqlx::Error> {
    let status: Option<Uuid> = sqlx::query_scalar("SELECT status_id FROM polls WHERE id = $1")
        .bind(poll_id)
        .fetch_optional(&mut *conn)
        .await?;
    match status {
        Some(status) if crate::statuses::access::can_see(conn, viewer, status).await? => {
            poll_of_readable_status(conn, poll_id, viewer).await
        }
        _ => Ok(None),
    }
}

/// The Poll entity of a status already known to be readable by `viewer` (the status
/// renderers, whose statuses went through `statuses::access`).
pub(crate) async fn poll_of_readable_status(
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
    mentions: Value,
    visibility: String,
}

pub fn account_json(id: Uuid, username: &str) -> Value {
    json!({ "id": id.to_string(), "username": username, "acct": username })
}

/// Mastodon's Status entity (the parts this server has), for a node without federation
/// configured. It does not check who may read: its one caller
/// (`web::mastodon::statuses::render`) keeps only the ids `statuses::access::visible` allows.
pub async fn status_json(
    conn: &mut sqlx::PgConnection,
    status_id: Uuid,
    viewer: Option<Uuid>,
) -> Result<Option<Value>, sqlx::Error> {
    let row: Option<StatusRow> = sqlx::query_as(
        "SELECT s.id, s.uri, s.content, s.created_at, s.edited_at, s.account_id, a.username,
                p.id AS poll_id, s.mentions, s.visibility
           FROM statuses s JOIN accounts a ON a.id = s.account_id
           LEFT JOIN polls p ON p.status_id = s.id
          WHERE s.id = $1",
    )
    .bind(status_id)
    .fetch_optional(&mut *conn)
    .await?;
    let Some(s) = row else { return Ok(None) };
    let poll = match s.poll_id {
        Some(p) => poll_of_readable_status(conn, p, viewer).await?,
        None => None,
    };
    // The same HTML our federation sends (`federation::statuses::object`).
    let mentions = crate::federation::mentions::parse_stored(s.mentions);
    let content = crate::content::render(&s.content, &s.uri, &mentions).html;
    Ok(Some(json!({
        "id": s.id.to_string(),
        "uri": s.uri,
        "created_at": s.created_at,
        "edited_at": s.edited_at,
        "content": content,
        "visibility": s.visibility,
        "account": account_json(s.account_id, &s.username),
        "poll": poll,
    })))
}
