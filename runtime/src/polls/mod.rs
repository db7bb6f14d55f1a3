//! Polls and their expiry notifications (SPEC.md §7, R-POLL): polls of our statuses, and
//! polls of remote posts (a remote `Question`) that our users see and vote on.
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
//! A poll of ours has a local author, so it always has a recipient and is scheduled. Remote
//! votes on it (`remote`) change neither the expiry nor the local recipients, so they schedule
//! nothing; the poll's wakeup already exists or recovery finds it. A remote poll (`question`)
//! has a recipient only once one of our users votes in it (`voting`): until then it is stored
//! as notified, so recovery never meets it; the vote clears that and schedules its wakeup. Its
//! end may also move with its author's `Update` (closed early): recovery finds it then.
//!
//! Modules by concern: `validation` (request shapes and rules, pure), `storage` (the writes
//! and the tally, SQL), `voting` (a local account's vote), `remote` (remote votes on ours),
//! `question` (remote polls); the Poll entity is `mastodon::poll`. Publishing to followers is
//! the caller's: storage writes in the caller's transaction, so `web::polls` publishes in the
//! same one, and nothing here depends on `federation::outbound::statuses` (which reads
//! `storage::tally`).

pub mod admission;
pub mod question;
pub mod recovery;
pub mod remote;
pub mod storage;
pub mod validation;
pub mod voting;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use uuid::Uuid;

pub use storage::{
    PollError, PollTally, create_status, edit_status, insert_status, tally, unnotified_expired,
    update_status,
};
pub use validation::{Invalid, NewPoll, StatusEdit};
pub use voting::vote;

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
