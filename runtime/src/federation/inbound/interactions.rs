//! Remote `Like`s and `Announce`s, and their `Undo` (R-MAPI-4): a like of our post counts
//! once per actor and notifies its author (`favourite`); a boost of a post we know is a
//! `reblogs` row of the remote actor, notifies our author (`reblog`) and reaches the home
//! feeds of local accounts following the booster (unless they turned its boosts off). An
//! `Undo` takes each back. A like of one of our posts the actor may not read, a reaction to
//! any post it may not read, and any of them across a block between the actor and our
//! author, store nothing ([`refusal`]).
//!
//! Redelivery changes nothing: a like is one standing row per (actor, post), a boost one row
//! per (actor, post) and per activity, and notifications are keyed by the activity.

use serde_json::Value;
use sqlx::PgConnection;
use uuid::Uuid;

use super::incoming::Incoming;
use super::outcome::Outcome;
use crate::approvals::{self, granted};
use crate::federation::Federation;
use crate::federation::actors::directory::remote_id;
use crate::federation::outbound::relationships;
use crate::statuses::notify::{self, Kind, Notification};
use crate::statuses::{Visibility, access, feed, followers};

/// `Like`: stored in `remote_interactions` (which the counts read); our author is notified.
/// A like of one of our posts that the actor may not engage with ([`refusal`]) is dropped
/// (who may like a post of theirs is their server's business).
pub async fn like(
    tx: &mut PgConnection,
    fed: &Federation,
    inc: &Incoming,
    object_id: &str,
) -> Result<Outcome, sqlx::Error> {
    let post = known_post(tx, object_id).await?;
    if let Some(p) = &post
        && p.author.is_some()
        && let Some(why) = refusal(tx, fed, &inc.actor, p).await?
    {
        return Ok(Outcome::ignored(format!("like of {why}")));
    }
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
    if post.as_ref().is_some_and(|p| p.author.is_some()) {
        // A like of our followers-only status waits for our approval on GoToSocial.
        let like = granted::Interaction {
            kind: approvals::Kind::Like,
            id: &inc.id,
            ty: "Like",
            actor: &inc.actor,
        };
        granted::grant(tx, fed, object_id, &like).await?;
    }
    if let (
        Some(KnownPost {
            id,
            author: Some(author),
            ..
        }),
        Some(from),
    ) = (post, remote_id(tx, &inc.actor).await?)
    {
        let n = Notification {
            account: author,
            kind: Kind::Favourite,
            from_account: from,
            post: Some(id),
            cause: &inc.id,
        };
        notify::notify(tx, &n).await?;
    }
    Ok(Outcome::applied("like stored"))
}

/// A post we store that a remote activity names, as the engagement checks read it.
struct KnownPost {
    id: Uuid,
    /// Its local author, for one of ours.
    author: Option<Uuid>,
    visibility: String,
    /// Its author's actor IRI.
    author_iri: String,
}

/// The post we store at `uri`, ours or theirs.
async fn known_post(tx: &mut PgConnection, uri: &str) -> Result<Option<KnownPost>, sqlx::Error> {
    let row: Option<(Uuid, Option<Uuid>, String, String)> =
        sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT p.id, p.account_id, p.visibility, {} FROM posts p WHERE p.uri = $1",
            access::author_iri_sql("p")
        )))
        .bind(uri)
        .fetch_optional(&mut *tx)
        .await?;
    Ok(row.map(|(id, author, visibility, author_iri)| KnownPost {
        id,
        author,
        visibility,
        author_iri,
    }))
}

/// Why `actor` may not like or react to `post`, if it may not: it may not read it
/// ([`may_read`]), or a block stands between it and the post's local author, either way
/// (`relationships::blocked_either_way`, as for our own accounts' engagements).
async fn refusal(
    tx: &mut PgConnection,
    fed: &Federation,
    actor: &str,
    post: &KnownPost,
) -> Result<Option<&'static str>, sqlx::Error> {
    if !may_read(tx, actor, post).await? {
        return Ok(Some("a post the actor may not read"));
    }
    if let Some(author) = post.author
        && relationships::blocked_either_way(tx, fed, author, &post.author_iri, actor).await?
    {
        return Ok(Some("a post across a block"));
    }
    Ok(None)
}

/// An emoji reaction to a post we store: a Unicode emoji, or a custom one named `:code:`
/// whose `Emoji` tag gives its image. Counted once per actor, post and emoji; our author is
/// notified (`emoji_reaction`). A post the actor may not read (followers-only, not followed;
/// direct, not addressed) takes no reaction, as its existence is not theirs to learn; nor
/// does one across a block ([`refusal`]).
pub async fn react(
    tx: &mut PgConnection,
    fed: &Federation,
    inc: &Incoming,
    object_id: &str,
    emoji: &str,
    tags: &Value,
) -> Result<Outcome, sqlx::Error> {
    let Some(known) = known_post(tx, object_id).await? else {
        return Ok(Outcome::ignored("reaction to an unknown post"));
    };
    if let Some(why) = refusal(tx, fed, &inc.actor, &known).await? {
        return Ok(Outcome::ignored(format!("reaction to {why}")));
    }
    let (post, author) = (known.id, known.author);
    let Some((name, url)) = reaction_of(emoji, tags) else {
        return Ok(Outcome::ignored("reaction that is not an emoji"));
    };
    let fresh = sqlx::query(
        "INSERT INTO emoji_reactions (id, post_id, actor_iri, emoji, emoji_url, activity_id)
         VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
    )
    .bind(Uuid::now_v7())
    .bind(post)
    .bind(&inc.actor)
    .bind(&name)
    .bind(url)
    .bind(&inc.id)
    .execute(&mut *tx)
    .await?
    .rows_affected()
        == 1;
    if !fresh {
        return Ok(Outcome::applied("reaction already stored"));
    }
    if let (Some(author), Some(from)) = (author, remote_id(tx, &inc.actor).await?) {
        let n = Notification {
            account: author,
            kind: Kind::EmojiReaction,
            from_account: from,
            post: Some(post),
            cause: &inc.id,
        };
        notify::notify(tx, &n).await?;
    }
    Ok(Outcome::applied("reaction stored"))
}

/// Whether `actor` may read the post (and so like or react to it): a public or unlisted one,
/// one of our followers-only posts whose author it follows now, one of ours that mentions it.
async fn may_read(
    tx: &mut PgConnection,
    actor: &str,
    post: &KnownPost,
) -> Result<bool, sqlx::Error> {
    if matches!(post.visibility.as_str(), "public" | "unlisted") {
        return Ok(true);
    }
    let Some(author) = post.author else {
        // A remote non-public post: its own server decides who reads it; ours stores it
        // only for the local accounts it was addressed to.
        return Ok(false);
    };
    sqlx::query_scalar(
        "SELECT ($3 = 'private' AND EXISTS (SELECT 1 FROM followers WHERE account_id = $1 AND actor_iri = $2))
             OR EXISTS (SELECT 1 FROM statuses s, jsonb_array_elements(s.mentions) m
                         WHERE s.id = $4 AND m->>'href' = $2)",
    )
    .bind(author)
    .bind(actor)
    .bind(&post.visibility)
    .bind(post.id)
    .fetch_one(tx)
    .await
}

/// The stored name and image of a reaction: a Unicode emoji as it is, a `:code:` with the
/// http(s) image its `Emoji` tag names. Anything else is no reaction.
fn reaction_of(emoji: &str, tags: &Value) -> Option<(String, Option<String>)> {
    if crate::reactions::is_unicode_emoji(emoji) {
        return Some((emoji.to_string(), None));
    }
    let code = emoji.strip_prefix(':')?.strip_suffix(':')?;
    if !crate::emojis::valid_shortcode(code) {
        return None;
    }
    let items: Vec<&Value> = match tags {
        Value::Array(a) => a.iter().collect(),
        v @ Value::Object(_) => vec![v],
        _ => vec![],
    };
    let url = items.into_iter().find_map(|t| {
        let named = t.get("type").and_then(Value::as_str) == Some("Emoji")
            && t.get("name")
                .and_then(Value::as_str)
                .map(|n| n.trim_matches(':'))
                == Some(code);
        let icon = t.get("icon")?;
        let url = icon
            .get("url")
            .or(Some(icon))
            .and_then(crate::federation::actors::actor::id_of)
            .and_then(crate::html::http_url)?;
        named.then(|| url.to_string())
    })?;
    Some((format!(":{code}:"), Some(url)))
}

/// `Announce` of a post we know (ours, or a stored remote one that is public or unlisted). A
/// boost across a block between the booster and the post's local author is dropped.
pub async fn announce(
    tx: &mut PgConnection,
    fed: &Federation,
    inc: &Incoming,
    object_id: &str,
) -> Result<Outcome, sqlx::Error> {
    if let Some(KnownPost {
        author: Some(author),
        author_iri,
        ..
    }) = known_post(tx, object_id).await?
        && relationships::blocked_either_way(tx, fed, author, &author_iri, &inc.actor).await?
    {
        return Ok(Outcome::ignored("Announce of a post across a block"));
    }
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
    let from = remote_id(tx, &inc.actor).await?;
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
    let reaction: Option<Uuid> = sqlx::query_scalar(
        "DELETE FROM emoji_reactions WHERE activity_id = $1 AND actor_iri = $2 RETURNING id",
    )
    .bind(object_id)
    .bind(&inc.actor)
    .fetch_optional(&mut *tx)
    .await?;
    if reaction.is_some() {
        notify::withdraw(tx, Kind::EmojiReaction, object_id).await?;
        return Ok(Some(Outcome::applied("reaction undone")));
    }
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
            granted::withdraw(tx, object_id, &inc.actor).await?;
            Some(Outcome::applied("like undone"))
        }
        Some(_) => Some(Outcome::applied("interaction undone")),
        None => None,
    })
}
