//! Incoming activities (R-AP-1): stored once per id when the inbox accepts them, then applied
//! by `tasks::inbox` in one transaction with the queue message's completion, so each activity's
//! effects happen exactly once however often it is posted or redelivered.
//!
//! Every effect is bounded by who signed: the inbox only stores activities whose `actor` is the
//! signing key's owner, and objects (notes) must be attributed to that actor.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use super::Federation;
use super::accounts;
use super::actor::{self, RemoteActor, id_of};
use super::context;
use super::delivery::{Recipient, queue_activity};
use super::inbound;
use crate::queue::{NewMessage, QueueName};
use crate::statuses::notify::{self, Kind, Notification};

pub const INBOX_KIND: &str = "hollo.inbox.v1";

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InboxPayload {
    pub activity_id: String,
}

/// Stores a verified activity and enqueues its processing in one transaction. Returns `false`
/// when the id was already stored (a duplicate post): nothing is enqueued again.
pub async fn store_incoming(
    pool: &PgPool,
    account: Option<Uuid>,
    key_id: &str,
    id: &str,
    ty: &str,
    actor: &str,
    body: &Value,
) -> Result<bool, sqlx::Error> {
    // One statement, so one round trip and one commit per accepted activity (issue 20): the
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
        .bind(ty)
        .bind(actor)
        .bind(account)
        .bind(key_id)
        .bind(body)
        .bind(msg_id)
        .bind(envelope)
        .bind(kind)
        .fetch_one(pool)
        .await?;
    Ok(stored == 1)
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

/// Network work done before the transaction (never hold a transaction across a remote fetch).
pub enum Prepared {
    Nothing,
    /// A `Follow` of a local account: the follower (for its inbox) and the followed account.
    Follow {
        follower: Box<RemoteActor>,
        account: Box<accounts::Account>,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    /// Worth retrying (remote unreachable, database blip).
    #[error("{0}")]
    Transient(String),
}

impl From<sqlx::Error> for ProcessError {
    fn from(e: sqlx::Error) -> Self {
        ProcessError::Transient(format!("database: {e}"))
    }
}

fn object_of(body: &Value) -> &Value {
    body.get("object").unwrap_or(&Value::Null)
}

fn type_of(v: &Value) -> Option<&str> {
    v.get("type").and_then(Value::as_str)
}

/// The local account a `Follow`/`Block` names as its object, if any.
async fn local_target(
    pool: &PgPool,
    fed: &Federation,
    object: &Value,
) -> Result<Option<accounts::Account>, sqlx::Error> {
    let Some(name) = id_of(object).and_then(|iri| fed.local_username(iri)) else {
        return Ok(None);
    };
    accounts::by_username(pool, name).await
}

/// The post an `Announce` boosts, fetched and stored when we do not have it (a followed
/// account boosting someone we never heard of is the common case): from its own server,
/// signed as the instance actor, never from the copy the booster embedded. A post that cannot
/// be fetched leaves the boost to be ignored (logged), as an unknown post's boost is.
async fn boosted_post(
    pool: &PgPool,
    fed: &Federation,
    signer: &super::signature::SigningKey,
    inc: &Incoming,
) -> Result<(), ProcessError> {
    let Some(object) = id_of(object_of(&inc.body)).map(str::to_string) else {
        return Ok(());
    };
    if super::iri::same_origin(&object, &fed.origin) {
        return Ok(()); // ours: `apply` finds it or ignores it
    }
    let known: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM remote_posts WHERE iri = $1)")
            .bind(&object)
            .fetch_one(pool)
            .await?;
    if known {
        return Ok(());
    }
    if let Err(e) = super::resolve::resolve_url(pool, fed, signer, &object).await {
        tracing::info!(activity = %inc.id, post = %object, error = %e,
            "the boosted post could not be fetched; the boost is ignored");
    }
    Ok(())
}

pub async fn prepare(
    pool: &PgPool,
    fed: &Federation,
    inc: &Incoming,
) -> Result<Prepared, ProcessError> {
    if matches!(inc.ty.as_str(), "Create" | "Update" | "Announce" | "Like") {
        // Posts, boosts and likes are shown and notified as by the actor's Account entity:
        // the actor must be stored (the signature check only cached its key).
        // A vote is counted, never shown: its voter need not be fetched.
        let vote = crate::polls::remote::vote_shape(inc).is_some();
        if !vote
            && (inc.ty != "Update"
                || type_of(object_of(&inc.body)).is_some_and(|t| !ACTOR_TYPES.contains(&t)))
        {
            // Fetched as the instance actor: servers in authorized-fetch mode answer it.
            let signer = fed
                .instance_key(pool)
                .await
                .map_err(|e| ProcessError::Transient(format!("{e:#}")))?;
            actor::known_actor(pool, fed, &inc.actor, Some(&signer.signing))
                .await
                .map_err(|e| {
                    ProcessError::Transient(format!("fetching actor {}: {e}", inc.actor))
                })?;
            if inc.ty == "Announce" {
                boosted_post(pool, fed, &signer.signing, inc).await?;
            }
        }
        return Ok(Prepared::Nothing);
    }
    if inc.ty != "Follow" {
        return Ok(Prepared::Nothing);
    }
    let Some(account) = local_target(pool, fed, object_of(&inc.body)).await? else {
        return Ok(Prepared::Nothing);
    };
    let signer = fed
        .signing_key(&account)
        .map_err(|e| ProcessError::Transient(format!("{e:#}")))?;
    let follower = actor::known_actor(pool, fed, &inc.actor, Some(&signer))
        .await
        .map_err(|e| ProcessError::Transient(format!("fetching follower {}: {e}", inc.actor)))?;
    Ok(Prepared::Follow {
        follower: Box::new(follower),
        account: Box::new(account),
    })
}

/// Applies the activity's effects inside `tx`; returns a short outcome for the record.
pub async fn apply(
    tx: &mut PgConnection,
    fed: &Federation,
    inc: &Incoming,
    prepared: Prepared,
) -> Result<String, sqlx::Error> {
    let body = &inc.body;
    let object = object_of(body);
    let object_id = id_of(object).unwrap_or_default().to_string();
    let outcome = match (inc.ty.as_str(), prepared) {
        ("Follow", Prepared::Follow { follower, account }) => {
            // A locked account decides: the Follow waits as a request (answered by
            // `relationships::answer_request`), unless the actor already follows (a re-sent
            // Follow is accepted again). A blocked actor is refused.
            let (locked, following, blocked): (bool, bool, bool) = sqlx::query_as(
                "SELECT a.locked,
                        EXISTS (SELECT 1 FROM followers WHERE account_id = a.id AND actor_iri = $2),
                        EXISTS (SELECT 1 FROM account_blocks WHERE account_id = a.id AND target_iri = $2)
                   FROM accounts a WHERE a.id = $1",
            )
            .bind(account.id)
            .bind(&follower.iri)
            .fetch_one(&mut *tx)
            .await?;
            if blocked || (locked && !following) {
                return follow_waits_or_refused(tx, fed, inc, &follower, &account, blocked).await;
            }
            sqlx::query(
                "INSERT INTO followers (account_id, actor_iri, follow_activity_id) VALUES ($1, $2, $3)
                 ON CONFLICT (account_id, actor_iri) DO UPDATE SET follow_activity_id = EXCLUDED.follow_activity_id",
            )
            .bind(account.id)
            .bind(&follower.iri)
            .bind(&inc.id)
            .execute(&mut *tx)
            .await?;
            if !following {
                // A re-sent Follow of an existing follower notifies nobody again.
                notify_follow(tx, Kind::Follow, account.id, &follower.iri, &inc.id).await?;
            }
            // Auto-accept: the Accept embeds the Follow as Mastodon expects.
            let accept = json!({
                "@context": context::ld(),
                "id": fed.new_activity_id(),
                "type": "Accept",
                "actor": fed.actor_iri(&account.username),
                "object": {
                    "id": inc.id, "type": "Follow", "actor": follower.iri,
                    "object": fed.actor_iri(&account.username),
                },
                "to": [follower.iri],
            });
            queue_activity(
                &mut *tx,
                fed,
                account.id,
                &accept,
                &[Recipient::from(&*follower)],
            )
            .await?;
            "follower stored; Accept queued".to_string()
        }
        ("Follow", Prepared::Nothing) => "ignored: Follow of no local account".into(),
        ("Undo", _) => undo(tx, fed, inc, object, &object_id).await?,
        ("Accept" | "Reject", _) => {
            let state = if inc.ty == "Accept" {
                "accepted"
            } else {
                "rejected"
            };
            // Only the followed actor may answer our Follow.
            let n = sqlx::query(
                "UPDATE follows SET state = $1, updated_at = now()
                  WHERE follow_activity_id = $2 AND target_iri = $3",
            )
            .bind(state)
            .bind(&object_id)
            .bind(&inc.actor)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if n == 1 {
                format!("follow {state}")
            } else {
                "ignored: no matching follow".into()
            }
        }
        ("Update", _) if type_of(object).is_some_and(|t| ACTOR_TYPES.contains(&t)) => {
            // Only the actor may update itself; this is how key rotation reaches us.
            if object_id != inc.actor {
                return Ok("ignored: Update of another actor".into());
            }
            match actor::parse_actor(object, &inc.actor) {
                Ok(a) => {
                    actor::store_actor_in(&mut *tx, &a, object, None).await?;
                    "actor updated".into()
                }
                Err(e) => format!("ignored: {e}"),
            }
        }
        ("Create" | "Update", _) => inbound::notes::upsert(tx, fed, inc, object).await?,
        ("Delete", _) => {
            if object_id == inc.actor {
                // The actor deleted itself: forget the relationships, keep the record of it.
                sqlx::query("UPDATE remote_actors SET gone_at = now() WHERE iri = $1")
                    .bind(&inc.actor)
                    .execute(&mut *tx)
                    .await?;
                for sql in [
                    "DELETE FROM followers WHERE actor_iri = $1",
                    "DELETE FROM follow_requests WHERE actor_iri = $1",
                ] {
                    sqlx::query(sql).bind(&inc.actor).execute(&mut *tx).await?;
                }
                "actor deleted".into()
            } else {
                inbound::notes::delete(tx, inc, &object_id).await?
            }
        }
        ("Like" | "Announce", _) if object_id.is_empty() => "ignored: no object".into(),
        ("Like", _) => inbound::interactions::like(tx, inc, &object_id).await?,
        ("Announce", _) => inbound::interactions::announce(tx, inc, &object_id).await?,
        ("Block", _) => {
            if object_id.is_empty() {
                return Ok("ignored: no object".into());
            }
            let kind = inc.ty.to_ascii_lowercase();
            sqlx::query(
                "INSERT INTO remote_interactions (activity_id, kind, actor, object) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (activity_id) DO NOTHING",
            )
            .bind(&inc.id)
            .bind(&kind)
            .bind(&inc.actor)
            .bind(&object_id)
            .execute(&mut *tx)
            .await?;
            if inc.ty == "Block"
                && let Some(name) = fed.local_username(&object_id)
            {
                // A block ends the relationship both ways, as Mastodon does.
                sqlx::query(
                    "DELETE FROM followers f USING accounts a
                      WHERE f.account_id = a.id AND lower(a.username) = lower($1) AND f.actor_iri = $2",
                )
                .bind(name)
                .bind(&inc.actor)
                .execute(&mut *tx)
                .await?;
                sqlx::query(
                    "DELETE FROM follow_requests f USING accounts a
                      WHERE f.account_id = a.id AND lower(a.username) = lower($1) AND f.actor_iri = $2",
                )
                .bind(name)
                .bind(&inc.actor)
                .execute(&mut *tx)
                .await?;
                sqlx::query(
                    "DELETE FROM follows f USING accounts a
                      WHERE f.account_id = a.id AND lower(a.username) = lower($1) AND f.target_iri = $2",
                )
                .bind(name)
                .bind(&inc.actor)
                .execute(&mut *tx)
                .await?;
            }
            format!("{kind} stored")
        }
        (other, _) => format!("ignored: unsupported type {other}"),
    };
    Ok(outcome)
}

/// A Follow of a locked account is stored as a request; one from an actor the account blocks
/// is answered with a `Reject`.
async fn follow_waits_or_refused(
    tx: &mut PgConnection,
    fed: &Federation,
    inc: &Incoming,
    follower: &RemoteActor,
    account: &accounts::Account,
    blocked: bool,
) -> Result<String, sqlx::Error> {
    if blocked {
        let me = fed.actor_iri(&account.username);
        let reject = json!({
            "@context": context::ld(), "id": fed.new_activity_id(), "type": "Reject", "actor": me,
            "object": { "id": inc.id, "type": "Follow", "actor": follower.iri, "object": me },
            "to": [follower.iri],
        });
        queue_activity(
            &mut *tx,
            fed,
            account.id,
            &reject,
            &[Recipient::from(follower)],
        )
        .await?;
        return Ok("Follow of a blocking account; Reject queued".into());
    }
    let waiting: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM follow_requests WHERE account_id = $1 AND actor_iri = $2)",
    )
    .bind(account.id)
    .bind(&follower.iri)
    .fetch_one(&mut *tx)
    .await?;
    if !waiting {
        notify_follow(tx, Kind::FollowRequest, account.id, &follower.iri, &inc.id).await?;
    }
    sqlx::query(
        "INSERT INTO follow_requests (account_id, actor_iri, follow_activity_id) VALUES ($1, $2, $3)
         ON CONFLICT (account_id, actor_iri) DO UPDATE SET follow_activity_id = EXCLUDED.follow_activity_id",
    )
    .bind(account.id)
    .bind(&follower.iri)
    .bind(&inc.id)
    .execute(&mut *tx)
    .await?;
    Ok("follow request stored (locked account)".into())
}

/// A `follow` or `follow_request` notification for `account` from the remote follower.
async fn notify_follow(
    tx: &mut PgConnection,
    kind: Kind,
    account: Uuid,
    follower: &str,
    cause: &str,
) -> Result<(), sqlx::Error> {
    if let Some(from) = inbound::notes::actor_id(tx, follower).await? {
        let n = Notification {
            account,
            kind,
            from_account: from,
            post: None,
            cause,
        };
        notify::notify(tx, &n).await?;
    }
    Ok(())
}

async fn undo(
    tx: &mut PgConnection,
    fed: &Federation,
    inc: &Incoming,
    object: &Value,
    object_id: &str,
) -> Result<String, sqlx::Error> {
    let inner = type_of(object);
    // A Follow still waiting on a locked account is withdrawn.
    let n =
        sqlx::query("DELETE FROM follow_requests WHERE actor_iri = $1 AND follow_activity_id = $2")
            .bind(&inc.actor)
            .bind(object_id)
            .execute(&mut *tx)
            .await?
            .rows_affected();
    if n > 0 {
        notify::withdraw(tx, Kind::FollowRequest, object_id).await?;
        return Ok("follow request withdrawn".into());
    }
    // An Undo names its activity by id; Mastodon embeds it, others may not (then we look
    // the id up among the relationships and interactions it could be).
    let n = sqlx::query("DELETE FROM followers WHERE actor_iri = $1 AND follow_activity_id = $2")
        .bind(&inc.actor)
        .bind(object_id)
        .execute(&mut *tx)
        .await?
        .rows_affected();
    if n > 0 {
        return Ok("follower removed".into());
    }
    if inner == Some("Follow") {
        // A Follow we never stored under that id (e.g. re-sent with a new id): undo by target.
        let target = object
            .get("object")
            .and_then(id_of)
            .and_then(|t| fed.local_username(t))
            .unwrap_or_default();
        let mut n = 0;
        for table in ["followers", "follow_requests"] {
            n += sqlx::query(sqlx::AssertSqlSafe(format!(
                "DELETE FROM {table} f USING accounts a
                  WHERE f.account_id = a.id AND f.actor_iri = $1 AND lower(a.username) = lower($2)"
            )))
            .bind(&inc.actor)
            .bind(target)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        }
        return Ok(if n > 0 {
            "follower removed".into()
        } else {
            "ignored: not a follower".into()
        });
    }
    Ok(inbound::interactions::undo(tx, inc, object_id)
        .await?
        .unwrap_or_else(|| "ignored: nothing to undo".into()))
}

pub const ACTOR_TYPES: [&str; 5] = ["Person", "Service", "Application", "Group", "Organization"];

pub const NOTE_TYPES: [&str; 4] = ["Note", "Article", "Question", "Page"];

pub use super::inbound::notes::store_note;

/// Marks the activity processed (inside the processing transaction).
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
