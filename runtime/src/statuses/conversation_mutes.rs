//! Muted conversations (R-MAPI-6, `POST /api/v1/statuses/:id/mute`): a thread the
//! account takes part in stops notifying it — replies, mentions, favourites, boosts, poll
//! ends and edits about any of its statuses — as Mastodon's `NotifyService` does. Its statuses
//! render `muted: true` for that account. Nothing is federated.
//!
//! A thread is named by the IRI at its top: the root post's, or the parent nobody here has
//! (`in_reply_to` pointing at an unfetched post). The check walks a status's ancestors and
//! asks whether any of them (or the dangling parent above them) is a muted top, so a mute
//! still holds after the missing parent arrives and the top moves up.

use std::collections::HashSet;

use sqlx::PgConnection;
use uuid::Uuid;

/// How far up a thread is followed (as `statuses::context`; conversations' roots too): cycles
/// and very long chains stop here.
const MAX_DEPTH: i32 = 64;

/// `up(uri, parent, depth)`: post `$1` and the posts we have above it (`parent` is each one's
/// `in_reply_to`), to `MAX_DEPTH` — the walk up a thread that finds its top.
pub(crate) fn up_the_thread() -> String {
    format!(
        "WITH RECURSIVE up(uri, parent, depth) AS (
             SELECT uri, in_reply_to_uri, 0 FROM posts WHERE id = $1
           UNION ALL
             SELECT p.uri, p.in_reply_to_uri, up.depth + 1
               FROM up JOIN posts p ON p.uri = up.parent
              WHERE up.depth < {MAX_DEPTH}
         )"
    )
}

/// The IRI at the top of the thread of post `id`, if `id` names a post.
pub async fn root_of(conn: &mut PgConnection, id: Uuid) -> Result<Option<String>, sqlx::Error> {
    sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "{} SELECT coalesce(parent, uri) FROM up ORDER BY depth DESC LIMIT 1",
        up_the_thread()
    )))
    .bind(id)
    .fetch_optional(conn)
    .await
}

/// `account` mutes the thread of post `id` (again: nothing changes).
pub async fn mute(tx: &mut PgConnection, account: Uuid, id: Uuid) -> Result<(), sqlx::Error> {
    if let Some(root) = root_of(tx, id).await? {
        sqlx::query(
            "INSERT INTO conversation_mutes (account_id, root_uri) VALUES ($1, $2)
             ON CONFLICT DO NOTHING",
        )
        .bind(account)
        .bind(root)
        .execute(tx)
        .await?;
    }
    Ok(())
}

/// `account` unmutes the thread of post `id`: every top its ancestors had is lifted.
pub async fn unmute(tx: &mut PgConnection, account: Uuid, id: Uuid) -> Result<(), sqlx::Error> {
    let muted = muted_among(tx, account, &[id]).await?;
    if muted.is_empty() {
        return Ok(());
    }
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DELETE FROM conversation_mutes m
          WHERE m.account_id = $2 AND m.root_uri IN (
             {} SELECT uri FROM up UNION SELECT parent FROM up WHERE parent IS NOT NULL)",
        up_the_thread()
    )))
    .bind(id)
    .bind(account)
    .execute(tx)
    .await?;
    Ok(())
}

/// Which of the posts `ids` are in a thread `account` muted. Costs one indexed probe when
/// the account mutes no thread (most accounts), one walk up the page's threads otherwise.
pub async fn muted_among(
    conn: &mut PgConnection,
    account: Uuid,
    ids: &[Uuid],
) -> Result<HashSet<Uuid>, sqlx::Error> {
    let any: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM conversation_mutes WHERE account_id = $1)",
    )
    .bind(account)
    .fetch_one(&mut *conn)
    .await?;
    if !any || ids.is_empty() {
        return Ok(HashSet::new());
    }
    let rows: Vec<Uuid> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "WITH RECURSIVE up(start, uri, parent, depth) AS (
             SELECT id, uri, in_reply_to_uri, 0 FROM posts WHERE id = ANY($1)
           UNION ALL
             SELECT up.start, p.uri, p.in_reply_to_uri, up.depth + 1
               FROM up JOIN posts p ON p.uri = up.parent
              WHERE up.depth < {MAX_DEPTH}
         )
         SELECT DISTINCT up.start FROM up
           JOIN conversation_mutes m ON m.account_id = $2
                AND (m.root_uri = up.uri OR m.root_uri = up.parent)"
    )))
    .bind(ids)
    .bind(account)
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().collect())
}
