//! Remote notes arriving in the inbox (R-MAPI-4): a `Create` or `Update`
//! stores the post with what reads must honour (visibility, audience), fills the home feeds of
//! local followers who may see it and notifies the mentioned; an `Update` also tells local
//! accounts that boosted it; a `Delete` takes it out of every feed and notification.
//!
//! Redelivery changes nothing: the post is keyed by IRI, feed entries by (account, entry) and
//! notifications by their cause (the note's IRI for a mention, the `Update`'s id for an edit).

use std::collections::BTreeSet;

use serde_json::Value;
use sqlx::PgConnection;
use uuid::Uuid;

use super::activity::Object;
use super::incoming::Incoming;
use super::outcome::Outcome;
use crate::federation::Federation;
use crate::federation::actors::actor::id_of;
use crate::federation::bounds;
use crate::federation::iri::same_origin;
use crate::federation::vocab;
use crate::html;
use crate::polls::question::{self, RemotePoll};
use crate::statuses::notify::{self, Kind, Notification};
use crate::statuses::{Visibility, conversations, feed};
use crate::streaming::emit;

/// What `remote_posts` keeps of a remote note, made safe to serve: `content` and `summary`
/// through the allow-list sanitizer, urls only when http(s), at most `bounds`' attachments,
/// mentions and hashtags. Every way a note arrives — the inbox, reply collection, search —
/// stores these, from a document `normalize` has already bounded; the counts are kept here
/// too, so what is stored stays bounded whatever document a caller passes.
pub struct NoteFields {
    pub content: Option<String>,
    pub summary: Option<String>,
    pub in_reply_to: Option<String>,
    pub replies: Option<String>,
    pub url: Option<String>,
    pub published: Option<chrono::DateTime<chrono::Utc>>,
    pub sensitive: bool,
    pub language: Option<String>,
    /// `[{"href", "name"}]` of the `Mention` tags.
    pub mentions: Value,
    /// Hashtag names, lowercased, without `#`.
    pub tags: Vec<String>,
    /// The `Document`s with an http(s) url, as received.
    pub attachments: Value,
}

/// A property that may be one value or an array of them, as a list.
fn many(v: Option<&Value>) -> Vec<&Value> {
    match v {
        Some(Value::Array(a)) => a.iter().collect(),
        Some(Value::Null) | None => Vec::new(),
        Some(v) => vec![v],
    }
}

impl NoteFields {
    pub fn of(object: &Value) -> NoteFields {
        let text = |k: &str| object.get(k).and_then(Value::as_str);
        let iri = |k: &str| object.get(k).and_then(id_of).map(str::to_string);
        let tags = many(object.get("tag"));
        let of_type = |t: &&&Value, ty: &str| t.get("type").and_then(Value::as_str) == Some(ty);
        let mentions: Vec<Value> = tags
            .iter()
            .filter(|t| of_type(t, "Mention"))
            .filter_map(|t| {
                let href = t.get("href").and_then(Value::as_str)?;
                html::http_url(href)?;
                let name = t.get("name").and_then(Value::as_str).unwrap_or(href);
                Some(serde_json::json!({ "href": href, "name": name }))
            })
            .take(bounds::MAX_TAGS_PER_KIND)
            .collect();
        let hashtags: BTreeSet<String> = tags
            .iter()
            .filter(|t| of_type(t, "Hashtag"))
            .filter_map(|t| t.get("name").and_then(Value::as_str))
            .map(|n| n.trim_start_matches('#').to_lowercase())
            // Only names a local post could have made: the name goes into tag URLs and
            // timelines (R-API).
            .filter(|n| crate::content::valid_tag_name(n))
            .take(bounds::MAX_TAGS_PER_KIND)
            .collect();
        let attachments: Vec<Value> = many(object.get("attachment"))
            .into_iter()
            .filter(|d| {
                d.get("url")
                    .and_then(id_of)
                    .and_then(html::http_url)
                    .is_some()
            })
            .take(bounds::MAX_ATTACHMENTS)
            .cloned()
            .collect();
        // Mastodon sends the language as the one key of `contentMap`.
        let language = object
            .get("contentMap")
            .and_then(Value::as_object)
            .and_then(|m| m.keys().next())
            .filter(|l| {
                !l.is_empty()
                    && l.len() <= 16
                    && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            })
            .cloned();
        NoteFields {
            // A quoting note's fallback link goes: the quote is shown (`quotes`).
            content: text("content").map(|c| match crate::quotes::quoted_iri(object) {
                Some(_) => html::sanitize_remote(&crate::quotes::without_fallback(c)),
                None => html::sanitize_remote(c),
            }),
            summary: text("summary").map(html::sanitize_remote),
            in_reply_to: iri("inReplyTo"),
            replies: iri("replies"),
            url: object
                .get("url")
                .and_then(id_of)
                .and_then(html::http_url)
                .map(str::to_string),
            published: text("published")
                .and_then(|p| chrono::DateTime::parse_from_rfc3339(p).ok())
                .map(|d| d.with_timezone(&chrono::Utc)),
            sensitive: object
                .get("sensitive")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            language,
            mentions: Value::Array(mentions),
            tags: hashtags.into_iter().collect(),
            attachments: Value::Array(attachments),
        }
    }

    /// The mentioned actors' IRIs.
    pub fn mention_hrefs(&self) -> Vec<&str> {
        many(Some(&self.mentions))
            .into_iter()
            .filter_map(|m| m.get("href").and_then(Value::as_str))
            .collect()
    }
}

/// A stored post: its id, whether this call inserted it, and whether it changed what a
/// reader sees (an `Update` that only brings a poll's new counts does not: it is no edit).
pub struct Stored {
    pub id: Uuid,
    pub fresh: bool,
    pub edited: bool,
}

/// Stores a remote note as `NoteFields` makes it safe, its visibility read from its addressing
/// (the author's followers collection taken from the stored actor). A create never overwrites
/// (a replayed `Create`, or a reply collected twice, changes nothing, and the stored post is
/// returned); an update touches only a post of the same author that is not deleted, or stores
/// it if we never saw it. `audience` (the local accounts it names, who may read it) is added
/// to what the post had. The id is a v7 of its publication time (never later than now), so timelines
/// order it by when it was written. `None`: nothing of this author under that IRI.
pub async fn store(
    conn: &mut PgConnection,
    iri: &str,
    actor: &str,
    object: &Value,
    create: bool,
    audience: &[Uuid],
) -> Result<Option<Stored>, sqlx::Error> {
    let followers: Option<String> =
        sqlx::query_scalar("SELECT document->>'followers' FROM remote_actors WHERE iri = $1")
            .bind(actor)
            .fetch_optional(&mut *conn)
            .await?
            .flatten();
    let visibility = Visibility::of_addressing(object, followers.as_deref());
    let note = NoteFields::of(object);
    let post = Post {
        iri,
        actor,
        object,
        create,
        audience,
        visibility,
    };
    store_fields(conn, &post, &note).await
}

/// What `store_fields` writes: the note, who sent it and how it is addressed.
struct Post<'a> {
    iri: &'a str,
    actor: &'a str,
    object: &'a Value,
    create: bool,
    audience: &'a [Uuid],
    /// From the addressing and the author's followers collection, as `store` reads it.
    visibility: Visibility,
}

/// `store` with the visibility and the fields already worked out (the inbox has read the
/// author's followers collection and sanitized the note before it stores it).
async fn store_fields(
    conn: &mut PgConnection,
    post: &Post<'_>,
    note: &NoteFields,
) -> Result<Option<Stored>, sqlx::Error> {
    let Post {
        iri,
        actor,
        object,
        create,
        audience,
        visibility,
    } = *post;
    // A poll's `Update` (GoToSocial and Mastodon send one as its counts change and when it
    // closes) is an edit only when what it shows besides the counts changed
    // (`polls::question::store` tells about the options).
    let poll = RemotePoll::of(object);
    let on_conflict = if create {
        "DO NOTHING"
    } else {
        "DO UPDATE SET content = EXCLUDED.content, summary = EXCLUDED.summary,
            replies_iri = EXCLUDED.replies_iri, url = EXCLUDED.url, body = EXCLUDED.body,
            sensitive = EXCLUDED.sensitive, language = EXCLUDED.language,
            mentions = EXCLUDED.mentions, tags = EXCLUDED.tags,
            attachments = EXCLUDED.attachments,
            audience = ARRAY(SELECT DISTINCT unnest(remote_posts.audience || EXCLUDED.audience)),
            edited_at = CASE WHEN $17 AND remote_posts.content IS NOT DISTINCT FROM EXCLUDED.content
                                  AND remote_posts.summary IS NOT DISTINCT FROM EXCLUDED.summary
                                  AND remote_posts.sensitive = EXCLUDED.sensitive
                                  AND remote_posts.attachments = EXCLUDED.attachments
                             THEN remote_posts.edited_at ELSE now() END,
            updated_at = now()
          WHERE remote_posts.actor = EXCLUDED.actor AND remote_posts.deleted_at IS NULL"
    };
    let sql = format!(
        "INSERT INTO remote_posts (id, iri, actor, content, summary, in_reply_to, replies_iri, url,
                                   published, body, visibility, sensitive, language, mentions,
                                   tags, attachments, audience)
         VALUES (hollo_uuid_v7(least(coalesce($8, now()), now())), $1, $2, $3, $4, $5, $6, $7,
                 $8, $9, $10, $11, $12, $13, $14, $15, $16)
         ON CONFLICT (iri) {on_conflict}
         RETURNING id, (xmax = 0) AS fresh, coalesce(edited_at = now(), false) AS edited"
    );
    let row: Option<(Uuid, bool, bool)> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(iri)
        .bind(actor)
        .bind(&note.content)
        .bind(&note.summary)
        .bind(&note.in_reply_to)
        .bind(&note.replies)
        .bind(&note.url)
        .bind(note.published)
        .bind(object)
        .bind(visibility.as_str())
        .bind(note.sensitive)
        .bind(&note.language)
        .bind(&note.mentions)
        .bind(&note.tags)
        .bind(&note.attachments)
        .bind(audience)
        .bind(poll.is_some())
        .fetch_optional(&mut *conn)
        .await?;
    if let Some((id, fresh, mut edited)) = row {
        if fresh || !create {
            let changed = question::store(conn, id, poll.as_ref(), create && fresh).await?;
            if changed.options_changed && !fresh && !edited {
                sqlx::query("UPDATE remote_posts SET edited_at = now() WHERE id = $1")
                    .bind(id)
                    .execute(&mut *conn)
                    .await?;
                edited = true;
            }
        }
        return Ok(Some(Stored { id, fresh, edited }));
    }
    if !create {
        return Ok(None);
    }
    // Already stored: a redelivered create still widens the audience it names.
    let id: Option<Uuid> = sqlx::query_scalar(
        "UPDATE remote_posts SET audience = ARRAY(SELECT DISTINCT unnest(audience || $3::uuid[]))
          WHERE iri = $1 AND actor = $2 AND deleted_at IS NULL RETURNING id",
    )
    .bind(iri)
    .bind(actor)
    .bind(audience)
    .fetch_optional(&mut *conn)
    .await?;
    Ok(id.map(|id| Stored {
        id,
        fresh: false,
        edited: false,
    }))
}

/// `store` for the callers that only need to know whether a row was written (reply
/// collection, search resolution): 1 when a create inserted or an update touched the post.
pub async fn store_note(
    conn: &mut PgConnection,
    iri: &str,
    actor: &str,
    object: &Value,
    create: bool,
) -> Result<u64, sqlx::Error> {
    Ok(match store(conn, iri, actor, object, create, &[]).await? {
        Some(s) if s.fresh || !create => 1,
        _ => 0,
    })
}

/// Local account ids among actor IRIs.
async fn local_ids(
    tx: &mut PgConnection,
    fed: &Federation,
    iris: &[&str],
) -> Result<Vec<Uuid>, sqlx::Error> {
    let names: Vec<String> = iris
        .iter()
        .filter_map(|i| fed.local_username(i).map(str::to_lowercase))
        .collect();
    if names.is_empty() {
        return Ok(Vec::new());
    }
    sqlx::query_scalar("SELECT id FROM accounts WHERE lower(username) = ANY($1)")
        .bind(&names)
        .fetch_all(tx)
        .await
}

/// `Create` (`create`) or `Update` of a note by the signer.
pub async fn upsert(
    tx: &mut PgConnection,
    fed: &Federation,
    inc: &Incoming,
    create: bool,
    note: &Object,
    claim_holds: Option<bool>,
) -> Result<Outcome, sqlx::Error> {
    let Some(ty) = note.kind().filter(|t| vocab::is_note(t)) else {
        return Ok(Outcome::ignored(format!(
            "{} of {}",
            inc.ty,
            note.kind().unwrap_or("a reference")
        )));
    };
    if !note.has_id() {
        return Ok(Outcome::ignored("note without id"));
    }
    let (iri, object) = (note.id.as_str(), &note.doc);
    let author = object
        .get("attributedTo")
        .and_then(id_of)
        .unwrap_or_default();
    if author != inc.actor || !same_origin(iri, &inc.actor) {
        return Ok(Outcome::ignored("note not attributed to the signer"));
    }

    // Whom it names (its `audience`, who may read it whatever its visibility): the mentioned
    // and addressed local accounts. Its author's local followers read a followers-only one
    // as long as they follow (`statuses::access`).
    let fields = NoteFields::of(object);
    let mentioned = local_ids(tx, fed, &fields.mention_hrefs()).await?;
    let addressed: Vec<&str> = ["to", "cc"]
        .iter()
        .flat_map(|k| many(object.get(*k)))
        .filter_map(id_of)
        .collect();
    let addressed_iris: Vec<String> = addressed.iter().map(|a| a.to_string()).collect();
    let addressed = local_ids(tx, fed, &addressed).await?;
    // In one round trip: the local followers (home feeds), those of them who asked to hear of
    // every post (`status` notifications), and the author's account id (whom notifications
    // are from) and followers collection (what makes a post followers-only).
    let (followers, notified_of_posts, from, actor_doc_followers): (
        Vec<Uuid>,
        Vec<Uuid>,
        Option<Uuid>,
        Option<String>,
    ) = sqlx::query_as(
        "SELECT ARRAY(SELECT account_id FROM follows WHERE target_iri = $1 AND state = 'accepted'),
                ARRAY(SELECT account_id FROM follows
                       WHERE target_iri = $1 AND state = 'accepted' AND notify),
                (SELECT id FROM remote_actors WHERE iri = $1),
                (SELECT document->>'followers' FROM remote_actors WHERE iri = $1)",
    )
    .bind(&inc.actor)
    .fetch_one(&mut *tx)
    .await?;
    let visibility = Visibility::of_addressing(object, actor_doc_followers.as_deref());
    let audience: BTreeSet<Uuid> = mentioned.iter().chain(&addressed).copied().collect();
    let audience: Vec<Uuid> = audience.into_iter().collect();

    let post = Post {
        iri,
        actor: &inc.actor,
        object,
        create,
        audience: &audience,
        visibility,
    };
    let Some(stored) = store_fields(tx, &post, &fields).await? else {
        return Ok(Outcome::ignored(format!("{ty} not updatable")));
    };
    // Public streams hear of a new public note, and of every edit (their readers may hold it).
    if create && stored.fresh {
        if visibility == Visibility::Public {
            let created = emit::RemoteCreated {
                post: stored.id,
                tags: &fields.tags,
                author: from,
            };
            emit::remote_created_stored(tx, &created).await?;
        }
    } else if !create {
        emit::remote_edited(tx, iri).await?;
    }
    if create && let Some(parent) = fields.in_reply_to.as_deref() {
        // A reply to our followers-only status waits for our approval on GoToSocial.
        let reply = crate::approvals::granted::Interaction {
            kind: crate::approvals::Kind::Reply,
            id: iri,
            ty,
            actor: &inc.actor,
        };
        crate::approvals::granted::grant(tx, fed, parent, &reply).await?;
    }
    if stored.fresh || stored.edited {
        // Its link preview, fetched by a worker (`cards`); an edit may change or drop the link.
        let content = fields.content.as_deref().unwrap_or_default();
        crate::cards::enqueue_for(tx, stored.id, content, !create).await?;
    }
    // What it quotes, and whether the quoted author agreed (`quotes`). A post this call just
    // inserted that quotes nothing has no quote to forget.
    if !stored.fresh || crate::quotes::quoted_iri(object).is_some() {
        crate::quotes::inbound::note(tx, fed, stored.id, iri, &inc.actor, object, claim_holds)
            .await?;
    }

    if visibility == Visibility::Direct {
        // A direct note joins (or starts) the conversation of each local account it
        // addresses; a redelivery finds it already there.
        // Collections (a followers IRI) name no participant; an actor we cannot show is left
        // out when the conversation is read.
        let mut participants = vec![inc.actor.clone()];
        let named = addressed_iris
            .iter()
            .map(String::as_str)
            .chain(fields.mention_hrefs())
            .filter(|p| Some(*p) != actor_doc_followers.as_deref());
        for p in named {
            if !participants.iter().any(|q| q == p) {
                participants.push(p.to_string());
            }
        }
        conversations::record(tx, fed, stored.id, None, &participants).await?;
    }
    // Home feeds: every local follower who may read it (a direct post only the addressed).
    let readers: Vec<Uuid> = followers
        .iter()
        .filter(|f| visibility != Visibility::Direct || audience.contains(f))
        .copied()
        .collect();
    let reply_to = match readers.is_empty() {
        true => None,
        false => feed::ReplyTo::of(tx, fed.urls(), stored.id).await?,
    };
    let entry = feed::Entry {
        entry: stored.id,
        post: stored.id,
        source: &inc.actor,
        reply_to,
    };
    feed::push(tx, &entry, &readers).await?;
    if create && stored.fresh && !fields.tags.is_empty() {
        // Accounts following one of its tags get a public post too (R-MAPI-6). A post without
        // tags has no `post_tags` rows to fan out from.
        crate::tags::fan_out(tx, stored.id).await?;
    }

    if let Some(from) = from {
        // Mentions (and, for a direct post, its addressees) once per note, whichever
        // activity brought them.
        let mut notified = mentioned.clone();
        if visibility == Visibility::Direct {
            notified.extend(&addressed);
        }
        notified.sort();
        notified.dedup();
        for account in notified {
            let n = Notification {
                account,
                kind: Kind::Mention,
                from_account: from,
                post: Some(stored.id),
                cause: iri,
            };
            notify::notify(tx, &n).await?;
        }
        if create && stored.fresh && visibility != Visibility::Direct {
            // Followers who asked to hear of each post: its own posts, not its replies to
            // others (as Mastodon's `status` notifications).
            let reply_to_other =
                match fields.in_reply_to.as_deref() {
                    None => false,
                    Some(parent) => !sqlx::query_scalar::<_, bool>(
                        "SELECT EXISTS (SELECT 1 FROM remote_posts WHERE iri = $1 AND actor = $2)",
                    )
                    .bind(parent)
                    .bind(&inc.actor)
                    .fetch_one(&mut *tx)
                    .await?,
                };
            if !reply_to_other {
                for &account in &notified_of_posts {
                    let n = Notification {
                        account,
                        kind: Kind::Status,
                        from_account: from,
                        post: Some(stored.id),
                        cause: iri,
                    };
                    notify::notify(tx, &n).await?;
                }
            }
        }
        if !create && !stored.fresh && stored.edited {
            // An edit reaches the local accounts that boosted the post (a poll's new counts
            // are no edit).
            let boosters: Vec<Uuid> = sqlx::query_scalar(
                "SELECT account_id FROM reblogs WHERE post_id = $1 AND account_id IS NOT NULL",
            )
            .bind(stored.id)
            .fetch_all(&mut *tx)
            .await?;
            for account in boosters {
                let n = Notification {
                    account,
                    kind: Kind::Update,
                    from_account: from,
                    post: Some(stored.id),
                    cause: &inc.id,
                };
                notify::notify(tx, &n).await?;
            }
            // And the local accounts that quoted it.
            crate::quotes::inbound::quoted_edited(tx, iri, from, &inc.id).await?;
        }
    }
    Ok(Outcome::applied(match (create, stored.fresh) {
        (true, true) => format!("{ty} stored"),
        (true, false) => format!("{ty} already stored"),
        (false, _) if stored.fresh || stored.edited => format!("{ty} updated"),
        (false, _) => format!("{ty} poll counts updated"),
    }))
}

/// `Delete` of a note by its author: gone from reads, feeds, boosts and notifications.
pub async fn delete(
    tx: &mut PgConnection,
    inc: &Incoming,
    object_id: &str,
) -> Result<Outcome, sqlx::Error> {
    let id: Option<Uuid> = sqlx::query_scalar(
        "UPDATE remote_posts SET deleted_at = now(), content = NULL, summary = NULL, updated_at = now()
          WHERE iri = $1 AND actor = $2 AND deleted_at IS NULL RETURNING id",
    )
    .bind(object_id)
    .bind(&inc.actor)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(id) = id else {
        return Ok(Outcome::ignored("unknown post"));
    };
    // Streams hear of it while its boosts still exist (their entries go too).
    crate::streaming::emit::remote_deleted(tx, object_id).await?;
    feed::remove_post(tx, id).await?;
    notify::remove_post(tx, id).await?;
    conversations::remove_post(tx, id).await?;
    sqlx::query("DELETE FROM reblogs WHERE post_id = $1")
        .bind(id)
        .execute(&mut *tx)
        .await?;
    sqlx::query("DELETE FROM post_tags WHERE post_id = $1")
        .bind(id)
        .execute(&mut *tx)
        .await?;
    // Its poll, with our users' votes and their end-of-poll notification.
    sqlx::query("DELETE FROM polls WHERE remote_post_id = $1")
        .bind(id)
        .execute(&mut *tx)
        .await?;
    crate::quotes::forget(tx, id).await?;
    crate::approvals::granted::withdraw(tx, object_id, &inc.actor).await?;
    Ok(Outcome::applied("post deleted"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// R-API: a remote note's `Hashtag` names become tags (and tag URLs) only when
    /// they are names a local post could have made.
    #[test]
    fn remote_hashtag_names_are_checked() {
        let note = serde_json::json!({
            "type": "Note",
            "tag": [
                {"type": "Hashtag", "name": "#x/../../oauth/authorize", "href": "https://r.example/tags/x"},
                {"type": "Hashtag", "name": "#<script>", "href": "https://r.example/tags/s"},
                {"type": "Hashtag", "name": "#a b", "href": "https://r.example/tags/ab"},
                {"type": "Hashtag", "name": "#Rust", "href": "https://r.example/tags/rust"},
                {"type": "Hashtag", "name": "日本語", "href": "https://r.example/tags/j"},
            ],
        });
        assert_eq!(NoteFields::of(&note).tags, vec!["rust", "日本語"]);
    }
}
