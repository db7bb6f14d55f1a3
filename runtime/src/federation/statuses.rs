//! Local statuses as ActivityPub objects: a `Note`, or a `Question` when the status carries a
//! poll (SPEC.md §8, issue 6 follow-up). A new status is delivered to the author's followers as
//! a `Create` in the transaction that stores it (one delivery per inbox, shared inbox
//! preferred), and its URI (`<actor>/statuses/<id>`) serves the object, so remote servers can
//! show the poll and their users can vote on it.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use sqlx::PgConnection;
use uuid::Uuid;

use super::Federation;
use super::actor::{AS_CONTEXT, PUBLIC};
use super::delivery::{Recipient, queue_activity};

/// A local status as stored, with its poll if it has one.
pub struct LocalStatus {
    pub id: Uuid,
    pub uri: String,
    pub username: String,
    pub content: String,
    pub created_at: DateTime<Utc>,
    pub poll: Option<LocalPoll>,
}

pub struct LocalPoll {
    pub options: Vec<String>,
    pub multiple: bool,
    pub expires_at: DateTime<Utc>,
    /// Votes per option, in option order.
    pub counts: Vec<i64>,
    pub voters: i64,
}

/// The status's object: `Note`, or `Question` with `oneOf`/`anyOf` and the current counts
/// (`closed` once it has ended, `endTime` before).
pub fn object(fed: &Federation, s: &LocalStatus, now: DateTime<Utc>) -> Value {
    let actor = fed.actor_iri(&s.username);
    let mut o = json!({
        "@context": AS_CONTEXT,
        "id": s.uri, "type": "Note", "attributedTo": actor,
        "content": s.content, "published": s.created_at,
        "to": [PUBLIC], "cc": [fed.followers(&s.username)],
    });
    if let Some(p) = &s.poll {
        o["type"] = json!("Question");
        let options: Vec<Value> = p
            .options
            .iter()
            .enumerate()
            .map(|(i, name)| {
                json!({ "type": "Note", "name": name,
                        "replies": { "type": "Collection", "totalItems": p.counts.get(i).copied().unwrap_or(0) } })
            })
            .collect();
        o[if p.multiple { "anyOf" } else { "oneOf" }] = json!(options);
        o["votersCount"] = json!(p.voters);
        if p.expires_at <= now {
            o["closed"] = json!(p.expires_at);
        } else {
            o["endTime"] = json!(p.expires_at);
        }
    }
    o
}

/// The author's followers we can deliver to (known inbox, not gone).
pub async fn followers(
    conn: &mut PgConnection,
    account: Uuid,
) -> Result<Vec<Recipient>, sqlx::Error> {
    let rows: Vec<(String, String, Option<String>)> = sqlx::query_as(
        "SELECT a.iri, a.inbox, a.shared_inbox FROM followers f
           JOIN remote_actors a ON a.iri = f.actor_iri
          WHERE f.account_id = $1 AND a.gone_at IS NULL",
    )
    .bind(account)
    .fetch_all(&mut *conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(actor_iri, inbox, shared_inbox)| Recipient {
            actor_iri,
            inbox,
            shared_inbox,
        })
        .collect())
}

/// Loads a local status (and its poll with current counts) by id, in the caller's connection.
pub async fn load(conn: &mut PgConnection, id: Uuid) -> Result<Option<LocalStatus>, sqlx::Error> {
    let row: Option<(String, String, String, DateTime<Utc>)> = sqlx::query_as(
        "SELECT s.uri, a.username, s.content, s.created_at
           FROM statuses s JOIN accounts a ON a.id = s.account_id WHERE s.id = $1",
    )
    .bind(id)
    .fetch_optional(&mut *conn)
    .await?;
    let Some((uri, username, content, created_at)) = row else {
        return Ok(None);
    };
    let poll: Option<(Uuid, Value, bool, DateTime<Utc>)> =
        sqlx::query_as("SELECT id, options, multiple, expires_at FROM polls WHERE status_id = $1")
            .bind(id)
            .fetch_optional(&mut *conn)
            .await?;
    let poll = match poll {
        None => None,
        Some((poll_id, options, multiple, expires_at)) => {
            let options: Vec<String> = options
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|o| o.as_str().unwrap_or_default().to_string())
                        .collect()
                })
                .unwrap_or_default();
            let (counts, voters): (Vec<i64>, i64) = sqlx::query_as(
                "SELECT ARRAY(SELECT count(v.choice) FROM generate_series(0, $2 - 1) c(i)
                                LEFT JOIN poll_votes v ON v.poll_id = $1 AND v.choice = c.i
                               GROUP BY c.i ORDER BY c.i),
                        (SELECT count(DISTINCT coalesce(account_id::text, actor_iri))
                           FROM poll_votes WHERE poll_id = $1)",
            )
            .bind(poll_id)
            .bind(options.len() as i32)
            .fetch_one(&mut *conn)
            .await?;
            Some(LocalPoll {
                options,
                multiple,
                expires_at,
                counts,
                voters,
            })
        }
    };
    Ok(Some(LocalStatus {
        id,
        uri,
        username,
        content,
        created_at,
        poll,
    }))
}

/// Queues the `Update` of a poll that just ended — final counts, `closed` — to the author's
/// followers and the remote voters, in the transaction that records the end (so once).
pub async fn publish_poll_end(
    tx: &mut PgConnection,
    fed: &Federation,
    account: Uuid,
    status: Uuid,
    poll: Uuid,
) -> Result<usize, sqlx::Error> {
    // One end per poll (its expiry cannot change afterwards): a stable id.
    publish_update(tx, fed, account, status, Some(poll), "closed").await
}

/// Queues the `Update` of an edited status (new text, or a poll's new end time) to the
/// author's followers and, for a poll, its remote voters, in the edit's transaction.
pub async fn publish_edit(
    tx: &mut PgConnection,
    fed: &Federation,
    account: Uuid,
    status: Uuid,
    poll: Option<Uuid>,
) -> Result<usize, sqlx::Error> {
    publish_update(tx, fed, account, status, poll, &Uuid::now_v7().to_string()).await
}

/// The `Update` of a status's current object, with id `<uri>/updates/<tag>`. A status minted
/// without federation (no actor URI) has no one to tell.
async fn publish_update(
    tx: &mut PgConnection,
    fed: &Federation,
    account: Uuid,
    status: Uuid,
    poll: Option<Uuid>,
    tag: &str,
) -> Result<usize, sqlx::Error> {
    let Some(s) = load(&mut *tx, status).await? else {
        return Ok(0);
    };
    if s.uri != fed.status_iri(&s.username, s.id) {
        return Ok(0);
    }
    let mut to = followers(&mut *tx, account).await?;
    let voters: Vec<(String, String, Option<String>)> = sqlx::query_as(
        "SELECT DISTINCT a.iri, a.inbox, a.shared_inbox FROM poll_votes v
           JOIN remote_actors a ON a.iri = v.actor_iri
          WHERE v.poll_id = $1 AND a.gone_at IS NULL",
    )
    .bind(poll)
    .fetch_all(&mut *tx)
    .await?;
    // (no poll: `poll_id = NULL` matches no vote)
    for (actor_iri, inbox, shared_inbox) in voters {
        if !to.iter().any(|r| r.actor_iri == actor_iri) {
            to.push(Recipient {
                actor_iri,
                inbox,
                shared_inbox,
            });
        }
    }
    if to.is_empty() {
        return Ok(0);
    }
    let object = object(fed, &s, Utc::now());
    let update = json!({
        "@context": AS_CONTEXT,
        "id": format!("{}/updates/{tag}", s.uri), "type": "Update",
        "actor": fed.actor_iri(&s.username),
        "to": object["to"], "cc": object["cc"], "object": object,
    });
    queue_activity(&mut *tx, account, &update, &to).await
}

/// Queues the `Create` of a just-stored status to the author's followers, in the transaction
/// that stored it. Returns how many inboxes it goes to.
pub async fn publish_create(
    tx: &mut PgConnection,
    fed: &Federation,
    account: Uuid,
    status: Uuid,
) -> Result<usize, sqlx::Error> {
    let Some(s) = load(&mut *tx, status).await? else {
        return Ok(0);
    };
    let to = followers(&mut *tx, account).await?;
    if to.is_empty() {
        return Ok(0);
    }
    let object = object(fed, &s, Utc::now());
    let create = json!({
        "@context": AS_CONTEXT,
        "id": format!("{}/activity", s.uri), "type": "Create",
        "actor": fed.actor_iri(&s.username), "published": s.created_at,
        "to": object["to"], "cc": object["cc"], "object": object,
    });
    queue_activity(&mut *tx, account, &create, &to).await
}
