//! Local statuses as ActivityPub objects: a `Note`, or a `Question` when the status carries a
//! poll (SPEC.md §8, R-POLL). A new status is delivered to the author's followers as
//! a `Create` in the transaction that stores it (one delivery per inbox, shared inbox
//! preferred), and its URI (`<actor>/statuses/<id>`) serves the object, so remote servers can
//! show the poll and their users can vote on it.
//!
//! Addressing follows the status's visibility as Mastodon's does: public (to Public, cc
//! followers), unlisted (to followers, cc Public), private (followers only), direct (only the
//! mentioned); mentioned remote actors are always addressed. A deleted status is announced as
//! a `Delete` of a `Tombstone` to the same inboxes its `Create` went to.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use sqlx::PgConnection;
use uuid::Uuid;

use crate::content::{self, Mention};
use crate::federation::Federation;
use crate::federation::context;
use crate::federation::outbound::delivery::{Recipient, queue_activity, requeue_activity};
use crate::federation::outbound::mentions;
use crate::federation::outbound::policy::{Audience, interaction_policy};
use crate::federation::vocab::PUBLIC;
use crate::media::{self, Drive};
use crate::polls::{self, PollTally};
use crate::quotes::Policy;
use crate::statuses::Visibility;

/// A local status as stored, with its poll (and the poll's current counts) if it has one.
pub struct LocalStatus {
    pub id: Uuid,
    pub uri: String,
    pub username: String,
    pub content: String,
    pub created_at: DateTime<Utc>,
    pub poll: Option<PollTally>,
    /// The mentions resolved when it was written (rendered as links, addressed in `cc`).
    pub mentions: Vec<Mention>,
    pub visibility: Visibility,
    pub spoiler_text: String,
    pub sensitive: bool,
    pub language: Option<String>,
    pub in_reply_to_uri: Option<String>,
    pub edited_at: Option<DateTime<Utc>>,
    /// The attached media as ActivityPub `Document`s (empty unless loaded with a drive).
    pub attachments: Vec<Value>,
    /// The instance's custom emojis its text uses, carried as `Emoji` tags.
    pub emojis: Vec<crate::emojis::Emoji>,
    /// The post it quotes, and the quoted author's authorization once granted (`quotes`).
    pub quote: Option<QuoteRef>,
    /// Who may quote it (`quotes::Policy`), advertised in its `interactionPolicy`.
    pub quote_policy: Policy,
    /// A reply still waiting for the remote parent's author to approve it (`approvals`): it
    /// goes to that author alone.
    pub pending_approval: bool,
    /// The approval the parent's author gave it, served as `approvedBy`.
    pub approved_by: Option<String>,
}

/// What a quoting note says of its quote.
pub struct QuoteRef {
    pub uri: String,
    pub authorization: Option<String>,
}

/// `to` and `cc` for a status of `visibility` by `username` mentioning `mentioned`.
pub fn addressing(
    fed: &Federation,
    username: &str,
    visibility: Visibility,
    mentioned: Vec<String>,
) -> (Vec<String>, Vec<String>) {
    let followers = fed.followers(username);
    match visibility {
        Visibility::Public => {
            let mut cc = vec![followers];
            cc.extend(mentioned);
            (vec![PUBLIC.to_string()], cc)
        }
        Visibility::Unlisted => {
            let mut cc = vec![PUBLIC.to_string()];
            cc.extend(mentioned);
            (vec![followers], cc)
        }
        Visibility::Private => (vec![followers], mentioned),
        Visibility::Direct => (mentioned, Vec::new()),
    }
}

/// The status's object: `Note`, or `Question` with `oneOf`/`anyOf` and the current counts
/// (`closed` once it has ended, `endTime` before).
pub fn object(fed: &Federation, s: &LocalStatus) -> Value {
    let actor = fed.actor_iri(&s.username);
    // The same HTML our API shows: the user's text escaped (`<b>` typed is shown, never
    // markup), with links, mentions and hashtags.
    let mut rendered = content::render(&s.content, &s.uri, &s.mentions);
    if let Some(q) = &s.quote {
        // For servers that know no quote term, the quoted post as a link (Mastodon 4.5's
        // fallback; its clients hide `quote-inline`).
        let link = crate::html::escape(&q.uri);
        rendered.html.push_str(&format!(
            "<p class=\"quote-inline\">RE: <a href=\"{link}\">{link}</a></p>"
        ));
    }
    let followers = fed.followers(&s.username);
    let policy = interaction_policy(
        s.visibility,
        s.quote_policy,
        &Audience {
            author: &actor,
            followers: &followers,
            mentioned: &rendered.mentioned,
        },
    );
    let (to, cc) = addressing(fed, &s.username, s.visibility, rendered.mentioned);
    let summary = (!s.spoiler_text.is_empty()).then_some(&s.spoiler_text);
    let mut o = json!({
        "@context": context::ld(),
        "id": s.uri, "type": "Note", "attributedTo": actor,
        "content": rendered.html, "published": s.created_at,
        "to": to, "cc": cc, "tag": rendered.tags,
        "summary": summary, "sensitive": s.sensitive || summary.is_some(),
        "inReplyTo": s.in_reply_to_uri, "attachment": s.attachments,
    });
    if let Some(tags) = o["tag"].as_array_mut() {
        for e in &s.emojis {
            tags.push(json!({
                "id": format!("{}/emojis/{}", fed.urls().origin(), e.id),
                "type": "Emoji", "name": format!(":{}:", e.shortcode),
                "icon": { "type": "Image", "mediaType": e.media_type, "url": e.url },
            }));
        }
    }
    if let Some(lang) = &s.language {
        o["contentMap"] = json!({ lang: rendered.html });
    }
    if let Some(q) = &s.quote {
        // FEP-044f's term, and the ones Misskey and Fedibird read.
        o["quote"] = json!(q.uri);
        o["_misskey_quote"] = json!(q.uri);
        o["quoteUri"] = json!(q.uri);
        if let Some(a) = &q.authorization {
            o["quoteAuthorization"] = json!(a);
        }
    }
    o["interactionPolicy"] = policy;
    if let Some(a) = &s.approved_by {
        // GoToSocial's proof that the parent's author approved the reply (servers that
        // enforce policies check it before they show it).
        o["approvedBy"] = json!(a);
    }
    if let Some(at) = s.edited_at {
        o["updated"] = json!(at);
    }
    if let Some(p) = &s.poll {
        o["type"] = json!("Question");
        let options: Vec<Value> = p
            .options
            .iter()
            .zip(&p.counts)
            .map(|(name, n)| {
                json!({ "type": "Note", "name": name,
                        "replies": { "type": "Collection", "totalItems": n } })
            })
            .collect();
        o[if p.multiple { "anyOf" } else { "oneOf" }] = json!(options);
        o["votersCount"] = json!(p.voters.unwrap_or_default());
        o[if p.expired { "closed" } else { "endTime" }] = json!(p.expires_at);
    }
    o
}

#[derive(sqlx::FromRow)]
struct Row {
    uri: String,
    username: String,
    content: String,
    created_at: DateTime<Utc>,
    poll_id: Option<Uuid>,
    mentions: Value,
    visibility: String,
    spoiler_text: String,
    sensitive: bool,
    language: Option<String>,
    in_reply_to_uri: Option<String>,
    edited_at: Option<DateTime<Utc>>,
    quote_policy: String,
    quoted_uri: Option<String>,
    quote_state: Option<String>,
    quote_authorization: Option<String>,
    pending_approval: bool,
    approved_by: Option<String>,
}

/// Loads a local status (and its poll with current counts) by id, in the caller's connection;
/// with a `drive`, its media as `Document`s too (a status with a poll has none: the API
/// refuses both together, so the poll's own updates need no drive).
pub async fn load(
    conn: &mut PgConnection,
    drive: Option<&Drive>,
    id: Uuid,
) -> Result<Option<LocalStatus>, sqlx::Error> {
    let row: Option<Row> = sqlx::query_as(
        "SELECT s.uri, a.username, s.content, s.created_at, p.id AS poll_id, s.mentions,
                s.visibility, s.spoiler_text, s.sensitive, s.language, s.in_reply_to_uri,
                s.edited_at, s.quote_policy, q.quoted_uri, q.state AS quote_state,
                q.authorization_iri AS quote_authorization, s.pending_approval, s.approved_by
           FROM statuses s JOIN accounts a ON a.id = s.account_id
           LEFT JOIN polls p ON p.status_id = s.id
           LEFT JOIN quotes q ON q.post_id = s.id
          WHERE s.id = $1",
    )
    .bind(id)
    .fetch_optional(&mut *conn)
    .await?;
    let Some(r) = row else {
        return Ok(None);
    };
    let poll = match r.poll_id {
        Some(p) => polls::tally(&mut *conn, p).await?,
        None => None,
    };
    let attachments = match drive {
        Some(d) => media::documents_for(&mut *conn, d, id).await?,
        None => Vec::new(),
    };
    let emojis = crate::emojis::used_in(&mut *conn, &[&r.spoiler_text, &r.content]).await?;
    Ok(Some(LocalStatus {
        emojis,
        id,
        uri: r.uri,
        username: r.username,
        content: r.content,
        created_at: r.created_at,
        poll,
        mentions: mentions::parse_stored(r.mentions),
        visibility: Visibility::parse(&r.visibility).unwrap_or(Visibility::Public),
        spoiler_text: r.spoiler_text,
        sensitive: r.sensitive,
        language: r.language,
        in_reply_to_uri: r.in_reply_to_uri,
        edited_at: r.edited_at,
        attachments,
        quote: r.quoted_uri.map(|uri| QuoteRef {
            uri,
            authorization: r
                .quote_authorization
                .filter(|_| r.quote_state.as_deref() == Some("accepted")),
        }),
        quote_policy: Policy::parse(&r.quote_policy).unwrap_or(Policy::Public),
        pending_approval: r.pending_approval,
        approved_by: r.approved_by,
    }))
}

/// Who hears about a status: the author's followers (unless it is direct), the remote actors
/// it mentions, the remote author of the post it replies to (unless direct) and, for a poll,
/// its remote voters. A reply waiting for approval goes to the parent's author alone
/// (GoToSocial's interaction policies: "do not distribute the activity further").
async fn recipients(
    conn: &mut PgConnection,
    account: Uuid,
    s: &LocalStatus,
    poll: Option<Uuid>,
    mentioned: &[String],
) -> Result<Vec<Recipient>, sqlx::Error> {
    if s.pending_approval {
        let parent: Vec<&str> = s.in_reply_to_uri.as_deref().into_iter().collect();
        return inboxes(conn, account, false, None, &[], &parent).await;
    }
    let wide = s.visibility != Visibility::Direct;
    let mut posts: Vec<&str> = Vec::new();
    if wide {
        posts.extend(s.in_reply_to_uri.as_deref());
        // The quoted author hears of the quote (and of its edits).
        posts.extend(s.quote.as_ref().map(|q| q.uri.as_str()));
    }
    inboxes(conn, account, wide, poll, mentioned, &posts).await
}

/// The remote actors (known inbox, not gone) among: `account`'s followers (when `followers`),
/// the voters of `poll`, `actors`, and the authors of the `posts` named (the one replied to,
/// the one quoted); each once.
pub(crate) async fn inboxes(
    conn: &mut PgConnection,
    account: Uuid,
    followers: bool,
    poll: Option<Uuid>,
    actors: &[String],
    posts: &[&str],
) -> Result<Vec<Recipient>, sqlx::Error> {
    sqlx::query_as(
        "SELECT a.iri AS actor_iri, a.inbox, a.shared_inbox FROM remote_actors a
          WHERE a.gone_at IS NULL
            AND (($4 AND a.iri IN (SELECT actor_iri FROM followers WHERE account_id = $1))
                 OR a.iri IN (SELECT actor_iri FROM poll_votes WHERE poll_id = $2)
                 OR a.iri = ANY($3)
                 OR a.iri IN (SELECT actor FROM remote_posts WHERE iri = ANY($5)))",
    )
    .bind(account)
    .bind(poll)
    .bind(actors)
    .bind(followers)
    .bind(posts)
    .fetch_all(&mut *conn)
    .await
}

/// What is sent about a status.
pub enum Announce<'a> {
    /// A new status, to the followers.
    Create,
    /// Its current object, to the followers and remote voters; `tag` makes the activity id
    /// (`<uri>/updates/<tag>`), so one event is one id however often it is queued.
    Update { tag: &'a str },
    /// Its deletion (a `Tombstone`), to everyone the `Create` went to. Published before the
    /// row is deleted, in the same transaction.
    Delete,
    /// Its `Create` again, once the reply was approved (`approvals`): the same activity, now
    /// carrying `approvedBy`, to those it had not gone to (everyone but the parent's author).
    Approved,
}

/// Queues the activity about a status in the caller's transaction (the one that changed it),
/// one delivery per inbox. A status minted without federation (no actor URI) has no one to
/// tell. Returns how many inboxes it goes to.
pub async fn publish(
    tx: &mut PgConnection,
    fed: &Federation,
    drive: Option<&Drive>,
    account: Uuid,
    status: Uuid,
    what: Announce<'_>,
) -> Result<usize, sqlx::Error> {
    let Some(s) = load(&mut *tx, drive, status).await? else {
        return Ok(0);
    };
    if s.uri != fed.status_iri(&s.username, s.id) {
        return Ok(0);
    }
    let (poll, ty, id) = match what {
        Announce::Create | Announce::Approved => (None, "Create", format!("{}/activity", s.uri)),
        Announce::Update { tag } => (
            s.poll.as_ref().map(|p| p.id),
            "Update",
            format!("{}/updates/{tag}", s.uri),
        ),
        Announce::Delete => (None, "Delete", format!("{}#delete", s.uri)),
    };
    let mentioned: Vec<String> = s.mentions.iter().map(|m| m.href.clone()).collect();
    let to = recipients(&mut *tx, account, &s, poll, &mentioned).await?;
    if to.is_empty() {
        return Ok(0);
    }
    let mut object = object(fed, &s);
    let (to_field, cc_field) = (object["to"].clone(), object["cc"].clone());
    if ty == "Delete" {
        // Only its id is needed to remove it; the addressing stays on the activity.
        object = json!({ "id": s.uri, "type": "Tombstone" });
    }
    let activity = json!({
        "@context": context::ld(),
        "id": id, "type": ty, "actor": fed.actor_iri(&s.username),
        "to": to_field, "cc": cc_field, "object": object,
    });
    match what {
        Announce::Approved => requeue_activity(&mut *tx, fed, account, &activity, &to).await,
        _ => queue_activity(&mut *tx, fed, account, &activity, &to).await,
    }
}
