//! The Mastodon streaming API's events (R-MAPI-5), across every web node.
//!
//! Producers write a `stream_events` row and `pg_notify('hollo_stream', id)` in one statement
//! of their own transaction ([`emit`]): an event exists, and is heard, only if its cause
//! committed, whichever node or worker caused it. Each web node has one `LISTEN` connection
//! ([`listen::run`]) that reads the rows it is told of (and catches up from the table after a
//! reconnect) and hands them to its [`Hub`], which fans them out to the node's connections
//! ([`session`]). Which connection gets what is [`streams`]; rows hold ids only. A payload of a
//! public stream is rendered once per node and event, as anyone sees it, and shared by every
//! stream that sends it; a home timeline's or a notification's is rendered per connection with
//! the viewer's account at send time ([`render`]).
//!
//! Limits (R-API): a stream holds one of the node's `HTTP_MAX_CONNECTIONS` slots
//! while it is open, a node holds at most `STREAMS_MAX` streams and a token
//! `STREAMS_PER_TOKEN` on one node ([`hub::Admission`]), and a revoked token's streams close
//! on every node (a `revoke` event, written by a trigger whenever tokens are deleted).

pub mod emit;
pub mod hub;
pub mod listen;
pub mod render;
pub mod session;
pub mod streams;

use std::sync::Arc;

use uuid::Uuid;

pub use hub::Hub;

/// The channel every web node listens on; the payload is the event's id.
pub const CHANNEL: &str = "hollo_stream";

/// One stored event, as every node reads it.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct Event {
    pub id: i64,
    /// `home`, `list`, `notification`, `public`, `delete`, `revoke` or `relationship` (see
    /// the migrations).
    pub kind: String,
    /// Mastodon's event name: `update`, `status.update`, `notification`, `delete` (and
    /// `revoke`, which no client sees).
    pub event: String,
    /// Whose streams a `home` or `notification` event is for.
    pub accounts: Vec<Uuid>,
    pub post_id: Option<Uuid>,
    pub notification_id: Option<i64>,
    pub local: bool,
    pub tags: Vec<String>,
    /// For `delete`: only the streams of `accounts` hear of it (a followers-only or direct
    /// status's deletion).
    pub restricted: bool,
    /// For `revoke`: the hashes of the revoked tokens, whose streams close.
    pub tokens: Vec<Vec<u8>>,
    /// For `list`: the lists the entry is new in.
    pub lists: Vec<Uuid>,
    /// The accounts the event is by (author, booster, a notification's sender): a stream
    /// leaves out what its reader mutes or blocks (`statuses::hidden`).
    pub authors: Vec<Uuid>,
    /// A `public` event's payload, rendered by the first stream of the node that sends it and
    /// reused by every other (the event is shared behind an `Arc`): one render per node
    /// instead of one per stream. `None` inside: gone, or not public any more.
    #[sqlx(skip)]
    pub shared: tokio::sync::OnceCell<Option<Arc<SharedStatus>>>,
}

/// A public event's status as anyone sees it: the entity (a reader with filters gets a copy
/// with its `filtered`) and its JSON (what every other reader is sent).
#[derive(Debug)]
pub struct SharedStatus {
    pub status: crate::mastodon::Status,
    pub json: Arc<str>,
}

/// The columns of [`Event`], for every query that reads events.
pub(crate) const COLUMNS: &str = "id, kind, event, accounts, post_id, notification_id, local, tags, restricted, tokens, lists, \
     authors";
