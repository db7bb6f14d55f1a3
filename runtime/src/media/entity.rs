//! A media attachment row and its two faces: Mastodon's `MediaAttachment` entity (client API)
//! and the ActivityPub `Document` of a note's `attachment`.

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

/// `{width, height, size: "WxH", aspect}` of one version.
fn dimensions(w: Option<i32>, h: Option<i32>) -> Option<Value> {
    let (w, h) = (w?, h?);
    (w > 0 && h > 0).then(|| {
        json!({
            "width": w,
            "height": h,
            "size": format!("{w}x{h}"),
            "aspect": f64::from(w) / f64::from(h),
        })
    })
}

/// Two decimals, as Mastodon stores focal points.
fn round2(v: f32) -> f64 {
    (f64::from(v) * 100.0).round() / 100.0
}

/// Mastodon's `MediaAttachment`. While processing, `url` and `preview_url` are null (what
/// Mastodon answers with 202/206) and `meta` has only the focus.
pub fn entity(drive: &Drive, row: &MediaRow) -> Value {
    let ready = row.is_ready();
    let mut meta = serde_json::Map::new();
    if ready {
        if let Some(original) = dimensions(row.width, row.height) {
            meta.insert("original".into(), original);
        }
        if let Some(small) = dimensions(row.thumbnail_width, row.thumbnail_height) {
            meta.insert("small".into(), small);
        }
    }
    meta.insert(
        "focus".into(),
        json!({ "x": round2(row.focus_x), "y": round2(row.focus_y) }),
    );
    json!({
        "id": row.id.to_string(),
        "type": row.kind,
        "url": ready.then(|| drive.url(&row.file_key)),
        "preview_url": ready
            .then(|| row.thumbnail_key.as_deref().map(|k| drive.url(k)))
            .flatten(),
        "remote_url": null,
        "preview_remote_url": null,
        "text_url": null,
        "meta": meta,
        "description": row.description,
        "blurhash": if ready { row.blurhash.clone() } else { None },
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    fn row(state: &str) -> MediaRow {
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

    #[test]
    fn the_entity_has_mastodons_shape() {
        let drive = Drive::disabled("https://h.example");
        let e = entity(&drive, &row("ready"));
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
        let p = entity(&drive, &row("processing"));
        assert!(p["url"].is_null() && p["preview_url"].is_null() && p["blurhash"].is_null());
        assert!(p["meta"].get("original").is_none());
    }

    #[test]
    fn the_document_has_mastodons_attachment_shape() {
        let d = document(&Drive::disabled("https://h.example"), &row("ready"));
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
