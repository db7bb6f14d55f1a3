//! Mastodon's `MediaAttachment`: our uploads (URLs from the drive) and a remote post's
//! `Document`s — images shown through the media proxy (`remote_url` keeps the original, as
//! Mastodon's cached copies do), video and audio still at their origin.

use std::collections::HashMap;

use serde::Serialize;
use serde_json::Value;
use sqlx::PgConnection;
use uuid::Uuid;

use crate::html;
use crate::media::entity::round2;
use crate::media::{Drive, MediaRow};

#[derive(Clone, Debug, Serialize)]
pub struct MediaAttachment {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    /// Null while processing (what Mastodon answers with 202/206).
    pub url: Option<String>,
    pub preview_url: Option<String>,
    pub remote_url: Option<String>,
    pub preview_remote_url: Option<String>,
    pub text_url: Option<String>,
    pub meta: Meta,
    pub description: Option<String>,
    pub blurhash: Option<String>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Meta {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub original: Option<Dimensions>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub small: Option<Dimensions>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub focus: Option<Focus>,
}

/// One version's size: `{width, height, size: "WxH", aspect}`.
#[derive(Clone, Debug, Serialize)]
pub struct Dimensions {
    pub width: u64,
    pub height: u64,
    pub size: String,
    pub aspect: f64,
}

impl Dimensions {
    fn of(width: u64, height: u64) -> Option<Self> {
        (width > 0 && height > 0).then(|| Dimensions {
            width,
            height,
            size: format!("{width}x{height}"),
            aspect: width as f64 / height as f64,
        })
    }
    fn of_i32(w: Option<i32>, h: Option<i32>) -> Option<Self> {
        Self::of(u64::try_from(w?).ok()?, u64::try_from(h?).ok()?)
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Focus {
    pub x: f64,
    pub y: f64,
}

impl MediaAttachment {
    /// One of our uploads. While processing, `url` and `preview_url` are null and `meta` has
    /// only the focus.
    pub fn local(drive: &Drive, row: &MediaRow) -> Self {
        let ready = row.is_ready();
        MediaAttachment {
            id: row.id.to_string(),
            kind: row.kind.clone(),
            url: ready.then(|| drive.url(&row.file_key)),
            preview_url: ready
                .then(|| row.thumbnail_key.as_deref().map(|k| drive.url(k)))
                .flatten(),
            remote_url: None,
            preview_remote_url: None,
            text_url: None,
            meta: Meta {
                original: ready
                    .then(|| Dimensions::of_i32(row.width, row.height))
                    .flatten(),
                small: ready
                    .then(|| Dimensions::of_i32(row.thumbnail_width, row.thumbnail_height))
                    .flatten(),
                focus: Some(Focus {
                    x: round2(row.focus_x),
                    y: round2(row.focus_y),
                }),
            },
            description: row.description.clone(),
            blurhash: if ready { row.blurhash.clone() } else { None },
        }
    }

    /// A remote post's stored `Document` (sanitized URL, or nothing to show). Its strings are
    /// held to `bounds` as `normalize` holds them, for posts stored before the bounds.
    pub fn remote(urls: crate::mastodon::Urls<'_>, doc: &Value) -> Option<Self> {
        use crate::federation::bounds::{MAX_NAME_BYTES, MAX_STRING_BYTES, cut_str};
        let url = doc
            .get("url")
            .and_then(crate::federation::actors::actor::id_of)?;
        let url = html::http_url(url)
            .filter(|u| u.len() <= MAX_STRING_BYTES)?
            .to_string();
        let media_type = doc.get("mediaType").and_then(Value::as_str).unwrap_or("");
        let kind = match media_type.split('/').next() {
            Some("image") if media_type == "image/gif" => "gifv",
            Some("image") => "image",
            Some("video") => "video",
            Some("audio") => "audio",
            _ => "unknown",
        };
        let width = doc.get("width").and_then(Value::as_u64);
        let height = doc.get("height").and_then(Value::as_u64);
        // The proxy relays raster images only; other media is linked where it is.
        let shown = match kind {
            "image" | "gifv" => urls.remote_image(&url),
            _ => url.clone(),
        };
        Some(MediaAttachment {
            id: Uuid::new_v5(&Uuid::NAMESPACE_URL, url.as_bytes()).to_string(),
            kind: kind.into(),
            preview_url: Some(shown.clone()),
            remote_url: Some(url),
            url: Some(shown),
            preview_remote_url: None,
            text_url: None,
            meta: Meta {
                original: width.zip(height).and_then(|(w, h)| Dimensions::of(w, h)),
                ..Meta::default()
            },
            description: doc
                .get("name")
                .and_then(Value::as_str)
                .map(|d| cut_str(d, MAX_NAME_BYTES).to_string()),
            blurhash: doc
                .get("blurhash")
                .and_then(Value::as_str)
                .filter(|b| b.len() <= MAX_STRING_BYTES)
                .map(str::to_string),
        })
    }

    /// A remote post's `attachment` list as stored: at most `bounds::MAX_ATTACHMENTS` (a post
    /// stored before the bound may hold more).
    pub fn remote_all(urls: crate::mastodon::Urls<'_>, stored: &Value) -> Vec<Self> {
        stored
            .as_array()
            .map(|docs| {
                docs.iter()
                    .filter_map(|d| Self::remote(urls, d))
                    .take(crate::federation::bounds::MAX_ATTACHMENTS)
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// The attachments of each of our `statuses`, in attach order, one query for the whole page.
pub async fn of_statuses(
    conn: &mut PgConnection,
    drive: &Drive,
    statuses: &[Uuid],
) -> Result<HashMap<Uuid, Vec<MediaAttachment>>, sqlx::Error> {
    let mut out: HashMap<Uuid, Vec<MediaAttachment>> = HashMap::new();
    if statuses.is_empty() {
        return Ok(out);
    }
    for row in crate::media::attach::rows_of(conn, statuses).await? {
        if let Some(status) = row.status_id {
            out.entry(status)
                .or_default()
                .push(MediaAttachment::local(drive, &row));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::media::entity::test_row as row;
    use serde_json::json;

    #[test]
    fn the_entity_has_mastodons_shape() {
        let drive = Drive::disabled("https://h.example");
        let e = serde_json::to_value(MediaAttachment::local(&drive, &row("ready"))).unwrap();
        assert_eq!(e["id"], "00000000-0000-0000-0000-000000000000");
        assert_eq!(
            e["url"],
            "https://h.example/media/00000000-0000-0000-0000-000000000000/original.png"
        );
        assert_eq!(e["meta"]["original"]["size"], "1280x320");
        assert_eq!(e["meta"]["original"]["aspect"], 4.0);
        assert_eq!(e["meta"]["small"]["width"], 640);
        assert_eq!(e["meta"]["focus"], json!({"x": 0.25, "y": -0.5}));
        assert!(e["remote_url"].is_null() && e["text_url"].is_null());
        let p = serde_json::to_value(MediaAttachment::local(&drive, &row("processing"))).unwrap();
        assert!(p["url"].is_null() && p["preview_url"].is_null() && p["blurhash"].is_null());
        assert!(p["meta"].get("original").is_none());
    }

    #[test]
    fn a_remote_document_without_a_usable_url_is_left_out() {
        let docs = json!([
            { "type": "Document", "mediaType": "image/gif", "url": "https://r.example/a.gif",
              "width": 4, "height": 2 },
            { "type": "Document", "mediaType": "image/png", "url": "javascript:alert(1)" },
            { "type": "Document", "mediaType": "video/mp4" },
        ]);
        let shown =
            MediaAttachment::remote_all(crate::mastodon::Urls::new("https://h.example"), &docs);
        assert_eq!(shown.len(), 1);
        let v = serde_json::to_value(&shown[0]).unwrap();
        assert_eq!(v["type"], "gifv");
        assert_eq!(
            v["meta"],
            json!({ "original": {
            "width": 4, "height": 2, "size": "4x2", "aspect": 2.0 } })
        );
    }

    #[test]
    fn remote_images_go_through_the_proxy_and_keep_their_origin_as_remote_url() {
        let proxy = crate::media::proxy::MediaProxy::new("a-secret-key-of-at-least-32-characters");
        let urls = crate::mastodon::Urls::with_proxy("https://h.example", Some(&proxy));
        let docs = json!([
            { "type": "Document", "mediaType": "image/jpeg", "url": "https://r.example/a.jpg" },
            { "type": "Document", "mediaType": "video/mp4", "url": "https://r.example/v.mp4" },
        ]);
        let shown = MediaAttachment::remote_all(urls, &docs);
        let image = serde_json::to_value(&shown[0]).unwrap();
        let proxied = proxy.url("https://h.example", "https://r.example/a.jpg");
        assert_eq!(image["url"], proxied.as_str());
        assert_eq!(image["preview_url"], proxied.as_str());
        assert_eq!(image["remote_url"], "https://r.example/a.jpg");
        // The proxy relays images only: a video stays where it is.
        let video = serde_json::to_value(&shown[1]).unwrap();
        assert_eq!(video["url"], "https://r.example/v.mp4");
    }
}
