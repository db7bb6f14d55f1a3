//! Home and list timelines written when a post or boost arrives (R-MAPI-4, R-MAPI-6):
//! `push` is the one way an entry gets into `home_feed` and `list_feed`, so reading a page
//! stays one index range scan and every new entry reaches the account's `user` and `list`
//! streams from one place.
//!
//! Lists follow Mastodon's rules when the entry is written: an entry goes to each list of the
//! reader that holds its source (the member whose post or boost it is); a reply to someone
//! else goes only where the list's `replies_policy` lets it (always when it answers the
//! list's owner); and a member of an `exclusive` list is kept out of the owner's home.

use sqlx::PgConnection;
use uuid::Uuid;

use crate::mastodon::Urls;

/// One entry to add to some home timelines.
pub struct Entry<'a> {
    /// The status id shown: a post's id, or a boost's id.
    pub entry: Uuid,
    /// The post shown (the boosted one for a boost), so a deletion can remove every entry.
    pub post: Uuid,
    /// Whose activity put it there: an actor IRI, or `self` for the account's own posts.
    pub source: &'a str,
    /// For a reply to someone else's post, whom it answers (lists' `replies_policy`).
    pub reply_to: Option<ReplyTo>,
}

/// The author of the post a reply answers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReplyTo {
    /// Their actor IRI; `None` when the post answered is not known here.
    pub iri: Option<String>,
    /// Their account, when they are local (a reply to a list's owner reaches the list).
    pub local: Option<Uuid>,
}

impl ReplyTo {
    /// Whom the post `post` answers, if it is a reply to another author's post (a reply to
    /// oneself, a thread, is not: lists show threads of their members).
    pub async fn of(
        conn: &mut PgConnection,
        urls: Urls<'_>,
        post: Uuid,
    ) -> Result<Option<ReplyTo>, sqlx::Error> {
        // The parent's remote author, local author and username, and whether it is a thread.
        type Parent = (Option<String>, Option<Uuid>, Option<String>, bool);
        let row: Option<Parent> = sqlx::query_as(
            "SELECT pp.actor_iri, pp.account_id, a.username,
                    coalesce(pp.author_id = p.author_id, false)
               FROM posts p
               LEFT JOIN LATERAL (SELECT * FROM posts pp WHERE pp.uri = p.in_reply_to_uri
                                  LIMIT 1) pp ON true
               LEFT JOIN accounts a ON a.id = pp.account_id
              WHERE p.id = $1 AND p.in_reply_to_uri IS NOT NULL",
        )
        .bind(post)
        .fetch_optional(conn)
        .await?;
        Ok(match row {
            None | Some((_, _, _, true)) => None,
            Some((remote, local, username, false)) => Some(ReplyTo {
                iri: remote.or_else(|| username.map(|u| urls.actor(&u))),
                local,
            }),
        })
    }
}

/// Adds the entry to each account's home timeline (once: a redelivered post adds nothing)
/// unless its source is a member of one of the account's exclusive lists, and to each of
/// their lists that take it; tells their `user` and `list` streams, in the same transaction.
/// Returns the accounts whose home got it new.
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
          WHERE NOT EXISTS (SELECT 1 FROM lists l
                              JOIN list_members m ON m.list_id = l.id AND m.target_iri = $4
                             WHERE l.account_id = a AND l.exclusive)
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
    let reply = e.reply_to.as_ref();
    let lists: Vec<Uuid> = sqlx::query_scalar(
        "INSERT INTO list_feed (list_id, entry_id, post_id, source)
         SELECT l.id, $2, $3, $4
           FROM lists l JOIN list_members m ON m.list_id = l.id AND m.target_iri = $4
          WHERE l.account_id = ANY($1)
            AND (NOT $5
                 OR l.account_id = $7::uuid
                 OR (l.replies_policy = 'followed'
                     AND EXISTS (SELECT 1 FROM follows f
                                  WHERE f.account_id = l.account_id AND f.target_iri = $6
                                    AND f.state = 'accepted'))
                 OR (l.replies_policy = 'list'
                     AND EXISTS (SELECT 1 FROM list_members o
                                  WHERE o.list_id = l.id AND o.target_iri = $6)))
         ON CONFLICT (list_id, entry_id) DO NOTHING
         RETURNING list_id",
    )
    .bind(accounts)
    .bind(e.entry)
    .bind(e.post)
    .bind(e.source)
    .bind(reply.is_some())
    .bind(reply.and_then(|r| r.iri.as_deref()))
    .bind(reply.and_then(|r| r.local))
    .fetch_all(&mut *tx)
    .await?;
    crate::streaming::emit::list(tx, e.entry, &lists).await?;
    Ok(new)
}

/// Removes every entry showing `post` (it was deleted), boosts of it included.
pub async fn remove_post(tx: &mut PgConnection, post: Uuid) -> Result<u64, sqlx::Error> {
    sqlx::query("DELETE FROM list_feed WHERE post_id = $1")
        .bind(post)
        .execute(&mut *tx)
        .await?;
    Ok(sqlx::query("DELETE FROM home_feed WHERE post_id = $1")
        .bind(post)
        .execute(tx)
        .await?
        .rows_affected())
}

/// Removes one entry (a boost that was undone, or a post an account may no longer see) from
/// every home timeline that shows it.
pub async fn remove_entry(tx: &mut PgConnection, entry: Uuid) -> Result<u64, sqlx::Error> {
    sqlx::query("DELETE FROM list_feed WHERE entry_id = $1")
        .bind(entry)
        .execute(&mut *tx)
        .await?;
    Ok(sqlx::query("DELETE FROM home_feed WHERE entry_id = $1")
        .bind(entry)
        .execute(tx)
        .await?
        .rows_affected())
}
