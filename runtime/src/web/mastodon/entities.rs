//! Mastodon's JSON entities for accounts, relationships and remote statuses: string ids,
//! `acct` (`name` for ours, `name@host` for remote), profile text as HTML, counts, `fields`,
//! `emojis` and the default avatar and header every client expects to load.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use sqlx::{PgConnection, PgPool};

use crate::federation::Federation;
use crate::federation::accounts::Account;
use crate::federation::directory::{Found, RemoteAccount};
use crate::federation::profiles::{self, Profile};
use crate::federation::relationships::Standing;
use crate::html;

/// The images shown for an account without avatar or header (served by `instance.rs`).
pub const MISSING_AVATAR: &str = "/avatars/original/missing.png";
pub const MISSING_HEADER: &str = "/headers/original/missing.png";

fn images(v: &mut Value, origin: &str, avatar: Option<&str>, header: Option<&str>) {
    let avatar = avatar.map_or_else(|| format!("{origin}{MISSING_AVATAR}"), str::to_string);
    let header = header.map_or_else(|| format!("{origin}{MISSING_HEADER}"), str::to_string);
    v["avatar"] = json!(avatar);
    v["avatar_static"] = json!(avatar);
    v["header"] = json!(header);
    v["header_static"] = json!(header);
}

/// What a local account's entity counts.
#[derive(sqlx::FromRow)]
struct Counts {
    followers: i64,
    following: i64,
    statuses: i64,
    last_status_at: Option<DateTime<Utc>>,
}

async fn counts(conn: &mut PgConnection, account: &Account) -> Result<Counts, sqlx::Error> {
    sqlx::query_as(
        // Kept by triggers (`account_stats`): counting per render read the whole table for an
        // account with most of the posts (issue 38). The last post is one index probe.
        "SELECT coalesce(s.followers, 0) AS followers,
                coalesce(s.following, 0) AS following,
                coalesce(s.statuses, 0) AS statuses,
                (SELECT max(created_at) FROM statuses WHERE account_id = $1) AS last_status_at
           FROM (SELECT $1::uuid AS id) a
           LEFT JOIN account_stats s ON s.account_id = a.id",
    )
    .bind(account.id)
    .fetch_one(conn)
    .await
}

/// A local account's Account entity, and its profile (for `source`).
pub async fn local_account(
    conn: &mut PgConnection,
    fed: &Federation,
    account: &Account,
) -> Result<(Value, Profile), sqlx::Error> {
    let profile = profiles::load(&mut *conn, account.id)
        .await?
        .ok_or(sqlx::Error::RowNotFound)?;
    let c = counts(conn, account).await?;
    let url = fed.actor_iri(&account.username);
    let fields: Vec<Value> = profile
        .fields
        .iter()
        .map(|f| json!({ "name": f.name, "value": html::escape(&f.value), "verified_at": null }))
        .collect();
    let mut v = json!({
        "id": account.id.to_string(),
        "username": account.username,
        "acct": account.username,
        "display_name": profile.display_name,
        "locked": profile.locked,
        "bot": profile.bot,
        "discoverable": true,
        "group": false,
        "created_at": profile.created_at,
        "note": profiles::note_html(fed, account, &profile),
        "url": url,
        "uri": url,
        "followers_count": c.followers,
        "following_count": c.following,
        "statuses_count": c.statuses,
        "last_status_at": c.last_status_at.map(|t| t.date_naive().to_string()),
        "emojis": [],
        "fields": fields,
    });
    images(&mut v, &fed.origin, None, None);
    Ok((v, profile))
}

/// The `CredentialAccount`: the Account plus `source` (the plain text the user edits) and
/// `role`.
pub async fn credential_account(
    pool: &PgPool,
    fed: &Federation,
    account: &Account,
) -> Result<Value, sqlx::Error> {
    let (mut v, profile) = local_account(&mut *pool.acquire().await?, fed, account).await?;
    let requests: i64 =
        sqlx::query_scalar("SELECT count(*) FROM follow_requests WHERE account_id = $1")
            .bind(account.id)
            .fetch_one(pool)
            .await?;
    let fields: Vec<Value> = profile
        .fields
        .iter()
        .map(|f| json!({ "name": f.name, "value": f.value, "verified_at": null }))
        .collect();
    let posting = crate::statuses::preferences::load(pool, account.id).await?;
    v["source"] = json!({
        "privacy": posting.visibility.as_str(),
        "sensitive": posting.sensitive,
        // Mastodon: a code, or "" when unset.
        "language": posting.language.unwrap_or_default(),
        "note": profile.note, "fields": fields, "follow_requests_count": requests,
    });
    v["role"] = if account.admin {
        json!({ "id": "3", "name": "Owner", "permissions": "1", "color": "", "highlighted": true })
    } else {
        json!({ "id": "-99", "name": "", "permissions": "0", "color": "", "highlighted": false })
    };
    Ok(v)
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
}

/// A remote actor's Account entity, from its stored document; text through the sanitizer.
pub fn remote_account(fed: &Federation, r: &RemoteAccount) -> Value {
    let doc = &r.document;
    let acct = r.acct();
    let username = acct.split('@').next().unwrap_or_default().to_string();
    let fields: Vec<Value> = match doc.get("attachment") {
        Some(Value::Array(a)) => a
            .iter()
            .filter(|f| text(f, "type") == Some("PropertyValue"))
            .map(|f| {
                json!({
                    // Names are plain text (clients escape them); values are HTML.
                    "name": text(f, "name").unwrap_or_default(),
                    "value": html::sanitize_remote(text(f, "value").unwrap_or_default()),
                    "verified_at": null,
                })
            })
            .collect(),
        _ => Vec::new(),
    };
    let url = doc
        .get("url")
        .and_then(crate::federation::actor::id_of)
        .and_then(html::http_url)
        .unwrap_or(&r.iri);
    let created = text(doc, "published")
        .and_then(|p| DateTime::parse_from_rfc3339(p).ok())
        .map(|d| d.with_timezone(&Utc))
        .unwrap_or(r.fetched_at);
    let mut v = json!({
        "id": r.id.to_string(),
        "username": username,
        "acct": acct,
        // Plain text, as Mastodon serves it: clients escape display names themselves.
        "display_name": text(doc, "name").unwrap_or_default(),
        "locked": doc.get("manuallyApprovesFollowers").and_then(Value::as_bool).unwrap_or(false),
        "bot": matches!(text(doc, "type"), Some("Service" | "Application")),
        "discoverable": doc.get("discoverable").and_then(Value::as_bool).unwrap_or(false),
        "group": text(doc, "type") == Some("Group"),
        "created_at": created,
        "note": html::sanitize_remote(text(doc, "summary").unwrap_or_default()),
        "url": url,
        "uri": r.iri,
        // What we know of them; we do not fetch their collections.
        "followers_count": 0,
        "following_count": 0,
        "statuses_count": 0,
        "last_status_at": null,
        "emojis": [],
        "fields": fields,
    });
    images(
        &mut v,
        &fed.origin,
        image_url(doc.get("icon")),
        image_url(doc.get("image")),
    );
    v
}

pub async fn account(pool: &PgPool, fed: &Federation, found: &Found) -> Result<Value, sqlx::Error> {
    match found {
        Found::Local(a) => Ok(local_account(&mut *pool.acquire().await?, fed, a).await?.0),
        Found::Remote(r) => Ok(remote_account(fed, r)),
    }
}

/// Mastodon's Relationship entity.
pub fn relationship(id: &str, s: &Standing) -> Value {
    json!({
        "id": id,
        "following": s.following,
        "showing_reblogs": s.showing_reblogs,
        "notifying": s.notifying,
        "languages": s.languages,
        "followed_by": s.followed_by,
        "blocking": s.blocking,
        "blocked_by": s.blocked_by,
        "muting": s.muting,
        "muting_notifications": s.muting_notifications,
        "requested": s.requested,
        "requested_by": s.requested_by,
        "domain_blocking": false,
        "endorsed": false,
        "note": "",
    })
}
