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
pub mod mailbox;
pub mod outbox;
pub mod render;
pub mod session;
pub mod streams;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use axum::extract::ws::Utf8Bytes;
use tokio::sync::OnceCell;
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
    pub shared: Cell,
    /// A home or list event's status per viewer, while that viewer's streams on this node
    /// send it: rendered by the first of them and reused by the others (one render per event
    /// and viewer, not per connection). An entry lives only while a stream holds it
    /// ([`Event::viewer_render`], [`Event::viewer_done`]), so an event kept in a mailbox keeps
    /// no renders.
    #[sqlx(skip)]
    pub per_viewer: PerViewer,
}

#[cfg(test)]
impl Event {
    /// An event for unit tests: `kind` for `accounts`, local or not, with `tags`; no post and
    /// nothing else.
    pub(crate) fn for_test(kind: &str, accounts: Vec<Uuid>, local: bool, tags: &[&str]) -> Event {
        Event {
            id: 1,
            kind: kind.into(),
            event: "update".into(),
            accounts,
            post_id: None,
            notification_id: None,
            local,
            tags: tags.iter().map(|t| t.to_string()).collect(),
            restricted: false,
            tokens: vec![],
            lists: vec![],
            authors: vec![],
            shared: Default::default(),
            per_viewer: Default::default(),
        }
    }
}

/// A status rendered once (`None`: gone, or not the viewer's to see) for every stream that
/// sends it.
pub type Cell = OnceCell<Option<Arc<SharedStatus>>>;

/// One viewer's render of an event, held by the streams sending it.
pub type Render = Arc<Cell>;

/// [`Event::per_viewer`]: weak, so the renders go when their last stream has sent them.
#[derive(Debug, Default)]
pub struct PerViewer(Mutex<HashMap<Uuid, Weak<Cell>>>);

impl Clone for PerViewer {
    /// A copy of an event starts with no renders of its own.
    fn clone(&self) -> Self {
        PerViewer::default()
    }
}

impl Event {
    /// The render of this event for `viewer` that another of its streams is making or
    /// sending, or a new one to make.
    pub fn viewer_render(&self, viewer: Uuid) -> Render {
        let mut m = self.per_viewer.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(r) = m.get(&viewer).and_then(Weak::upgrade) {
            return r;
        }
        let r = Render::default();
        m.insert(viewer, Arc::downgrade(&r));
        r
    }

    /// A stream of `viewer` is done with its render (dropped before): the last one takes the
    /// entry out.
    pub fn viewer_done(&self, viewer: Uuid) {
        let mut m = self.per_viewer.0.lock().unwrap_or_else(|p| p.into_inner());
        if m.get(&viewer).is_some_and(|w| w.strong_count() == 0) {
            m.remove(&viewer);
        }
    }
}

/// A public event's status as anyone sees it: the entity (a reader with filters gets a copy
/// with its `filtered`) and its JSON (what every other reader is sent).
#[derive(Debug)]
pub struct SharedStatus {
    pub status: crate::mastodon::Status,
    pub json: Arc<str>,
    /// The messages carrying `json` as they were sent, by stream: serialized once per
    /// audience and shared by every socket that sends the same bytes. A few entries per event
    /// (public, public:local, a tag or two), so a list; the lock is this event's alone.
    frames: Mutex<Vec<(streams::Stream, Utf8Bytes)>>,
}

impl SharedStatus {
    pub fn new(status: crate::mastodon::Status) -> SharedStatus {
        let json = render::json(&status).into();
        SharedStatus {
            status,
            json,
            frames: Mutex::default(),
        }
    }

    /// The message of `event` on `stream` with this payload, built by the first socket that
    /// sends it (the others only look it up: no allocation per socket).
    pub fn frame(&self, stream: &streams::Stream, event: &str) -> Utf8Bytes {
        let mut frames = self.frames.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, f)) = frames.iter().find(|(s, _)| s == stream) {
            return f.clone();
        }
        let f: Utf8Bytes = message(&stream.names(), event, &self.json).into();
        frames.push((stream.clone(), f.clone()));
        f
    }
}

/// A stream message: `{"stream":[…],"event":…,"payload":"<JSON string>"}`.
pub fn message(names: &[String], event: &str, payload: &str) -> String {
    serde_json::json!({ "stream": names, "event": event, "payload": payload }).to_string()
}

/// The columns of [`Event`], for every query that reads events.
pub(crate) const COLUMNS: &str = "id, kind, event, accounts, post_id, notification_id, local, tags, restricted, tokens, lists, \
     authors";
