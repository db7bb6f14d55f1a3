//! Home timelines written when a post or boost arrives (R-MAPI-4): `push` is the one way an
//! entry gets into `home_feed`, so reading a page stays one index range scan and every new
//! entry reaches the account's `user` stream from one place.

use sqlx::PgConnection;
use uuid::Uuid;

/// One entry to add to some home timelines.
pub struct Entry<'a> {
    /// The status id shown: a post's id, or a boost's id.
    pub entry: Uuid,
    /// The post shown (the boosted one for a boost), so a deletion can remove every entry.
    pub post: Uuid,
    /// Whose activity put it there: an actor IRI, or `self` for the account's own posts.
    pub source: &'a str,
}

/// Adds the entry to each account's home timeline (once: a redelivered post adds nothing)
/// and tells their `user` streams, in the same transaction. Returns the accounts that got it
/// new.
pub async fn push(
    tx: &mut PgConnection,
    e: &Entry<'_>,
    accounts: &[Uuid],
) -> Result<Vec<Uuid>, sqlx::Error> {
    if accounts.is_empty() {
        return Ok(Vec::new());
    }
    let new: Vec<Uuid> = sqlx::query_scalar(
        "INSERT INTO home_feed (account_id, entry_id, post_id, source)
         SELECT a, $2, $3, $4 FROM unnest($1::uuid[]) AS a
         ON CONFLICT (account_id, entry_id) DO NOTHING
         RETURNING account_id",
    )
    .bind(accounts)
    .bind(e.entry)
    .bind(e.post)
    .bind(e.source)
    .fetch_all(&mut *tx)
    .await?;
    crate::streaming::emit::home(tx, e.entry, &new).await?;
    Ok(new)
}

/// Removes every entry showing `post` (it was deleted), boosts of it included.
pub async fn remove_post(tx: &mut PgConnection, post: Uuid) -> Result<u64, sqlx::Error> {
    Ok(sqlx::query("DELETE FROM home_feed WHERE post_id = $1")
        .bind(post)
        .execute(tx)
        .await?
        .rows_affected())
}

/// Removes one entry (a boost that was undone, or a post an account may no longer see) from
/// every home timeline that shows it.
pub async fn remove_entry(tx: &mut PgConnection, entry: Uuid) -> Result<u64, sqlx::Error> {
    Ok(sqlx::query("DELETE FROM home_feed WHERE entry_id = $1")
        .bind(entry)
        .execute(tx)
        .await?
        .rows_affected())
}
