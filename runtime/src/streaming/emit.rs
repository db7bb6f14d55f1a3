//! The producers' side: each function writes its events and notifies every listening node in
//! one statement (`INSERT … RETURNING pg_notify(…)`) of the caller's transaction, so the
//! notifications go out at its commit and never if it rolls back, and a producer pays one round
//! trip. Who may see what is decided when the event is sent, per connection (`session`); these
//! only say what happened and to whose streams.
//!
//! Call sites: `statuses::feed::push` ([`home`]), `statuses::notify::notify` and
//! `tasks::poll_notification` ([`notified`]), `statuses::write` ([`created`], [`edited`],
//! [`deleted`]) and the inbox (`federation::activity`: [`remote_created_stored`], [`remote_edited`],
//! [`remote_deleted`]).

use crate::statuses::access;
use sqlx::{AssertSqlSafe, PgConnection};
use uuid::Uuid;

/// The `authors` of the entry (a post or a boost) whose id is `id_expr`: the post's author,
/// or the booster and the boosted post's author. Each probe is one index lookup by id.
fn entry_authors(id_expr: &str) -> String {
    format!(
        "coalesce((SELECT ARRAY[p.author_id] FROM posts p WHERE p.id = {id_expr}),
                  (SELECT ARRAY[coalesce(r.account_id, ra.id),
                                (SELECT p.author_id FROM posts p WHERE p.id = r.post_id LIMIT 1)]
                     FROM reblogs r LEFT JOIN remote_actors ra ON ra.iri = r.actor_iri
                    WHERE r.id = {id_expr}),
                  '{{}}'::uuid[])"
    )
}

/// What every producing statement ends with: one NOTIFY per row it wrote, carrying the id.
const NOTIFY: &str = "RETURNING pg_notify('hollo_stream', id::text)";

/// `update` on the `user` streams of `accounts`: `entry` (a post or a boost) is new in their
/// home timelines.
pub async fn home(
    tx: &mut PgConnection,
    entry: Uuid,
    accounts: &[Uuid],
) -> Result<(), sqlx::Error> {
    if accounts.is_empty() {
        return Ok(());
    }
    let sql = format!(
        "INSERT INTO stream_events (kind, event, accounts, post_id, authors)
         VALUES ('home', 'update', $1, $2, {}) {NOTIFY}",
        entry_authors("$2::uuid")
    );
    sqlx::query(AssertSqlSafe(sql))
        .bind(accounts)
        .bind(entry)
        .execute(tx)
        .await?;
    Ok(())
}

/// `update` on the `list` streams of `lists`: `entry` is new in those list timelines (one row
/// for all of them).
pub async fn list(tx: &mut PgConnection, entry: Uuid, lists: &[Uuid]) -> Result<(), sqlx::Error> {
    if lists.is_empty() {
        return Ok(());
    }
    let sql = format!(
        "INSERT INTO stream_events (kind, event, lists, post_id, authors)
         VALUES ('list', 'update', $1, $2, {}) {NOTIFY}",
        entry_authors("$2::uuid")
    );
    sqlx::query(AssertSqlSafe(sql))
        .bind(lists)
        .bind(entry)
        .execute(tx)
        .await?;
    Ok(())
}

/// `account`'s mutes or blocks changed: its open streams reload what they hide. No client
/// sees this event.
pub async fn relationship(tx: &mut PgConnection, account: Uuid) -> Result<(), sqlx::Error> {
    to_account(tx, account, "'relationship', 'relationship'").await
}

/// `account`'s filters changed, or one ran out: its open streams reload them, and its `user`
/// streams send Mastodon's `filters_changed` (no payload) so apps fetch them again.
pub async fn filters(tx: &mut PgConnection, account: Uuid) -> Result<(), sqlx::Error> {
    to_account(tx, account, "'filters', 'filters_changed'").await
}

/// An event of `kind_and_event` (two SQL literals) for `account`'s streams alone.
async fn to_account(
    tx: &mut PgConnection,
    account: Uuid,
    kind_and_event: &'static str,
) -> Result<(), sqlx::Error> {
    let sql = format!(
        "INSERT INTO stream_events (kind, event, accounts)
         VALUES ({kind_and_event}, ARRAY[$1::uuid]) {NOTIFY}"
    );
    sqlx::query(AssertSqlSafe(sql))
        .bind(account)
        .execute(tx)
        .await?;
    Ok(())
}

/// `notification` on the `user` and `user:notification` streams: each `(account, id)` is a
/// notification just stored for that account.
pub async fn notified(tx: &mut PgConnection, stored: &[(Uuid, i64)]) -> Result<(), sqlx::Error> {
    if stored.is_empty() {
        return Ok(());
    }
    let (accounts, ids): (Vec<Uuid>, Vec<i64>) = stored.iter().copied().unzip();
    let sql = format!(
        "INSERT INTO stream_events (kind, event, accounts, notification_id, authors)
         SELECT 'notification', 'notification', ARRAY[a], n,
                coalesce((SELECT array_remove(ARRAY[from_account_id], NULL)
                            FROM notifications WHERE id = n), '{{}}'::uuid[])
           FROM unnest($1::uuid[], $2::bigint[]) AS u (a, n) {NOTIFY}"
    );
    sqlx::query(AssertSqlSafe(sql))
        .bind(&accounts)
        .bind(&ids)
        .execute(tx)
        .await?;
    Ok(())
}

/// The public streams' rows of a post, if it is public, for `event`: its origin and hashtags
/// let each connection choose (public:local, hashtag) without reading the post.
fn public_rows(filter: &str, event: &str) -> String {
    format!(
        "SELECT 'public'::text, '{event}'::text, '{{}}'::uuid[], p.id, p.local, p.tags,
                ARRAY[p.author_id]
           FROM posts p WHERE {filter} AND p.visibility = 'public'"
    )
}

/// A new status (call it after storing the post): an `update` on the public, public:local and
/// hashtag streams when it is public. Other visibilities reach people through their home
/// timelines and notifications only, as on Mastodon; callers need not check.
pub async fn created(tx: &mut PgConnection, post: Uuid) -> Result<(), sqlx::Error> {
    let rows = public_rows("p.id = $1", "update");
    let sql = format!(
        "INSERT INTO stream_events (kind, event, accounts, post_id, local, tags, authors) {rows} {NOTIFY}"
    );
    sqlx::query(AssertSqlSafe(sql))
        .bind(post)
        .execute(tx)
        .await?;
    Ok(())
}

/// An edited status (call it after the edit is stored): `status.update` on the `user` streams
/// of every account whose home timeline shows it (boosts of it included) and, if it is public,
/// on the public streams.
pub async fn edited(tx: &mut PgConnection, post: Uuid) -> Result<(), sqlx::Error> {
    let key = post.to_string();
    edited_where(tx, "p.id = $1::uuid", "post_id = $1::uuid", &key).await
}

/// `status.update` rows of the post `post_filter` names (over `posts p`) and the home and list
/// entries `home_filter` names (over `home_feed`, `list_feed`); both read the key as text `$1`.
async fn edited_where(
    tx: &mut PgConnection,
    post_filter: &str,
    home_filter: &str,
    key: &str,
) -> Result<(), sqlx::Error> {
    let public = public_rows(post_filter, "status.update");
    let sql = format!(
        "INSERT INTO stream_events (kind, event, accounts, post_id, local, tags, authors)
         SELECT 'home', 'status.update', h.accounts, h.post_id, false, '{{}}'::text[],
                '{{}}'::uuid[]
           FROM (SELECT post_id, array_agg(DISTINCT account_id) AS accounts
                   FROM home_feed WHERE {home_filter} GROUP BY post_id) h
         UNION ALL {public} {NOTIFY}"
    );
    sqlx::query(AssertSqlSafe(sql))
        .bind(key)
        .execute(&mut *tx)
        .await?;
    let lists = format!(
        "INSERT INTO stream_events (kind, event, lists, post_id)
         SELECT 'list', 'status.update', array_agg(DISTINCT list_id), post_id
           FROM list_feed WHERE {home_filter} GROUP BY post_id {NOTIFY}"
    );
    sqlx::query(AssertSqlSafe(lists))
        .bind(key)
        .execute(tx)
        .await?;
    Ok(())
}

/// A deleted status (call it before its boosts are deleted): `delete` of its id and of every
/// boost of it. Clients drop an id they show and ignore one they do not, so a public or
/// unlisted status's deletion goes to every stream; a followers-only or direct one's only to
/// the streams of those who could read it (R-MAPI-VIS: that a direct message existed, and when
/// it went, is its audience's business).
pub async fn deleted(tx: &mut PgConnection, post: Uuid) -> Result<(), sqlx::Error> {
    deleted_where(
        tx,
        "SELECT $1::uuid UNION ALL SELECT id FROM reblogs WHERE post_id = $1::uuid",
        &format!(
            "SELECT visibility, array_append(audience, account_id) || {} FROM statuses s
              WHERE id = $1::uuid",
            followers_reading("s", &access::local_author_iri_sql("s"))
        ),
        &post.to_string(),
    )
    .await
}

/// The local accounts that read the post `alias` (of `statuses` or `remote_posts`) as its
/// author's followers (`statuses::access`): a followers-only post's accepted followers now,
/// as an array (none for another visibility).
fn followers_reading(alias: &str, author_iri: &str) -> String {
    format!(
        "(CASE WHEN {alias}.visibility = 'private'
               THEN ARRAY(SELECT f.account_id FROM follows f
                           WHERE f.target_iri = {author_iri} AND f.state = 'accepted')
               ELSE '{{}}'::uuid[] END)"
    )
}

/// `delete` rows of the ids `ids` selects, for the readers `readers` selects (one row: the
/// post's visibility and the local accounts who may read it, whatever its `deleted_at`), both
/// reading the key as text `$1`.
async fn deleted_where(
    tx: &mut PgConnection,
    ids: &str,
    readers: &str,
    key: &str,
) -> Result<(), sqlx::Error> {
    let sql = format!(
        "INSERT INTO stream_events (kind, event, post_id, restricted, accounts)
         SELECT 'delete', 'delete', d.id, v.restricted,
                CASE WHEN v.restricted THEN v.readers ELSE '{{}}'::uuid[] END
           FROM ({ids}) AS d (id),
                (SELECT r.visibility NOT IN ('public', 'unlisted'), r.readers
                   FROM ({readers}) AS r (visibility, readers)) AS v (restricted, readers)
         {NOTIFY}"
    );
    sqlx::query(AssertSqlSafe(sql))
        .bind(key)
        .execute(tx)
        .await?;
    Ok(())
}

/// A public remote post the inbox just inserted (R-MAPI-5): what the `public` event needs is
/// what the inbox already holds — the id, the stored hashtags and the author's account id — so
/// the event is written from those, without reading the post and its author back.
pub struct RemoteCreated<'a> {
    pub post: Uuid,
    /// The hashtags as stored on the post (lowercased, without `#`).
    pub tags: &'a [String],
    /// The author's `remote_actors` id, when the author is stored.
    pub author: Option<Uuid>,
}

/// `update` on the public streams: the public remote post in `created` is new. The caller
/// has checked it is public and was just inserted (so not deleted).
pub async fn remote_created_stored(
    tx: &mut PgConnection,
    created: &RemoteCreated<'_>,
) -> Result<(), sqlx::Error> {
    let sql = format!(
        "INSERT INTO stream_events (kind, event, accounts, post_id, local, tags, authors)
         VALUES ('public', 'update', '{{}}'::uuid[], $1, false, $2,
                 array_remove(ARRAY[$3::uuid], NULL)) {NOTIFY}"
    );
    sqlx::query(AssertSqlSafe(sql))
        .bind(created.post)
        .bind(created.tags)
        .bind(created.author)
        .execute(tx)
        .await?;
    Ok(())
}

/// A remote post just changed by an inbox `Update`: as [`edited`].
pub async fn remote_edited(tx: &mut PgConnection, iri: &str) -> Result<(), sqlx::Error> {
    edited_where(
        tx,
        "p.uri = $1 AND NOT p.local",
        "post_id = (SELECT id FROM remote_posts WHERE iri = $1)",
        iri,
    )
    .await
}

/// A remote post just deleted by an inbox `Delete`: as [`deleted`].
pub async fn remote_deleted(tx: &mut PgConnection, iri: &str) -> Result<(), sqlx::Error> {
    deleted_where(
        tx,
        "SELECT id FROM remote_posts WHERE iri = $1 UNION ALL SELECT id FROM reblogs WHERE post_uri = $1",
        &format!(
            "SELECT visibility, audience || {} FROM remote_posts r WHERE iri = $1",
            followers_reading("r", "r.actor")
        ),
        iri,
    )
    .await
}
