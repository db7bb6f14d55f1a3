//! Mastodon's `Account` entity — string ids, `acct` (`name` for ours, `name@host` for remote),
//! profile text as HTML, counts, `fields`, `emojis` and the default images every client
//! expects to load — and the `CredentialAccount` (the Account plus what the owner edits).

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use super::{CustomEmoji, Urls};
use crate::accounts;
use crate::federation::actors::directory::{Found, RemoteAccount};
use crate::federation::actors::profiles::{self, Field as ProfileField};
use crate::federation::bounds;
use crate::html;

#[derive(Clone, Debug, Serialize)]
pub struct Account {
    pub id: String,
    pub username: String,
    pub acct: String,
    /// Plain text, as Mastodon serves it: clients escape display names themselves.
    pub display_name: String,
    pub locked: bool,
    pub bot: bool,
    pub discoverable: bool,
    pub group: bool,
    pub created_at: DateTime<Utc>,
    pub note: String,
    pub url: String,
    pub uri: String,
    pub avatar: String,
    pub avatar_static: String,
    pub header: String,
    pub header_static: String,
    pub followers_count: i64,
    pub following_count: i64,
    pub statuses_count: i64,
    /// A date (`YYYY-MM-DD`), as Mastodon gives it.
    pub last_status_at: Option<String>,
    pub emojis: Vec<CustomEmoji>,
    pub fields: Vec<Field>,
}

/// A profile field: the name is plain text, the value HTML.
#[derive(Clone, Debug, Serialize)]
pub struct Field {
    pub name: String,
    pub value: String,
    pub verified_at: Option<DateTime<Utc>>,
}

/// An account as `GET /api/v1/mutes` lists it: with when the mute ends (`null`: never).
#[derive(Clone, Debug, Serialize)]
pub struct MutedAccount {
    #[serde(flatten)]
    pub account: Account,
    pub mute_expires_at: Option<DateTime<Utc>>,
}

/// The owner's view of their account (`verify_credentials`, `update_credentials`).
#[derive(Clone, Debug, Serialize)]
pub struct CredentialAccount {
    #[serde(flatten)]
    pub account: Account,
    pub source: Source,
    pub role: Role,
}

/// What the owner edits, as they typed it.
#[derive(Clone, Debug, Serialize)]
pub struct Source {
    pub privacy: String,
    pub sensitive: bool,
    /// A language code, or "" when unset (as Mastodon gives it).
    pub language: String,
    pub note: String,
    pub fields: Vec<Field>,
    pub follow_requests_count: i64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Role {
    pub id: String,
    pub name: String,
    pub permissions: String,
    pub color: String,
    pub highlighted: bool,
}

impl Account {
    fn set_images(&mut self, urls: Urls<'_>, avatar: Option<&str>, header: Option<&str>) {
        self.avatar = avatar.map_or_else(|| urls.missing_avatar(), str::to_string);
        self.avatar_static = self.avatar.clone();
        self.header = header.map_or_else(|| urls.missing_header(), str::to_string);
        self.header_static = self.header.clone();
    }
}

/// A local account's row with its profile and counters.
#[derive(sqlx::FromRow)]
struct LocalRow {
    id: Uuid,
    username: String,
    display_name: String,
    note: String,
    locked: bool,
    bot: bool,
    #[sqlx(json)]
    fields: Vec<ProfileField>,
    /// Verified field values and when (`federation::actors::links`).
    #[sqlx(json)]
    verified: HashMap<String, DateTime<Utc>>,
    created_at: DateTime<Utc>,
    followers: i64,
    following: i64,
    statuses: i64,
    last_status_at: Option<DateTime<Utc>>,
    /// Processed images on the drive (`media::profile_images`), `None` for the placeholder.
    avatar_url: Option<String>,
    header_url: Option<String>,
}

/// Account entities of our accounts among `ids`, one query for all of them.
pub async fn locals(
    conn: &mut PgConnection,
    urls: Urls<'_>,
    ids: &[Uuid],
) -> Result<HashMap<Uuid, Account>, sqlx::Error> {
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    let rows: Vec<LocalRow> = sqlx::query_as(
        // Counters are kept by triggers (`account_stats`): counting per render read the whole
        // table for an account with most of the posts. The last post is one index probe.
        // Posts are counted, and the last one dated, as any reader may see them: public and
        // unlisted ones (a direct message or a followers-only post moves neither; its owner
        // sees them all, `credential`).
        "SELECT a.id, a.username, a.display_name, a.note, a.locked, a.bot, a.fields, a.created_at,
                a.avatar_url, a.header_url,
                coalesce(s.followers, 0) AS followers,
                coalesce(s.following, 0) AS following,
                coalesce(s.public_statuses, 0) AS statuses,
                (SELECT max(created_at) FROM statuses
                  WHERE account_id = a.id AND visibility IN ('public', 'unlisted')) AS last_status_at,
                (SELECT coalesce(jsonb_object_agg(v.value, v.verified_at), '{}')
                   FROM account_field_verifications v WHERE v.account_id = a.id) AS verified
           FROM accounts a LEFT JOIN account_stats s ON s.account_id = a.id
          WHERE a.id = ANY($1)",
    )
    .bind(ids)
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| (r.id, local_entity(urls, r)))
        .collect())
}

fn local_entity(urls: Urls<'_>, r: LocalRow) -> Account {
    let url = urls.actor(&r.username);
    let mut a = Account {
        id: r.id.to_string(),
        acct: r.username.clone(),
        display_name: r.display_name,
        locked: r.locked,
        bot: r.bot,
        discoverable: true,
        group: false,
        created_at: r.created_at,
        // Rendered like a status (escaped text, paragraphs, links, hashtags), as the actor
        // document's `summary` is.
        note: crate::content::render(&r.note, &url, &[]).html,
        uri: url.clone(),
        url,
        avatar: String::new(),
        avatar_static: String::new(),
        header: String::new(),
        header_static: String::new(),
        followers_count: r.followers,
        following_count: r.following,
        statuses_count: r.statuses,
        last_status_at: r.last_status_at.map(|t| t.date_naive().to_string()),
        emojis: Vec::new(),
        fields: r
            .fields
            .iter()
            .map(|f| Field {
                name: f.name.clone(),
                value: html::escape(&f.value),
                verified_at: r.verified.get(&f.value).copied(),
            })
            .collect(),
        username: r.username,
    };
    // One still image per slot: the static URL is the same file (`processing::fill`).
    a.set_images(urls, r.avatar_url.as_deref(), r.header_url.as_deref());
    a
}

/// One local account's entity.
pub async fn local(
    conn: &mut PgConnection,
    urls: Urls<'_>,
    id: Uuid,
) -> Result<Account, sqlx::Error> {
    locals(conn, urls, &[id])
        .await?
        .remove(&id)
        .ok_or(sqlx::Error::RowNotFound)
}

fn text<'a>(doc: &'a Value, key: &str) -> Option<&'a str> {
    doc.get(key).and_then(Value::as_str)
}

/// The `url` of an image reference (`icon`, `image`): an object, a list of them, or a string.
fn image_url(v: Option<&Value>) -> Option<&str> {
    match v? {
        Value::String(s) => Some(s.as_str()),
        Value::Array(a) => image_url(a.first()),
        Value::Object(o) => image_url(o.get("url")),
        _ => None,
    }
    .and_then(html::http_url)
    // Longer only in a document stored before the bounds: not a URL any server serves.
    .filter(|u| u.len() <= bounds::MAX_STRING_BYTES)
}

/// A remote actor's Account entity, from its stored document; text through the sanitizer.
pub fn remote(urls: Urls<'_>, r: &RemoteAccount) -> Account {
    let doc = &r.document;
    let acct = r.acct();
    let fields = match doc.get("attachment") {
        Some(Value::Array(a)) => a
            .iter()
            .filter(|f| text(f, "type") == Some("PropertyValue"))
            .take(bounds::MAX_FIELDS)
            .map(|f| {
                // Cut as `normalize` cuts them, for documents stored before the bounds.
                let field = |k: &str| {
                    bounds::cut_str(text(f, k).unwrap_or_default(), bounds::MAX_NAME_BYTES)
                };
                Field {
                    name: field("name").to_string(),
                    value: html::sanitize_remote(field("value")),
                    verified_at: None,
                }
            })
            .collect(),
        _ => Vec::new(),
    };
    let url = doc
        .get("url")
        .and_then(crate::federation::actors::actor::id_of)
        .and_then(html::http_url)
        .unwrap_or(&r.iri)
        .to_string();
    let created_at = text(doc, "published")
        .and_then(|p| DateTime::parse_from_rfc3339(p).ok())
        .map(|d| d.with_timezone(&Utc))
        .unwrap_or(r.fetched_at);
    let mut a = Account {
        id: r.id.to_string(),
        username: acct.split('@').next().unwrap_or_default().to_string(),
        acct,
        display_name: text(doc, "name").unwrap_or_default().to_string(),
        locked: doc
            .get("manuallyApprovesFollowers")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        bot: matches!(text(doc, "type"), Some("Service" | "Application")),
        discoverable: doc
            .get("discoverable")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        group: text(doc, "type") == Some("Group"),
        created_at,
        note: html::sanitize_remote(text(doc, "summary").unwrap_or_default()),
        url,
        uri: r.iri.clone(),
        avatar: String::new(),
        avatar_static: String::new(),
        header: String::new(),
        header_static: String::new(),
        // As their server publishes them (`tasks::actor_counts`), 0 until read.
        followers_count: r.followers_count.unwrap_or(0),
        following_count: r.following_count.unwrap_or(0),
        statuses_count: r.statuses_count.unwrap_or(0),
        last_status_at: None,
        emojis: CustomEmoji::from_tags(urls, doc.get("tag")),
        fields,
    };
    // Through the media proxy: an app showing the profile asks only this server (R-MAPI-6).
    let avatar = image_url(doc.get("icon")).map(|u| urls.remote_image(u));
    let header = image_url(doc.get("image")).map(|u| urls.remote_image(u));
    a.set_images(urls, avatar.as_deref(), header.as_deref());
    a
}

/// The entity of an account found in the directory, local or remote.
pub async fn of_found(
    pool: &PgPool,
    urls: Urls<'_>,
    found: &Found,
) -> Result<Account, sqlx::Error> {
    match found {
        Found::Local(a) => local(&mut *pool.acquire().await?, urls, a.id).await,
        Found::Remote(r) => Ok(remote(urls, r)),
    }
}

/// The `CredentialAccount`: the Account plus `source` (the plain text the user edits) and
/// `role`.
pub async fn credential(
    pool: &PgPool,
    urls: Urls<'_>,
    account: &accounts::Account,
) -> Result<CredentialAccount, sqlx::Error> {
    let mut entity = local(&mut *pool.acquire().await?, urls, account.id).await?;
    // Its owner counts every post of theirs.
    entity.statuses_count = sqlx::query_scalar(
        "SELECT coalesce((SELECT statuses FROM account_stats WHERE account_id = $1), 0)",
    )
    .bind(account.id)
    .fetch_one(pool)
    .await?;
    let profile = profiles::load(pool, account.id)
        .await?
        .ok_or(sqlx::Error::RowNotFound)?;
    let requests: i64 =
        sqlx::query_scalar("SELECT count(*) FROM follow_requests WHERE account_id = $1")
            .bind(account.id)
            .fetch_one(pool)
            .await?;
    let posting = crate::statuses::preferences::load(pool, account.id).await?;
    let verified = crate::federation::actors::links::verified(pool, account.id).await?;
    let role = if account.admin {
        Role {
            id: "3".into(),
            name: "Owner".into(),
            permissions: "1".into(),
            color: String::new(),
            highlighted: true,
        }
    } else {
        Role {
            id: "-99".into(),
            name: String::new(),
            permissions: "0".into(),
            color: String::new(),
            highlighted: false,
        }
    };
    Ok(CredentialAccount {
        account: entity,
        source: Source {
            privacy: posting.visibility.as_str().to_string(),
            sensitive: posting.sensitive,
            language: posting.language.unwrap_or_default(),
            note: profile.note,
            fields: profile
                .fields
                .into_iter()
                .map(|f| Field {
                    verified_at: verified.get(&f.value).copied(),
                    name: f.name,
                    value: f.value,
                })
                .collect(),
            follow_requests_count: requests,
        },
        role,
    })
}
