//! Mastodon's client-API entities as types (R-MAPI-3, R-MAPI-VIS): what every client reads,
//! built in one place for the API handlers, the streaming payloads and search alike. Each
//! entity is a `#[derive(Serialize)]` struct whose fields are Mastodon's, in Mastodon's
//! documented order; the batch loaders (`status::render`, `account::locals`, …) read a whole
//! page with a fixed number of queries.
//!
//! Rendering needs no federation: the URLs an entity shows are minted by [`Urls`] from
//! `PUBLIC_URL` alone, and media URLs by the drive — both in a [`Site`]. This module depends on
//! the domain (statuses, polls, media, accounts); nothing here imports `web`.

pub mod account;
pub mod familiar_followers;
pub mod filter;
pub mod instance;
pub mod list;
pub mod media;
pub mod notification;
pub mod notification_group;
pub mod poll;
pub mod preview_card;
pub mod quote;
pub mod reaction;
pub mod relationship;
pub mod replies;
pub mod report;
pub mod scheduled_status;
pub mod status;
pub mod status_edit;
pub mod suggestion;
pub mod tag;
pub mod urls;

pub use account::{Account, CredentialAccount, MutedAccount};
pub use familiar_followers::FamiliarFollowers;
pub use filter::FilterResult;
pub use list::List;
pub use media::MediaAttachment;
pub use notification::Notification;
pub use poll::Poll;
pub use relationship::Relationship;
pub use replies::{Empty, Marker, Preferences, StatusSource, UnreadCount};
pub use status::Status;
pub use status_edit::StatusEdit;
pub use urls::Urls;

use crate::media::Drive;

/// What rendering needs to know about this server: its URLs and where media is served from.
#[derive(Clone, Copy)]
pub struct Site<'a> {
    pub urls: Urls<'a>,
    pub drive: &'a Drive,
}

impl<'a> Site<'a> {
    pub fn new(
        origin: &'a str,
        drive: &'a Drive,
        proxy: Option<&'a crate::media::proxy::MediaProxy>,
    ) -> Self {
        Site {
            urls: Urls::with_proxy(origin, proxy),
            drive,
        }
    }
}

/// A custom emoji: a remote post's or profile's `Emoji` tags (R-MAPI-6); the field is
/// always present, as clients expect.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct CustomEmoji {
    pub shortcode: String,
    pub url: String,
    pub static_url: String,
    pub visible_in_picker: bool,
}

impl CustomEmoji {
    /// The `Emoji` tags of an ActivityPub `tag` value (an array, or one object): a shortcode
    /// Mastodon would make (`[A-Za-z0-9_]{2,}` between colons) and an http(s) image. Each
    /// shortcode once, at most `bounds::MAX_TAGS_PER_KIND` (a document stored before the
    /// bound may hold more); anything else is skipped. The image is shown through the media
    /// proxy when the node has one (`Urls::remote_image`).
    pub fn from_tags(urls: Urls<'_>, tags: Option<&serde_json::Value>) -> Vec<CustomEmoji> {
        let items: Vec<&serde_json::Value> = match tags {
            Some(serde_json::Value::Array(a)) => a.iter().collect(),
            Some(v @ serde_json::Value::Object(_)) => vec![v],
            _ => Vec::new(),
        };
        let mut out: Vec<CustomEmoji> = Vec::new();
        for t in items {
            if out.len() >= crate::federation::bounds::MAX_TAGS_PER_KIND {
                break;
            }
            if t.get("type").and_then(serde_json::Value::as_str) != Some("Emoji") {
                continue;
            }
            let Some(name) = t.get("name").and_then(serde_json::Value::as_str) else {
                continue;
            };
            let code = name.trim_matches(':');
            let valid = code.len() >= 2
                && code.len() <= 64
                && code.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            let icon = t.get("icon");
            let url = icon
                .and_then(|i| i.get("url"))
                .or(icon)
                .and_then(crate::federation::actors::actor::id_of)
                .and_then(crate::html::http_url)
                // Longer only in a document stored before the bounds.
                .filter(|u| u.len() <= crate::federation::bounds::MAX_TAG_STRING_BYTES);
            if let (true, Some(url)) = (valid, url)
                && !out.iter().any(|e| e.shortcode == code)
            {
                let shown = urls.remote_image(url);
                out.push(CustomEmoji {
                    shortcode: code.to_string(),
                    url: shown.clone(),
                    static_url: shown,
                    visible_in_picker: false,
                });
            }
        }
        out
    }
}

#[cfg(test)]
mod emoji_tests {
    use super::CustomEmoji;
    use serde_json::json;

    #[test]
    fn emoji_tags_are_read_as_mastodon_writes_them() {
        let tags = json!([
            {"type": "Emoji", "name": ":blobcat:", "icon": {"type": "Image", "url": "https://r.example/e/blobcat.png"}},
            {"type": "Emoji", "name": ":blobcat:", "icon": {"type": "Image", "url": "https://r.example/e/other.png"}},
            {"type": "Emoji", "name": ":bad code:", "icon": {"url": "https://r.example/e/x.png"}},
            {"type": "Emoji", "name": ":js:", "icon": {"url": "javascript:alert(1)"}},
            {"type": "Hashtag", "name": "#tag"},
            {"type": "Emoji", "name": ":ok_2:", "icon": "https://r.example/e/ok.png"}
        ]);
        let got = CustomEmoji::from_tags(super::Urls::new("https://h.example"), Some(&tags));
        let codes: Vec<&str> = got.iter().map(|e| e.shortcode.as_str()).collect();
        assert_eq!(codes, ["blobcat", "ok_2"]);
        assert_eq!(got[0].url, "https://r.example/e/blobcat.png");
        assert!(CustomEmoji::from_tags(super::Urls::new("https://h.example"), None).is_empty());
        assert_eq!(
            CustomEmoji::from_tags(super::Urls::new("https://h.example"), Some(&tags[0])).len(),
            1,
            "one object"
        );
    }
}
