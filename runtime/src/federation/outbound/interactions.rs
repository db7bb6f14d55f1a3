//! What a local account's favourites and boosts send (R-MAPI-3, R-AP-2),
//! outbound only: a `Like` (and its `Undo`) to a remote post's author; an `Announce` (and its
//! `Undo`) to the booster's followers and the remote author, addressed as Mastodon addresses
//! a boost of that visibility. Each is queued in the caller's transaction, the one that
//! stores the change (`statuses::interact`), so a favourite is never stored without its
//! `Like` nor a `Like` sent for a favourite that was not stored. A local author gets nothing
//! sent: their notification is written directly. A boost waiting for the remote author's
//! approval (`approvals`) goes, addressed as any boost, to that author alone; once approved,
//! to everyone, carrying `approvedBy`.

use serde_json::{Value, json};
use sqlx::PgConnection;

use crate::accounts::Account;
use crate::emojis::Reaction;
use crate::federation::Federation;
use crate::federation::context;
use crate::federation::outbound::delivery::{Recipient, queue_activity, requeue_activity};
use crate::federation::outbound::statuses::inboxes;
use crate::federation::vocab::PUBLIC;
use crate::statuses::Visibility;
use crate::statuses::post::{Boost, Post};

/// A local account's interaction with a post: what the activities are built from.
#[derive(Clone, Copy)]
pub struct Interaction<'a> {
    pub fed: &'a Federation,
    pub account: &'a Account,
    pub post: &'a Post,
}

impl Interaction<'_> {
    /// Queues the `Like` `activity` of the post to its remote author. Returns the inboxes
    /// queued.
    pub async fn like(self, tx: &mut PgConnection, activity: &str) -> Result<usize, sqlx::Error> {
        self.to_author(tx, self.like_object(activity)).await
    }

    /// Queues the `Undo` of the `Like` `activity` to the post's remote author.
    pub async fn undo_like(
        self,
        tx: &mut PgConnection,
        activity: &str,
    ) -> Result<usize, sqlx::Error> {
        let undo = self.undo_of(self.like_object(activity));
        self.to_author(tx, undo).await
    }

    /// Queues the `Announce` of `boost` to the booster's followers and the post's remote
    /// author (only the latter while the boost waits for their approval).
    pub async fn announce(
        self,
        tx: &mut PgConnection,
        boost: &Boost,
    ) -> Result<usize, sqlx::Error> {
        let announce = with_context(self.announce_object(boost));
        self.to_announce_recipients(tx, &announce, boost).await
    }

    /// Queues the `Announce` of `boost` again once its author approved it: the same activity,
    /// now carrying `approvedBy`, to those it had not gone to (the booster's followers).
    pub async fn announce_approved(
        self,
        tx: &mut PgConnection,
        boost: &Boost,
    ) -> Result<usize, sqlx::Error> {
        let announce = with_context(self.announce_object(boost));
        let to = self.announce_recipients(tx).await?;
        requeue_activity(&mut *tx, self.fed, self.account.id, &announce, &to).await
    }

    /// Queues the `Undo` of `boost`'s `Announce` to whoever the `Announce` went to (as they
    /// are now: followers gained since hear of the Undo too, which is harmless).
    pub async fn undo_announce(
        self,
        tx: &mut PgConnection,
        boost: &Boost,
    ) -> Result<usize, sqlx::Error> {
        let announce = self.announce_object(boost);
        let undo = json!({
            "@context": context::ld(), "id": self.fed.new_activity_id(), "type": "Undo",
            "actor": self.actor(),
            "to": announce["to"], "cc": announce["cc"],
            "object": announce,
        });
        self.to_announce_recipients(tx, &undo, boost).await
    }

    /// Queues the `EmojiReact` `activity` of the post to its remote author: the emoji as
    /// `content` and, for a custom one, its `Emoji` tag (the image our instance serves), as
    /// Pleroma, Misskey and Fedify read it.
    pub async fn emoji_react(
        self,
        tx: &mut PgConnection,
        activity: &str,
        reaction: &Reaction,
    ) -> Result<usize, sqlx::Error> {
        self.to_author(tx, self.react_object(activity, reaction))
            .await
    }

    /// Queues the `Undo` of the `EmojiReact` `activity` to the post's remote author.
    pub async fn undo_emoji_react(
        self,
        tx: &mut PgConnection,
        activity: &str,
        reaction: &Reaction,
    ) -> Result<usize, sqlx::Error> {
        let undo = self.undo_of(self.react_object(activity, reaction));
        self.to_author(tx, undo).await
    }

    /// Queues `activity` (a like, a reaction, or the undo of one) to the post's remote author
    /// alone, addressed to them; a local author gets nothing sent (their notification is
    /// written directly). Returns the inboxes queued.
    async fn to_author(self, tx: &mut PgConnection, activity: Value) -> Result<usize, sqlx::Error> {
        let Some(author) = &self.post.actor_iri else {
            return Ok(0);
        };
        to_actor(tx, self.fed, self.account.id, author, activity).await
    }

    /// Queues `activity` (an `Announce` or its `Undo`) to the booster's remote followers
    /// and, for a remote post, its author; while `boost` waits for that author's approval, to
    /// the author alone, addressed as it is.
    async fn to_announce_recipients(
        self,
        tx: &mut PgConnection,
        activity: &Value,
        boost: &Boost,
    ) -> Result<usize, sqlx::Error> {
        let to = match (&self.post.actor_iri, boost.pending_approval) {
            (Some(author), true) => author_recipient(&mut *tx, author).await?,
            _ => self.announce_recipients(tx).await?,
        };
        queue_activity(&mut *tx, self.fed, self.account.id, activity, &to).await
    }

    /// The booster's remote followers and, for a remote post, its author.
    async fn announce_recipients(
        self,
        tx: &mut PgConnection,
    ) -> Result<Vec<Recipient>, sqlx::Error> {
        let author: Vec<String> = self.post.actor_iri.iter().cloned().collect();
        inboxes(&mut *tx, self.account.id, true, None, &author, &[]).await
    }

    /// Our account's actor IRI.
    fn actor(self) -> String {
        self.fed.actor_iri(&self.account.username)
    }

    /// The `Undo` of `object`, by the account, under a new id.
    fn undo_of(self, object: Value) -> Value {
        json!({
            "id": self.fed.new_activity_id(), "type": "Undo",
            "actor": self.actor(), "object": object,
        })
    }

    fn react_object(self, activity: &str, reaction: &Reaction) -> Value {
        let mut o = json!({
            "id": activity, "type": "EmojiReact",
            "actor": self.actor(), "object": self.post.uri,
            "content": reaction.name(),
        });
        if let Reaction::Custom(e) = reaction {
            o["tag"] = json!([{
                "id": format!("{}/emojis/{}", self.fed.urls().origin(), e.id),
                "type": "Emoji", "name": reaction.name(),
                "icon": { "type": "Image", "mediaType": e.media_type, "url": e.url },
            }]);
        }
        o
    }

    fn like_object(self, activity: &str) -> Value {
        json!({
            "id": activity, "type": "Like",
            "actor": self.actor(), "object": self.post.uri,
        })
    }

    /// The `Announce` as Mastodon addresses a boost: public in `to` (unlisted: in `cc`), the
    /// booster's followers, and the boosted post's author in `cc`.
    fn announce_object(self, boost: &Boost) -> Value {
        let followers = self.fed.followers(&self.account.username);
        let author = self
            .post
            .actor_iri
            .clone()
            .or_else(|| local_author_iri(self.fed, self.post));
        let visibility = Visibility::parse(&boost.visibility).unwrap_or(Visibility::Private);
        let (to, mut cc) = match visibility {
            Visibility::Public => (vec![PUBLIC.to_string()], vec![followers]),
            Visibility::Unlisted => (vec![followers], vec![PUBLIC.to_string()]),
            Visibility::Private | Visibility::Direct => (vec![followers], vec![]),
        };
        if let Some(a) = author {
            cc.push(a);
        }
        let mut announce = json!({
            "id": boost.activity_id, "type": "Announce",
            "actor": self.actor(),
            "published": boost_time(boost),
            "to": to, "cc": cc, "object": self.post.uri,
        });
        if let Some(a) = &boost.approved_by {
            // GoToSocial's proof that the post's author approved the boost.
            announce["approvedBy"] = json!(a);
        }
        announce
    }
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

/// The remote author, if we know where its inbox is.
async fn author_recipient(
    conn: &mut PgConnection,
    author: &str,
) -> Result<Vec<Recipient>, sqlx::Error> {
    sqlx::query_as(
        "SELECT iri AS actor_iri, inbox, shared_inbox FROM remote_actors
          WHERE iri = $1 AND gone_at IS NULL",
    )
    .bind(author)
    .fetch_all(conn)
    .await
}
