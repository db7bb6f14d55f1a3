//! Mastodon's Status entity for any id of the one id space: our posts, remote posts and boosts
//! (a boost renders as its own status with the boosted one in `reblog`). Rows, parents,
//! counts, the viewer's flags, mentions and remote authors are each fetched once for the whole
//! page; a local author's Account entity (its counts) and a poll's tally are still one query
//! each per distinct author or poll on the page.
//!
//! Rendering is where who may read is enforced (R-MAPI-VIS): [`render`] keeps only the ids
//! `access::visible` allows the viewer, whatever its caller filtered before (lists also filter
//! in their queries, so their pages are full).

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use sqlx::PgConnection;
use uuid::Uuid;

use super::access;
use crate::content;
use crate::federation::Federation;
use crate::federation::accounts;
use crate::federation::directory::RemoteAccount;
use crate::federation::mentions;
use crate::html;
use crate::web::mastodon::entities;

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
    fed: &Federation,
    viewer: Option<Uuid>,
    ids: &[Uuid],
) -> Result<Vec<Value>, sqlx::Error> {
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
    let posts = render_posts(conn, fed, viewer, &post_ids).await?;

    let boosters: Vec<Author> = reblogs
        .iter()
        .filter_map(|r| match (&r.account_id, &r.actor_iri) {
            (Some(a), _) => Some(Author::Local(*a)),
            (None, Some(i)) => Some(Author::Remote(i.clone())),
            _ => None,
        })
        .collect();
    let accounts = account_entities(conn, fed, &boosters).await?;
    let viewer_reblogged: HashSet<Uuid> = match viewer {
        Some(v) => reblogs
            .iter()
            .filter(|r| r.account_id == Some(v))
            .map(|r| r.id)
            .collect(),
        None => HashSet::new(),
    };
    let mut wrapped: HashMap<Uuid, Value> = HashMap::new();
    for r in &reblogs {
        let booster = match (&r.account_id, &r.actor_iri) {
            (Some(a), _) => accounts.get(&Author::Local(*a)),
            (None, Some(i)) => accounts.get(&Author::Remote(i.clone())),
            _ => None,
        };
        let (Some(inner), Some(booster)) = (posts.get(&r.post_id), booster) else {
            continue;
        };
        wrapped.insert(r.id, reblog_entity(r, inner, booster, &viewer_reblogged));
    }
    Ok(ids
        .iter()
        .filter_map(|id| wrapped.remove(id).or_else(|| posts.get(id).cloned()))
        .collect())
}

/// One status entity, if `id` names one.
pub async fn render_one(
    conn: &mut PgConnection,
    fed: &Federation,
    viewer: Option<Uuid>,
    id: Uuid,
) -> Result<Option<Value>, sqlx::Error> {
    Ok(render(conn, fed, viewer, &[id]).await?.pop())
}

/// A boost as Mastodon shows it: a status of its own, by the booster, empty but for `reblog`.
fn reblog_entity(r: &ReblogRow, inner: &Value, booster: &Value, mine: &HashSet<Uuid>) -> Value {
    let mut inner = inner.clone();
    if mine.contains(&r.id) {
        inner["reblogged"] = json!(true);
    }
    json!({
        "id": r.id.to_string(),
        "uri": r.activity_id,
        "url": inner["url"],
        "created_at": r.created_at,
        "edited_at": null,
        "account": booster,
        "content": "",
        "spoiler_text": "",
        "sensitive": false,
        "visibility": r.visibility,
        "language": null,
        "in_reply_to_id": null,
        "in_reply_to_account_id": null,
        "replies_count": 0,
        "reblogs_count": 0,
        "favourites_count": 0,
        "favourited": inner["favourited"],
        "reblogged": inner["reblogged"],
        "bookmarked": inner["bookmarked"],
        "muted": false,
        "pinned": false,
        "media_attachments": [],
        "mentions": [],
        "tags": [],
        "emojis": [],
        "card": null,
        "poll": null,
        "application": null,
        "filtered": [],
        "reblog": inner,
    })
}

/// Entities of the posts among `ids` (not boosts), keyed by id.
async fn render_posts(
    conn: &mut PgConnection,
    fed: &Federation,
    viewer: Option<Uuid>,
    ids: &[Uuid],
) -> Result<HashMap<Uuid, Value>, sqlx::Error> {
    let local: Vec<LocalRow> = sqlx::query_as(
        "SELECT s.id, s.uri, s.account_id, s.content, s.created_at, s.edited_at, s.visibility,
                s.spoiler_text, s.sensitive, s.language, s.in_reply_to_uri, s.application,
                s.mentions, s.tags, p.id AS poll_id
           FROM statuses s LEFT JOIN polls p ON p.status_id = s.id
          WHERE s.id = ANY($1)",
    )
    .bind(ids)
    .fetch_all(&mut *conn)
    .await?;
    let remote: Vec<RemoteRow> = sqlx::query_as(
        "SELECT id, iri, actor, content, summary, url, coalesce(published, created_at) AS created_at,
                edited_at, visibility, sensitive, language, in_reply_to, mentions, tags, attachments
           FROM remote_posts WHERE id = ANY($1) AND deleted_at IS NULL",
    )
    .bind(ids)
    .fetch_all(&mut *conn)
    .await?;
    if local.is_empty() && remote.is_empty() {
        return Ok(HashMap::new());
    }

    let found: Vec<Uuid> = local
        .iter()
        .map(|r| r.id)
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
    let counts = counts(conn, &found, &uris).await?;
    let flags = match viewer {
        Some(v) => viewer_flags(conn, v, &found, &uris).await?,
        None => HashMap::new(),
    };
    let mention_ids = mention_ids(conn, fed, &local, &remote).await?;

    let authors: Vec<Author> = local
        .iter()
        .map(|r| Author::Local(r.account_id))
        .chain(remote.iter().map(|r| Author::Remote(r.actor.clone())))
        .collect();
    let accounts = account_entities(conn, fed, &authors).await?;

    let mut out = HashMap::new();
    for r in local {
        let Some(account) = accounts.get(&Author::Local(r.account_id)) else {
            continue;
        };
        let stored = mentions::parse_stored(r.mentions);
        let html = content::render(&r.content, &r.uri, &stored).html;
        let poll = match r.poll_id {
            Some(p) => crate::polls::render::poll_of_readable_status(&mut *conn, p, viewer).await?,
            None => None,
        };
        let mentioned: Vec<Value> = stored
            .iter()
            .filter_map(|m| mention_entity(&mention_ids, &m.href, &m.name))
            .collect();
        let mut v = base(
            r.id,
            &r.uri,
            &r.uri,
            r.created_at,
            r.edited_at,
            account,
            html,
            &r.spoiler_text,
            r.sensitive,
            &r.visibility,
            r.language.as_deref(),
        );
        v["mentions"] = json!(mentioned);
        v["tags"] = tags(fed, &r.tags);
        v["poll"] = poll.unwrap_or(Value::Null);
        v["application"] = r.application.unwrap_or(Value::Null);
        v["media_attachments"] = json!([]);
        finish(
            &mut v,
            r.in_reply_to_uri.as_deref(),
            &parents,
            &counts,
            &flags,
            r.id,
        );
        out.insert(r.id, v);
    }
    for r in remote {
        let Some(account) = accounts.get(&Author::Remote(r.actor.clone())) else {
            continue;
        };
        let url = r.url.as_deref().unwrap_or(&r.iri).to_string();
        let mentioned: Vec<Value> = remote_mentions(&r.mentions)
            .iter()
            .filter_map(|(href, name)| mention_entity(&mention_ids, href, name))
            .collect();
        let spoiler = html::to_text(r.summary.as_deref().unwrap_or_default());
        let mut v = base(
            r.id,
            &r.iri,
            &url,
            r.created_at,
            r.edited_at,
            account,
            r.content.unwrap_or_default(),
            &spoiler,
            r.sensitive || !spoiler.is_empty(),
            &r.visibility,
            r.language.as_deref(),
        );
        v["mentions"] = json!(mentioned);
        v["tags"] = tags(fed, &r.tags);
        v["media_attachments"] = remote_attachments(&r.attachments);
        finish(
            &mut v,
            r.in_reply_to.as_deref(),
            &parents,
            &counts,
            &flags,
            r.id,
        );
        out.insert(r.id, v);
    }
    Ok(out)
}

#[allow(clippy::too_many_arguments)]
fn base(
    id: Uuid,
    uri: &str,
    url: &str,
    created_at: DateTime<Utc>,
    edited_at: Option<DateTime<Utc>>,
    account: &Value,
    content: String,
    spoiler_text: &str,
    sensitive: bool,
    visibility: &str,
    language: Option<&str>,
) -> Value {
    json!({
        "id": id.to_string(),
        "uri": uri,
        "url": url,
        "created_at": created_at,
        "edited_at": edited_at,
        "account": account,
        "content": content,
        "spoiler_text": spoiler_text,
        "sensitive": sensitive,
        "visibility": visibility,
        "language": language,
        "in_reply_to_id": null,
        "in_reply_to_account_id": null,
        "reblog": null,
        "replies_count": 0,
        "reblogs_count": 0,
        "favourites_count": 0,
        "favourited": false,
        "reblogged": false,
        "bookmarked": false,
        "muted": false,
        "pinned": false,
        "media_attachments": [],
        "mentions": [],
        "tags": [],
        "emojis": [],
        "card": null,
        "poll": null,
        "application": null,
        "filtered": [],
    })
}

/// Parent ids, counts and the viewer's flags.
fn finish(
    v: &mut Value,
    parent: Option<&str>,
    parents: &HashMap<String, (Uuid, Uuid)>,
    counts: &HashMap<Uuid, Counts>,
    flags: &HashMap<Uuid, Flags>,
    id: Uuid,
) {
    if let Some((pid, author)) = parent.and_then(|p| parents.get(p)) {
        v["in_reply_to_id"] = json!(pid.to_string());
        v["in_reply_to_account_id"] = json!(author.to_string());
    }
    if let Some(c) = counts.get(&id) {
        v["replies_count"] = json!(c.replies);
        v["reblogs_count"] = json!(c.reblogs);
        v["favourites_count"] = json!(c.favourites);
    }
    if let Some(f) = flags.get(&id) {
        v["favourited"] = json!(f.favourited);
        v["reblogged"] = json!(f.reblogged);
        v["bookmarked"] = json!(f.bookmarked);
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

/// Replies we know of, boosts (ours and theirs) and favourites (ours, and remote `Like`s).
async fn counts(
    conn: &mut PgConnection,
    ids: &[Uuid],
    uris: &[String],
) -> Result<HashMap<Uuid, Counts>, sqlx::Error> {
    let rows: Vec<Counts> = sqlx::query_as(
        "SELECT t.id,
                (SELECT count(*) FROM posts c WHERE c.in_reply_to_uri = t.uri) AS replies,
                (SELECT count(*) FROM reblogs r WHERE r.post_id = t.id) AS reblogs,
                (SELECT count(*) FROM favourites f WHERE f.post_id = t.id)
                  + (SELECT count(*) FROM remote_interactions i
                      WHERE i.object = t.uri AND i.kind = 'like' AND i.undone_at IS NULL) AS favourites
           FROM unnest($1::uuid[], $2::text[]) AS t(id, uri)",
    )
    .bind(ids)
    .bind(uris)
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

/// Account ids (and our usernames) of every mentioned actor on the page, by IRI.
async fn mention_ids(
    conn: &mut PgConnection,
    fed: &Federation,
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
    let remote: Vec<(String, Uuid, Value)> =
        sqlx::query_as("SELECT iri, id, document FROM remote_actors WHERE iri = ANY($1)")
            .bind(&hrefs)
            .fetch_all(&mut *conn)
            .await?;
    for (iri, id, doc) in remote {
        let url = doc
            .get("url")
            .and_then(crate::federation::actor::id_of)
            .and_then(html::http_url)
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
        .filter_map(|h| fed.local_username(h).map(str::to_lowercase))
        .collect();
    if !names.is_empty() {
        let rows: Vec<(Uuid, String)> =
            sqlx::query_as("SELECT id, username FROM accounts WHERE lower(username) = ANY($1)")
                .bind(&names)
                .fetch_all(&mut *conn)
                .await?;
        for (id, username) in rows {
            let iri = fed.actor_iri(&username);
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

struct MentionTarget {
    id: Uuid,
    url: String,
    local_username: Option<String>,
}

/// Mastodon's Mention entity, for an actor we know (an unknown one has no account id to give).
fn mention_entity(known: &HashMap<String, MentionTarget>, href: &str, name: &str) -> Option<Value> {
    let t = known.get(href)?;
    let acct = match &t.local_username {
        Some(u) => u.clone(),
        None => name.trim_start_matches('@').to_string(),
    };
    let username = acct.split('@').next().unwrap_or_default().to_string();
    Some(json!({ "id": t.id.to_string(), "username": username, "acct": acct, "url": t.url }))
}

/// Mastodon's Tag entities (in a status: name and url).
fn tags(fed: &Federation, names: &[String]) -> Value {
    json!(
        names
            .iter()
            .map(|n| json!({ "name": n, "url": crate::content::tag_url(&fed.origin, n) }))
            .collect::<Vec<_>>()
    )
}

/// A remote post's `Document`s as MediaAttachment entities, pointing at the remote files
/// (we do not proxy them).
fn remote_attachments(stored: &Value) -> Value {
    let Some(docs) = stored.as_array() else {
        return json!([]);
    };
    json!(
        docs.iter()
            .filter_map(|d| {
                let url = d.get("url").and_then(crate::federation::actor::id_of)?;
                let url = html::http_url(url)?;
                let media_type = d.get("mediaType").and_then(Value::as_str).unwrap_or("");
                let kind = match media_type.split('/').next() {
                    Some("image") if media_type == "image/gif" => "gifv",
                    Some("image") => "image",
                    Some("video") => "video",
                    Some("audio") => "audio",
                    _ => "unknown",
                };
                let width = d.get("width").and_then(Value::as_u64);
                let height = d.get("height").and_then(Value::as_u64);
                let meta = match (width, height) {
                    (Some(w), Some(h)) if h > 0 => json!({ "original": {
                        "width": w, "height": h, "size": format!("{w}x{h}"),
                        "aspect": w as f64 / h as f64 } }),
                    _ => json!({}),
                };
                Some(json!({
                    "id": Uuid::new_v5(&Uuid::NAMESPACE_URL, url.as_bytes()).to_string(),
                    "type": kind,
                    "url": url,
                    "preview_url": url,
                    "remote_url": url,
                    "preview_remote_url": null,
                    "text_url": null,
                    "meta": meta,
                    "description": d.get("name").and_then(Value::as_str),
                    "blurhash": d.get("blurhash").and_then(Value::as_str),
                }))
            })
            .collect::<Vec<_>>()
    )
}

/// Account entities of every author on the page, each fetched once.
async fn account_entities(
    conn: &mut PgConnection,
    fed: &Federation,
    authors: &[Author],
) -> Result<HashMap<Author, Value>, sqlx::Error> {
    let mut out = HashMap::new();
    let mut iris: Vec<String> = Vec::new();
    for a in authors {
        if out.contains_key(a) {
            continue;
        }
        match a {
            Author::Local(id) => {
                if let Some(acc) = accounts::by_id(&mut *conn, *id).await? {
                    let v = entities::local_account(&mut *conn, fed, &acc).await?.0;
                    out.insert(a.clone(), v);
                }
            }
            Author::Remote(iri) => iris.push(iri.clone()),
        }
    }
    if !iris.is_empty() {
        let rows: Vec<RemoteAccount> = sqlx::query_as(
            "SELECT id, iri, handle, inbox, shared_inbox, key_id, public_key_pem, document, fetched_at
               FROM remote_actors WHERE iri = ANY($1)",
        )
        .bind(&iris)
        .fetch_all(&mut *conn)
        .await?;
        for r in rows {
            out.insert(
                Author::Remote(r.iri.clone()),
                entities::remote_account(fed, &r),
            );
        }
    }
    Ok(out)
}

/// Fills the `media_attachments` of our statuses among `entities` (and of the boosted ones
/// inside boosts) from `media::entities_for`, one query for the whole page. `render` leaves
/// them empty because it has no drive (which builds the URLs); every API answer that shows
/// local statuses passes its entities through here.
pub async fn attach_media(
    conn: &mut PgConnection,
    drive: &crate::media::Drive,
    entities: &mut [Value],
) -> Result<(), sqlx::Error> {
    fn id_of(v: &Value) -> Option<Uuid> {
        v["id"].as_str().and_then(|s| Uuid::parse_str(s).ok())
    }
    let ids: Vec<Uuid> = entities
        .iter()
        .flat_map(|e| [id_of(e), id_of(&e["reblog"])])
        .flatten()
        .collect();
    if ids.is_empty() {
        return Ok(());
    }
    let media = crate::media::entities_for(conn, drive, &ids).await?;
    let fill = |v: &mut Value| {
        if let Some(m) = id_of(v).and_then(|id| media.get(&id)) {
            v["media_attachments"] = json!(m);
        }
    };
    for e in entities.iter_mut() {
        fill(e);
        if e["reblog"].is_object() {
            fill(&mut e["reblog"]);
        }
    }
    Ok(())
}
