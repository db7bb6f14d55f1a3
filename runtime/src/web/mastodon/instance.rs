//! What a client or another server asks about the instance: `GET /api/v1/instance`,
//! `/api/v2/instance`, `/api/v1/custom_emojis`, NodeInfo (`/.well-known/nodeinfo`,
//! `/nodeinfo/2.1`) and the default avatar and header images. The `configuration` limits are
//! the ones the runtime enforces (the poll and status rules of `polls`, the media limits of
//! `MEDIA_MAX_BYTES` / `MEDIA_MAX_PIXELS`); without a media drive no media type is offered.

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{Value, json};

use crate::mastodon::account::{self, Account};
use crate::mastodon::urls::{MISSING_AVATAR, MISSING_HEADER};
use crate::polls::{
    MAX_EXPIRES_IN, MAX_OPTION_CHARS, MAX_OPTIONS, MAX_STATUS_CHARS, MIN_EXPIRES_IN,
};
use crate::web::{ApiError, AppState};

const NODEINFO_SCHEMA: &str = "http://nodeinfo.diaspora.software/ns/schema/2.1";
const SOURCE_URL: &str = "https://github.com/fedify-dev/hollo";
const MISSING_PNG: &[u8] = include_bytes!("missing.png");

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/instance", get(v1))
        .route("/api/v2/instance", get(v2))
        .route("/api/v1/custom_emojis", get(|| async { Json(json!([])) }))
        .route("/.well-known/nodeinfo", get(nodeinfo_links))
        .route("/nodeinfo/2.1", get(nodeinfo))
        .route(MISSING_AVATAR, get(missing_image))
        .route(MISSING_HEADER, get(missing_image))
}

/// Mastodon clients enable features by the version they read; this is the API level served.
fn version() -> String {
    format!("4.3.0 (compatible; Hollo {})", crate::VERSION)
}

/// `host[:port]` of `PUBLIC_URL`.
fn domain(s: &AppState) -> String {
    url::Url::parse(&s.public_origin)
        .ok()
        .map(|u| crate::federation::transport::signature::host_header(&u))
        .unwrap_or_default()
}

/// The limits this server enforces, in the v2 shape (v1 reuses the parts it has).
fn configuration(s: &AppState) -> Value {
    // Images only (no video transcoding, SPEC §12); nothing when no drive stores them.
    let (mimes, max_attachments): (&[&str], usize) = if s.drive.is_enabled() {
        (
            &crate::media::processing::Format::MIMES,
            crate::media::MAX_PER_STATUS,
        )
    } else {
        (&[], 0)
    };
    let (size_limit, matrix_limit) = if s.drive.is_enabled() {
        (s.media.max_bytes as u64, s.media.max_pixels)
    } else {
        (0, 0)
    };
    json!({
        "accounts": { "max_featured_tags": 0, "max_pinned_statuses": 0 },
        // Links count with their full length here (no 23-character shortening).
        "statuses": {
            "max_characters": MAX_STATUS_CHARS,
            "max_media_attachments": max_attachments,
        },
        "media_attachments": {
            "supported_mime_types": mimes,
            "image_size_limit": size_limit,
            "image_matrix_limit": matrix_limit,
            "description_limit": crate::media::upload::MAX_DESCRIPTION_CHARS,
            "video_size_limit": 0,
            "video_frame_rate_limit": 0,
            "video_matrix_limit": 0,
        },
        "polls": {
            "max_options": MAX_OPTIONS,
            "max_characters_per_option": MAX_OPTION_CHARS,
            "min_expiration": MIN_EXPIRES_IN,
            "max_expiration": MAX_EXPIRES_IN,
        },
        "translation": { "enabled": false },
    })
}

#[derive(sqlx::FromRow, Clone, Copy, Debug)]
pub struct Usage {
    users: i64,
    active_month: i64,
    active_halfyear: i64,
    local_posts: i64,
    domains: i64,
}

/// The instance's counts as this process last read them (issue 28 item 8). Counting every
/// account and status costs about half a second of database time at 300 000 statuses, and the
/// three documents that show the counts are anonymous: each process counts at most once per
/// `INSTANCE_STATS_SECONDS`, and callers arriving while it counts wait for that one count
/// rather than start their own.
pub struct UsageCache {
    ttl: std::time::Duration,
    last: tokio::sync::Mutex<Option<(Usage, std::time::Instant)>>,
}

impl UsageCache {
    pub fn new(ttl: std::time::Duration) -> std::sync::Arc<UsageCache> {
        std::sync::Arc::new(UsageCache {
            ttl,
            last: tokio::sync::Mutex::new(None),
        })
    }

    /// The counts, read from the database only when the last reading is older than the TTL.
    pub async fn get(&self, pool: &sqlx::PgPool) -> Result<Usage, sqlx::Error> {
        // Held across the count on purpose: one count per process at a time.
        let mut last = self.last.lock().await;
        if let Some((u, at)) = *last
            && at.elapsed() < self.ttl
        {
            return Ok(u);
        }
        let u = count(pool).await?;
        *last = Some((u, std::time::Instant::now()));
        Ok(u)
    }
}

async fn usage(s: &AppState) -> Result<Usage, sqlx::Error> {
    s.instance_stats.get(&s.pool).await
}

async fn count(pool: &sqlx::PgPool) -> Result<Usage, sqlx::Error> {
    sqlx::query_as(
        "SELECT (SELECT count(*) FROM accounts) AS users,
                (SELECT count(DISTINCT account_id) FROM statuses
                  WHERE created_at > now() - interval '30 days') AS active_month,
                (SELECT count(DISTINCT account_id) FROM statuses
                  WHERE created_at > now() - interval '180 days') AS active_halfyear,
                (SELECT count(*) FROM statuses) AS local_posts,
                (SELECT count(DISTINCT substring(iri from '^[a-z]+://([^/]+)')) FROM remote_actors)
                  AS domains",
    )
    .fetch_one(pool)
    .await
}

/// The first admin's Account entity, as the contact (null without one).
async fn contact(s: &AppState) -> Result<Option<Account>, sqlx::Error> {
    let admin: Option<uuid::Uuid> =
        sqlx::query_scalar("SELECT id FROM accounts WHERE admin ORDER BY created_at LIMIT 1")
            .fetch_optional(&s.pool)
            .await?;
    match admin {
        Some(admin) => Ok(Some(
            account::local(&mut *s.pool.acquire().await?, s.site().urls, admin).await?,
        )),
        None => Ok(None),
    }
}

fn thumbnail(s: &AppState) -> String {
    format!("{}{MISSING_HEADER}", s.public_origin)
}

async fn v2(State(s): State<AppState>) -> Result<Json<Value>, ApiError> {
    let u = usage(&s).await?;
    let streaming = s.public_origin.replacen("http", "ws", 1);
    let mut config = configuration(&s);
    config["urls"] = json!({ "streaming": streaming });
    Ok(Json(json!({
        "domain": domain(&s),
        "title": domain(&s),
        "version": version(),
        "source_url": SOURCE_URL,
        "description": "A Hollo server",
        "usage": { "users": { "active_month": u.active_month } },
        "thumbnail": { "url": thumbnail(&s) },
        "icon": [],
        "languages": ["en"],
        "configuration": config,
        // Accounts are made with `hollo account create`.
        "registrations": { "enabled": false, "approval_required": false, "message": null },
        "api_versions": { "mastodon": 2 },
        "contact": { "email": "", "account": contact(&s).await? },
        "rules": [],
    })))
}

async fn v1(State(s): State<AppState>) -> Result<Json<Value>, ApiError> {
    let u = usage(&s).await?;
    let streaming = s.public_origin.replacen("http", "ws", 1);
    let mut config = configuration(&s);
    if let Some(c) = config.as_object_mut() {
        c.remove("accounts");
        c.remove("translation");
    }
    Ok(Json(json!({
        "uri": domain(&s),
        "title": domain(&s),
        "short_description": "A Hollo server",
        "description": "A Hollo server",
        "email": "",
        "version": version(),
        "urls": { "streaming_api": streaming },
        "stats": { "user_count": u.users, "status_count": u.local_posts, "domain_count": u.domains },
        "thumbnail": thumbnail(&s),
        "languages": ["en"],
        "registrations": false,
        "approval_required": false,
        "invites_enabled": false,
        "configuration": config,
        "contact_account": contact(&s).await?,
        "rules": [],
    })))
}

async fn nodeinfo_links(State(s): State<AppState>) -> Json<Value> {
    Json(json!({
        "links": [{ "rel": NODEINFO_SCHEMA, "href": format!("{}/nodeinfo/2.1", s.public_origin) }],
    }))
}

async fn nodeinfo(State(s): State<AppState>) -> Result<Response, ApiError> {
    let u = usage(&s).await?;
    let body = json!({
        "version": "2.1",
        "software": {
            "name": "hollo", "version": crate::VERSION,
            "repository": SOURCE_URL, "homepage": SOURCE_URL,
        },
        "protocols": ["activitypub"],
        "services": { "inbound": [], "outbound": [] },
        "openRegistrations": false,
        "usage": {
            "users": {
                "total": u.users, "activeMonth": u.active_month, "activeHalfyear": u.active_halfyear,
            },
            "localPosts": u.local_posts,
        },
        "metadata": {},
    });
    Ok((
        [(
            header::CONTENT_TYPE,
            format!("application/json; profile=\"{NODEINFO_SCHEMA}#\""),
        )],
        Json(body),
    )
        .into_response())
}

async fn missing_image() -> Response {
    (
        [
            (header::CONTENT_TYPE, "image/png"),
            (header::CACHE_CONTROL, "public, max-age=86400"),
        ],
        MISSING_PNG,
    )
        .into_response()
}
