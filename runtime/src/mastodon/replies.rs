//! The small answers of the client API, typed like the entities: an empty object, the
//! notifications count, posting preferences, a status's source and the reading markers. Fields
//! are in the order Mastodon's JSON shows them (alphabetical where it sorts them).

use chrono::{DateTime, Utc};
use serde::Serialize;

/// `{}`: what Mastodon answers for a dismissal or a removal.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Empty {}

/// `GET /api/v1/notifications/unread_count`.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct UnreadCount {
    pub count: i64,
}

/// `GET /api/v1/preferences`: Mastodon's keys; the reading ones are Mastodon's defaults.
#[derive(Clone, Debug, Serialize)]
pub struct Preferences {
    #[serde(rename = "posting:default:language")]
    pub language: Option<String>,
    #[serde(rename = "posting:default:sensitive")]
    pub sensitive: bool,
    #[serde(rename = "posting:default:visibility")]
    pub visibility: &'static str,
    #[serde(rename = "reading:expand:media")]
    pub expand_media: &'static str,
    #[serde(rename = "reading:expand:spoilers")]
    pub expand_spoilers: bool,
}

/// `GET /api/v1/statuses/:id/source`: the text as its author wrote it, for editing.
#[derive(Clone, Debug, Serialize)]
pub struct StatusSource {
    pub id: String,
    pub spoiler_text: String,
    pub text: String,
}

/// One timeline's reading position (`GET`/`POST /api/v1/markers`, keyed by timeline).
#[derive(Clone, Debug, Serialize)]
pub struct Marker {
    pub last_read_id: String,
    pub updated_at: DateTime<Utc>,
    pub version: i32,
}
