//! Remote `Like`s and `Announce`s, and their `Undo` (R-MAPI-4): a like of our
//! post counts once per actor and notifies its author (`favourite`); a boost of a post we know
//! is a `reblogs` row of the remote actor, notifies our author (`reblog`) and reaches the home
//! feeds of local accounts following the booster (unless they turned its boosts off). An `Undo` takes each back.
//!
//! Redelivery changes nothing: a like is one standing row per (actor, post), a boost one row
//! per (actor, post) and per activity, and notifications are keyed by the activity.

use serde_json::Value;
use sqlx::PgConnection;
use uuid::Uuid;

use super::incoming::Incoming;
use super::notes::actor_id;
use super::outcome::Outcome;
use crate::statuses::notify::{self, Kind, Notification};
use crate::statuses::{Visibility, feed, followers};

/// One of our statuses by IRI: its id and author.
async fn local_status(
    tx: &mut PgConnection,
    uri: &str,
) -> Result<Option<(Uuid, Uuid)>, sqlx::Error> {
    sqlx::query_as("SELECT id, account_id FROM statuses WHERE uri = $1")
        .bind(uri)
        .fetch_optional(tx)
        .await
}

/// `Like`: stored in `remote_interactions` (which the counts read); our author is notified.
pub async fn like(
    tx: &mut PgConnection,
    inc: &Incoming,
    object_id: &str,
) -> Result<Outcome, sqlx::Error> {
    let fresh = sqlx::query(
        "INSERT INTO remote_interactions (activity_id, kind, actor, object) VALUES ($1, 'like', $2, $3)
         ON CONFLICT DO NOTHING",
    )
    .bind(&inc.id)
    .bind(&inc.actor)
    .bind(object_id)
    .execute(&mut *tx)
    .await?
    .rows_affected()
        == 1;
    if !fresh {
        return Ok(Outcome::applied("like already stored"));
    }
    if let (Some((post, author)), Some(from)) = (
        local_status(tx, object_id).await?,
        actor_id(tx, &inc.actor).await?,
    ) {
        let n = Notification {
            account: author,
            kind: Kind::Favourite,
            from_account: from,
            post: Some(post),
            cause: &inc.id,
        };
        notify::notify(tx, &n).await?;
    }
    Ok(Outcome::applied("like stored"))
}

/// `Announce` of a post we know (ours, or a stored remote one that is public or unlisted).
pub async fn announce(
    tx: &mut PgConnection,
    inc: &Incoming,
    object_id: &str,
) -> Result<Outcome, sqlx::Error> {
    // The booster's interaction is recorded as before (relationships read them).
    sqlx::query(
        "INSERT INTO remote_interactions (activity_id, kind, actor, object) VALUES ($1, 'announce', $2, $3)
         ON CONFLICT DO NOTHING",
    )
    .bind(&inc.id)
    .bind(&inc.actor)
    .bind(object_id)
    .execute(&mut *tx)
    .await?;
    let post: Option<(Uuid, Option<Uuid>, String)> =
        sqlx::query_as("SELECT id, account_id, visibility FROM posts WHERE uri = $1")
            .bind(object_id)
            .fetch_optional(&mut *tx)
            .await?;
    let Some((post, author, post_visibility)) = post else {
        return Ok(Outcome::ignored("Announce of an unknown post"));
    };
    if !matches!(post_visibility.as_str(), "public" | "unlisted") {
        // Followers-only and direct posts cannot be boosted; this is no boost to show.
        return Ok(Outcome::ignored("Announce of a non-public post"));
    }
    let followers_iri: Option<String> =
        sqlx::query_scalar("SELECT document->>'followers' FROM remote_actors WHERE iri = $1")
            .bind(&inc.actor)
            .fetch_optional(&mut *tx)
            .await?
            .flatten();
    let visibility = Visibility::of_addressing(&inc.body, followers_iri.as_deref());
    let published = inc
        .body
        .get("published")
        .and_then(Value::as_str)
        .and_then(|p| chrono::DateTime::parse_from_rfc3339(p).ok())
        .map(|d| d.with_timezone(&chrono::Utc));
    let id: Option<Uuid> = sqlx::query_scalar(
        "INSERT INTO reblogs (id, post_id, post_uri, actor_iri, activity_id, visibility)
         VALUES (hollo_uuid_v7(least(coalesce($1, now()), now())), $2, $3, $4, $5, $6)
         ON CONFLICT DO NOTHING RETURNING id",
    )
    .bind(published)
    .bind(post)
    .bind(object_id)
    .bind(&inc.actor)
    .bind(&inc.id)
    .bind(visibility.as_str())
    .fetch_optional(&mut *tx)
    .await?;
    let Some(id) = id else {
        return Ok(Outcome::applied("boost already stored"));
    };
    let from = actor_id(tx, &inc.actor).await?;
    if let (Some(author), Some(from)) = (author, from) {
        let n = Notification {
            account: author,
            kind: Kind::Reblog,
            from_account: from,
            post: Some(post),
            cause: &inc.id,
        };
        notify::notify(tx, &n).await?;
    }
    // A boost shows on the home feeds of the booster's local followers, unless it was
    // addressed to fewer than them (a boost is readable when public or unlisted).
    if matches!(visibility, Visibility::Public | Visibility::Unlisted) {
        let readers = followers::boost_readers(tx, &inc.actor).await?;
        let entry = feed::Entry {
            entry: id,
            post,
            source: &inc.actor,
            reply_to: None,
        };
        feed::push(tx, &entry, &readers).await?;
    }
    Ok(Outcome::applied("boost stored"))
}

/// `Undo` of a `Like` or `Announce` by its actor, named by the undone activity's id. `None`
/// when it names neither.
pub async fn undo(
    tx: &mut PgConnection,
    inc: &Incoming,
    object_id: &str,
) -> Result<Option<Outcome>, sqlx::Error> {
    let kind: Option<String> = sqlx::query_scalar(
        "UPDATE remote_interactions SET undone_at = now()
          WHERE activity_id = $1 AND actor = $2 AND undone_at IS NULL RETURNING kind",
    )
    .bind(object_id)
    .bind(&inc.actor)
    .fetch_optional(&mut *tx)
    .await?;
    let boost: Option<Uuid> = sqlx::query_scalar(
        "DELETE FROM reblogs WHERE activity_id = $1 AND actor_iri = $2 RETURNING id",
    )
    .bind(object_id)
    .bind(&inc.actor)
    .fetch_optional(&mut *tx)
    .await?;
    if let Some(id) = boost {
        feed::remove_entry(tx, id).await?;
        notify::withdraw(tx, Kind::Reblog, object_id).await?;
        return Ok(Some(Outcome::applied("boost undone")));
    }
    Ok(match kind.as_deref() {
        Some("like") => {
            notify::withdraw(tx, Kind::Favourite, object_id).await?;
            Some(Outcome::applied("like undone"))
        }
        Some(_) => Some(Outcome::applied("interaction undone")),
        None => None,
    })
}
