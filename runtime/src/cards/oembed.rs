//! An oEmbed document (<https://oembed.com>), read as untrusted input: the fields a preview
//! card takes, and a player's `html` only when it is nothing but one https `<iframe>` (what
//! Mastodon keeps of it too) — a provider's script or markup never reaches a client.

use std::sync::OnceLock;

use serde_json::Value;
use url::Url;

use super::page::{MAX_NAME, MAX_TITLE, cap, clean};

/// Largest player size taken (a provider's absurd numbers are not passed on).
const MAX_SIDE: i64 = 4_096;

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct OEmbed {
    /// `photo`, `video` or `rich` (a `link` oEmbed adds nothing to the page's own card).
    pub kind: Option<&'static str>,
    pub title: String,
    pub author_name: String,
    pub author_url: String,
    pub provider_name: String,
    pub provider_url: String,
    pub html: String,
    pub width: i32,
    pub height: i32,
    /// `thumbnail_url`, or a photo's own `url`.
    pub image: Option<Url>,
}

/// What `doc` (served at `base`) says; fields of the wrong type are ignored.
pub fn read(doc: &Value, base: &Url) -> OEmbed {
    let text = |k: &str, max: usize| {
        cap(
            &clean(doc.get(k).and_then(Value::as_str).unwrap_or("")),
            max,
        )
    };
    let link = |k: &str| {
        doc.get(k)
            .and_then(Value::as_str)
            .and_then(|u| base.join(u.trim()).ok())
            .filter(|u| matches!(u.scheme(), "http" | "https"))
    };
    // Numbers arrive as numbers or as strings, depending on the provider.
    let side = |k: &str| {
        let v = doc.get(k);
        v.and_then(Value::as_i64)
            .or_else(|| {
                v.and_then(Value::as_str)
                    .and_then(|s| s.trim().parse().ok())
            })
            .filter(|n| (1..=MAX_SIDE).contains(n))
            .unwrap_or(0) as i32
    };
    let kind = match doc.get("type").and_then(Value::as_str) {
        Some("photo") => Some("photo"),
        Some("video") => Some("video"),
        Some("rich") => Some("rich"),
        _ => None,
    };
    let html = match kind {
        Some("video" | "rich") => player(doc.get("html").and_then(Value::as_str).unwrap_or("")),
        _ => String::new(),
    };
    let image =
        link("thumbnail_url").or_else(|| (kind == Some("photo")).then(|| link("url")).flatten());
    OEmbed {
        kind,
        title: text("title", MAX_TITLE),
        author_name: text("author_name", MAX_NAME),
        author_url: link("author_url").map(String::from).unwrap_or_default(),
        provider_name: text("provider_name", MAX_NAME),
        provider_url: link("provider_url").map(String::from).unwrap_or_default(),
        html,
        width: side("width"),
        height: side("height"),
        image,
    }
}

/// The player markup cut down to iframes with an https `src` and their size; empty unless
/// exactly one iframe is left.
pub fn player(html: &str) -> String {
    static IFRAMES: OnceLock<ammonia::Builder<'static>> = OnceLock::new();
    let cleaned = IFRAMES
        .get_or_init(|| {
            let mut b = ammonia::Builder::empty();
            b.add_tags(["iframe"])
                .add_tag_attributes(
                    "iframe",
                    ["src", "width", "height", "allowfullscreen", "title"],
                )
                .url_schemes(["https"].into_iter().collect())
                .link_rel(None);
            b
        })
        .clean(html)
        .to_string();
    let one_iframe = cleaned.matches("<iframe").count() == 1 && cleaned.contains("src=\"https://");
    if one_iframe { cleaned } else { String::new() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn base() -> Url {
        Url::parse("https://video.example/oembed").expect("url")
    }

    #[test]
    fn a_video_keeps_its_iframe_and_nothing_else() {
        let doc = json!({
            "type": "video", "title": "Clip", "author_name": "Ann",
            "provider_name": "Video", "width": "640", "height": 360,
            "thumbnail_url": "/t.jpg",
            "html": "<script>steal()</script><iframe src=\"https://video.example/embed/1\" width=\"640\" onload=\"x()\"></iframe><b>hi</b>"
        });
        let o = read(&doc, &base());
        assert_eq!(o.kind, Some("video"));
        assert_eq!(o.width, 640);
        assert_eq!(o.height, 360);
        assert_eq!(
            o.image.as_ref().map(Url::as_str),
            Some("https://video.example/t.jpg")
        );
        assert!(
            o.html
                .starts_with("<iframe src=\"https://video.example/embed/1\""),
            "{}",
            o.html
        );
        assert!(
            !o.html.contains("script") && !o.html.contains("onload"),
            "{}",
            o.html
        );
    }

    #[test]
    fn a_player_over_http_or_of_two_frames_is_dropped() {
        assert_eq!(player("<iframe src=\"http://x.example/\"></iframe>"), "");
        assert_eq!(player("<iframe src=\"javascript:alert(1)\"></iframe>"), "");
        assert_eq!(
            player(
                "<iframe src=\"https://a.example/\"></iframe><iframe src=\"https://b.example/\"></iframe>"
            ),
            ""
        );
    }

    #[test]
    fn wrong_types_are_ignored() {
        let doc = json!({"type": 7, "title": ["x"], "width": -5, "height": 99999});
        let o = read(&doc, &base());
        assert_eq!(o, OEmbed::default());
    }
}
