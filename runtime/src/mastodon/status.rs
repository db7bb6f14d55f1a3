//! Mastodon's `Status` entity for any id of the one id space: our posts, remote posts and
//! boosts (a boost renders as its own status with the boosted one in `reblog`). Rows, parents,
//! counts, the viewer's flags, mentions, authors and media are each fetched once for the whole
//! page; a poll's tally is still one query per poll on the page.
//!
//! Rendering is where who may read is enforced (R-MAPI-VIS): [`render`] keeps only the ids
//! `statuses::access::visible` allows the viewer, whatever its caller filtered before (lists
//! also filter in their queries, so their pages are full).

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;
use sqlx::PgConnection;
use uuid::Uuid;

use super::account::{self, Account};
use super::media::{self, MediaAttachment};
use super::poll::{self, Poll};
use super::quote::{QuoteApproval, Quotes};
use super::{CustomEmoji, Site, Urls};
use crate::content;
use crate::federation::actors::directory::RemoteAccount;
use crate::federation::outbound::mentions;
use crate::html;
use crate::statuses::{access, conversation_mutes, pins};

#[derive(Clone, Debug, Serialize)]
pub struct Status {
    pub id: String,
    pub uri: String,
    pub url: String,
    pub created_at: DateTime<Utc>,
    pub edited_at: Option<DateTime<Utc>>,
    /// Shared by every status of the page by the same author.
    pub account: Arc<Account>,
    pub content: String,
    pub spoiler_text: String,
    pub sensitive: bool,
    pub visibility: String,
    pub language: Option<String>,
    pub in_reply_to_id: Option<String>,
    pub in_reply_to_account_id: Option<String>,
    pub reblog: Option<Box<Status>>,
    pub replies_count: i64,
    pub reblogs_count: i64,
    pub favourites_count: i64,
    pub favourited: bool,
    pub reblogged: bool,
    pub bookmarked: bool,
    pub muted: bool,
    pub pinned: bool,
    pub media_attachments: Vec<MediaAttachment>,
    pub mentions: Vec<Mention>,
    pub tags: Vec<Tag>,
    pub emojis: Vec<CustomEmoji>,
    /// Emoji reactions by emoji (Hollo's and Fedibird's `emoji_reactions`).
    pub emoji_reactions: Vec<super::reaction::EmojiReaction>,
    /// The first link's preview, once a worker fetched it (`cards`).
    pub card: Option<super::preview_card::PreviewCard>,
    pub poll: Option<Poll>,
    /// The post it quotes and whether the quoted author agreed (Mastodon 4.5).
    pub quote: Option<super::quote::Quote<Status>>,
    /// Who may quote it, and whether the viewer may.
    pub quote_approval: QuoteApproval,
    /// Pleroma's and Akkoma's extension object, where their clients (megalodon's Pleroma
    /// client among them) read reactions and quotes.
    pub pleroma: Pleroma,
    /// The client that posted it (`{name, website}`), as stored at posting time.
    pub application: Option<Value>,
    /// The viewer's filters this status matches where it is shown (`filters::active`); a
    /// boost carries its boosted status's, as on Mastodon.
    pub filtered: Vec<super::FilterResult>,
    /// The source text, only in the answer to a deletion ("delete and redraft").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

/// The part of Pleroma's `pleroma` object this server has: the reactions (as in
/// `emoji_reactions`) and the id of the quoted status the viewer is shown.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Pleroma {
    pub emoji_reactions: Vec<super::reaction::EmojiReaction>,
    pub quote_id: Option<String>,
}

/// A mentioned account we know (an unknown one has no account id to give).
#[derive(Clone, Debug, Serialize)]
pub struct Mention {
    pub id: String,
    pub username: String,
    pub acct: String,
    pub url: String,
}

/// A hashtag in a status: its name and its page here.
#[derive(Clone, Debug, Serialize)]
pub struct Tag {
    pub name: String,
    pub url: Option<String>,
}

impl Status {
    /// Fills `pleroma` from what the status shows (once its quote is attached).
    fn mirror_for_pleroma(&mut self) {
        self.pleroma.emoji_reactions = self.emoji_reactions.clone();
        self.pleroma.quote_id = match &self.quote {
            Some(super::quote::Quote::Full { quoted_status, .. }) => {
                quoted_status.as_ref().map(|q| q.id.clone())
            }
            Some(super::quote::Quote::Shallow {
                quoted_status_id, ..
            }) => quoted_status_id.clone(),
            None => None,
        };
    }

    /// The status's id as a UUID (every status this module renders has one).
    pub fn uuid(&self) -> Option<Uuid> {
        Uuid::parse_str(&self.id).ok()
    }

    /// A status with every count and flag at its default.
    fn new(id: Uuid, uri: String, url: String, account: Arc<Account>) -> Self {
        Status {
            id: id.to_string(),
            uri,
            url,
            created_at: DateTime::<Utc>::MIN_UTC,
            edited_at: None,
            account,
            content: String::new(),
            spoiler_text: String::new(),
            sensitive: false,
            visibility: String::new(),
            language: None,
            in_reply_to_id: None,
            in_reply_to_account_id: None,
            reblog: None,
            replies_count: 0,
            reblogs_count: 0,
            favourites_count: 0,
            favourited: false,
            reblogged: false,
            bookmarked: false,
            muted: false,
            pinned: false,
            media_attachments: Vec::new(),
            mentions: Vec::new(),
            tags: Vec::new(),
            emojis: Vec::new(),
            emoji_reactions: Vec::new(),
            card: None,
            poll: None,
            quote: None,
            quote_approval: QuoteApproval {
                automatic: Vec::new(),
                manual: Vec::new(),
                current_user: "unknown",
            },
            pleroma: Pleroma::default(),
            application: None,
            filtered: Vec::new(),
            text: None,
        }
    }
}

/// One of our statuses as stored.
#[derive(sqlx::FromRow)]
struct LocalRow {
    id: Uuid,
    uri: String,
    account_id: Uuid,
    content: String,
    created_at: DateTime<Utc>,
    edited_at: Option<DateTime<Utc>>,
    visibility: String,
    spoiler_text: String,
    sensitive: bool,
    language: Option<String>,
    in_reply_to_uri: Option<String>,
    application: Option<Value>,
    mentions: Value,
    tags: Vec<String>,
    poll_id: Option<Uuid>,
    quote_policy: String,
}

/// A remote post as stored (sanitized when it arrived).
#[derive(sqlx::FromRow)]
struct RemoteRow {
    id: Uuid,
    iri: String,
    actor: String,
    content: Option<String>,
    summary: Option<String>,
    url: Option<String>,
    created_at: DateTime<Utc>,
    edited_at: Option<DateTime<Utc>>,
    visibility: String,
    sensitive: bool,
    language: Option<String>,
    in_reply_to: Option<String>,
    mentions: Value,
    tags: Vec<String>,
    attachments: Value,
    /// The note's `tag` as received (its `Emoji` tags are the status's emojis).
    tag_json: Option<Value>,
    /// The note's `interactionPolicy` as received (its quote policy).
    interaction_policy: Option<Value>,
    /// Its poll (a `Question`'s, `polls::question`).
    poll_id: Option<Uuid>,
}

#[derive(sqlx::FromRow)]
struct ReblogRow {
    id: Uuid,
    post_id: Uuid,
    activity_id: String,
    account_id: Option<Uuid>,
    actor_iri: Option<String>,
    visibility: String,
    created_at: DateTime<Utc>,
}

impl ReblogRow {
    fn booster(&self) -> Option<Author> {
        match (&self.account_id, &self.actor_iri) {
            (Some(a), _) => Some(Author::Local(*a)),
            (None, Some(i)) => Some(Author::Remote(i.clone())),
            _ => None,
        }
    }
}

/// Who an entity is by: a local account or a remote actor.
#[derive(Clone, PartialEq, Eq, Hash)]
enum Author {
    Local(Uuid),
    Remote(String),
}

/// Status entities for `ids` (posts or boosts) that `viewer` may read, in the order given;
/// ids that name nothing, a deleted post, or a status the viewer may not read are left out.
/// `viewer` also sets `favourited`, `reblogged`, `bookmarked` and the poll's `voted`.
pub async fn render(
    conn: &mut PgConnection,
    site: Site<'_>,
    viewer: Option<Uuid>,
    ids: &[Uuid],
) -> Result<Vec<Status>, sqlx::Error> {
    let readable = access::visible(conn, viewer, ids).await?;
    let ids: Vec<Uuid> = ids
        .iter()
        .copied()
        .filter(|id| readable.contains(id))
        .collect();
    let ids = ids.as_slice();
    let reblogs: Vec<ReblogRow> = sqlx::query_as(
        "SELECT id, post_id, activity_id, account_id, actor_iri, visibility, created_at
           FROM reblogs WHERE id = ANY($1)",
    )
    .bind(ids)
    .fetch_all(&mut *conn)
    .await?;
    let mut post_ids: Vec<Uuid> = ids.to_vec();
    post_ids.extend(reblogs.iter().map(|r| r.post_id));
    let mut posts = render_posts(conn, site, viewer, &post_ids).await?;
    let found: Vec<Uuid> = posts.keys().copied().collect();
    let quotes = Quotes::of(conn, &found).await?;
    let quoted = render_quoted(conn, site, viewer, &quotes.quoted_ids()).await?;
    for (id, s) in posts.iter_mut() {
        s.quote = quotes.full(*id, &quoted);
        s.mirror_for_pleroma();
    }

    let boosters: Vec<Author> = reblogs.iter().filter_map(ReblogRow::booster).collect();
    let accounts = accounts_of(conn, site.urls, &boosters).await?;
    let mut wrapped: HashMap<Uuid, Status> = HashMap::new();
    for r in &reblogs {
        let booster = r.booster().and_then(|b| accounts.get(&b));
        let (Some(inner), Some(booster)) = (posts.get(&r.post_id), booster) else {
            continue;
        };
        let mine = viewer.is_some() && r.account_id == viewer;
        wrapped.insert(r.id, reblog_entity(r, inner, booster.clone(), mine));
    }
    Ok(ids
        .iter()
        .filter_map(|id| wrapped.remove(id).or_else(|| posts.remove(id)))
        .collect())
}

/// The quoted posts among `ids` the viewer may read, each with its own quote shallow.
async fn render_quoted(
    conn: &mut PgConnection,
    site: Site<'_>,
    viewer: Option<Uuid>,
    ids: &[Uuid],
) -> Result<HashMap<Uuid, Status>, sqlx::Error> {
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    let readable = access::visible(conn, viewer, ids).await?;
    let ids: Vec<Uuid> = readable.into_iter().collect();
    let mut posts = render_posts(conn, site, viewer, &ids).await?;
    let quotes = Quotes::of(conn, &ids).await?;
    let inner = access::visible(conn, viewer, &quotes.quoted_ids()).await?;
    for (id, s) in posts.iter_mut() {
        s.quote = quotes.shallow(*id, &inner);
        s.mirror_for_pleroma();
    }
    Ok(posts)
}

/// One status entity, if `id` names one the viewer may read.
pub async fn render_one(
    conn: &mut PgConnection,
    site: Site<'_>,
    viewer: Option<Uuid>,
    id: Uuid,
) -> Result<Option<Status>, sqlx::Error> {
    Ok(render(conn, site, viewer, &[id]).await?.pop())
}

/// A boost as Mastodon shows it: a status of its own, by the booster, empty but for `reblog`.
fn reblog_entity(r: &ReblogRow, inner: &Status, booster: Arc<Account>, mine: bool) -> Status {
    let mut inner = inner.clone();
    if mine {
        inner.reblogged = true;
    }
    let mut s = Status::new(r.id, r.activity_id.clone(), inner.url.clone(), booster);
    s.created_at = r.created_at;
    s.visibility = r.visibility.clone();
    s.favourited = inner.favourited;
    s.reblogged = inner.reblogged;
    s.bookmarked = inner.bookmarked;
    s.reblog = Some(Box::new(inner));
    s
}

/// The query of `RemoteRow`s by id (`$1`). What it reads is bounded (`bounds`) whenever the
/// post was stored: its lists are sliced and its texts cut here too, for posts stored before
/// the bounds, so a rendered status costs what the bounds allow, whatever its row holds.
fn remote_rows_sql() -> &'static str {
    use crate::federation::bounds;
    static SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        format!(
            "SELECT id, iri, actor, left(content, {content}) AS content,
                    left(summary, {summary}) AS summary, url,
                    coalesce(published, created_at) AS created_at, edited_at, visibility,
                    sensitive, language, in_reply_to,
                    jsonb_path_query_array(mentions, '$[0 to {tags}]') AS mentions,
                    tags[1:{kind}] AS tags,
                    jsonb_path_query_array(attachments, '$[0 to {attachments}]') AS attachments,
                    jsonb_path_query_array(body, '$.tag[0 to {all_tags}]') AS tag_json,
                    body->'interactionPolicy' AS interaction_policy,
                    (SELECT p.id FROM polls p WHERE p.remote_post_id = remote_posts.id) AS poll_id
               FROM remote_posts WHERE id = ANY($1) AND deleted_at IS NULL",
            // Sanitized HTML of a bounded `content` may be longer than it (an escaped `<`).
            content = 4 * bounds::MAX_CONTENT_BYTES,
            summary = 4 * bounds::MAX_SUMMARY_BYTES,
            tags = bounds::MAX_TAGS_PER_KIND - 1,
            kind = bounds::MAX_TAGS_PER_KIND,
            attachments = bounds::MAX_ATTACHMENTS - 1,
            all_tags = 4 * bounds::MAX_TAGS_PER_KIND - 1,
        )
    });
    &SQL
}

/// A remote post's stored HTML as shown: as stored, unless `remote_rows_sql` had to cut it (a
/// post stored before the bounds), when the cut is sanitized again so it stays well-formed.
fn bounded_html(html: String) -> String {
    if html.len() < 4 * crate::federation::bounds::MAX_CONTENT_BYTES {
        return html;
    }
    html::sanitize_remote(&html)
}

/// Entities of the posts among `ids` (not boosts), keyed by id.
async fn render_posts(
    conn: &mut PgConnection,
    site: Site<'_>,
    viewer: Option<Uuid>,
    ids: &[Uuid],
) -> Result<HashMap<Uuid, Status>, sqlx::Error> {
    let local: Vec<LocalRow> = sqlx::query_as(
        "SELECT s.id, s.uri, s.account_id, s.content, s.created_at, s.edited_at, s.visibility,
                s.spoiler_text, s.sensitive, s.language, s.in_reply_to_uri, s.application,
                s.mentions, s.tags, p.id AS poll_id, s.quote_policy
           FROM statuses s LEFT JOIN polls p ON p.status_id = s.id
          WHERE s.id = ANY($1)",
    )
    .bind(ids)
    .fetch_all(&mut *conn)
    .await?;
    let remote: Vec<RemoteRow> = sqlx::query_as(sqlx::AssertSqlSafe(remote_rows_sql()))
        .bind(ids)
        .fetch_all(&mut *conn)
        .await?;
    if local.is_empty() && remote.is_empty() {
        return Ok(HashMap::new());
    }

    let local_ids: Vec<Uuid> = local.iter().map(|r| r.id).collect();
    let found: Vec<Uuid> = local_ids
        .iter()
        .copied()
        .chain(remote.iter().map(|r| r.id))
        .collect();
    let uris: Vec<String> = local
        .iter()
        .map(|r| r.uri.clone())
        .chain(remote.iter().map(|r| r.iri.clone()))
        .collect();
    let parent_uris: Vec<String> = local
        .iter()
        .filter_map(|r| r.in_reply_to_uri.clone())
        .chain(remote.iter().filter_map(|r| r.in_reply_to.clone()))
        .collect();
    let parents = parents(conn, &parent_uris).await?;
    let counts = counts(conn, viewer, &found, &uris).await?;
    let flags = match viewer {
        Some(v) => viewer_flags(conn, v, &found, &uris).await?,
        None => HashMap::new(),
    };
    let muted = match viewer {
        Some(v) => conversation_mutes::muted_among(conn, v, &found).await?,
        None => Default::default(),
    };
    let pinned = match viewer {
        Some(v) => pins::pinned_among(conn, v, &local_ids).await?,
        None => Default::default(),
    };
    let mention_ids = mention_ids(conn, site.urls, &local, &remote).await?;
    let mut media = media::of_statuses(conn, site.drive, &local_ids).await?;
    let mut cards = super::preview_card::of_posts(conn, site.drive, &found).await?;
    let mut reactions = super::reaction::of_posts(conn, site.urls, viewer, &found).await?;

    let authors: Vec<Author> = local
        .iter()
        .map(|r| Author::Local(r.account_id))
        .chain(remote.iter().map(|r| Author::Remote(r.actor.clone())))
        .collect();
    let accounts = accounts_of(conn, site.urls, &authors).await?;
    // Whether the viewer follows them matters only for "followers may quote" posts of others:
    // most pages have none, and ask nothing.
    let asked: Vec<Uuid> = local
        .iter()
        .filter(|r| r.quote_policy == "followers" && Some(r.account_id) != viewer)
        .map(|r| r.account_id)
        .collect();
    let followed = match viewer {
        Some(v) if !asked.is_empty() => {
            followed_among(conn, site.urls, v, &asked, &accounts).await?
        }
        _ => Default::default(),
    };

    // Our posts' custom emojis, as their text uses them (one query for the page).
    let texts: Vec<String> = local
        .iter()
        .map(|r| format!("{} {}", r.spoiler_text, r.content))
        .collect();
    let text_refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let mut local_emojis = crate::emojis::entities_for(conn, &text_refs)
        .await?
        .into_iter();

    let mut out = HashMap::new();
    for r in local {
        let emojis = local_emojis.next().unwrap_or_default();
        let Some(account) = accounts.get(&Author::Local(r.account_id)) else {
            continue;
        };
        let stored = mentions::parse_stored(r.mentions);
        let mut s = Status::new(r.id, r.uri.clone(), r.uri.clone(), account.clone());
        s.content = content::render(&r.content, &r.uri, &stored).html;
        s.created_at = r.created_at;
        s.edited_at = r.edited_at;
        s.spoiler_text = r.spoiler_text;
        s.sensitive = r.sensitive;
        s.visibility = r.visibility;
        s.language = r.language;
        s.mentions = stored
            .iter()
            .filter_map(|m| mention_entity(&mention_ids, &m.href, &m.name))
            .collect();
        s.tags = tags(site.urls, &r.tags);
        s.poll = match r.poll_id {
            Some(p) => poll::of_readable_status(&mut *conn, p, viewer).await?,
            None => None,
        };
        s.application = r.application;
        s.emojis = emojis;
        s.media_attachments = media.remove(&r.id).unwrap_or_default();
        s.card = cards.remove(&r.id);
        s.emoji_reactions = reactions.remove(&r.id).unwrap_or_default();
        finish(
            &mut s,
            r.in_reply_to_uri.as_deref(),
            &parents,
            &counts,
            &flags,
            r.id,
        );
        s.muted = muted.contains(&r.id);
        s.pinned = pinned.contains(&r.id);
        s.quote_approval = local_approval(
            &r.quote_policy,
            &s.visibility,
            viewer.map(|v| v == r.account_id),
            followed.contains(&Author::Local(r.account_id)),
        );
        out.insert(r.id, s);
    }
    for r in remote {
        let Some(account) = accounts.get(&Author::Remote(r.actor.clone())) else {
            continue;
        };
        let url = r
            .url
            .clone()
            .filter(|u| u.len() <= crate::federation::bounds::MAX_STRING_BYTES)
            .unwrap_or_else(|| r.iri.clone());
        let mut s = Status::new(r.id, r.iri, url, account.clone());
        s.mentions = remote_mentions(&r.mentions)
            .iter()
            .filter_map(|(href, name)| mention_entity(&mention_ids, href, name))
            .collect();
        s.spoiler_text = html::to_text(r.summary.as_deref().unwrap_or_default());
        s.sensitive = r.sensitive || !s.spoiler_text.is_empty();
        s.content = r.content.map(bounded_html).unwrap_or_default();
        s.created_at = r.created_at;
        s.edited_at = r.edited_at;
        s.visibility = r.visibility;
        s.language = r.language;
        s.tags = tags(site.urls, &r.tags);
        s.media_attachments = MediaAttachment::remote_all(site.urls, &r.attachments);
        s.poll = match r.poll_id {
            Some(p) => poll::of_readable_status(&mut *conn, p, viewer).await?,
            None => None,
        };
        s.emojis = CustomEmoji::from_tags(site.urls, r.tag_json.as_ref());
        s.card = cards.remove(&r.id);
        s.emoji_reactions = reactions.remove(&r.id).unwrap_or_default();
        finish(
            &mut s,
            r.in_reply_to.as_deref(),
            &parents,
            &counts,
            &flags,
            r.id,
        );
        s.muted = muted.contains(&r.id);
        s.quote_approval = remote_approval(r.interaction_policy.as_ref(), viewer.is_some());
        out.insert(r.id, s);
    }
    Ok(out)
}

/// Our status's `quote_approval`: its policy, as far as its visibility lets it (only public
/// and unlisted statuses are quotable by others); `own` is whether the viewer is its author
/// (`None`: no viewer), `follows` whether the viewer follows the author.
fn local_approval(
    policy: &str,
    visibility: &str,
    own: Option<bool>,
    follows: bool,
) -> QuoteApproval {
    let open = matches!(visibility, "public" | "unlisted");
    let policy = crate::quotes::Policy::parse(policy).unwrap_or(crate::quotes::Policy::Nobody);
    let automatic = match (open, policy) {
        (true, crate::quotes::Policy::Public) => vec!["public".to_string()],
        (true, crate::quotes::Policy::Followers) => vec!["followers".to_string()],
        _ => Vec::new(),
    };
    let current_user = match own {
        None => "unknown",
        Some(true) => "automatic",
        Some(false) => match (open, policy) {
            (true, crate::quotes::Policy::Public) => "automatic",
            (true, crate::quotes::Policy::Followers) if follows => "automatic",
            _ => "denied",
        },
    };
    QuoteApproval {
        automatic,
        manual: Vec::new(),
        current_user,
    }
}

/// A remote status's `quote_approval`, from its `interactionPolicy.canQuote`; one without a
/// policy (software before FEP-044f) is quotable, as `quotes` treats it.
fn remote_approval(policy: Option<&Value>, viewer: bool) -> QuoteApproval {
    let doc = policy.map(|p| serde_json::json!({ "interactionPolicy": p }));
    let Some(p) = doc.as_ref().and_then(crate::quotes::remote_policy) else {
        return QuoteApproval {
            automatic: vec!["public".to_string()],
            manual: Vec::new(),
            current_user: if viewer { "automatic" } else { "unknown" },
        };
    };
    let automatic = crate::quotes::RemotePolicy::names(&p.automatic, None);
    let manual = crate::quotes::RemotePolicy::names(&p.manual, None);
    let current_user = match (viewer, automatic.is_empty(), manual.is_empty()) {
        (false, _, _) => "unknown",
        (true, false, _) => "automatic",
        (true, true, false) => "manual",
        (true, true, true) => "denied",
    };
    QuoteApproval {
        automatic,
        manual,
        current_user,
    }
}

/// The local authors among `asked` whose follow by `viewer` was accepted.
async fn followed_among(
    conn: &mut PgConnection,
    urls: Urls<'_>,
    viewer: Uuid,
    asked: &[Uuid],
    accounts: &HashMap<Author, Arc<Account>>,
) -> Result<std::collections::HashSet<Author>, sqlx::Error> {
    let iris: HashMap<String, Author> = asked
        .iter()
        .map(|id| Author::Local(*id))
        .filter_map(|a| Some((urls.actor(&accounts.get(&a)?.username), a)))
        .collect();
    let keys: Vec<&String> = iris.keys().collect();
    let rows: Vec<String> = sqlx::query_scalar(
        "SELECT target_iri FROM follows WHERE account_id = $1 AND state = 'accepted'
            AND target_iri = ANY($2)",
    )
    .bind(viewer)
    .bind(keys)
    .fetch_all(conn)
    .await?;
    Ok(rows.iter().filter_map(|i| iris.get(i).cloned()).collect())
}

/// Parent ids, counts and the viewer's flags.
fn finish(
    s: &mut Status,
    parent: Option<&str>,
    parents: &HashMap<String, (Uuid, Uuid)>,
    counts: &HashMap<Uuid, Counts>,
    flags: &HashMap<Uuid, Flags>,
    id: Uuid,
) {
    if let Some((pid, author)) = parent.and_then(|p| parents.get(p)) {
        s.in_reply_to_id = Some(pid.to_string());
        s.in_reply_to_account_id = Some(author.to_string());
    }
    if let Some(c) = counts.get(&id) {
        s.replies_count = c.replies;
        s.reblogs_count = c.reblogs;
        s.favourites_count = c.favourites;
    }
    if let Some(f) = flags.get(&id) {
        s.favourited = f.favourited;
        s.reblogged = f.reblogged;
        s.bookmarked = f.bookmarked;
    }
}

/// Known parents by IRI: their id and their author's Account id.
async fn parents(
    conn: &mut PgConnection,
    uris: &[String],
) -> Result<HashMap<String, (Uuid, Uuid)>, sqlx::Error> {
    if uris.is_empty() {
        return Ok(HashMap::new());
    }
    let rows: Vec<(String, Uuid, Uuid)> =
        sqlx::query_as("SELECT uri, id, author_id FROM posts WHERE uri = ANY($1)")
            .bind(uris)
            .fetch_all(conn)
            .await?;
    Ok(rows.into_iter().map(|(u, i, a)| (u, (i, a))).collect())
}

#[derive(Default, sqlx::FromRow)]
struct Counts {
    id: Uuid,
    replies: i64,
    reblogs: i64,
    favourites: i64,
}

/// Replies we know of that `viewer` may read (R-MAPI-VIS: a direct or followers-only reply
/// is not counted for someone who may not read it, so its existence does not show; one of
/// ours still waiting for the post's author to approve it counts for its author alone,
/// `approvals`), boosts (ours and theirs) and favourites (ours, and remote `Like`s), of ours
/// none still waiting for approval.
async fn counts(
    conn: &mut PgConnection,
    viewer: Option<Uuid>,
    ids: &[Uuid],
    uris: &[String],
) -> Result<HashMap<Uuid, Counts>, sqlx::Error> {
    let rows: Vec<Counts> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT t.id,
                (SELECT count(*) FROM posts c WHERE c.in_reply_to_uri = t.uri AND {}) AS replies,
                (SELECT count(*) FROM reblogs r
                  WHERE r.post_id = t.id AND NOT r.pending_approval) AS reblogs,
                (SELECT count(*) FROM favourites f
                  WHERE f.post_id = t.id AND NOT f.pending_approval)
                  + (SELECT count(*) FROM remote_interactions i
                      WHERE i.object = t.uri AND i.kind = 'like' AND i.undone_at IS NULL) AS favourites
           FROM unnest($1::uuid[], $2::text[]) AS t(id, uri)",
        access::visible_sql("c", 3)
    )))
    .bind(ids)
    .bind(uris)
    .bind(viewer)
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|c| (c.id, c)).collect())
}

#[derive(sqlx::FromRow)]
struct Flags {
    id: Uuid,
    favourited: bool,
    reblogged: bool,
    bookmarked: bool,
}

async fn viewer_flags(
    conn: &mut PgConnection,
    viewer: Uuid,
    ids: &[Uuid],
    uris: &[String],
) -> Result<HashMap<Uuid, Flags>, sqlx::Error> {
    let rows: Vec<Flags> = sqlx::query_as(
        "SELECT t.id,
                EXISTS (SELECT 1 FROM favourites WHERE account_id = $3 AND post_id = t.id) AS favourited,
                EXISTS (SELECT 1 FROM reblogs WHERE account_id = $3 AND post_id = t.id) AS reblogged,
                EXISTS (SELECT 1 FROM bookmarks WHERE account_id = $3 AND post_iri = t.uri) AS bookmarked
           FROM unnest($1::uuid[], $2::text[]) AS t(id, uri)",
    )
    .bind(ids)
    .bind(uris)
    .bind(viewer)
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|f| (f.id, f)).collect())
}

/// `[{"href", "name"}]` as stored for a remote post.
fn remote_mentions(stored: &Value) -> Vec<(String, String)> {
    stored
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|m| {
                    let href = m.get("href")?.as_str()?;
                    let name = m.get("name").and_then(Value::as_str).unwrap_or(href);
                    Some((href.to_string(), name.to_string()))
                })
                .collect()
        })
        .unwrap_or_default()
}

struct MentionTarget {
    id: Uuid,
    url: String,
    local_username: Option<String>,
}

/// Account ids (and our usernames) of every mentioned actor on the page, by IRI.
async fn mention_ids(
    conn: &mut PgConnection,
    urls: Urls<'_>,
    local: &[LocalRow],
    remote: &[RemoteRow],
) -> Result<HashMap<String, MentionTarget>, sqlx::Error> {
    let mut hrefs: Vec<String> = Vec::new();
    for r in local {
        if let Some(a) = r.mentions.as_array() {
            hrefs.extend(
                a.iter()
                    .filter_map(|m| m.get("href").and_then(Value::as_str).map(str::to_string)),
            );
        }
    }
    for r in remote {
        hrefs.extend(remote_mentions(&r.mentions).into_iter().map(|(h, _)| h));
    }
    if hrefs.is_empty() {
        return Ok(HashMap::new());
    }
    let mut out = HashMap::new();
    // Only the profile URL of each: the rest of a mentioned actor's document is not shown.
    let remote: Vec<(String, Uuid, Value)> = sqlx::query_as(
        "SELECT iri, id, coalesce(document->'url', 'null') FROM remote_actors WHERE iri = ANY($1)",
    )
    .bind(&hrefs)
    .fetch_all(&mut *conn)
    .await?;
    for (iri, id, url) in remote {
        let url = crate::federation::actors::actor::id_of(&url)
            .and_then(html::http_url)
            .filter(|u| u.len() <= crate::federation::bounds::MAX_STRING_BYTES)
            .unwrap_or(&iri)
            .to_string();
        out.insert(
            iri,
            MentionTarget {
                id,
                url,
                local_username: None,
            },
        );
    }
    let names: Vec<String> = hrefs
        .iter()
        .filter_map(|h| urls.local_username(h).map(str::to_lowercase))
        .collect();
    if !names.is_empty() {
        let rows: Vec<(Uuid, String)> =
            sqlx::query_as("SELECT id, username FROM accounts WHERE lower(username) = ANY($1)")
                .bind(&names)
                .fetch_all(&mut *conn)
                .await?;
        for (id, username) in rows {
            let iri = urls.actor(&username);
            out.insert(
                iri.clone(),
                MentionTarget {
                    id,
                    url: iri,
                    local_username: Some(username),
                },
            );
        }
    }
    Ok(out)
}

fn mention_entity(
    known: &HashMap<String, MentionTarget>,
    href: &str,
    name: &str,
) -> Option<Mention> {
    let t = known.get(href)?;
    let acct = match &t.local_username {
        Some(u) => u.clone(),
        // As `normalize` cuts a tag's strings, for posts stored before the bounds.
        None => crate::federation::bounds::cut_str(
            name,
            crate::federation::bounds::MAX_TAG_STRING_BYTES,
        )
        .trim_start_matches('@')
        .to_string(),
    };
    Some(Mention {
        id: t.id.to_string(),
        username: acct.split('@').next().unwrap_or_default().to_string(),
        url: t.url.clone(),
        acct,
    })
}

fn tags(urls: Urls<'_>, names: &[String]) -> Vec<Tag> {
    names
        .iter()
        .map(|n| Tag {
            name: n.clone(),
            url: urls.tag(n),
        })
        .collect()
}

/// Account entities of every author on the page: ours in one query, remote ones in another.
async fn accounts_of(
    conn: &mut PgConnection,
    urls: Urls<'_>,
    authors: &[Author],
) -> Result<HashMap<Author, Arc<Account>>, sqlx::Error> {
    let mut local: Vec<Uuid> = Vec::new();
    let mut iris: Vec<String> = Vec::new();
    for a in authors {
        match a {
            Author::Local(id) => local.push(*id),
            Author::Remote(iri) => iris.push(iri.clone()),
        }
    }
    local.sort_unstable();
    local.dedup();
    iris.sort_unstable();
    iris.dedup();
    let mut out: HashMap<Author, Arc<Account>> = account::locals(conn, urls, &local)
        .await?
        .into_iter()
        .map(|(id, a)| (Author::Local(id), Arc::new(a)))
        .collect();
    if !iris.is_empty() {
        let rows: Vec<RemoteAccount> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {} FROM remote_actors WHERE iri = ANY($1)",
            crate::federation::actors::directory::remote_columns()
        )))
        .bind(&iris)
        .fetch_all(&mut *conn)
        .await?;
        for r in rows {
            out.insert(
                Author::Remote(r.iri.clone()),
                Arc::new(account::remote(urls, &r)),
            );
        }
    }
    Ok(out)
}
