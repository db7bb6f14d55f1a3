//! A media attachment row and its ActivityPub face, the `Document` of a note's `attachment`
//! (its client-API face is `mastodon::media::MediaAttachment`).

use serde_json::{Value, json};
use uuid::Uuid;

use super::storage::Drive;

/// The columns every reader selects (`SELECT {COLUMNS} FROM media_attachments`).
pub const COLUMNS: &str = "id, account_id, status_id, kind, content_type, file_key, \
    thumbnail_key, size, width, height, thumbnail_width, thumbnail_height, blurhash, \
    description, focus_x, focus_y, state, error";

#[derive(Clone, Debug, sqlx::FromRow)]
pub struct MediaRow {
    pub id: Uuid,
    pub account_id: Uuid,
    pub status_id: Option<Uuid>,
    pub kind: String,
    pub content_type: String,
    pub file_key: String,
    pub thumbnail_key: Option<String>,
    pub size: i64,
    pub width: Option<i32>,
    pub height: Option<i32>,
    pub thumbnail_width: Option<i32>,
    pub thumbnail_height: Option<i32>,
    pub blurhash: Option<String>,
    pub description: Option<String>,
    pub focus_x: f32,
    pub focus_y: f32,
    pub state: String,
    pub error: Option<String>,
}

impl MediaRow {
    pub fn is_ready(&self) -> bool {
        self.state == "ready"
    }
}

/// Two decimals, as Mastodon stores focal points.
pub(crate) fn round2(v: f32) -> f64 {
    (f64::from(v) * 100.0).round() / 100.0
}

/// The ActivityPub `Document` of a note's `attachment` (Mastodon's shape): `mediaType`, `url`,
/// `name` (the description), `blurhash`, `width`, `height` and `focalPoint` `[x, y]`.
pub fn document(drive: &Drive, row: &MediaRow) -> Value {
    let mut doc = json!({
        "type": "Document",
        "mediaType": row.content_type,
        "url": drive.url(&row.file_key),
        "name": row.description,
        "focalPoint": [round2(row.focus_x), round2(row.focus_y)],
    });
    if let Some(b) = &row.blurhash {
        doc["blurhash"] = json!(b);
    }
    if let (Some(w), Some(h)) = (row.width, row.height) {
        doc["width"] = json!(w);
        doc["height"] = json!(h);
    }
    doc
}

/// A ready-or-not image row for unit tests (here and in `mastodon::media`).
#[cfg(test)]
pub(crate) fn test_row(state: &str) -> MediaRow {
    MediaRow {
        id: Uuid::nil(),
        account_id: Uuid::nil(),
        status_id: None,
        kind: "image".into(),
        content_type: "image/png".into(),
        file_key: "media/00000000-0000-0000-0000-000000000000/original.png".into(),
        thumbnail_key: Some("media/00000000-0000-0000-0000-000000000000/small.jpg".into()),
        size: 10,
        width: Some(1280),
        height: Some(320),
        thumbnail_width: Some(640),
        thumbnail_height: Some(160),
        blurhash: Some("LEHV6nWB2yk8pyo0adR*.7kCMdnj".into()),
        description: Some("a cat".into()),
        focus_x: 0.25,
        focus_y: -0.5,
        state: state.into(),
        error: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_document_has_mastodons_attachment_shape() {
        let d = document(&Drive::disabled("https://h.example"), &test_row("ready"));
        assert_eq!(d["type"], "Document");
        assert_eq!(d["mediaType"], "image/png");
        assert_eq!(d["name"], "a cat");
        assert_eq!(d["focalPoint"], json!([0.25, -0.5]));
        assert_eq!(
            (d["width"].as_i64(), d["height"].as_i64()),
            (Some(1280), Some(320))
        );
    }
}
