//! A local account's favourites, boosts and bookmarks (R-MAPI-3): the rows,
//! and their local side effects in the caller's transaction — the local author's
//! notification (`notify`), the boost's home timeline entries (`feed`) — and the activity it
//! sends (`federation::outbound::interactions`), queued in the same transaction, so the handler
//! is begin → act → commit → render.
//!
//! Every action is idempotent: a second favourite, boost or bookmark of the same post finds
//! the first one and changes nothing (no second row, notification or activity), and undoing
//! what is not there changes nothing either.
//!
//! A favourite or boost of a remote post takes the `Consent` its policy gives
//! (`approvals::ask`): one that waits for the author's approval is stored pending, and a
//! pending boost reaches no one's home but the booster's until it is approved.

use sqlx::PgConnection;
use uuid::Uuid;

use super::Visibility;
use super::feed::{self, Entry};
use super::notify::{self, Kind, Notification};
pub use super::post::{BOOST, Boost, Post, find};
use crate::accounts::Account;
use crate::approvals::Consent;
use crate::federation::Federation;
use crate::federation::outbound::interactions;

/// Favourites `post` as its author's `consent` allows. True when it is new (false: it was
/// already favourited, nothing changed); then a local author is notified and a remote one
/// sent our `Like`.
pub async fn favourite(
    tx: &mut PgConnection,
    fed: &Federation,
    account: &Account,
    post: &Post,
    consent: Consent,
) -> Result<bool, sqlx::Error> {
    let activity = fed.new_activity_id();
    let new: Option<String> = sqlx::query_scalar(
        "INSERT INTO favourites (account_id, post_id, post_uri, activity_id, pending_approval)
         VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (account_id, post_id) DO NOTHING RETURNING activity_id",
    )
    .bind(account.id)
    .bind(post.id)
    .bind(&post.uri)
    .bind(&activity)
    .bind(consent.pending())
    .fetch_optional(&mut *tx)
    .await?;
    let Some(like) = new else {
        return Ok(false);
    };
    if let Some(author) = post.account_id {
        let n = Notification {
            account: author,
            kind: Kind::Favourite,
            from_account: account.id,
            post: Some(post.id),
            cause: &like,
        };
        notify::notify(&mut *tx, &n).await?;
    }
    interactions::Interaction { fed, account, post }
        .like(tx, &like)
        .await?;
    Ok(true)
}

/// Removes the favourite of `post`: the notification it caused is withdrawn and a remote
/// author sent the `Undo` of our `Like`. True when there was one.
pub async fn unfavourite(
    tx: &mut PgConnection,
    fed: &Federation,
    account: &Account,
    post: &Post,
) -> Result<bool, sqlx::Error> {
    let gone: Option<String> = sqlx::query_scalar(
        "DELETE FROM favourites WHERE account_id = $1 AND post_id = $2 RETURNING activity_id",
    )
    .bind(account.id)
    .bind(post.id)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(like) = gone else {
        return Ok(false);
    };
    notify::withdraw(&mut *tx, Kind::Favourite, &like).await?;
    interactions::Interaction { fed, account, post }
        .undo_like(tx, &like)
        .await?;
    Ok(true)
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

/// Boosts `post` (already checked with `boost_visibility`) as a new status, as its author's
/// `consent` allows. Returns the boost: an existing boost of the post is answered as it is. A
/// new one goes to the booster's home timeline and (unless pending) their local followers',
/// notifies a local author, and its `Announce` is queued to the booster's followers and a
/// remote author (only the author while pending).
pub async fn reblog(
    tx: &mut PgConnection,
    fed: &Federation,
    account: &Account,
    post: &Post,
    visibility: Visibility,
    consent: Consent,
) -> Result<Boost, sqlx::Error> {
    let activity = fed.new_activity_id();
    let new: Option<Boost> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "INSERT INTO reblogs (id, post_id, post_uri, account_id, activity_id, visibility,
                              pending_approval)
         VALUES ($1, $2, $3, $4, $5, $6, $7)
         ON CONFLICT (account_id, post_id) WHERE account_id IS NOT NULL DO NOTHING
         RETURNING {BOOST}"
    )))
    .bind(Uuid::now_v7())
    .bind(post.id)
    .bind(&post.uri)
    .bind(account.id)
    .bind(&activity)
    .bind(visibility.as_str())
    .bind(consent.pending())
    .fetch_optional(&mut *tx)
    .await?;
    let Some(boost) = new else {
        let existing: Boost = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {BOOST} FROM reblogs WHERE account_id = $1 AND post_id = $2"
        )))
        .bind(account.id)
        .bind(post.id)
        .fetch_one(&mut *tx)
        .await?;
        return Ok(existing);
    };
    let own = Entry {
        entry: boost.id,
        post: post.id,
        source: "self",
        reply_to: None,
    };
    feed::push(&mut *tx, &own, &[account.id]).await?;
    if !boost.pending_approval {
        to_followers_homes(tx, fed, account, post, &boost).await?;
    }
    if let Some(author) = post.account_id {
        let n = Notification {
            account: author,
            kind: Kind::Reblog,
            from_account: account.id,
            post: Some(post.id),
            cause: &activity,
        };
        notify::notify(&mut *tx, &n).await?;
    }
    interactions::Interaction { fed, account, post }
        .announce(tx, &boost)
        .await?;
    Ok(boost)
}

/// `boost` of `post` in the home timelines of the booster's local followers who see boosts:
/// when it is made, or once its author approved it (`approvals::answers`).
pub async fn to_followers_homes(
    tx: &mut PgConnection,
    fed: &Federation,
    account: &Account,
    post: &Post,
    boost: &Boost,
) -> Result<(), sqlx::Error> {
    let me = fed.actor_iri(&account.username);
    let followers = super::followers::boost_readers(&mut *tx, &me).await?;
    let theirs = Entry {
        entry: boost.id,
        post: post.id,
        source: &me,
        reply_to: None,
    };
    feed::push(&mut *tx, &theirs, &followers).await?;
    Ok(())
}

/// Takes back the boost of `post`: its timeline entries and the notification it caused go,
/// and the `Undo` of its `Announce` is queued. True when there was one.
pub async fn unreblog(
    tx: &mut PgConnection,
    fed: &Federation,
    account: &Account,
    post: &Post,
) -> Result<bool, sqlx::Error> {
    let gone: Option<Boost> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "DELETE FROM reblogs WHERE account_id = $1 AND post_id = $2 RETURNING {BOOST}"
    )))
    .bind(account.id)
    .bind(post.id)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(boost) = gone else {
        return Ok(false);
    };
    feed::remove_entry(&mut *tx, boost.id).await?;
    notify::withdraw(&mut *tx, Kind::Reblog, &boost.activity_id).await?;
    interactions::Interaction { fed, account, post }
        .undo_announce(tx, &boost)
        .await?;
    Ok(true)
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
