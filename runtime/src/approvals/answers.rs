//! A remote author's `Accept` or `Reject` of one of our interactions with their post, as
//! GoToSocial sends them (`internal/federation/federatingdb/accept.go`, `reject.go` in 0.18.3):
//! the `object` names the interaction — our `Like` or `Announce` by its id, our reply by its
//! IRI, either embedded by `id` and `type` or not — and only the author of the post it was
//! with may answer.
//!
//! - `Accept`: the approval is the `result` (an approval object on the author's server), else
//!   the `Accept` itself — GoToSocial 0.18 sends no `result` and takes its `Accept` as the
//!   approval; a `result` on another server approves nothing. A pending interaction becomes an
//!   approved one: counted, shown to everyone, and a reply or boost goes to its whole audience
//!   carrying `approvedBy` (a reply through `tasks::approved_reply`, whose note needs the
//!   drive for its media). One approved without asking just keeps the approval.
//! - `Reject`: undone here as our user would undo it — the favourite and the boost taken back
//!   (an `Undo` to whoever had them), the reply deleted (a `Delete` to whoever had it), as
//!   GoToSocial deletes a rejected reply. A post that mentions our user cannot reject its
//!   reply (GoToSocial's rule: whom a post mentions may always answer it).

use serde_json::Value;
use sqlx::PgConnection;
use uuid::Uuid;

use crate::accounts::{self, Account};
use crate::federation::Federation;
use crate::federation::inbound::Outcome;
use crate::federation::inbound::activity::Object;
use crate::federation::inbound::incoming::Incoming;
use crate::federation::iri::same_origin;
use crate::federation::outbound::interactions::Interaction;
use crate::html;
use crate::statuses::interact::{self, Boost};
use crate::statuses::{feed, write};

/// One of our interactions an answer names.
#[derive(sqlx::FromRow)]
struct Ours {
    /// `like`, `announce` or `reply`.
    kind: String,
    /// Its IRI: our `Like`'s or `Announce`'s id, our reply's IRI.
    interaction: String,
    account_id: Uuid,
    /// The post interacted with.
    post_id: Uuid,
    /// The boost's or the reply's own id (a favourite has none).
    own_id: Option<Uuid>,
    /// The author of the post interacted with: the only one who answers.
    author: String,
    pending: bool,
    approved_by: Option<String>,
    /// For a reply, the mentions of the post it answers.
    parent_mentions: Option<Value>,
}

/// The author's `Accept` (`accepted`) or `Reject` of our interaction `object`; `result` is
/// the `Accept`'s. `None` when `object` names no interaction of ours with a remote post (a
/// follow's or a quote request's answer, then).
pub async fn answered(
    tx: &mut PgConnection,
    fed: &Federation,
    inc: &Incoming,
    accepted: bool,
    object: &Object,
    result: Option<&str>,
) -> Result<Option<Outcome>, sqlx::Error> {
    if !object.has_id() || !same_origin(&object.id, &fed.origin) {
        return Ok(None);
    }
    let ours: Option<Ours> = sqlx::query_as(
        "SELECT 'like' AS kind, $1::text AS interaction, f.account_id, f.post_id,
                NULL::uuid AS own_id, r.actor AS author, f.pending_approval AS pending, f.approved_by,
                NULL::jsonb AS parent_mentions
           FROM favourites f JOIN remote_posts r ON r.iri = f.post_uri
          WHERE f.activity_id = $1
         UNION ALL
         SELECT 'announce', $1, b.account_id, b.post_id, b.id, r.actor, b.pending_approval,
                b.approved_by, NULL
           FROM reblogs b JOIN remote_posts r ON r.iri = b.post_uri
          WHERE b.activity_id = $1 AND b.account_id IS NOT NULL
         UNION ALL
         SELECT 'reply', $1, s.account_id, r.id, s.id, r.actor, s.pending_approval, s.approved_by,
                r.mentions
           FROM statuses s JOIN remote_posts r ON r.iri = s.in_reply_to_uri
          WHERE s.uri = $1
         LIMIT 1",
    )
    .bind(&object.id)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(ours) = ours else {
        return Ok(None);
    };
    if ours.author != inc.actor {
        return Ok(Some(Outcome::ignored(
            "an answer about our interaction from someone other than the author of its post",
        )));
    }
    let Some(account) = accounts::by_id(&mut *tx, ours.account_id).await? else {
        return Ok(Some(Outcome::ignored("the interacting account is gone")));
    };
    let outcome = if accepted {
        approve(tx, fed, inc, &account, &ours, result).await?
    } else {
        reject(tx, fed, &account, &ours).await?
    };
    Ok(Some(outcome))
}

/// The approval an `Accept` gives: its `result` on the author's server, else itself.
fn approval_of<'a>(inc: &'a Incoming, result: Option<&'a str>) -> Option<&'a str> {
    match result {
        None => Some(&inc.id),
        Some(r) => html::http_url(r).filter(|r| same_origin(r, &inc.actor)),
    }
}

async fn approve(
    tx: &mut PgConnection,
    fed: &Federation,
    inc: &Incoming,
    account: &Account,
    ours: &Ours,
    result: Option<&str>,
) -> Result<Outcome, sqlx::Error> {
    let Some(approval) = approval_of(inc, result) else {
        return Ok(Outcome::ignored(
            "an Accept naming an approval on another server than its author's",
        ));
    };
    if ours.approved_by.is_some() {
        return Ok(Outcome::ignored("the interaction already has its approval"));
    }
    let (table, named_by) = match ours.kind.as_str() {
        "like" => ("favourites", "activity_id"),
        "announce" => ("reblogs", "activity_id"),
        _ => ("statuses", "uri"),
    };
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "UPDATE {table} SET pending_approval = false, approved_by = $2 WHERE {named_by} = $1"
    )))
    .bind(&ours.interaction)
    .bind(approval)
    .execute(&mut *tx)
    .await?;
    if ours.pending {
        match (ours.kind.as_str(), ours.own_id) {
            ("announce", Some(boost)) => boost_approved(tx, fed, account, ours, boost).await?,
            ("reply", Some(status)) => {
                crate::streaming::emit::created(&mut *tx, status).await?;
                crate::tasks::republish::enqueue_for(
                    &mut *tx,
                    crate::tasks::republish::Approved::Reply,
                    status,
                )
                .await?;
            }
            _ => {}
        }
    }
    Ok(Outcome::applied(format!("our {} approved", ours.kind)))
}

/// An approved boost reaches the booster's followers: their homes here, and its `Announce`
/// (now with `approvedBy`) theirs elsewhere.
async fn boost_approved(
    tx: &mut PgConnection,
    fed: &Federation,
    account: &Account,
    ours: &Ours,
    boost: Uuid,
) -> Result<(), sqlx::Error> {
    let Some(post) = interact::find(&mut *tx, Some(account.id), ours.post_id).await? else {
        return Ok(());
    };
    let boost: Boost = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {} FROM reblogs WHERE id = $1",
        interact::BOOST
    )))
    .bind(boost)
    .fetch_one(&mut *tx)
    .await?;
    interact::to_followers_homes(tx, fed, account, &post, &boost).await?;
    Interaction {
        fed,
        account,
        post: &post,
    }
    .announce_approved(tx, &boost)
    .await?;
    Ok(())
}

async fn reject(
    tx: &mut PgConnection,
    fed: &Federation,
    account: &Account,
    ours: &Ours,
) -> Result<Outcome, sqlx::Error> {
    match (ours.kind.as_str(), ours.own_id) {
        ("like", _) => match interact::find(&mut *tx, Some(account.id), ours.post_id).await? {
            Some(post) => {
                interact::unfavourite(tx, fed, account, &post).await?;
            }
            // A post no longer shown keeps no favourite either; there is no one to tell.
            None => {
                sqlx::query("DELETE FROM favourites WHERE activity_id = $1")
                    .bind(&ours.interaction)
                    .execute(&mut *tx)
                    .await?;
            }
        },
        ("announce", Some(boost)) => {
            match interact::find(&mut *tx, Some(account.id), ours.post_id).await? {
                Some(post) => {
                    interact::unreblog(tx, fed, account, &post).await?;
                }
                None => {
                    feed::remove_entry(&mut *tx, boost).await?;
                    sqlx::query("DELETE FROM reblogs WHERE id = $1")
                        .bind(boost)
                        .execute(&mut *tx)
                        .await?;
                }
            }
        }
        ("reply", Some(status)) => {
            let me = fed.actor_iri(&account.username);
            if mentions(ours.parent_mentions.as_ref(), &me) {
                return Ok(Outcome::ignored(
                    "a Reject of a reply to a post that mentions its author",
                ));
            }
            write::remove(
                &mut *tx,
                Some(fed),
                None,
                account.id,
                status,
                &ours.interaction,
            )
            .await?;
        }
        _ => return Ok(Outcome::ignored("nothing to undo")),
    }
    Ok(Outcome::applied(format!(
        "our {} rejected: undone",
        ours.kind
    )))
}

/// Whether the stored mentions `[{"href", "name"}]` name the actor `me`.
fn mentions(stored: Option<&Value>, me: &str) -> bool {
    stored.and_then(Value::as_array).is_some_and(|m| {
        m.iter()
            .any(|m| m.get("href").and_then(Value::as_str) == Some(me))
    })
}
