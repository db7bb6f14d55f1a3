//! A local account's relationships with another account, local or remote: follow, unfollow,
//! block, unblock, and answering follow requests on a locked account. Every change is made in
//! the caller's transaction together with the activity it sends (`Follow`, `Undo`, `Block`,
//! `Accept`, `Reject`, stored with a stable id and delivered through the queue), so either both
//! happen or neither does. Between two local accounts nothing is delivered: both sides of the
//! relationship are written at once.
//!
//! Storage: `follows` (our account → target, `pending` until accepted), `followers` (someone →
//! our account), `follow_requests` (someone waiting for a locked account), `account_blocks`.
//! Targets are named by actor IRI in all of them, local accounts too.

use serde_json::json;
use sqlx::{PgConnection, PgPool};

use crate::accounts::Account;
use crate::federation::Federation;
use crate::federation::actors::actor::RemoteActor;
use crate::federation::context;
use crate::federation::outbound::delivery::{Recipient, queue_activity};
use crate::federation::outbound::follows;
use crate::statuses::notify::{self, Kind, Notification};

/// The other side of a relationship.
#[derive(Clone, Debug)]
pub enum Target {
    Local(Account),
    Remote(RemoteActor),
}

impl Target {
    pub fn iri(&self, fed: &Federation) -> String {
        match self {
            Target::Local(a) => fed.actor_iri(&a.username),
            Target::Remote(r) => r.iri.clone(),
        }
    }
}

/// Follows `target`. Remote: a pending follow and a queued `Follow` (idempotent while pending
/// or accepted, `follows::follow_in`). Local: accepted at once, or a follow request when the
/// target is locked. Following oneself, or someone one blocks or who blocks one, is refused.
pub async fn follow(
    tx: &mut PgConnection,
    fed: &Federation,
    account: &Account,
    target: &Target,
) -> Result<(), RelationshipError> {
    let iri = target.iri(fed);
    let me = fed.actor_iri(&account.username);
    if iri == me {
        return Err(RelationshipError::Refused(
            "you cannot follow yourself".into(),
        ));
    }
    if blocked_either_way(&mut *tx, fed, account.id, &me, &iri).await? {
        return Err(RelationshipError::Refused(
            "a block stands between these accounts".into(),
        ));
    }
    match target {
        Target::Remote(remote) => {
            follows::follow_in(&mut *tx, fed, account, remote).await?;
        }
        Target::Local(other) => {
            let already: Option<String> = sqlx::query_scalar(
                "SELECT state FROM follows WHERE account_id = $1 AND target_iri = $2 FOR UPDATE",
            )
            .bind(account.id)
            .bind(&iri)
            .fetch_optional(&mut *tx)
            .await?;
            if already.is_some() {
                return Ok(());
            }
            let locked: bool = sqlx::query_scalar("SELECT locked FROM accounts WHERE id = $1")
                .bind(other.id)
                .fetch_one(&mut *tx)
                .await?;
            let follow_id = fed.new_activity_id();
            sqlx::query(
                "INSERT INTO follows (account_id, target_iri, follow_activity_id, state)
                 VALUES ($1, $2, $3, $4)",
            )
            .bind(account.id)
            .bind(&iri)
            .bind(&follow_id)
            .bind(if locked { "pending" } else { "accepted" })
            .execute(&mut *tx)
            .await?;
            let table = if locked {
                "follow_requests"
            } else {
                "followers"
            };
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "INSERT INTO {table} (account_id, actor_iri, follow_activity_id) VALUES ($1, $2, $3)
                 ON CONFLICT DO NOTHING"
            )))
            .bind(other.id)
            .bind(&me)
            .bind(&follow_id)
            .execute(&mut *tx)
            .await?;
            // The followed account hears of it as from a remote follower (`follow`, or
            // `follow_request` when locked), caused by the follow's id.
            let kind = if locked {
                Kind::FollowRequest
            } else {
                Kind::Follow
            };
            let n = Notification {
                account: other.id,
                kind,
                from_account: account.id,
                post: None,
                cause: &follow_id,
            };
            notify::notify(&mut *tx, &n).await?;
        }
    }
    Ok(())
}

/// What a follow is set to deliver; `None` keeps the stored value.
#[derive(Clone, Debug, Default)]
pub struct FollowOptions {
    /// The target's boosts reach the follower's home timeline.
    pub reblogs: Option<bool>,
    /// Each new post of the target notifies the follower (`status`).
    pub notify: Option<bool>,
    /// Only posts in these languages (stored, as Mastodon's; not yet applied to feeds).
    pub languages: Option<Vec<String>>,
}

/// Applies `options` to `account`'s follow of `target_iri` (pending or accepted), if any.
pub async fn set_follow_options(
    tx: &mut PgConnection,
    account: &Account,
    target_iri: &str,
    options: &FollowOptions,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE follows SET show_reblogs = coalesce($3, show_reblogs), notify = coalesce($4, notify),
                languages = coalesce($5, languages)
          WHERE account_id = $1 AND target_iri = $2",
    )
    .bind(account.id)
    .bind(target_iri)
    .bind(options.reblogs)
    .bind(options.notify)
    .bind(&options.languages)
    .execute(tx)
    .await?;
    Ok(())
}

#[derive(Debug, thiserror::Error)]
pub enum RelationshipError {
    /// Not allowed (e.g. following oneself): 422 for the client.
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Db(#[from] sqlx::Error),
}

/// Whether a block stands between the local account `account` (whose actor IRI is `me`) and
/// the actor `other`, either way: `account` blocks `other`, or `other` blocks `account` — a
/// local `other` by a block of its own, a remote one by the `Block` it sent (not undone).
/// Across one, a follow is refused ([`follow`]), and so are favourites, boosts, replies,
/// quotes and reactions, ours (`statuses::post::blocked`) and theirs (the inbox's `Like`,
/// `Announce`, `EmojiReact` and `QuoteRequest`). Each side is one index probe.
pub async fn blocked_either_way(
    conn: &mut PgConnection,
    fed: &Federation,
    account: uuid::Uuid,
    me: &str,
    other: &str,
) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM account_blocks WHERE account_id = $1 AND target_iri = $2)
             OR EXISTS (SELECT 1 FROM account_blocks b JOIN accounts a ON a.id = b.account_id
                         WHERE lower(a.username) = lower($4) AND b.target_iri = $3)
             OR EXISTS (SELECT 1 FROM remote_interactions
                         WHERE kind = 'block' AND actor = $2 AND object = $3 AND undone_at IS NULL)",
    )
    .bind(account)
    .bind(other)
    .bind(me)
    .bind(fed.local_username(other))
    .fetch_one(&mut *conn)
    .await
}

/// The activity that undoes `activity_id` (a `Follow` or `Block` of `target`), queued to it.
async fn queue_undo(
    tx: &mut PgConnection,
    fed: &Federation,
    account: &Account,
    remote: &RemoteActor,
    activity_id: &str,
    object_type: &str,
) -> Result<(), sqlx::Error> {
    let actor = fed.actor_iri(&account.username);
    let undo = json!({
        "@context": context::ld(), "id": fed.new_activity_id(), "type": "Undo", "actor": actor,
        "object": { "id": activity_id, "type": object_type, "actor": actor, "object": remote.iri },
        "to": [remote.iri],
    });
    queue_activity(&mut *tx, fed, account.id, &undo, &[Recipient::from(remote)]).await?;
    Ok(())
}

/// Stops following `target` (or withdraws a pending follow). Remote: `Undo(Follow)` of the
/// stored Follow id. Nothing to undo is not an error (Mastodon answers the relationship).
pub async fn unfollow(
    tx: &mut PgConnection,
    fed: &Federation,
    account: &Account,
    target: &Target,
) -> Result<(), sqlx::Error> {
    let iri = target.iri(fed);
    let removed: Option<String> = sqlx::query_scalar(
        "DELETE FROM follows WHERE account_id = $1 AND target_iri = $2 RETURNING follow_activity_id",
    )
    .bind(account.id)
    .bind(&iri)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(follow_id) = removed else {
        return Ok(());
    };
    // Someone one no longer follows leaves one's lists, endorsements and home, as on
    // Mastodon (their posts and boosts there came through the follow: `home_feed.source`).
    crate::lists::forget(&mut *tx, account.id, &iri).await?;
    crate::endorsements::forget(&mut *tx, account.id, &iri).await?;
    sqlx::query("DELETE FROM home_feed WHERE account_id = $1 AND source = $2")
        .bind(account.id)
        .bind(&iri)
        .execute(&mut *tx)
        .await?;
    match target {
        Target::Remote(remote) => queue_undo(tx, fed, account, remote, &follow_id, "Follow").await,
        Target::Local(other) => remove_follower(tx, other, &fed.actor_iri(&account.username)).await,
    }
}

/// `account` removes `follower` from its followers (Mastodon's "remove this follower"): a
/// local follower's follow ends as if it had unfollowed (our posts leave its home and lists);
/// a remote one is dropped and told with a `Reject` of its `Follow`, as a domain block does.
/// Not a follower: nothing changes.
pub async fn remove_from_followers(
    tx: &mut PgConnection,
    fed: &Federation,
    account: &Account,
    follower: &Target,
) -> Result<(), sqlx::Error> {
    match follower {
        Target::Local(other) => unfollow(tx, fed, other, &Target::Local(account.clone())).await,
        Target::Remote(remote) => {
            let removed: Option<String> = sqlx::query_scalar(
                "DELETE FROM followers WHERE account_id = $1 AND actor_iri = $2
                 RETURNING follow_activity_id",
            )
            .bind(account.id)
            .bind(&remote.iri)
            .fetch_optional(&mut *tx)
            .await?;
            if let Some(follow_id) = removed {
                follows::answer_follow(tx, fed, account, remote, &follow_id, "Reject").await?;
            }
            Ok(())
        }
    }
}

/// `actor_iri` no longer follows (or asks to follow) the local account `of`.
async fn remove_follower(
    tx: &mut PgConnection,
    of: &Account,
    actor_iri: &str,
) -> Result<(), sqlx::Error> {
    for table in ["followers", "follow_requests"] {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "DELETE FROM {table} WHERE account_id = $1 AND actor_iri = $2"
        )))
        .bind(of.id)
        .bind(actor_iri)
        .execute(&mut *tx)
        .await?;
    }
    Ok(())
}

/// Blocks `target`: the block is stored, follows are removed both ways (ours of them, theirs
/// of us, pending requests too), and a remote target gets a `Block` (once: blocking again
/// sends nothing).
pub async fn block(
    tx: &mut PgConnection,
    fed: &Federation,
    account: &Account,
    target: &Target,
) -> Result<(), RelationshipError> {
    let iri = target.iri(fed);
    let me = fed.actor_iri(&account.username);
    if iri == me {
        return Err(RelationshipError::Refused(
            "you cannot block yourself".into(),
        ));
    }
    let block_id = fed.new_activity_id();
    let fresh: Option<String> = sqlx::query_scalar(
        "INSERT INTO account_blocks (account_id, target_iri, block_activity_id) VALUES ($1, $2, $3)
         ON CONFLICT DO NOTHING RETURNING block_activity_id",
    )
    .bind(account.id)
    .bind(&iri)
    .bind(&block_id)
    .fetch_optional(&mut *tx)
    .await?;
    // The blocker's open streams stop showing the blocked account (`statuses::hidden`).
    crate::streaming::emit::relationship(&mut *tx, account.id).await?;
    sqlx::query("DELETE FROM follows WHERE account_id = $1 AND target_iri = $2")
        .bind(account.id)
        .bind(&iri)
        .execute(&mut *tx)
        .await?;
    crate::lists::forget(&mut *tx, account.id, &iri).await?;
    crate::endorsements::forget(&mut *tx, account.id, &iri).await?;
    remove_follower(tx, account, &iri).await?;
    match target {
        Target::Local(other) => {
            sqlx::query("DELETE FROM follows WHERE account_id = $1 AND target_iri = $2")
                .bind(other.id)
                .bind(&me)
                .execute(&mut *tx)
                .await?;
            crate::lists::forget(&mut *tx, other.id, &me).await?;
            crate::endorsements::forget(&mut *tx, other.id, &me).await?;
            remove_follower(tx, other, &me).await?;
        }
        Target::Remote(remote) if fresh.is_some() => {
            let block = json!({
                "@context": context::ld(), "id": block_id, "type": "Block",
                "actor": me, "object": remote.iri, "to": [remote.iri],
            });
            queue_activity(
                &mut *tx,
                fed,
                account.id,
                &block,
                &[Recipient::from(remote)],
            )
            .await?;
        }
        Target::Remote(_) => {}
    }
    Ok(())
}

/// Lifts a block; a remote target gets `Undo(Block)` of the stored Block id.
pub async fn unblock(
    tx: &mut PgConnection,
    fed: &Federation,
    account: &Account,
    target: &Target,
) -> Result<(), sqlx::Error> {
    let removed: Option<String> = sqlx::query_scalar(
        "DELETE FROM account_blocks WHERE account_id = $1 AND target_iri = $2 RETURNING block_activity_id",
    )
    .bind(account.id)
    .bind(target.iri(fed))
    .fetch_optional(&mut *tx)
    .await?;
    if removed.is_some() {
        crate::streaming::emit::relationship(&mut *tx, account.id).await?;
    }
    match (removed, target) {
        (Some(block_id), Target::Remote(remote)) => {
            queue_undo(tx, fed, account, remote, &block_id, "Block").await
        }
        _ => Ok(()),
    }
}

/// A waiting follow request of a locked account.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct FollowRequest {
    pub id: i64,
    pub actor_iri: String,
    pub follow_activity_id: String,
}

/// Answers the follow request of `requester` (an actor IRI) to `account`: authorized → a
/// follower, and a remote requester gets `Accept`, a local one's follow is accepted; rejected
/// → `Reject` / the local follow removed. `false` when there is no such request.
pub async fn answer_request(
    tx: &mut PgConnection,
    fed: &Federation,
    account: &Account,
    requester: &Target,
    authorize: bool,
) -> Result<bool, sqlx::Error> {
    let iri = requester.iri(fed);
    let request: Option<FollowRequest> = sqlx::query_as(
        "DELETE FROM follow_requests WHERE account_id = $1 AND actor_iri = $2
         RETURNING id, actor_iri, follow_activity_id",
    )
    .bind(account.id)
    .bind(&iri)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(request) = request else {
        return Ok(false);
    };
    let me = fed.actor_iri(&account.username);
    if authorize {
        sqlx::query(
            "INSERT INTO followers (account_id, actor_iri, follow_activity_id) VALUES ($1, $2, $3)
             ON CONFLICT (account_id, actor_iri) DO UPDATE SET follow_activity_id = EXCLUDED.follow_activity_id",
        )
        .bind(account.id)
        .bind(&iri)
        .bind(&request.follow_activity_id)
        .execute(&mut *tx)
        .await?;
    }
    match requester {
        Target::Remote(remote) => {
            let answer = if authorize { "Accept" } else { "Reject" };
            follows::answer_follow(
                tx,
                fed,
                account,
                remote,
                &request.follow_activity_id,
                answer,
            )
            .await?;
        }
        Target::Local(other) => {
            let sql = if authorize {
                "UPDATE follows SET state = 'accepted', updated_at = now()
                  WHERE account_id = $1 AND target_iri = $2"
            } else {
                "DELETE FROM follows WHERE account_id = $1 AND target_iri = $2"
            };
            sqlx::query(sql)
                .bind(other.id)
                .bind(&me)
                .execute(&mut *tx)
                .await?;
        }
    }
    Ok(true)
}

/// How `account` stands with one target, Mastodon's Relationship entity minus the id.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Standing {
    pub following: bool,
    pub requested: bool,
    pub showing_reblogs: bool,
    pub notifying: bool,
    pub languages: Option<Vec<String>>,
    pub followed_by: bool,
    pub requested_by: bool,
    pub blocking: bool,
    pub blocked_by: bool,
    pub muting: bool,
    pub muting_notifications: bool,
    /// The account blocks the actor's server (or one it is under).
    pub domain_blocking: bool,
    /// The account's private note on the actor (`account_notes`), empty without one.
    pub note: String,
    /// The account features the actor on its profile (`account_endorsements`).
    pub endorsed: bool,
}

/// The standing of `account` with the actor `iri`.
pub async fn standing(
    pool: &PgPool,
    fed: &Federation,
    account: &Account,
    iri: &str,
) -> Result<Standing, sqlx::Error> {
    type Row = (
        Option<String>,
        Option<bool>,
        Option<bool>,
        Option<Vec<String>>,
        bool,
        bool,
        bool,
        bool,
        Option<bool>,
        bool,
        Option<String>,
        bool,
    );
    let me = fed.actor_iri(&account.username);
    let (
        state,
        reblogs,
        notify,
        languages,
        followed_by,
        requested_by,
        blocking,
        blocked_by,
        mute,
        domain_blocking,
        note,
        endorsed,
    ): Row =
        sqlx::query_as(
            "SELECT f.state, f.show_reblogs, f.notify, f.languages,
                    EXISTS (SELECT 1 FROM followers WHERE account_id = $1 AND actor_iri = $2),
                    EXISTS (SELECT 1 FROM follow_requests WHERE account_id = $1 AND actor_iri = $2),
                    EXISTS (SELECT 1 FROM account_blocks WHERE account_id = $1 AND target_iri = $2),
                    EXISTS (SELECT 1 FROM remote_interactions
                             WHERE kind = 'block' AND actor = $2 AND object = $3 AND undone_at IS NULL)
                    OR EXISTS (SELECT 1 FROM account_blocks b JOIN accounts a ON a.id = b.account_id
                                WHERE b.target_iri = $3 AND $2 = $4 || '/users/' || a.username),
                    (SELECT notifications FROM account_mutes WHERE account_id = $1 AND target_iri = $2
                        AND (expires_at IS NULL OR expires_at > now())),
                    EXISTS (SELECT 1 FROM account_domain_blocks
                             WHERE account_id = $1
                               AND hollo_host_in(hollo_iri_host($2), ARRAY[domain])),
                    (SELECT comment FROM account_notes WHERE account_id = $1 AND target_iri = $2),
                    EXISTS (SELECT 1 FROM account_endorsements
                             WHERE account_id = $1 AND target_iri = $2)
               FROM (SELECT 1) one
               LEFT JOIN follows f ON f.account_id = $1 AND f.target_iri = $2",
        )
        .bind(account.id)
        .bind(iri)
        .bind(&me)
        .bind(&fed.origin)
        .fetch_one(pool)
        .await?;
    Ok(Standing {
        following: state.as_deref() == Some("accepted"),
        requested: state.as_deref() == Some("pending"),
        showing_reblogs: reblogs.unwrap_or(state.is_some()),
        notifying: notify.unwrap_or(false),
        languages,
        followed_by,
        requested_by,
        blocking,
        blocked_by,
        muting: mute.is_some(),
        muting_notifications: mute.unwrap_or(false),
        domain_blocking,
        note: note.unwrap_or_default(),
        endorsed,
    })
}
