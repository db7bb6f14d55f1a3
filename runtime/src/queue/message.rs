//! The envelope of a queued message and the two queues' names.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Which of the two queues (SPEC.md §2). Both share one table shape and one engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QueueName {
    Activity,
    Task,
}

impl QueueName {
    pub const ALL: [QueueName; 2] = [QueueName::Activity, QueueName::Task];

    pub fn table(self) -> &'static str {
        match self {
            QueueName::Activity => "hollo_activity_message_v1",
            QueueName::Task => "hollo_task_message_v1",
        }
    }

    pub fn channel(self) -> &'static str {
        match self {
            QueueName::Activity => "hollo_activity_channel_v1",
            QueueName::Task => "hollo_task_channel_v1",
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            QueueName::Activity => "activity",
            QueueName::Task => "task",
        }
    }

    pub fn from_channel(channel: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|q| q.channel() == channel)
    }

    /// The `type` field of the stored envelope (`{"type":"task","taskName":…}`).
    pub fn envelope_type(self) -> &'static str {
        self.as_str()
    }
}

impl std::str::FromStr for QueueName {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "activity" => Ok(QueueName::Activity),
            "task" => Ok(QueueName::Task),
            other => Err(format!(
                "unknown queue {other:?}: expected activity or task"
            )),
        }
    }
}

/// A claimed message as a handler sees it.
#[derive(Clone, Debug)]
pub struct Claimed {
    pub id: Uuid,
    pub queue: QueueName,
    pub kind: String,
    pub data: serde_json::Value,
    /// Recorded failures so far; the current run is attempt `attempts + 1`.
    pub attempts: i32,
    /// Fencing token: completion and retry only touch the row while it still carries it.
    pub claims: i32,
    pub created: DateTime<Utc>,
    /// When the message last became due (enqueue or retry time plus its delay).
    pub ready_at: DateTime<Utc>,
}

impl Claimed {
    pub fn attempt(&self) -> i32 {
        self.attempts + 1
    }
}

/// The stored envelope: `{"type":"task","taskName":"hollo.probe.v1","data":{…}}`, the shape the
/// seed's monitoring SQL reads (`message->>'type'`, `message->>'taskName'`).
pub fn envelope(queue: QueueName, kind: &str, data: &serde_json::Value) -> serde_json::Value {
    serde_json::json!({ "type": queue.envelope_type(), "taskName": kind, "data": data })
}

/// The claim fence, written once: the SQL condition under which row `m` is still the claim
/// (`id`, `claims`) that `owner` took. Every write that finishes, retries or fails a claimed
/// message carries it, so a worker whose lease ran out — its message re-claimed by another
/// worker since, which bumped `claims` — changes nothing (R-Q-2). Arguments are SQL
/// expressions (parameters or columns).
pub(super) fn fence(m: &str, id: &str, claims: &str, owner: &str) -> String {
    format!("{m}.id = {id} AND {m}.claims = {claims} AND {m}.lease_owner = {owner}")
}
