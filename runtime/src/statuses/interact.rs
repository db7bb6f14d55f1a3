//! A local account's favourites, boosts and bookmarks (R-MAPI-3, issue 19 item 1): the rows,
//! and their local side effects in the caller's transaction — the local author's
//! notification (`notify`), the boost's home timeline entries (`feed`). What is sent to other
//! servers is `federation::interactions`; the handler commits both together.
//!
//! Every action is idempotent: a second favourite, boost or bookmark of the same post finds
//! the first one and changes nothing (no second row, notification or activity), and undoing
//! what is not there changes nothing either.

use sqlx::PgConnection;
use uuid::Uuid;

use super::Visibility;
use super::access;
use super::feed::{self, Entry};
use super::notify::{self, Kind, Notification};
use crate::accounts::Account;
use crate::federation::Federation;

/// A post someone acts on, as the `posts` view has it.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct Post {
    pub id: Uuid,
    pub uri: String,
    /// The local author, for one of our posts.
    pub account_id: Option<Uuid>,
    /// The remote author's actor IRI, for one of theirs.
    pub actor_iri: Option<String>,
    /// The author's Account entity id (local account id, or remote actor id).
    pub author_id: Uuid,
    pub visibility: String,
}

impl Post {
    pub fn visibility(&self) -> Visibility {
        Visibility::parse(&self.visibility).unwrap_or(Visibility::Direct)
    }
}

/// The post `id` names for `viewer`: a post, or the post a boost boosts (acting on a boost
/// acts on what it shows, as Mastodon does). `None` when it names nothing the viewer may see.
pub async fn find(
    conn: &mut PgConnection,
    viewer: Option<Uuid>,
    id: Uuid,
) -> Result<Option<Post>, sqlx::Error> {
    if !access::can_see(&mut *conn, viewer, id).await? {
        return Ok(None);
    }
    sqlx::query_as(
        "SELECT p.id, p.uri, p.account_id, p.actor_iri, p.author_id, p.visibility
           FROM posts p
          WHERE p.id = coalesce((SELECT post_id FROM reblogs WHERE id = $1), $1)",
    )
    .bind(id)
    .fetch_optional(conn)
    .await
}

/// Favourites `post` with our `Like` id `activity`. Returns the stored favourite's `Like`
/// id when it is new (`None`: it was already favourited, nothing changed). A local author is
/// notified, caused by the `Like`.
pub async fn favourite(
    tx: &mut PgConnection,
    account: &Account,
    post: &Post,
    activity: &str,
) -> Result<Option<String>, sqlx::Error> {
    let new: Option<String> = sqlx::query_scalar(
        "INSERT INTO favourites (account_id, post_id, post_uri, activity_id)
         VALUES ($1, $2, $3, $4)
         ON CONFLICT (account_id, post_id) DO NOTHING RETURNING activity_id",
    )
    .bind(account.id)
    .bind(post.id)
    .bind(&post.uri)
    .bind(activity)
    .fetch_optional(&mut *tx)
    .await?;
    if let (Some(cause), Some(author)) = (&new, post.account_id) {
        let n = Notification {
            account: author,
            kind: Kind::Favourite,
            from_account: account.id,
            post: Some(post.id),
            cause,
        };
        notify::notify(&mut *tx, &n).await?;
    }
    Ok(new)
}

/// Removes the favourite of `post`. Returns its `Like` id (for the `Undo`) when there was one;
/// the notification it caused is withdrawn.
pub async fn unfavourite(
    tx: &mut PgConnection,
    account: &Account,
    post: &Post,
) -> Result<Option<String>, sqlx::Error> {
    let gone: Option<String> = sqlx::query_scalar(
        "DELETE FROM favourites WHERE account_id = $1 AND post_id = $2 RETURNING activity_id",
    )
    .bind(account.id)
    .bind(post.id)
    .fetch_optional(&mut *tx)
    .await?;
    if let Some(cause) = &gone {
        notify::withdraw(&mut *tx, Kind::Favourite, cause).await?;
    }
    Ok(gone)
}

/// One of our boosts as stored.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct Boost {
    /// The boost's own status id.
    pub id: Uuid,
    /// Our `Announce` id.
    pub activity_id: String,
    pub visibility: String,
}

/// Why a boost is refused (Mastodon's 403: the post's audience is not the booster's to widen).
#[derive(Debug, thiserror::Error)]
pub enum BoostError {
    #[error("This action is not allowed")]
    NotAllowed,
    #[error(transparent)]
    Db(#[from] sqlx::Error),
}

/// The visibility a boost gets: direct posts are never boosted and followers-only ones only
/// by their author, whose boost stays followers-only (Mastodon's `reblog?` policy); otherwise
/// the one asked for, else `default`: the booster's posting default, as Mastodon's
/// ReblogService (a followers-only default never boosts publicly by omission).
pub fn boost_visibility(
    account: &Account,
    post: &Post,
    asked: Option<Visibility>,
    default: Visibility,
) -> Result<Visibility, BoostError> {
    match post.visibility() {
        Visibility::Direct => Err(BoostError::NotAllowed),
        Visibility::Private if post.account_id != Some(account.id) => Err(BoostError::NotAllowed),
        Visibility::Private => Ok(Visibility::Private),
        Visibility::Public | Visibility::Unlisted => match asked {
            Some(Visibility::Direct) => Err(BoostError::NotAllowed),
            Some(v) => Ok(v),
            None => Ok(default),
        },
    }
}

/// Boosts `post` (already checked with `boost_visibility`) as a new status `id`, announced as
/// `activity`. Returns the boost and whether it is new: an existing boost of the post is
/// answered as it is. A new one goes to the booster's home timeline and their local
/// followers', and notifies a local author.
pub async fn reblog(
    tx: &mut PgConnection,
    fed: &Federation,
    account: &Account,
    post: &Post,
    visibility: Visibility,
    activity: &str,
) -> Result<(Boost, bool), sqlx::Error> {
    let new: Option<Boost> = sqlx::query_as(
        "INSERT INTO reblogs (id, post_id, post_uri, account_id, activity_id, visibility)
         VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (account_id, post_id) WHERE account_id IS NOT NULL DO NOTHING
         RETURNING id, activity_id, visibility",
    )
    .bind(Uuid::now_v7())
    .bind(post.id)
    .bind(&post.uri)
    .bind(account.id)
    .bind(activity)
    .bind(visibility.as_str())
    .fetch_optional(&mut *tx)
    .await?;
    let Some(boost) = new else {
        let existing: Boost = sqlx::query_as(
            "SELECT id, activity_id, visibility FROM reblogs WHERE account_id = $1 AND post_id = $2",
        )
        .bind(account.id)
        .bind(post.id)
        .fetch_one(&mut *tx)
        .await?;
        return Ok((existing, false));
    };
    let own = Entry {
        entry: boost.id,
        post: post.id,
        source: "self",
    };
    feed::push(&mut *tx, &own, &[account.id]).await?;
    let me = fed.actor_iri(&account.username);
    let followers = super::followers::boost_readers(&mut *tx, &me).await?;
    let theirs = Entry {
        entry: boost.id,
        post: post.id,
        source: &me,
    };
    feed::push(&mut *tx, &theirs, &followers).await?;
    if let Some(author) = post.account_id {
        let n = Notification {
            account: author,
            kind: Kind::Reblog,
            from_account: account.id,
            post: Some(post.id),
            cause: activity,
        };
        notify::notify(&mut *tx, &n).await?;
    }
    Ok((boost, true))
}

/// Takes back the boost of `post`: its timeline entries and the notification it caused go.
/// Returns it (for the `Undo`) when there was one.
pub async fn unreblog(
    tx: &mut PgConnection,
    account: &Account,
    post: &Post,
) -> Result<Option<Boost>, sqlx::Error> {
    let gone: Option<Boost> = sqlx::query_as(
        "DELETE FROM reblogs WHERE account_id = $1 AND post_id = $2
         RETURNING id, activity_id, visibility",
    )
    .bind(account.id)
    .bind(post.id)
    .fetch_optional(&mut *tx)
    .await?;
    if let Some(b) = &gone {
        feed::remove_entry(&mut *tx, b.id).await?;
        notify::withdraw(&mut *tx, Kind::Reblog, &b.activity_id).await?;
    }
    Ok(gone)
}

/// Bookmarks `post` (local only: nothing is sent). True when it stored something (a new
/// bookmark, or the id of an imported one).
pub async fn bookmark(
    tx: &mut PgConnection,
    account: &Account,
    post: &Post,
) -> Result<bool, sqlx::Error> {
    // Imported bookmarks name the post by IRI only; a bookmark made here also names its id.
    Ok(sqlx::query(
        "INSERT INTO bookmarks (account_id, post_iri, post_id) VALUES ($1, $2, $3)
         ON CONFLICT (account_id, post_iri) DO UPDATE SET post_id = EXCLUDED.post_id
          WHERE bookmarks.post_id IS NULL",
    )
    .bind(account.id)
    .bind(&post.uri)
    .bind(post.id)
    .execute(tx)
    .await?
    .rows_affected()
        == 1)
}

/// Removes the bookmark of `post`. True when there was one.
pub async fn unbookmark(
    tx: &mut PgConnection,
    account: &Account,
    post: &Post,
) -> Result<bool, sqlx::Error> {
    Ok(
        sqlx::query("DELETE FROM bookmarks WHERE account_id = $1 AND post_iri = $2")
            .bind(account.id)
            .bind(&post.uri)
            .execute(tx)
            .await?
            .rows_affected()
            == 1,
    )
}
