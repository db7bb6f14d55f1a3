//! What a local account's favourites and boosts send (R-MAPI-3, R-AP-2),
//! outbound only: a `Like` (and its `Undo`) to a remote post's author; an `Announce` (and its
//! `Undo`) to the booster's followers and the remote author, addressed as Mastodon addresses
//! a boost of that visibility. Each is queued in the caller's transaction, the one that
//! stores the change (`statuses::interact`), so a favourite is never stored without its
//! `Like` nor a `Like` sent for a favourite that was not stored. A local author gets nothing
//! sent: their notification is written directly.

use serde_json::{Value, json};
use sqlx::PgConnection;

use crate::accounts::Account;
use crate::emojis::Reaction;
use crate::federation::Federation;
use crate::federation::context;
use crate::federation::outbound::delivery::{Recipient, queue_activity};
use crate::federation::outbound::statuses::inboxes;
use crate::federation::vocab::PUBLIC;
use crate::statuses::Visibility;
use crate::statuses::post::{Boost, Post};

/// Queues the `Like` `activity` of `post` to its remote author. Returns the inboxes queued.
pub async fn like(
    tx: &mut PgConnection,
    fed: &Federation,
    account: &Account,
    post: &Post,
    activity: &str,
) -> Result<usize, sqlx::Error> {
    let like = like_object(fed, account, post, activity);
    to_author(tx, fed, account, post, like).await
}

/// Queues the `Undo` of the `Like` `activity` to the post's remote author.
pub async fn undo_like(
    tx: &mut PgConnection,
    fed: &Federation,
    account: &Account,
    post: &Post,
    activity: &str,
) -> Result<usize, sqlx::Error> {
    let undo = undo_of(fed, account, like_object(fed, account, post, activity));
    to_author(tx, fed, account, post, undo).await
}

/// Queues `activity` (a like, a reaction, or the undo of one) to `post`'s remote author
/// alone, addressed to them; a local author gets nothing sent (their notification is written
/// directly). Returns the inboxes queued.
async fn to_author(
    tx: &mut PgConnection,
    fed: &Federation,
    account: &Account,
    post: &Post,
    activity: Value,
) -> Result<usize, sqlx::Error> {
    let Some(author) = &post.actor_iri else {
        return Ok(0);
    };
    to_actor(tx, fed, account.id, author, activity).await
}

/// Queues `activity` by our account `account` to the remote `actor` alone, addressed to
/// them (with our `@context`). Returns the inboxes queued.
pub(crate) async fn to_actor(
    tx: &mut PgConnection,
    fed: &Federation,
    account: uuid::Uuid,
    actor: &str,
    activity: Value,
) -> Result<usize, sqlx::Error> {
    let mut activity = with_context(activity);
    activity["to"] = json!([actor]);
    let to = author_recipient(&mut *tx, actor).await?;
    queue_activity(&mut *tx, fed, account, &activity, &to).await
}

/// The `Undo` of `object`, by `account`, under a new id.
fn undo_of(fed: &Federation, account: &Account, object: Value) -> Value {
    json!({
        "id": fed.new_activity_id(), "type": "Undo",
        "actor": fed.actor_iri(&account.username), "object": object,
    })
}

/// Queues the `Announce` of `boost` to the booster's followers and the post's remote author.
pub async fn announce(
    tx: &mut PgConnection,
    fed: &Federation,
    account: &Account,
    post: &Post,
    boost: &Boost,
) -> Result<usize, sqlx::Error> {
    let announce = with_context(announce_object(fed, account, post, boost));
    let to = announce_recipients(&mut *tx, account, post).await?;
    queue_activity(&mut *tx, fed, account.id, &announce, &to).await
}

/// Queues the `Undo` of `boost`'s `Announce` to whoever the `Announce` went to (as they are
/// now: followers gained since hear of the Undo too, which is harmless).
pub async fn undo_announce(
    tx: &mut PgConnection,
    fed: &Federation,
    account: &Account,
    post: &Post,
    boost: &Boost,
) -> Result<usize, sqlx::Error> {
    let announce = announce_object(fed, account, post, boost);
    let undo = json!({
        "@context": context::ld(), "id": fed.new_activity_id(), "type": "Undo",
        "actor": fed.actor_iri(&account.username),
        "to": announce["to"], "cc": announce["cc"],
        "object": announce,
    });
    let to = announce_recipients(&mut *tx, account, post).await?;
    queue_activity(&mut *tx, fed, account.id, &undo, &to).await
}

/// Queues the `EmojiReact` `activity` of `post` to its remote author: the emoji as `content`
/// and, for a custom one, its `Emoji` tag (the image our instance serves), as Pleroma,
/// Misskey and Fedify read it.
pub async fn emoji_react(
    tx: &mut PgConnection,
    fed: &Federation,
    account: &Account,
    post: &Post,
    activity: &str,
    reaction: &Reaction,
) -> Result<usize, sqlx::Error> {
    let react = react_object(fed, account, post, activity, reaction);
    to_author(tx, fed, account, post, react).await
}

/// Queues the `Undo` of the `EmojiReact` `activity` to the post's remote author.
pub async fn undo_emoji_react(
    tx: &mut PgConnection,
    fed: &Federation,
    account: &Account,
    post: &Post,
    activity: &str,
    reaction: &Reaction,
) -> Result<usize, sqlx::Error> {
    let react = react_object(fed, account, post, activity, reaction);
    let undo = undo_of(fed, account, react);
    to_author(tx, fed, account, post, undo).await
}

fn react_object(
    fed: &Federation,
    account: &Account,
    post: &Post,
    activity: &str,
    reaction: &Reaction,
) -> Value {
    let mut o = json!({
        "id": activity, "type": "EmojiReact",
        "actor": fed.actor_iri(&account.username), "object": post.uri,
        "content": reaction.name(),
    });
    if let Reaction::Custom(e) = reaction {
        o["tag"] = json!([{
            "id": format!("{}/emojis/{}", fed.urls().origin(), e.id),
            "type": "Emoji", "name": reaction.name(),
            "icon": { "type": "Image", "mediaType": e.media_type, "url": e.url },
        }]);
    }
    o
}

fn like_object(fed: &Federation, account: &Account, post: &Post, activity: &str) -> Value {
    json!({
        "id": activity, "type": "Like",
        "actor": fed.actor_iri(&account.username), "object": post.uri,
    })
}

/// The `Announce` as Mastodon addresses a boost: public in `to` (unlisted: in `cc`), the
/// booster's followers, and the boosted post's author in `cc`.
fn announce_object(fed: &Federation, account: &Account, post: &Post, boost: &Boost) -> Value {
    let followers = fed.followers(&account.username);
    let author = post
        .actor_iri
        .clone()
        .or_else(|| local_author_iri(fed, post));
    let visibility = Visibility::parse(&boost.visibility).unwrap_or(Visibility::Private);
    let (to, mut cc) = match visibility {
        Visibility::Public => (vec![PUBLIC.to_string()], vec![followers]),
        Visibility::Unlisted => (vec![followers], vec![PUBLIC.to_string()]),
        Visibility::Private | Visibility::Direct => (vec![followers], vec![]),
    };
    if let Some(a) = author {
        cc.push(a);
    }
    json!({
        "id": boost.activity_id, "type": "Announce",
        "actor": fed.actor_iri(&account.username),
        "published": boost_time(boost),
        "to": to, "cc": cc, "object": post.uri,
    })
}

/// A local post's author IRI: its URI is `<actor>/statuses/<id>`.
fn local_author_iri(fed: &Federation, post: &Post) -> Option<String> {
    let (actor, _) = post.uri.rsplit_once("/statuses/")?;
    fed.local_username(actor).map(|_| actor.to_string())
}

/// When the boost was made: its id is a UUIDv7 of that moment.
fn boost_time(boost: &Boost) -> Value {
    boost
        .id
        .get_timestamp()
        .and_then(|ts| {
            let (secs, nanos) = ts.to_unix();
            chrono::DateTime::from_timestamp(i64::try_from(secs).ok()?, nanos)
        })
        .map_or(Value::Null, |t| json!(t))
}

fn with_context(mut activity: Value) -> Value {
    if let Some(o) = activity.as_object_mut() {
        o.insert("@context".into(), context::ld());
    }
    activity
}

/// The booster's remote followers and, for a remote post, its author.
async fn announce_recipients(
    conn: &mut PgConnection,
    account: &Account,
    post: &Post,
) -> Result<Vec<Recipient>, sqlx::Error> {
    let author: Vec<String> = post.actor_iri.iter().cloned().collect();
    inboxes(conn, account.id, true, None, &author, &[]).await
}

/// The remote author, if we know where its inbox is.
async fn author_recipient(
    conn: &mut PgConnection,
    author: &str,
) -> Result<Vec<Recipient>, sqlx::Error> {
    let row: Option<(String, String, Option<String>)> = sqlx::query_as(
        "SELECT iri, inbox, shared_inbox FROM remote_actors WHERE iri = $1 AND gone_at IS NULL",
    )
    .bind(author)
    .fetch_optional(conn)
    .await?;
    Ok(row
        .into_iter()
        .map(|(actor_iri, inbox, shared_inbox)| Recipient {
            actor_iri,
            inbox,
            shared_inbox,
        })
        .collect())
}
