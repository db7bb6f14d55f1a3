//! Local statuses as ActivityPub objects: a `Note`, or a `Question` when the status carries a
//! poll (SPEC.md §8, R-POLL). A new status is delivered to the author's followers as
//! a `Create` in the transaction that stores it (one delivery per inbox, shared inbox
//! preferred), and its URI (`<actor>/statuses/<id>`) serves the object, so remote servers can
//! show the poll and their users can vote on it.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use sqlx::PgConnection;
use uuid::Uuid;

use super::Federation;
use super::actor::PUBLIC;
use super::context;
use super::delivery::{Recipient, queue_activity};
use super::mentions;
use crate::content::{self, Mention};
use crate::polls::{self, PollTally};

/// A local status as stored, with its poll (and the poll's current counts) if it has one.
pub struct LocalStatus {
    pub id: Uuid,
    pub uri: String,
    pub username: String,
    pub content: String,
    pub created_at: DateTime<Utc>,
    pub poll: Option<PollTally>,
    /// The mentions resolved when it was written (rendered as links, addressed in `cc`).
    pub mentions: Vec<Mention>,
}

/// The status's object: `Note`, or `Question` with `oneOf`/`anyOf` and the current counts
/// (`closed` once it has ended, `endTime` before).
pub fn object(fed: &Federation, s: &LocalStatus) -> Value {
    let actor = fed.actor_iri(&s.username);
    // The same HTML our API shows: the user's text escaped (`<b>` typed is shown, never
    // markup), with links, mentions and hashtags.
    let rendered = content::render(&s.content, &s.uri, &s.mentions);
    let mut cc = vec![fed.followers(&s.username)];
    cc.extend(rendered.mentioned);
    let mut o = json!({
        "@context": context::ld(),
        "id": s.uri, "type": "Note", "attributedTo": actor,
        "content": rendered.html, "published": s.created_at,
        "to": [PUBLIC], "cc": cc, "tag": rendered.tags,
    });
    if let Some(p) = &s.poll {
        o["type"] = json!("Question");
        let options: Vec<Value> = p
            .options
            .iter()
            .zip(&p.counts)
            .map(|(name, n)| {
                json!({ "type": "Note", "name": name,
                        "replies": { "type": "Collection", "totalItems": n } })
            })
            .collect();
        o[if p.multiple { "anyOf" } else { "oneOf" }] = json!(options);
        o["votersCount"] = json!(p.voters);
        o[if p.expired { "closed" } else { "endTime" }] = json!(p.expires_at);
    }
    o
}

/// Loads a local status (and its poll with current counts) by id, in the caller's connection.
pub async fn load(conn: &mut PgConnection, id: Uuid) -> Result<Option<LocalStatus>, sqlx::Error> {
    type Row = (String, String, String, DateTime<Utc>, Option<Uuid>, Value);
    let row: Option<Row> = sqlx::query_as(
        "SELECT s.uri, a.username, s.content, s.created_at, p.id, s.mentions
           FROM statuses s JOIN accounts a ON a.id = s.account_id
           LEFT JOIN polls p ON p.status_id = s.id
          WHERE s.id = $1",
    )
    .bind(id)
    .fetch_optional(&mut *conn)
    .await?;
    let Some((uri, username, content, created_at, poll_id, mentioned)) = row else {
        return Ok(None);
    };
    let poll = match poll_id {
        Some(p) => polls::tally(&mut *conn, p).await?,
        None => None,
    };
    Ok(Some(LocalStatus {
        id,
        uri,
        username,
        content,
        created_at,
        poll,
        mentions: mentions::parse_stored(mentioned),
    }))
}

/// Who hears about a status: the author's followers, the remote actors it mentions and, for a
/// poll, its remote voters (known inbox, not gone), each actor once.
async fn recipients(
    conn: &mut PgConnection,
    account: Uuid,
    poll: Option<Uuid>,
    mentioned: &[String],
) -> Result<Vec<Recipient>, sqlx::Error> {
    let rows: Vec<(String, String, Option<String>)> = sqlx::query_as(
        "SELECT a.iri, a.inbox, a.shared_inbox FROM remote_actors a
          WHERE a.gone_at IS NULL
            AND (a.iri IN (SELECT actor_iri FROM followers WHERE account_id = $1)
                 OR a.iri IN (SELECT actor_iri FROM poll_votes WHERE poll_id = $2)
                 OR a.iri = ANY($3))",
    )
    .bind(account)
    .bind(poll)
    .bind(mentioned)
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

/// What is sent about a status.
pub enum Announce<'a> {
    /// A new status, to the followers.
    Create,
    /// Its current object, to the followers and remote voters; `tag` makes the activity id
    /// (`<uri>/updates/<tag>`), so one event is one id however often it is queued.
    Update { tag: &'a str },
}

/// Queues the activity about a status in the caller's transaction (the one that changed it),
/// one delivery per inbox. A status minted without federation (no actor URI) has no one to
/// tell. Returns how many inboxes it goes to.
pub async fn publish(
    tx: &mut PgConnection,
    fed: &Federation,
    account: Uuid,
    status: Uuid,
    what: Announce<'_>,
) -> Result<usize, sqlx::Error> {
    let Some(s) = load(&mut *tx, status).await? else {
        return Ok(0);
    };
    if s.uri != fed.status_iri(&s.username, s.id) {
        return Ok(0);
    }
    let (poll, ty, id) = match what {
        Announce::Create => (None, "Create", format!("{}/activity", s.uri)),
        Announce::Update { tag } => (
            s.poll.as_ref().map(|p| p.id),
            "Update",
            format!("{}/updates/{tag}", s.uri),
        ),
    };
    let mentioned: Vec<String> = s.mentions.iter().map(|m| m.href.clone()).collect();
    let to = recipients(&mut *tx, account, poll, &mentioned).await?;
    if to.is_empty() {
        return Ok(0);
    }
    let object = object(fed, &s);
    let activity = json!({
        "@context": context::ld(),
        "id": id, "type": ty, "actor": fed.actor_iri(&s.username),
        "to": object["to"], "cc": object["cc"], "object": object,
    });
    queue_activity(&mut *tx, fed, account, &activity, &to).await
}
