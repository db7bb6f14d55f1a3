//! The outbox (R-AP-2): an activity is stored once with its stable id, then one delivery row
//! and one queue message per target inbox (shared inbox preferred), all in the caller's
//! transaction, so either the activity and all its deliveries exist or none does.
//! `tasks::delivery` sends them; this module also bounds deliveries per remote host (R-AP-3).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sqlx::PgConnection;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use uuid::Uuid;

use crate::queue::{NewMessage, QueueName, enqueue_many};

pub const DELIVER_KIND: &str = "hollo.deliver.v1";

/// The queued message of one delivery: which stored activity to which inbox. The body is read
/// from `outbox_activities` at send time, so a redelivery sends the very same activity id.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct DeliverPayload {
    pub activity_id: String,
    pub inbox: String,
    /// Times this delivery was put back for a 429 or a busy host (not recorded failures);
    /// bounded so a remote that always says "later" cannot keep it alive forever.
    #[serde(default)]
    pub deferrals: u32,
}

/// One recipient: its personal inbox, shared inbox if any, and its IRI (for 410 Gone). As a
/// row: `iri AS actor_iri, inbox, shared_inbox` of `remote_actors`.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct Recipient {
    pub actor_iri: String,
    pub inbox: String,
    pub shared_inbox: Option<String>,
}

impl From<&crate::federation::actors::actor::RemoteActor> for Recipient {
    fn from(a: &crate::federation::actors::actor::RemoteActor) -> Self {
        Recipient {
            actor_iri: a.iri.clone(),
            inbox: a.inbox.clone(),
            shared_inbox: a.shared_inbox.clone(),
        }
    }
}

/// Stores `activity` (its `id` must be set) for `account`, with the account's integrity proof,
/// and queues one delivery per distinct target inbox. Idempotent by activity id: storing the
/// same activity again adds nothing.
pub async fn queue_activity(
    tx: &mut PgConnection,
    fed: &crate::federation::Federation,
    account: Uuid,
    activity: &Value,
    recipients: &[Recipient],
) -> Result<usize, sqlx::Error> {
    let activity = &signed(tx, fed, account, activity).await?;
    store_and_deliver(tx, Some(account), activity, recipients, Stored::Once).await
}

/// Queues an activity already stored, changed since (a reply or boost that now carries its
/// approval, `approvals`): the stored body is replaced — deliveries still waiting send the
/// new one — and it goes to those of `recipients` it had not gone to; who had it gets no
/// second copy. An activity not stored yet is stored and queued as [`queue_activity`] does.
pub async fn requeue_activity(
    tx: &mut PgConnection,
    fed: &crate::federation::Federation,
    account: Uuid,
    activity: &Value,
    recipients: &[Recipient],
) -> Result<usize, sqlx::Error> {
    let activity = &signed(tx, fed, account, activity).await?;
    store_and_deliver(tx, Some(account), activity, recipients, Stored::Replaced).await
}

/// `activity` with the account's integrity proof.
async fn signed(
    tx: &mut PgConnection,
    fed: &crate::federation::Federation,
    account: Uuid,
    activity: &Value,
) -> Result<Value, sqlx::Error> {
    // Signed once, here, with the author's proof key (FEP-8b32): every delivery and every
    // retry carries the same proof, and a relay of it still proves who wrote it.
    let key = fed
        .proof_key(&mut *tx, account)
        .await
        .map_err(|e| sqlx::Error::Protocol(format!("the author's proof key: {e:#}")))?;
    crate::federation::crypto::proofs::sign(activity, &key, chrono::Utc::now())
        .map_err(|e| sqlx::Error::Protocol(format!("signing the activity: {e}")))
}

/// Stores `activity` (its `id` must be set) as the instance actor's and queues its
/// deliveries, as [`queue_activity`] does for an account's. Sent with the instance actor's
/// HTTP signature and no integrity proof (the instance actor has no proof key): what Mastodon
/// sends this way is a forwarded report's `Flag`, which names no reporter.
pub async fn queue_instance_activity(
    tx: &mut PgConnection,
    activity: &Value,
    recipients: &[Recipient],
) -> Result<usize, sqlx::Error> {
    store_and_deliver(tx, None, activity, recipients, Stored::Once).await
}

/// How an activity whose id is already stored is treated.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stored {
    /// Left alone, and nothing is queued: one id is one activity, sent once.
    Once,
    /// Replaced by the new body, which goes to the recipients it had not gone to.
    Replaced,
}

async fn store_and_deliver(
    tx: &mut PgConnection,
    account: Option<Uuid>,
    activity: &Value,
    recipients: &[Recipient],
    stored: Stored,
) -> Result<usize, sqlx::Error> {
    let id = activity
        .get("id")
        .and_then(Value::as_str)
        .ok_or_else(|| sqlx::Error::Protocol("an outgoing activity needs an id".into()))?;
    let ty = activity
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("Activity");
    let on_conflict = match stored {
        Stored::Once => "DO NOTHING",
        Stored::Replaced => "DO UPDATE SET body = EXCLUDED.body",
    };
    let fresh = sqlx::query(sqlx::AssertSqlSafe(format!(
        "INSERT INTO outbox_activities (id, account_id, type, body) VALUES ($1, $2, $3, $4)
         ON CONFLICT (id) {on_conflict}"
    )))
    .bind(id)
    .bind(account)
    .bind(ty)
    .bind(activity)
    .execute(&mut *tx)
    .await?
    .rows_affected()
        == 1;
    if !fresh {
        return Ok(0);
    }
    // One message per inbox: followers on one server share its shared inbox.
    let mut seen = BTreeSet::new();
    // Actors that answered 410 Gone get nothing more (until a fetch or Update revives them).
    let iris: Vec<&str> = recipients.iter().map(|r| r.actor_iri.as_str()).collect();
    let gone: Vec<String> = sqlx::query_scalar(
        "SELECT iri FROM remote_actors WHERE iri = ANY($1) AND gone_at IS NOT NULL",
    )
    .bind(&iris)
    .fetch_all(&mut *tx)
    .await?;
    let (mut inboxes, mut actors) = (Vec::new(), Vec::new());
    for r in recipients.iter().filter(|r| !gone.contains(&r.actor_iri)) {
        let (inbox, actor) = match &r.shared_inbox {
            Some(shared) => (shared.clone(), None),
            None => (r.inbox.clone(), Some(r.actor_iri.clone())),
        };
        if seen.insert(inbox.clone()) {
            inboxes.push(inbox);
            actors.push(actor);
        }
    }
    // Every delivery row in one statement (a fan-out to a thousand hosts was a thousand round
    // trips inside the poster's transaction); a message only for the rows that are new.
    let fresh: Vec<String> = sqlx::query_scalar(
        "INSERT INTO deliveries (activity_id, inbox, actor_iri)
         SELECT $1, inbox, actor FROM unnest($2::text[], $3::text[]) AS u(inbox, actor)
         ON CONFLICT DO NOTHING RETURNING inbox",
    )
    .bind(id)
    .bind(&inboxes)
    .bind(&actors)
    .fetch_all(&mut *tx)
    .await?;
    let messages: Vec<NewMessage> = fresh
        .into_iter()
        .map(|inbox| {
            let payload = DeliverPayload {
                activity_id: id.to_string(),
                inbox,
                deferrals: 0,
            };
            NewMessage::new(
                DELIVER_KIND,
                serde_json::to_value(&payload).unwrap_or_default(),
            )
        })
        .collect();
    enqueue_many(&mut *tx, QueueName::Activity, &messages).await?;
    Ok(messages.len())
}

/// Per-host bound on concurrent deliveries within this process, so one slow host cannot take
/// every activity slot (R-AP-3).
pub struct HostLimiter {
    limit: usize,
    hosts: Mutex<HashMap<String, Arc<Semaphore>>>,
}

impl HostLimiter {
    pub fn new(limit: usize) -> Self {
        HostLimiter {
            limit: limit.max(1),
            hosts: Mutex::new(HashMap::new()),
        }
    }

    pub fn limit(&self) -> usize {
        self.limit
    }

    /// A permit for `host`, waiting at most `wait`. `None` means the host is busy: the caller
    /// should put the delivery back for a little while instead of holding a queue slot.
    pub async fn acquire(&self, host: &str, wait: Duration) -> Option<OwnedSemaphorePermit> {
        let sem = {
            let mut hosts = self.hosts.lock().ok()?;
            // Forget idle hosts now and then so the map does not grow with every host ever seen.
            if hosts.len() > 1024 {
                hosts.retain(|_, s| s.available_permits() < self.limit);
            }
            hosts
                .entry(host.to_ascii_lowercase())
                .or_insert_with(|| Arc::new(Semaphore::new(self.limit)))
                .clone()
        };
        tokio::time::timeout(wait, sem.acquire_owned())
            .await
            .ok()?
            .ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_host_gets_at_most_its_limit_and_others_are_unaffected() {
        let l = HostLimiter::new(2);
        let a1 = l.acquire("a.example", Duration::from_millis(10)).await;
        let a2 = l.acquire("A.example", Duration::from_millis(10)).await;
        assert!(a1.is_some() && a2.is_some());
        assert!(
            l.acquire("a.example", Duration::from_millis(10))
                .await
                .is_none()
        );
        assert!(
            l.acquire("b.example", Duration::from_millis(10))
                .await
                .is_some()
        );
        drop(a1);
        assert!(
            l.acquire("a.example", Duration::from_millis(10))
                .await
                .is_some()
        );
    }
}
