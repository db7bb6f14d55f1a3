//! The instance documents: Mastodon's Instance (v2 and the v1 that older apps read) with the
//! limits this server enforces, and NodeInfo 2.1. Fields in the order the JSON shows them
//! (sorted, as before they were typed).

use serde::Serialize;

use super::Account;

/// What the server enforces, in the v2 shape; v1 leaves out `accounts`, `translation` and
/// `urls`.
#[derive(Clone, Debug, Serialize)]
pub struct Configuration {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accounts: Option<AccountLimits>,
    pub media_attachments: MediaLimits,
    pub polls: PollLimits,
    pub statuses: StatusLimits,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub translation: Option<Enabled>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub urls: Option<StreamingUrl>,
}

#[derive(Clone, Copy, Debug, Serialize)]
pub struct AccountLimits {
    pub max_featured_tags: u32,
    pub max_pinned_statuses: u32,
}

#[derive(Clone, Debug, Serialize)]
pub struct MediaLimits {
    pub description_limit: usize,
    pub image_matrix_limit: u64,
    pub image_size_limit: u64,
    pub supported_mime_types: &'static [&'static str],
    pub video_frame_rate_limit: u32,
    pub video_matrix_limit: u32,
    pub video_size_limit: u32,
}

#[derive(Clone, Copy, Debug, Serialize)]
pub struct PollLimits {
    pub max_characters_per_option: usize,
    pub max_expiration: i64,
    pub max_options: usize,
    pub min_expiration: i64,
}

#[derive(Clone, Copy, Debug, Serialize)]
pub struct StatusLimits {
    pub max_characters: usize,
    pub max_media_attachments: usize,
}

#[derive(Clone, Copy, Debug, Serialize)]
pub struct Enabled {
    pub enabled: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct StreamingUrl {
    pub streaming: String,
}

/// `GET /api/v2/instance`.
#[derive(Clone, Debug, Serialize)]
pub struct InstanceV2 {
    pub api_versions: ApiVersions,
    pub configuration: Configuration,
    pub contact: Contact,
    pub description: &'static str,
    pub domain: String,
    pub icon: [(); 0],
    pub languages: [&'static str; 1],
    pub registrations: Registrations,
    pub rules: [(); 0],
    pub source_url: &'static str,
    pub thumbnail: Thumbnail,
    pub title: String,
    pub usage: Usage,
    pub version: String,
}

#[derive(Clone, Copy, Debug, Serialize)]
pub struct ApiVersions {
    pub mastodon: u32,
}

#[derive(Clone, Debug, Serialize)]
pub struct Contact {
    pub account: Option<Account>,
    pub email: &'static str,
}

#[derive(Clone, Debug, Serialize)]
pub struct Registrations {
    pub approval_required: bool,
    pub enabled: bool,
    pub message: Option<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Thumbnail {
    pub url: String,
}

#[derive(Clone, Copy, Debug, Serialize)]
pub struct Usage {
    pub users: ActiveUsers,
}

#[derive(Clone, Copy, Debug, Serialize)]
pub struct ActiveUsers {
    pub active_month: i64,
}

/// `GET /api/v1/instance`, for apps that predate v2.
#[derive(Clone, Debug, Serialize)]
pub struct InstanceV1 {
    pub approval_required: bool,
    pub configuration: Configuration,
    pub contact_account: Option<Account>,
    pub description: &'static str,
    pub email: &'static str,
    pub invites_enabled: bool,
    pub languages: [&'static str; 1],
    pub registrations: bool,
    pub rules: [(); 0],
    pub short_description: &'static str,
    pub stats: Stats,
    pub thumbnail: String,
    pub title: String,
    pub uri: String,
    pub urls: StreamingApi,
    pub version: String,
}

#[derive(Clone, Copy, Debug, Serialize)]
pub struct Stats {
    pub domain_count: i64,
    pub status_count: i64,
    pub user_count: i64,
}

#[derive(Clone, Debug, Serialize)]
pub struct StreamingApi {
    pub streaming_api: String,
}
