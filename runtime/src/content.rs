//! A local status's text as HTML: the one rendering that our API (`mastodon::status`) and our
//! federation (`federation::outbound::statuses::object`) both show. The text is escaped, split into a
//! paragraph per blank-line-separated block with `<br>` for single line breaks; http(s) URLs
//! become links, `@user@host` (or `@user` for a local account) mentions and `#tags` become
//! links plus `tag` entries (`Mention`, `Hashtag`), and the mentioned actors are addressed.
//!
//! Mentions are resolved once, when the status is written or edited
//! (`federation::mentions::resolve`), and stored with it (`statuses.mentions`); rendering is
//! pure, so every reader produces the same HTML. A mention that did not resolve stays text.
//! The markup is Mastodon's and within `html::sanitize_remote`'s allow-list, so peers that
//! sanitize as Mastodon does keep all of it.

use std::sync::OnceLock;

use linkify::{LinkFinder, LinkKind};
use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::html::{escape, http_url};

/// A mention as resolved when the status was written.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mention {
    /// What was typed after the `@`, lowercased: `user@host`, or `user` alone.
    pub key: String,
    /// The tag's `name`: `@user@host` (our domain for a local account).
    pub name: String,
    /// The mentioned actor's IRI.
    pub href: String,
}

/// A status's HTML with what it mentions and tags.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Rendered {
    pub html: String,
    /// ActivityStreams `tag` entries: `Mention`s, then `Hashtag`s, each once.
    pub tags: Vec<Value>,
    /// The IRIs of the mentioned actors (to address in `cc`), each once.
    pub mentioned: Vec<String>,
}

/// A mention as typed: the key it is stored under, the user part and the host, if any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Typed<'a> {
    pub key: String,
    pub user: &'a str,
    pub host: Option<&'a str>,
}

enum Piece<'a> {
    Text(&'a str),
    Url(&'a str),
    Mention(Typed<'a>),
    Tag(&'a str),
}

/// `@user`, `@user@host[:port]` or `#tag`, after the start of the text or a character that
/// cannot be part of a word, an address or a URL (so `a@b.example` and `x/#y` are not).
fn mention_or_tag() -> Option<&'static Regex> {
    static RE: OnceLock<Option<Regex>> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(
            r"(?:^|[^\p{L}\p{N}_@/#&])(?:(?P<m>@(?P<user>[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?)(?:@(?P<host>[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?(?::[0-9]{1,5})?))?)|(?P<t>#(?P<tag>[\p{L}\p{N}_]*[\p{L}_][\p{L}\p{N}_]*)))",
        )
        .ok()
    })
    .as_ref()
}

fn typed<'a>(user: &'a str, host: Option<&'a str>) -> Typed<'a> {
    let key = match host {
        Some(h) => format!("{user}@{h}"),
        None => user.to_string(),
    }
    .to_lowercase();
    Typed { key, user, host }
}

/// Mentions and hashtags in a run of text that holds no URL.
fn words<'a>(text: &'a str, out: &mut Vec<Piece<'a>>) {
    let Some(re) = mention_or_tag() else {
        out.push(Piece::Text(text));
        return;
    };
    let mut last = 0;
    for c in re.captures_iter(text) {
        let (whole, piece) = if let (Some(m), Some(user)) = (c.name("m"), c.name("user")) {
            let host = c.name("host").map(|h| h.as_str());
            (m, Piece::Mention(typed(user.as_str(), host)))
        } else if let (Some(t), Some(tag)) = (c.name("t"), c.name("tag")) {
            (t, Piece::Tag(tag.as_str()))
        } else {
            continue;
        };
        if whole.start() > last {
            out.push(Piece::Text(&text[last..whole.start()]));
        }
        out.push(piece);
        last = whole.end();
    }
    if last < text.len() {
        out.push(Piece::Text(&text[last..]));
    }
}

/// A line cut into text, http(s) URLs, mentions and hashtags.
fn pieces(line: &str) -> Vec<Piece<'_>> {
    let mut finder = LinkFinder::new();
    finder.kinds(&[LinkKind::Url]).url_must_have_scheme(true);
    let mut out = Vec::new();
    for span in finder.spans(line) {
        match span.kind() {
            Some(LinkKind::Url) if http_url(span.as_str()).is_some() => {
                out.push(Piece::Url(span.as_str()))
            }
            Some(_) => out.push(Piece::Text(span.as_str())),
            None => words(span.as_str(), &mut out),
        }
    }
    out
}

/// The mentions a text makes, each once, in order (what to resolve before storing it).
pub fn mentions_in(text: &str) -> Vec<Typed<'_>> {
    let mut out: Vec<Typed<'_>> = Vec::new();
    for line in text.lines() {
        for p in pieces(line) {
            if let Piece::Mention(m) = p
                && !out.iter().any(|o| o.key == m.key)
            {
                out.push(m);
            }
        }
    }
    out
}

/// The origin a local status's hashtag links live on, from the status's URI
/// (`<origin>/users/<name>/statuses/<id>`); `None` for a status minted without federation.
fn origin_of(uri: &str) -> Option<&str> {
    uri.starts_with("http")
        .then(|| uri.rsplit_once("/users/").map(|(origin, _)| origin))
        .flatten()
}

fn hashtag_href(origin: &str, tag: &str) -> Option<String> {
    tag_url(origin, &tag.to_lowercase())
}

/// `<origin>/tags/<name>` with the name percent-encoded as one path segment, so no name —
/// a stored one from before names were checked included — can add path segments, a query or a
/// fragment to the link (R-API).
pub fn tag_url(origin: &str, name: &str) -> Option<String> {
    let mut url = url::Url::parse(origin).ok()?;
    url.path_segments_mut()
        .ok()?
        .pop_if_empty()
        .push("tags")
        .push(name);
    Some(url.into())
}

/// The longest hashtag name kept (a remote one longer is dropped).
pub const MAX_TAG_CHARS: usize = 100;

/// Whether `name` (without `#`) is a hashtag name as Mastodon's `HASHTAG_NAME_RE` has them:
/// letters, digits, `_` and the separators `·` (U+00B7), `・` (U+30FB) and the zero-width
/// non-joiner, not all digits, at most [`MAX_TAG_CHARS`]. Remote `Hashtag` names are checked
/// with it when a note is stored, so `x/../../oauth/authorize` or `<script>` never become tags
/// (R-API).
pub fn valid_tag_name(name: &str) -> bool {
    let separator = |c: char| matches!(c, '_' | '\u{b7}' | '\u{30fb}' | '\u{200c}');
    !name.is_empty()
        && name.chars().count() <= MAX_TAG_CHARS
        && name.chars().all(|c| c.is_alphanumeric() || separator(c))
        && name.chars().any(|c| c.is_alphabetic() || separator(c))
}

/// The hashtags of `text`, lowercased without `#`, each once in order of appearance (what
/// `statuses.tags` stores and `/api/v1/timelines/tag/:hashtag` finds).
pub fn hashtags(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in text.lines() {
        for p in pieces(line) {
            if let Piece::Tag(tag) = p {
                let tag = tag.to_lowercase();
                if !out.contains(&tag) {
                    out.push(tag);
                }
            }
        }
    }
    out
}

/// Renders a local status: `text` as written, `uri` its ActivityPub id, `mentions` as stored.
pub fn render(text: &str, uri: &str, mentions: &[Mention]) -> Rendered {
    let origin = origin_of(uri);
    let mut r = Rendered::default();
    let mut hashtags: Vec<Value> = Vec::new();
    let text = text.replace("\r\n", "\n");
    for block in text.split("\n\n") {
        let block = block.trim_matches('\n');
        if block.is_empty() {
            continue;
        }
        let mut lines = Vec::new();
        for line in block.split('\n') {
            let mut html = String::new();
            for piece in pieces(line) {
                match piece {
                    Piece::Text(t) => html.push_str(&escape(t)),
                    Piece::Url(u) => {
                        let u = escape(u);
                        html.push_str(&format!(
                            r#"<a href="{u}" rel="nofollow noopener noreferrer">{u}</a>"#
                        ));
                    }
                    Piece::Mention(m) => match mentions.iter().find(|s| s.key == m.key) {
                        Some(found) => {
                            html.push_str(&format!(
                                r#"<span class="h-card"><a href="{}" class="u-url mention">@<span>{}</span></a></span>"#,
                                escape(&found.href),
                                escape(m.user)
                            ));
                            if !r.mentioned.contains(&found.href) {
                                r.mentioned.push(found.href.clone());
                                r.tags.push(json!({
                                    "type": "Mention", "href": found.href, "name": found.name,
                                }));
                            }
                        }
                        None => {
                            html.push('@');
                            html.push_str(&escape(&m.key_as_typed()));
                        }
                    },
                    Piece::Tag(tag) => match origin.and_then(|o| hashtag_href(o, tag)) {
                        Some(href) => {
                            html.push_str(&format!(
                                r##"<a href="{}" class="mention hashtag" rel="tag">#<span>{}</span></a>"##,
                                escape(&href),
                                escape(tag)
                            ));
                            if !hashtags.iter().any(|h| h["href"] == href.as_str()) {
                                hashtags.push(json!({
                                    "type": "Hashtag", "href": href,
                                    "name": format!("#{}", tag.to_lowercase()),
                                }));
                            }
                        }
                        None => {
                            html.push('#');
                            html.push_str(&escape(tag));
                        }
                    },
                }
            }
            lines.push(html);
        }
        r.html.push_str(&format!("<p>{}</p>", lines.join("<br>")));
    }
    r.tags.extend(hashtags);
    r
}

impl Typed<'_> {
    /// The mention as it was typed (without the `@`).
    fn key_as_typed(&self) -> String {
        match self.host {
            Some(h) => format!("{}@{h}", self.user),
            None => self.user.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::html::sanitize_remote;

    const URI: &str = "https://h.example/users/alice/statuses/1";

    fn bob() -> Mention {
        Mention {
            key: "bob@m.example".into(),
            name: "@bob@m.example".into(),
            href: "https://m.example/users/bob".into(),
        }
    }

    #[test]
    fn the_pattern_compiles() {
        assert!(mention_or_tag().is_some());
    }

    #[test]
    fn plain_text_is_escaped_with_paragraphs_and_breaks() {
        let r = render("<b>hi</b> & \"you\"\nnext\n\n\nsecond", URI, &[]);
        assert_eq!(
            r.html,
            "<p>&lt;b&gt;hi&lt;/b&gt; &amp; &quot;you&quot;<br>next</p><p>second</p>"
        );
        assert!(r.tags.is_empty() && r.mentioned.is_empty());
        assert_eq!(render("", URI, &[]).html, "");
    }

    #[test]
    fn urls_become_links_without_their_trailing_punctuation() {
        let r = render(
            "see https://x.example/a?b=1&c=2. or (http://y.example/p)",
            URI,
            &[],
        );
        assert_eq!(
            r.html,
            "<p>see <a href=\"https://x.example/a?b=1&amp;c=2\" rel=\"nofollow noopener noreferrer\">https://x.example/a?b=1&amp;c=2</a>. or (<a href=\"http://y.example/p\" rel=\"nofollow noopener noreferrer\">http://y.example/p</a>)</p>"
        );
        // Other schemes and bare addresses stay text.
        let r = render(
            "javascript:alert(1) ftp://f.example mail a@b.example",
            URI,
            &[],
        );
        assert!(!r.html.contains("<a"), "{}", r.html);
    }

    #[test]
    fn tag_names_are_checked_and_their_urls_encoded() {
        for ok in [
            "rust",
            "Fedi_verse",
            "日本語",
            "café",
            "a·b",
            "_",
            "2024tag",
        ] {
            assert!(valid_tag_name(ok), "{ok}");
        }
        for bad in [
            "",
            "x/../../oauth/authorize",
            "<script>",
            "a b",
            "a#b",
            "a?b",
            "2024",
            "dot.ted",
            &"a".repeat(MAX_TAG_CHARS + 1),
        ] {
            assert!(!valid_tag_name(bad), "{bad}");
        }
        assert_eq!(
            tag_url("https://h.example", "rust").as_deref(),
            Some("https://h.example/tags/rust")
        );
        assert_eq!(
            tag_url("https://h.example", "x/../../oauth/authorize?a=1#f").as_deref(),
            Some("https://h.example/tags/x%2F..%2F..%2Foauth%2Fauthorize%3Fa=1%23f")
        );
        assert_eq!(
            tag_url("https://h.example", "<script>").as_deref(),
            Some("https://h.example/tags/%3Cscript%3E")
        );
    }

    #[test]
    fn resolved_mentions_and_hashtags_become_links_and_tags() {
        let r = render(
            "hi @Bob@m.example and @carol@z.example #Rust #rust",
            URI,
            &[bob()],
        );
        assert_eq!(
            r.html,
            "<p>hi <span class=\"h-card\"><a href=\"https://m.example/users/bob\" class=\"u-url mention\">@<span>Bob</span></a></span> and @carol@z.example <a href=\"https://h.example/tags/rust\" class=\"mention hashtag\" rel=\"tag\">#<span>Rust</span></a> <a href=\"https://h.example/tags/rust\" class=\"mention hashtag\" rel=\"tag\">#<span>rust</span></a></p>"
        );
        assert_eq!(
            r.tags,
            vec![
                json!({"type": "Mention", "href": "https://m.example/users/bob", "name": "@bob@m.example"}),
                json!({"type": "Hashtag", "href": "https://h.example/tags/rust", "name": "#rust"}),
            ]
        );
        assert_eq!(r.mentioned, ["https://m.example/users/bob"]);
    }

    #[test]
    fn what_is_not_a_mention_or_tag_stays_text() {
        for text in ["a@b.example", "x/#y", "&#39;", "#123", "@", "#", "mail@@x"] {
            let r = render(text, URI, &[bob()]);
            assert!(r.tags.is_empty(), "{text}: {:?}", r.tags);
        }
        // Without federation (a urn: id) hashtags have nowhere to link to.
        let r = render("#tag", "urn:uuid:1", &[]);
        assert_eq!(r.html, "<p>#tag</p>");
    }

    #[test]
    fn mentions_are_found_once_each_with_their_host() {
        let m = mentions_in("@bob@m.example @BOB@M.example\n@alice @x@h.example:8443.");
        let keys: Vec<&str> = m.iter().map(|t| t.key.as_str()).collect();
        assert_eq!(keys, ["bob@m.example", "alice", "x@h.example:8443"]);
        assert_eq!(m[2].host, Some("h.example:8443"));
    }

    #[test]
    fn our_markup_is_within_the_allow_list() {
        let r = render("@bob@m.example #tag https://x.example/", URI, &[bob()]);
        let clean = sanitize_remote(&r.html);
        for kept in [
            "class=\"h-card\"",
            "class=\"u-url mention\"",
            "href=\"https://m.example/users/bob\"",
            "class=\"mention hashtag\"",
            "href=\"https://h.example/tags/tag\"",
            "href=\"https://x.example/\"",
        ] {
            assert!(clean.contains(kept), "{kept} in {clean}");
        }
    }

    #[test]
    fn hashtags_are_lowercased_once_each() {
        assert_eq!(
            hashtags("Hello #Rust and #rust,\n#Fedi_verse https://x.example/#frag"),
            ["rust", "fedi_verse"]
        );
        assert!(hashtags("no tags here").is_empty());
    }
}
