//! Inbound relationships: a `Follow` of one of our accounts (accepted, held as a request for a
//! locked account, or refused for a blocked actor), the answer to one of our `Follow`s, a
//! `Block` of us, and `Undo` of any of them. Each runs inside the inbox transaction and is
//! idempotent under redelivery.

use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use super::activity::Object;
use super::incoming::Incoming;
use super::outcome::Outcome;
use crate::accounts::{self, Account};
use crate::federation::Federation;
use crate::federation::actors::actor::{RemoteActor, id_of};
use crate::federation::outbound::follows::answer_follow;
use crate::statuses::notify::{self, Kind, Notification};

/// The local account a `Follow` names as its object, if any.
pub async fn local_target(
    pool: &PgPool,
    fed: &Federation,
    object: &Object,
) -> Result<Option<Account>, sqlx::Error> {
    let Some(name) = fed.local_username(&object.id) else {
        return Ok(None);
    };
    accounts::by_username(pool, name).await
}

/// A `Follow` of `account` by `follower` (fetched before the transaction, for its inbox).
pub async fn follow(
    tx: &mut PgConnection,
    fed: &Federation,
    inc: &Incoming,
    follower: &RemoteActor,
    account: &Account,
) -> Result<Outcome, sqlx::Error> {
    // A locked account decides: the Follow waits as a request (answered by
    // `relationships::answer_request`), unless the actor already follows (a re-sent Follow is
    // accepted again). A blocked actor, or one on a blocked domain, is refused.
    let (locked, following, blocked): (bool, bool, bool) = sqlx::query_as(
        "SELECT a.locked,
                EXISTS (SELECT 1 FROM followers WHERE account_id = a.id AND actor_iri = $2),
                EXISTS (SELECT 1 FROM account_blocks WHERE account_id = a.id AND target_iri = $2)
                OR EXISTS (SELECT 1 FROM account_domain_blocks
                            WHERE account_id = a.id
                              AND hollo_host_in(hollo_iri_host($2), ARRAY[domain]))
           FROM accounts a WHERE a.id = $1",
    )
    .bind(account.id)
    .bind(&follower.iri)
    .fetch_one(&mut *tx)
    .await?;
    if blocked {
        return refuse(tx, fed, inc, follower, account).await;
    }
    if locked && !following {
        return wait_for_approval(tx, inc, follower, account).await;
    }
    store_follow(tx, "followers", account.id, &follower.iri, &inc.id).await?;
    if !following {
        // A re-sent Follow of an existing follower notifies nobody again.
        notify_follow(tx, Kind::Follow, account.id, &follower.iri, &inc.id).await?;
    }
    // Auto-accept.
    answer_follow(tx, fed, account, follower, &inc.id, "Accept").await?;
    Ok(Outcome::applied("follower stored; Accept queued"))
}

/// A Follow from an actor the account blocks is answered with a `Reject`.
async fn refuse(
    tx: &mut PgConnection,
    fed: &Federation,
    inc: &Incoming,
    follower: &RemoteActor,
    account: &Account,
) -> Result<Outcome, sqlx::Error> {
    answer_follow(tx, fed, account, follower, &inc.id, "Reject").await?;
    Ok(Outcome::applied(
        "Follow of a blocking account; Reject queued",
    ))
}

/// A Follow of a locked account is stored as a request (notified once).
async fn wait_for_approval(
    tx: &mut PgConnection,
    inc: &Incoming,
    follower: &RemoteActor,
    account: &Account,
) -> Result<Outcome, sqlx::Error> {
    let waiting: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM follow_requests WHERE account_id = $1 AND actor_iri = $2)",
    )
    .bind(account.id)
    .bind(&follower.iri)
    .fetch_one(&mut *tx)
    .await?;
    if !waiting {
        notify_follow(tx, Kind::FollowRequest, account.id, &follower.iri, &inc.id).await?;
    }
    store_follow(tx, "follow_requests", account.id, &follower.iri, &inc.id).await?;
    Ok(Outcome::applied("follow request stored (locked account)"))
}

/// Stores (or refreshes) the remote `follower`'s Follow `activity` of `account` in `table`:
/// `followers` once accepted, `follow_requests` while it waits.
async fn store_follow(
    tx: &mut PgConnection,
    table: &'static str,
    account: Uuid,
    follower: &str,
    activity: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "INSERT INTO {table} (account_id, actor_iri, follow_activity_id) VALUES ($1, $2, $3)
         ON CONFLICT (account_id, actor_iri) DO UPDATE SET follow_activity_id = EXCLUDED.follow_activity_id"
    )))
    .bind(account)
    .bind(follower)
    .bind(activity)
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// A `follow` or `follow_request` notification for `account` from the remote follower.
async fn notify_follow(
    tx: &mut PgConnection,
    kind: Kind,
    account: Uuid,
    follower: &str,
    cause: &str,
) -> Result<(), sqlx::Error> {
    if let Some(from) = crate::federation::actors::directory::remote_id(tx, follower).await? {
        let n = Notification {
            account,
            kind,
            from_account: from,
            post: None,
            cause,
        };
        notify::notify(tx, &n).await?;
    }
    Ok(())
}

/// `Accept`/`Reject` of one of our Follows: only the followed actor may answer it.
pub async fn answer(
    tx: &mut PgConnection,
    inc: &Incoming,
    accepted: bool,
    follow: &Object,
) -> Result<Outcome, sqlx::Error> {
    let state = if accepted { "accepted" } else { "rejected" };
    let n = sqlx::query(
        "UPDATE follows SET state = $1, updated_at = now()
          WHERE follow_activity_id = $2 AND target_iri = $3",
    )
    .bind(state)
    .bind(&follow.id)
    .bind(&inc.actor)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    Ok(if n == 1 {
        Outcome::applied(format!("follow {state}"))
    } else {
        Outcome::ignored("no matching follow")
    })
}

/// `Block` by a remote actor: recorded, and when it blocks one of our accounts the
/// relationship ends both ways, as Mastodon does.
pub async fn block(
    tx: &mut PgConnection,
    fed: &Federation,
    inc: &Incoming,
    target: &Object,
) -> Result<Outcome, sqlx::Error> {
    if !target.has_id() {
        return Ok(Outcome::ignored("no object"));
    }
    sqlx::query(
        "INSERT INTO remote_interactions (activity_id, kind, actor, object) VALUES ($1, 'block', $2, $3)
         ON CONFLICT (activity_id) DO NOTHING",
    )
    .bind(&inc.id)
    .bind(&inc.actor)
    .bind(&target.id)
    .execute(&mut *tx)
    .await?;
    if let Some(name) = fed.local_username(&target.id) {
        for (table, column) in [
            ("followers", "actor_iri"),
            ("follow_requests", "actor_iri"),
            ("follows", "target_iri"),
        ] {
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "DELETE FROM {table} f USING accounts a
                  WHERE f.account_id = a.id AND lower(a.username) = lower($1) AND f.{column} = $2"
            )))
            .bind(name)
            .bind(&inc.actor)
            .execute(&mut *tx)
            .await?;
        }
    }
    Ok(Outcome::applied("block stored"))
}

/// Deletes the row of `table` (`followers` or `follow_requests`) that the incoming actor's
/// Follow `follow_id` made; whether there was one.
async fn forget_follow(
    tx: &mut PgConnection,
    table: &'static str,
    inc: &Incoming,
    follow_id: &str,
) -> Result<bool, sqlx::Error> {
    let n = sqlx::query(sqlx::AssertSqlSafe(format!(
        "DELETE FROM {table} WHERE actor_iri = $1 AND follow_activity_id = $2"
    )))
    .bind(&inc.actor)
    .bind(follow_id)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    Ok(n > 0)
}

/// `Undo` by its actor: a follow (waiting or accepted), else a like or boost.
pub async fn undo(
    tx: &mut PgConnection,
    fed: &Federation,
    inc: &Incoming,
    undone: &Object,
) -> Result<Outcome, sqlx::Error> {
    // A Follow still waiting on a locked account is withdrawn.
    if forget_follow(tx, "follow_requests", inc, &undone.id).await? {
        notify::withdraw(tx, Kind::FollowRequest, &undone.id).await?;
        return Ok(Outcome::applied("follow request withdrawn"));
    }
    // An Undo names its activity by id; Mastodon embeds it, others may not (then we look
    // the id up among the relationships and interactions it could be).
    if forget_follow(tx, "followers", inc, &undone.id).await? {
        return Ok(Outcome::applied("follower removed"));
    }
    if undone.kind() == Some("Follow") {
        // A Follow we never stored under that id (e.g. re-sent with a new id): undo by target.
        let target = undone
            .doc
            .get("object")
            .and_then(id_of)
            .and_then(|t| fed.local_username(t))
            .unwrap_or_default();
        let mut n = 0;
        for table in ["followers", "follow_requests"] {
            n += sqlx::query(sqlx::AssertSqlSafe(format!(
                "DELETE FROM {table} f USING accounts a
                  WHERE f.account_id = a.id AND f.actor_iri = $1 AND lower(a.username) = lower($2)"
            )))
            .bind(&inc.actor)
            .bind(target)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        }
        return Ok(if n > 0 {
            Outcome::applied("follower removed")
        } else {
            Outcome::ignored("not a follower")
        });
    }
    Ok(super::interactions::undo(tx, inc, &undone.id)
        .await?
        .unwrap_or_else(|| Outcome::ignored("nothing to undo")))
}
