//! The Mastodon streaming API's events (R-MAPI-5, issue 19 item 5), across every web node.
//!
//! Producers write a `stream_events` row and `pg_notify('hollo_stream', id)` in their own
//! transaction ([`emit`]): an event exists, and is heard, only if its cause committed. Each web
//! node has one `LISTEN` connection ([`listen::run`]) that reads the rows it is told of (and
//! catches up from the ids it has seen after a reconnect) and hands them to its [`Hub`], which
//! fans them out to the node's connections ([`session`]). Rows hold ids only: a payload is
//! rendered per connection with the viewer's account at send time ([`render`]).
//!
//! Who produces what: `statuses::feed::push` (`user` updates), `statuses::notify::notify`
//! (notifications), `statuses::feed::remove_post` / `remove_entry` (deletes) and
//! [`status_created`] / [`status_updated`] (the public, public:local and hashtag streams).

pub mod hub;
pub mod listen;
pub mod render;
pub mod session;

use sqlx::PgConnection;
use uuid::Uuid;

pub use hub::Hub;

/// The channel every web node listens on; the payload is the event's id.
pub const CHANNEL: &str = "hollo_stream";

/// One stored event, as every node reads it.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct Event {
    pub id: i64,
    /// `user`, `notification`, `public` or `delete` (see the migration).
    pub kind: String,
    /// Mastodon's event name: `update`, `notification`, `delete`, `status.update`.
    pub event: String,
    pub account_id: Option<Uuid>,
    pub post_id: Option<Uuid>,
    pub notification_id: Option<i64>,
    pub local: bool,
    pub tags: Vec<String>,
}

/// The columns of [`Event`], for every query that reads events.
pub(crate) const COLUMNS: &str =
    "id, kind, event, account_id, post_id, notification_id, local, tags";

/// What a producer writes: the row's columns but its id.
struct NewEvent<'a> {
    kind: &'a str,
    event: &'a str,
    accounts: &'a [Uuid],
    post: Option<Uuid>,
    notification: Option<i64>,
    local: bool,
    tags: &'a [String],
}

/// Writes one event per account (or one for everyone when `accounts` is empty and the kind is
/// not per account) and notifies every listening node, in the caller's transaction: the
/// notifications are sent at its commit, and never if it rolls back. One statement, so a
/// producer pays one round trip.
async fn emit(tx: &mut PgConnection, e: NewEvent<'_>) -> Result<(), sqlx::Error> {
    let everyone = [None::<Uuid>];
    let per_account: Vec<Option<Uuid>> = e.accounts.iter().copied().map(Some).collect();
    let targets: &[Option<Uuid>] = if per_account.is_empty() {
        &everyone
    } else {
        &per_account
    };
    sqlx::query(
        "WITH e AS (
             INSERT INTO stream_events (kind, event, account_id, post_id, notification_id, local, tags)
             SELECT $1, $2, a, $4, $5, $6, $7 FROM unnest($3::uuid[]) AS a
             RETURNING id)
         SELECT pg_notify('hollo_stream', id::text) FROM e",
    )
    .bind(e.kind)
    .bind(e.event)
    .bind(targets)
    .bind(e.post)
    .bind(e.notification)
    .bind(e.local)
    .bind(e.tags)
    .execute(tx)
    .await?;
    Ok(())
}

/// `update` on the `user` streams of `accounts`: `entry` (a status or a boost) is new in their
/// home timelines. Called by `statuses::feed::push` for the accounts that got it new.
pub(crate) async fn home_updated(
    tx: &mut PgConnection,
    entry: Uuid,
    accounts: &[Uuid],
) -> Result<(), sqlx::Error> {
    if accounts.is_empty() {
        return Ok(());
    }
    emit(
        tx,
        NewEvent {
            kind: "user",
            event: "update",
            accounts,
            post: Some(entry),
            notification: None,
            local: false,
            tags: &[],
        },
    )
    .await
}

/// `notification` on the `user` and `user:notification` streams of `account`. Called by
/// `statuses::notify::notify` for each notification it stores.
pub(crate) async fn notified(
    tx: &mut PgConnection,
    account: Uuid,
    notification: i64,
) -> Result<(), sqlx::Error> {
    emit(
        tx,
        NewEvent {
            kind: "notification",
            event: "notification",
            accounts: &[account],
            post: None,
            notification: Some(notification),
            local: false,
            tags: &[],
        },
    )
    .await
}

/// `delete` of status ids (posts or boosts) on every stream that may have shown them. Clients
/// drop the id if they show it and ignore it otherwise; ids are opaque, so telling everyone
/// leaks nothing a status id did not.
pub(crate) async fn deleted(tx: &mut PgConnection, ids: &[Uuid]) -> Result<(), sqlx::Error> {
    for id in ids {
        emit(
            tx,
            NewEvent {
                kind: "delete",
                event: "delete",
                accounts: &[],
                post: Some(*id),
                notification: None,
                local: false,
                tags: &[],
            },
        )
        .await?;
    }
    Ok(())
}

/// A new status, for the `public`, `public:local`/`public:remote` and `hashtag` streams: call
/// it in the transaction that stores the status (ours or a remote one), after it is stored.
/// Only public statuses are streamed there (as on Mastodon); others are ignored, so callers need
/// not check. Reads visibility, origin and tags from the `posts` view.
pub async fn status_created(tx: &mut PgConnection, post: Uuid) -> Result<(), sqlx::Error> {
    public_event(tx, post, "update").await
}

/// An edited status (`status.update`) on the same streams as [`status_created`].
pub async fn status_updated(tx: &mut PgConnection, post: Uuid) -> Result<(), sqlx::Error> {
    public_event(tx, post, "status.update").await
}

async fn public_event(tx: &mut PgConnection, post: Uuid, event: &str) -> Result<(), sqlx::Error> {
    let row: Option<(bool, Vec<String>)> = sqlx::query_as(
        "SELECT local, tags FROM posts WHERE id = $1 AND visibility = 'public'",
    )
    .bind(post)
    .fetch_optional(&mut *tx)
    .await?;
    let Some((local, tags)) = row else {
        return Ok(());
    };
    emit(
        tx,
        NewEvent {
            kind: "public",
            event,
            accounts: &[],
            post: Some(post),
            notification: None,
            local,
            tags: &tags,
        },
    )
    .await
}

/// Deletes events older than `keep`: they were delivered or are of no use to a client that
/// was away that long (a reconnecting client reloads its timelines). Returns how many.
pub async fn cleanup(pool: &sqlx::PgPool, keep: std::time::Duration) -> Result<u64, sqlx::Error> {
    Ok(sqlx::query(
        "DELETE FROM stream_events WHERE created_at < now() - make_interval(secs => $1)",
    )
    .bind(keep.as_secs_f64())
    .execute(pool)
    .await?
    .rows_affected())
}
