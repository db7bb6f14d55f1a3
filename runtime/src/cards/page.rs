//! What a fetched page says about itself: OpenGraph and Twitter-card `<meta>`, the plain
//! `<title>` and description, the language, and where its oEmbed document is. Read with the
//! WHATWG tokenizer as a browser would (entities decoded, `<script>` and `<style>` bodies are
//! text, not tags — a page cannot hide a `<meta>` in a script string), without building a DOM.
//! Everything here is untrusted text: it is stored and served as text, never as markup.

use std::cell::RefCell;
use std::collections::HashMap;

use html5ever::tendril::StrTendril;
use html5ever::tokenizer::states::RawKind;
use html5ever::tokenizer::{
    BufferQueue, CharacterTokens, StartTag, TagToken, Token, TokenSink, TokenSinkResult, Tokenizer,
    TokenizerOpts,
};
use url::Url;

/// Longest title, description and name kept (Mastodon's card columns are as short).
pub const MAX_TITLE: usize = 255;
pub const MAX_DESCRIPTION: usize = 1_000;
pub const MAX_NAME: usize = 255;

/// The facts a page states about itself.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PageMeta {
    pub title: String,
    pub description: String,
    pub site_name: String,
    pub author: String,
    /// `og:image` (or `twitter:image`), resolved against the page's URL; http(s) only.
    pub image: Option<Url>,
    pub image_alt: String,
    /// `<html lang>` or `og:locale`, as a language code (`en`, `pt`).
    pub language: Option<String>,
    pub published: Option<chrono::DateTime<chrono::Utc>>,
    /// The page's oEmbed document (`<link rel="alternate" type="application/json+oembed">`).
    pub oembed: Option<Url>,
}

#[derive(Default)]
struct Collected {
    meta: HashMap<String, String>,
    /// The first `<title>`'s text; `in_title` while inside it, `title_done` after it.
    title: String,
    in_title: bool,
    title_done: bool,
    lang: Option<String>,
    oembed: Option<String>,
}

struct Sink(RefCell<Collected>);

impl TokenSink for Sink {
    type Handle = ();

    fn process_token(&self, token: Token, _line: u64) -> TokenSinkResult<()> {
        let mut c = self.0.borrow_mut();
        match token {
            TagToken(tag) if tag.kind == StartTag => {
                let attr = |name: &str| {
                    tag.attrs
                        .iter()
                        .find(|a| &*a.name.local == name)
                        .map(|a| a.value.to_string())
                };
                match &*tag.name {
                    "html" if c.lang.is_none() => c.lang = attr("lang"),
                    "meta" => {
                        let key = attr("property").or_else(|| attr("name"));
                        if let (Some(k), Some(v)) = (key, attr("content")) {
                            // The first statement of a property is the page's (as OpenGraph
                            // readers take it); later ones are ignored.
                            c.meta.entry(k.trim().to_ascii_lowercase()).or_insert(v);
                        }
                    }
                    "link" => {
                        let rel = attr("rel").unwrap_or_default().to_ascii_lowercase();
                        let ty = attr("type").unwrap_or_default().to_ascii_lowercase();
                        if c.oembed.is_none()
                            && rel.split_ascii_whitespace().any(|r| r == "alternate")
                            && ty.trim() == "application/json+oembed"
                        {
                            c.oembed = attr("href");
                        }
                    }
                    "title" => {
                        c.in_title = !c.title_done;
                        return TokenSinkResult::RawData(RawKind::Rcdata);
                    }
                    "textarea" => return TokenSinkResult::RawData(RawKind::Rcdata),
                    "script" => return TokenSinkResult::RawData(RawKind::ScriptData),
                    "style" | "xmp" | "iframe" | "noembed" | "noframes" => {
                        return TokenSinkResult::RawData(RawKind::Rawtext);
                    }
                    _ => {}
                }
            }
            TagToken(tag) if &*tag.name == "title" => {
                c.title_done |= c.in_title;
                c.in_title = false;
            }
            // Bounded: a page cannot make us hold a megabyte of title.
            CharacterTokens(text) if c.in_title && c.title.len() < MAX_TITLE * 4 => {
                c.title.push_str(&text);
            }
            _ => {}
        }
        TokenSinkResult::Continue
    }
}

/// Reads `html` (the page served at `base`).
pub fn parse(html: &str, base: &Url) -> PageMeta {
    let tok = Tokenizer::new(
        Sink(RefCell::new(Collected::default())),
        TokenizerOpts::default(),
    );
    let input = BufferQueue::default();
    input.push_back(StrTendril::from_slice(html));
    let _ = tok.feed(&input);
    tok.end();
    let mut c = tok.sink.0.into_inner();
    // The `<title>` is the last fallback of `og:title`, under a key no `<meta>` can have.
    let title = std::mem::take(&mut c.title);
    c.meta.insert("\u{0}title".into(), title);
    let m = &c.meta;
    let first = |keys: &[&str]| {
        keys.iter()
            .filter_map(|k| m.get(*k))
            .map(|v| clean(v))
            .find(|v| !v.is_empty())
            .unwrap_or_default()
    };
    let resolve = |raw: &str| {
        base.join(raw.trim())
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https"))
    };
    let image = [
        "og:image:secure_url",
        "og:image",
        "og:image:url",
        "twitter:image",
    ]
    .iter()
    .filter_map(|k| m.get(*k))
    .find_map(|v| resolve(v));
    let language = c
        .lang
        .as_deref()
        .or(m.get("og:locale").map(String::as_str))
        .and_then(language_code);
    let published = m
        .get("article:published_time")
        .and_then(|v| chrono::DateTime::parse_from_rfc3339(v.trim()).ok())
        .map(|d| d.with_timezone(&chrono::Utc));
    // An author given as a profile URL is not a name.
    let author = Some(first(&["author", "article:author", "twitter:creator"]))
        .filter(|a| resolve(a).is_none() || !a.contains("://"))
        .unwrap_or_default();
    PageMeta {
        title: cap(
            &first(&["og:title", "twitter:title", "\u{0}title"]),
            MAX_TITLE,
        ),
        description: cap(
            &first(&["og:description", "twitter:description", "description"]),
            MAX_DESCRIPTION,
        ),
        site_name: cap(&first(&["og:site_name", "application-name"]), MAX_NAME),
        author: cap(&author, MAX_NAME),
        image,
        image_alt: cap(
            &first(&["og:image:alt", "twitter:image:alt"]),
            MAX_DESCRIPTION,
        ),
        language,
        published,
        oembed: c.oembed.as_deref().and_then(resolve),
    }
}

/// Whitespace runs (newlines included) become one space; control characters go.
pub fn clean(s: &str) -> String {
    s.split(|c: char| c.is_whitespace() || c.is_control())
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// At most `max` characters, cut at a character boundary with an ellipsis.
pub fn cap(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// `en-US` / `en_US` → `en`; anything that is not a language tag → none.
fn language_code(tag: &str) -> Option<String> {
    let primary = tag.trim().split(['-', '_']).next()?.to_ascii_lowercase();
    ((2..=3).contains(&primary.len()) && primary.chars().all(|c| c.is_ascii_alphabetic()))
        .then_some(primary)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> Url {
        Url::parse("https://news.example/a/story").expect("url")
    }

    #[test]
    fn opengraph_wins_over_the_plain_title_and_relative_urls_resolve() {
        let html = r#"<!doctype html><html lang="en-GB"><head>
            <title>Plain &amp; simple</title>
            <meta name="description" content="plain description">
            <meta property="og:title" content="  The
               Story  ">
            <meta property="og:description" content="What &quot;happened&quot;">
            <meta property="og:image" content="/img/lead.jpg">
            <meta property="og:image:alt" content="A lead photo">
            <meta property="og:site_name" content="News">
            <meta property="article:published_time" content="2026-11-30T08:00:00Z">
            <link rel="alternate" type="application/json+oembed" href="/oembed?u=1">
            </head><body></body></html>"#;
        let m = parse(html, &base());
        assert_eq!(m.title, "The Story");
        assert_eq!(m.description, "What \"happened\"");
        assert_eq!(
            m.image.as_ref().map(Url::as_str),
            Some("https://news.example/img/lead.jpg")
        );
        assert_eq!(m.image_alt, "A lead photo");
        assert_eq!(m.site_name, "News");
        assert_eq!(m.language.as_deref(), Some("en"));
        assert_eq!(
            m.oembed.as_ref().map(Url::as_str),
            Some("https://news.example/oembed?u=1")
        );
        assert!(m.published.is_some());
    }

    #[test]
    fn the_title_element_and_description_are_the_fallback() {
        let m = parse(
            "<title>Only &lt;this&gt;</title><meta name=description content=desc>",
            &base(),
        );
        assert_eq!(m.title, "Only <this>");
        assert_eq!(m.description, "desc");
        assert_eq!(m.image, None);
    }

    #[test]
    fn a_meta_inside_a_script_or_a_javascript_image_is_not_taken() {
        let html = r#"<script>var s = "<meta property='og:title' content='hidden'>";</script>
            <meta property="og:image" content="javascript:alert(1)">
            <title><meta property="og:title" content="in title"></title>"#;
        let m = parse(html, &base());
        assert_eq!(m.title, "<meta property=\"og:title\" content=\"in title\">");
        assert_eq!(m.image, None);
    }

    #[test]
    fn long_fields_are_cut_and_markup_stays_text() {
        let long = "x".repeat(5_000);
        let html =
            format!(r#"<meta property="og:title" content="<script>alert(1)</script>{long}">"#);
        let m = parse(&html, &base());
        assert!(m.title.starts_with("<script>alert(1)</script>"));
        assert_eq!(m.title.chars().count(), MAX_TITLE);
        assert!(m.title.ends_with('…'));
    }
}
