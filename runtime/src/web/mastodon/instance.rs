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
use serde_json::json;

use crate::mastodon::account::{self, Account};
use crate::mastodon::instance::{
    self, AccountLimits, ActiveUsers, ApiVersions, Configuration, Contact, Enabled, InstanceV1,
    InstanceV2, MediaLimits, PollLimits, Registrations, Stats, StatusLimits, StreamingApi,
    StreamingUrl, Thumbnail,
};
use crate::mastodon::urls::{MISSING_AVATAR, MISSING_HEADER};
use crate::media::processing::Format;
use crate::polls::{
    MAX_EXPIRES_IN, MAX_OPTION_CHARS, MAX_OPTIONS, MAX_STATUS_CHARS, MIN_EXPIRES_IN,
};
use crate::web::recent::Recent;
use crate::web::{ApiError, AppState};

const NODEINFO_SCHEMA: &str = "http://nodeinfo.diaspora.software/ns/schema/2.1";
const SOURCE_URL: &str = "https://github.com/fedify-dev/hollo";
const DESCRIPTION: &str = "A Hollo server";
const MISSING_PNG: &[u8] = include_bytes!("missing.png");

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/instance", get(v1))
        .route("/api/v2/instance", get(v2))
        .route("/.well-known/nodeinfo", get(nodeinfo_links))
        .route("/nodeinfo/2.1", get(nodeinfo))
        .route(MISSING_AVATAR, get(missing_image))
        .route(MISSING_HEADER, get(missing_image))
}

/// The Mastodon API level served: clients enable features by the version they read (R-MAPI-6).
/// 4.2 brings exclusive lists, which are served; 4.3 would make apps call what is not (Phanpy:
/// notification requests and policies, `GET /api/v1/statuses?id[]=`, trending link posts).
pub const MASTODON_API_VERSION: &str = "4.2.0";

fn version() -> String {
    format!(
        "{MASTODON_API_VERSION} (compatible; Hollo {})",
        crate::VERSION
    )
}

/// `host[:port]` of `PUBLIC_URL`.
fn domain(s: &AppState) -> String {
    url::Url::parse(&s.public_origin)
        .ok()
        .map(|u| crate::federation::transport::signature::host_header(&u))
        .unwrap_or_default()
}

/// The limits this server enforces, in the v2 shape (v1 reuses the parts it has).
fn configuration(s: &AppState) -> Configuration {
    // Images only (no video transcoding, SPEC §12); nothing when no drive stores them.
    let drive = s.drive.is_enabled();
    let mimes: &'static [&'static str] = if drive { &Format::MIMES } else { &[] };
    Configuration {
        accounts: Some(AccountLimits {
            max_featured_tags: crate::tags::featured::MAX_FEATURED as u32,
            max_pinned_statuses: crate::statuses::pins::MAX_PINNED as u32,
        }),
        media_attachments: MediaLimits {
            description_limit: crate::media::upload::MAX_DESCRIPTION_CHARS,
            image_matrix_limit: if drive { s.media.max_pixels } else { 0 },
            image_size_limit: if drive { s.media.max_bytes as u64 } else { 0 },
            supported_mime_types: mimes,
            video_frame_rate_limit: 0,
            video_matrix_limit: 0,
            video_size_limit: 0,
        },
        polls: PollLimits {
            max_characters_per_option: MAX_OPTION_CHARS,
            max_expiration: MAX_EXPIRES_IN,
            max_options: MAX_OPTIONS,
            min_expiration: MIN_EXPIRES_IN,
        },
        // Links count with their full length here (no 23-character shortening).
        statuses: StatusLimits {
            max_characters: MAX_STATUS_CHARS,
            max_media_attachments: if drive {
                crate::media::MAX_PER_STATUS
            } else {
                0
            },
        },
        translation: Some(Enabled { enabled: false }),
        urls: None,
    }
}

#[derive(sqlx::FromRow, Clone, Copy, Debug)]
pub struct Usage {
    users: i64,
    active_month: i64,
    active_halfyear: i64,
    local_posts: i64,
    domains: i64,
}

/// The instance's counts as this process last read them (R-API). Counting every
/// account and status costs about half a second of database time at 300 000 statuses, and the
/// three documents that show the counts are anonymous: each process counts at most once per
/// `INSTANCE_STATS_SECONDS` ([`Recent`]).
pub type UsageCache = Recent<Usage>;

async fn usage(s: &AppState) -> Result<Usage, sqlx::Error> {
    s.instance_stats.get(|| count(&s.pool)).await
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

async fn v2(State(s): State<AppState>) -> Result<Json<InstanceV2>, ApiError> {
    let u = usage(&s).await?;
    let mut configuration = configuration(&s);
    configuration.urls = Some(StreamingUrl {
        streaming: s.public_origin.replacen("http", "ws", 1),
    });
    Ok(Json(InstanceV2 {
        api_versions: ApiVersions { mastodon: 2 },
        configuration,
        contact: Contact {
            account: contact(&s).await?,
            email: "",
        },
        description: DESCRIPTION,
        domain: domain(&s),
        icon: [],
        languages: ["en"],
        // Accounts are made with `hollo account create`.
        registrations: Registrations {
            approval_required: false,
            enabled: false,
            message: None,
        },
        rules: [],
        source_url: SOURCE_URL,
        thumbnail: Thumbnail { url: thumbnail(&s) },
        title: domain(&s),
        usage: instance::Usage {
            users: ActiveUsers {
                active_month: u.active_month,
            },
        },
        version: version(),
    }))
}

async fn v1(State(s): State<AppState>) -> Result<Json<InstanceV1>, ApiError> {
    let u = usage(&s).await?;
    let mut configuration = configuration(&s);
    configuration.accounts = None;
    configuration.translation = None;
    Ok(Json(InstanceV1 {
        approval_required: false,
        configuration,
        contact_account: contact(&s).await?,
        description: DESCRIPTION,
        email: "",
        invites_enabled: false,
        languages: ["en"],
        registrations: false,
        rules: [],
        short_description: DESCRIPTION,
        stats: Stats {
            domain_count: u.domains,
            status_count: u.local_posts,
            user_count: u.users,
        },
        thumbnail: thumbnail(&s),
        title: domain(&s),
        uri: domain(&s),
        urls: StreamingApi {
            streaming_api: s.public_origin.replacen("http", "ws", 1),
        },
        version: version(),
    }))
}

/// `/.well-known/nodeinfo`: where the NodeInfo document is.
#[derive(serde::Serialize)]
struct NodeInfoLinks {
    links: [NodeInfoLink; 1],
}

#[derive(serde::Serialize)]
struct NodeInfoLink {
    href: String,
    rel: &'static str,
}

async fn nodeinfo_links(State(s): State<AppState>) -> Json<NodeInfoLinks> {
    Json(NodeInfoLinks {
        links: [NodeInfoLink {
            href: format!("{}/nodeinfo/2.1", s.public_origin),
            rel: NODEINFO_SCHEMA,
        }],
    })
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
