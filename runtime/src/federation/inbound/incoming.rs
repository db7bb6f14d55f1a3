//! The stored side of the inbox (R-AP-1): an accepted activity is kept once per id and its
//! processing enqueued in the same statement; `tasks::inbox` loads it, applies it and marks it
//! processed in one transaction with the queue message's completion, so each activity's
//! effects happen exactly once however often it is posted or redelivered.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use crate::queue::{NewMessage, QueueName};

pub const INBOX_KIND: &str = "hollo.inbox.v1";

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InboxPayload {
    pub activity_id: String,
}

/// Stores a verified activity and enqueues its processing in one transaction. Returns `false`
/// when the id was already stored (a duplicate post): nothing is enqueued again.
///
/// One exception to "one activity per id": GoToSocial sends every `Update` of a post under one
/// id (`<post>/activity#Update`) — each edit, each new count of a poll, its close. An `Update`
/// whose id is stored with another body is a new one: it is kept under that id plus a digest
/// of its body (so its own redelivery is still a duplicate).
pub async fn store(
    pool: &PgPool,
    account: Option<Uuid>,
    key_id: &str,
    activity: &Verified<'_>,
) -> Result<bool, sqlx::Error> {
    if insert(pool, account, key_id, activity, activity.id).await? {
        return Ok(true);
    }
    if activity.ty != "Update" {
        return Ok(false);
    }
    let same: Option<bool> =
        sqlx::query_scalar("SELECT body = $2 FROM inbox_activities WHERE id = $1")
            .bind(activity.id)
            .bind(activity.body)
            .fetch_optional(pool)
            .await?;
    if same != Some(false) {
        return Ok(false);
    }
    let digest = Sha256::digest(serde_json::to_vec(activity.body).unwrap_or_default());
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    let id = format!("{}#sha256-{hex}", activity.id);
    insert(pool, account, key_id, activity, &id).await
}

/// Stores `activity` under `id` and enqueues its processing, unless `id` is stored already.
async fn insert(
    pool: &PgPool,
    account: Option<Uuid>,
    key_id: &str,
    activity: &Verified<'_>,
    id: &str,
) -> Result<bool, sqlx::Error> {
    // One statement, so one round trip and one commit per accepted activity (R-AP-1): the
    // message is enqueued only when the activity row is new.
    let msg = NewMessage::new(
        INBOX_KIND,
        serde_json::to_value(InboxPayload {
            activity_id: id.to_string(),
        })
        .unwrap_or_default(),
    );
    let (enqueue, (msg_id, envelope, kind)) =
        crate::queue::enqueue::ready_message_ctes(QueueName::Activity, "stored", 7, &msg);
    let sql = format!(
        "WITH stored AS (
            INSERT INTO inbox_activities (id, type, actor, account_id, key_id, body)
            VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (id) DO NOTHING RETURNING id
         ), {enqueue}
         SELECT (SELECT count(*) FROM stored), (SELECT count(*) FROM q_wake)"
    );
    let (stored, _woke): (i64, i64) = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(id)
        .bind(activity.ty)
        .bind(activity.actor)
        .bind(account)
        .bind(key_id)
        .bind(activity.body)
        .bind(msg_id)
        .bind(envelope)
        .bind(kind)
        .fetch_one(pool)
        .await?;
    Ok(stored == 1)
}

/// What the inbox checked of an activity before storing it: its id, type and actor (the
/// signer, or the author of a valid proof), and the normalized document.
pub struct Verified<'a> {
    pub id: &'a str,
    pub ty: &'a str,
    pub actor: &'a str,
    pub body: &'a Value,
}

/// A stored incoming activity.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct Incoming {
    pub id: String,
    #[sqlx(rename = "type")]
    pub ty: String,
    pub actor: String,
    pub account_id: Option<Uuid>,
    pub body: Value,
    pub processed_at: Option<chrono::DateTime<chrono::Utc>>,
}

pub async fn load(pool: &PgPool, id: &str) -> Result<Option<Incoming>, sqlx::Error> {
    sqlx::query_as(
        "SELECT id, type, actor, account_id, body, processed_at FROM inbox_activities WHERE id = $1",
    )
    .bind(id)
    .fetch_optional(pool)
    .await
}

/// `load`, and whether its actor is stored, in one round trip: the worker needs the actor
/// stored before it applies a note, a boost or a like, and fetches it only when it is not.
pub async fn load_with_actor(
    pool: &PgPool,
    id: &str,
) -> Result<Option<(Incoming, bool)>, sqlx::Error> {
    #[derive(sqlx::FromRow)]
    struct Row {
        #[sqlx(flatten)]
        inc: Incoming,
        actor_known: bool,
    }
    let row: Option<Row> = sqlx::query_as(
        "SELECT i.id, i.type, i.actor, i.account_id, i.body, i.processed_at,
                EXISTS (SELECT 1 FROM remote_actors a WHERE a.iri = i.actor) AS actor_known
           FROM inbox_activities i WHERE i.id = $1",
    )
    .bind(id)
    .fetch_optional(pool)
    .await?;
    Ok(row.map(|r| (r.inc, r.actor_known)))
}

/// Marks the activity processed (inside the processing transaction), with its outcome.
pub async fn mark_processed(
    tx: &mut PgConnection,
    id: &str,
    outcome: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE inbox_activities SET processed_at = now(), outcome = $2 WHERE id = $1")
        .bind(id)
        .bind(outcome)
        .execute(&mut *tx)
        .await?;
    Ok(())
}
