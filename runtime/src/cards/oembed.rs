//! An oEmbed document (<https://oembed.com>), read as untrusted input: the fields a preview
//! card takes, and a player's `html` only as one https `<iframe>` we write ourselves from the
//! provider's (what Mastodon keeps of it too) — a provider's script or markup never reaches a
//! client.

use std::cell::RefCell;

use html5ever::tendril::StrTendril;
use html5ever::tokenizer::states::RawKind;
use html5ever::tokenizer::{
    BufferQueue, StartTag, TagToken, Token, TokenSink, TokenSinkResult, Tokenizer, TokenizerOpts,
};
use serde_json::Value;
use url::Url;

use super::page::{MAX_NAME, MAX_TITLE, cap, clean};
use crate::html::escape;

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

/// The player markup rebuilt as one fresh iframe: the document's only `<iframe>` (as a
/// browser's tokenizer finds it: a frame in a script's or another frame's text is text), with
/// an absolute https `src`, keeping only its size, `allowfullscreen` and `title`, and nothing
/// inside it. Empty unless there is exactly one such frame. Nothing of the provider's markup
/// is passed on as written (issue 61, F11: a text check let a protocol-relative `src` and the
/// frame's own text through).
pub fn player(html: &str) -> String {
    let frames = iframes(html);
    let [frame] = frames.as_slice() else {
        return String::new();
    };
    let Some(src) = frame
        .src
        .as_deref()
        .and_then(|s| Url::parse(s.trim()).ok())
        .filter(|u| u.scheme() == "https" && u.host().is_some())
    else {
        return String::new();
    };
    let mut out = format!("<iframe src=\"{}\"", escape(src.as_str()));
    for (name, value) in [("width", &frame.width), ("height", &frame.height)] {
        if let Some(v) = value.as_deref().map(str::trim).filter(|v| is_size(v)) {
            out.push_str(&format!(" {name}=\"{v}\""));
        }
    }
    if frame.allowfullscreen {
        out.push_str(" allowfullscreen=\"\"");
    }
    if let Some(t) = frame.title.as_deref().map(clean).filter(|t| !t.is_empty()) {
        out.push_str(&format!(" title=\"{}\"", escape(&cap(&t, MAX_NAME))));
    }
    out.push_str("></iframe>");
    out
}

/// A frame's width or height as taken: up to five digits, or a percentage.
fn is_size(v: &str) -> bool {
    let digits = v.strip_suffix('%').unwrap_or(v);
    (1..=5).contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_digit())
}

/// The attributes of an `<iframe>` start tag that a player keeps.
#[derive(Debug, Default)]
struct Frame {
    src: Option<String>,
    width: Option<String>,
    height: Option<String>,
    allowfullscreen: bool,
    title: Option<String>,
}

/// The iframes of `html` (at most two: more is as refused as two).
fn iframes(html: &str) -> Vec<Frame> {
    struct Sink(RefCell<Vec<Frame>>);
    impl TokenSink for Sink {
        type Handle = ();
        fn process_token(&self, token: Token, _line: u64) -> TokenSinkResult<()> {
            let TagToken(tag) = token else {
                return TokenSinkResult::Continue;
            };
            if tag.kind != StartTag {
                return TokenSinkResult::Continue;
            }
            let attr = |name: &str| {
                tag.attrs
                    .iter()
                    .find(|a| &*a.name.local == name)
                    .map(|a| a.value.to_string())
            };
            // What a browser reads as text up to the element's end tag is text here too.
            match &*tag.name {
                "iframe" => {
                    let mut frames = self.0.borrow_mut();
                    if frames.len() < 2 {
                        frames.push(Frame {
                            src: attr("src"),
                            width: attr("width"),
                            height: attr("height"),
                            allowfullscreen: attr("allowfullscreen").is_some(),
                            title: attr("title"),
                        });
                    }
                    TokenSinkResult::RawData(RawKind::Rawtext)
                }
                "script" => TokenSinkResult::RawData(RawKind::ScriptData),
                "style" | "xmp" | "noembed" | "noframes" | "noscript" => {
                    TokenSinkResult::RawData(RawKind::Rawtext)
                }
                "title" | "textarea" => TokenSinkResult::RawData(RawKind::Rcdata),
                "plaintext" => TokenSinkResult::Plaintext,
                _ => TokenSinkResult::Continue,
            }
        }
    }
    let tok = Tokenizer::new(Sink(RefCell::new(Vec::new())), TokenizerOpts::default());
    let input = BufferQueue::default();
    input.push_back(StrTendril::from_slice(html));
    let _ = tok.feed(&input);
    tok.end();
    tok.sink.0.into_inner()
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

    /// F11 (issue 61): the check looked for `<iframe` and `src="https://` in the cleaned
    /// text, so a protocol-relative `src` passed with the words in the frame's text, and the
    /// frame's text (raw script) was passed on. The frame is now rebuilt from its parsed
    /// attributes, with nothing inside it.
    #[test]
    fn the_frame_is_rebuilt_from_its_parsed_attributes_alone() {
        assert_eq!(
            player("<iframe src=\"//evil.example/x\"> src=\"https://</iframe>"),
            "",
            "a protocol-relative src"
        );
        assert_eq!(
            player("<iframe src=\"/embed/1\"></iframe>"),
            "",
            "a relative src"
        );
        assert_eq!(
            player(
                "<iframe src=\"https://v.example/e?a=1&amp;b=2\" width=\"640\" height=\"100%\" allowfullscreen title='A \"clip\" <b>' allow=\"camera\" onload=\"x()\" srcdoc=\"<script>y()</script>\"><script>alert(1)</script></iframe>"
            ),
            "<iframe src=\"https://v.example/e?a=1&amp;b=2\" width=\"640\" height=\"100%\" allowfullscreen=\"\" title=\"A &quot;clip&quot; &lt;b&gt;\"></iframe>"
        );
        assert_eq!(
            player(
                "<div><p>Watch:</p><iframe src=\"https://v.example/e\" width=\"1e9\" height=\"-1\"></iframe></div>"
            ),
            "<iframe src=\"https://v.example/e\"></iframe>",
            "markup around the frame and odd sizes go"
        );
        assert_eq!(
            player("<script>'<iframe src=\"https://v.example/e\"></iframe>'</script>"),
            "",
            "a frame in a script's text is text"
        );
        assert_eq!(
            player(
                "<iframe src=\"https://a.example/\"><iframe src=\"https://b.example/\"></iframe>"
            ),
            "<iframe src=\"https://a.example/\"></iframe>",
            "a frame's text is not a second frame, as in a browser"
        );
    }

    #[test]
    fn wrong_types_are_ignored() {
        let doc = json!({"type": 7, "title": ["x"], "width": -5, "height": 99999});
        let o = read(&doc, &base());
        assert_eq!(o, OEmbed::default());
    }
}
