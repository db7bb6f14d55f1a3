//! HTML that leaves or enters the server: remote HTML is cut down to an allow-list before it
//! is stored or served, and text is escaped (our users' statuses are rendered by
//! `content::render`, which escapes through here). Remote `url`s are taken only when they are
//! http(s).
//!
//! The allow-list is Mastodon's (what every fediverse client renders): paragraphs, line
//! breaks, links, spans, emphasis, code, quotes and lists; links get
//! `rel="nofollow noopener noreferrer"`; only http(s) URLs survive; no scripts, event
//! handlers, styles or other attributes.

use std::collections::HashSet;
use std::sync::OnceLock;

fn sanitizer() -> &'static ammonia::Builder<'static> {
    static SANITIZER: OnceLock<ammonia::Builder<'static>> = OnceLock::new();
    SANITIZER.get_or_init(|| {
        let mut b = ammonia::Builder::empty();
        b.add_tags([
            "p",
            "br",
            "a",
            "span",
            "del",
            "s",
            "pre",
            "code",
            "em",
            "strong",
            "b",
            "i",
            "u",
            "blockquote",
            "ul",
            "ol",
            "li",
        ])
        // `class` is allowed through `allowed_classes` below (ammonia refuses both).
        .add_tag_attributes("a", ["href"])
        .add_tag_attributes("ol", ["start", "reversed"])
        .add_tag_attributes("li", ["value"])
        // Microformat classes clients style (mentions, hashtags, shortened links) — no others.
        .allowed_classes(
            [
                (
                    "a",
                    [
                        "mention",
                        "hashtag",
                        "u-url",
                        "status-link",
                        "unhandled-link",
                    ]
                    .as_slice(),
                ),
                ("span", ["h-card", "ellipsis", "invisible"].as_slice()),
            ]
            .into_iter()
            .map(|(tag, classes)| (tag, classes.iter().copied().collect::<HashSet<_>>()))
            .collect(),
        )
        .url_schemes(HashSet::from(["http", "https"]))
        .url_relative(ammonia::UrlRelative::Deny)
        .link_rel(Some("nofollow noopener noreferrer"));
        b
    })
}

/// Most start tags remote HTML may have and still be parsed (a long article has a few
/// hundred). html5ever's tree building never recurses, but it is quadratic in nesting depth (a
/// 1 MiB body of nested `<div>`s would hold a worker or a web node for many minutes), and with
/// a bounded number of tags the depth is bounded too. Past it the text is kept, every tag
/// dropped, without parsing (R-API).
pub const MAX_TAGS: usize = 1024;

/// Whether `html` may hold more than [`MAX_TAGS`] start tags: a start tag is always `<`
/// followed by an ASCII letter in the source, so counting those over-counts (comments,
/// attribute values) but never under-counts.
fn too_many_tags(html: &str) -> bool {
    html.as_bytes()
        .windows(2)
        .filter(|w| w[0] == b'<' && w[1].is_ascii_alphabetic())
        .count()
        > MAX_TAGS
}

/// `html` less everything from a `<` that may open a tag, comment or declaration to the next
/// `>`: the text of markup too big to parse, in one linear pass.
fn strip_tags(html: &str) -> String {
    let mut out = String::with_capacity(html.len());
    let mut in_tag = false;
    let mut chars = html.chars().peekable();
    while let Some(c) = chars.next() {
        if in_tag {
            in_tag = c != '>';
        } else if c == '<'
            && chars
                .peek()
                .is_some_and(|n| n.is_ascii_alphabetic() || matches!(n, '/' | '!' | '?'))
        {
            in_tag = true;
        } else {
            out.push(c);
        }
    }
    out
}

/// The entities the sanitizer writes (and most HTML uses) as characters.
fn decode_entities(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&nbsp;", "\u{a0}")
        .replace("&amp;", "&")
}

/// Remote HTML cut down to the allow-list: safe to store, serve and render. HTML with more than
/// [`MAX_TAGS`] tags is kept as one escaped paragraph of its text.
pub fn sanitize_remote(html: &str) -> String {
    if too_many_tags(html) {
        return format!("<p>{}</p>", escape(&decode_entities(&strip_tags(html))));
    }
    sanitizer().clean(html).to_string()
}

/// A remote `url` we keep: http(s) only (`javascript:`, `data:` and the like are dropped).
pub fn http_url(url: &str) -> Option<&str> {
    let parsed = url::Url::parse(url).ok()?;
    matches!(parsed.scheme(), "http" | "https").then_some(url)
}

/// The text of (remote) HTML, for fields Mastodon serves as plain text (`spoiler_text`):
/// every tag dropped, the entities the sanitizer writes turned back into characters.
pub fn to_text(html: &str) -> String {
    if too_many_tags(html) {
        return decode_entities(&strip_tags(html));
    }
    static STRIPPER: OnceLock<ammonia::Builder<'static>> = OnceLock::new();
    let stripped = STRIPPER
        .get_or_init(ammonia::Builder::empty)
        .clean(html)
        .to_string();
    decode_entities(&stripped)
}

/// The text of HTML this server already sanitized (a rendered status's `content`), for
/// matching rather than showing: tags dropped without a parser, entities decoded. What the
/// sanitizer let through is well-formed, so no parse is needed (filters match every status of
/// every page a reader with keyword filters reads).
pub fn text_of_sanitized(html: &str) -> String {
    decode_entities(&strip_tags(html))
}

/// Escapes the five characters that are markup in HTML text and attributes.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn to_text_drops_markup_and_keeps_characters() {
        assert_eq!(
            to_text("<p>CW: <b>a &amp; b</b> &lt;x&gt;</p>"),
            "CW: a & b <x>"
        );
        assert_eq!(to_text("<script>alert(1)</script>spoiler"), "spoiler");
    }

    #[test]
    fn scripts_handlers_and_foreign_schemes_never_survive() {
        for (dirty, clean) in [
            ("<p>hi<script>alert(1)</script></p>", "<p>hi</p>"),
            ("<img src=x onerror=alert(1)>", ""),
            (
                r#"<a href="javascript:alert(1)" onclick="x()">go</a>"#,
                r#"<a rel="nofollow noopener noreferrer">go</a>"#,
            ),
            (r#"<p style="color:red" class="x">t</p>"#, "<p>t</p>"),
            ("<iframe src=https://evil></iframe>ok", "ok"),
        ] {
            assert_eq!(sanitize_remote(dirty), clean, "{dirty}");
        }
    }

    #[test]
    fn mastodon_markup_is_kept() {
        let html = r#"<p>hi <span class="h-card"><a href="https://m.example/@a" class="u-url mention">@<span>a</span></a></span> <a href="https://m.example/tags/x" class="mention hashtag" rel="tag">#x</a><br>line</p>"#;
        let out = sanitize_remote(html);
        assert!(out.contains(r#"<span class="h-card">"#), "{out}");
        assert!(out.contains(r#"href="https://m.example/@a""#), "{out}");
        assert!(out.contains(r#"class="u-url mention""#), "{out}");
        assert!(out.contains("<br>line</p>"), "{out}");
    }

    /// R-API: html5ever neither recurses nor overflows on deep nesting, but its tree
    /// building is quadratic in it (40 000 nested `<div>`s took 153 s, `<blockquote>`s 221 s
    /// in a debug build; a 1 MiB inbox body holds 200 000). Past MAX_TAGS start tags the
    /// text is kept without parsing, so each of these takes linear time, on a small stack.
    #[test]
    fn nesting_and_tag_floods_cost_linear_time() {
        let cases = [
            "<div>",
            "<blockquote>",
            "<ul><li>",
            "<b id=1>",
            "<div><!-- -->",
        ]
        .map(|open| open.repeat(1024 * 1024 / open.len()) + "a &amp; b <script>x</script>");
        let took = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(move || {
                cases.map(|html| {
                    let t = std::time::Instant::now();
                    let clean = sanitize_remote(&html);
                    assert!(
                        !clean.contains("<div") && !clean.contains("<script"),
                        "{clean:.80}"
                    );
                    assert!(
                        clean.ends_with("a &amp; b x</p>"),
                        "{}",
                        &clean[clean.len() - 40..]
                    );
                    assert_eq!(to_text(&html), "a & b x");
                    t.elapsed()
                })
            })
            .expect("thread")
            .join()
            .expect("no stack overflow");
        for t in took {
            assert!(t < std::time::Duration::from_secs(5), "{took:?}");
        }
        // Up to the bound, HTML is parsed as always, and deep nesting within it is cheap.
        let nested = "<blockquote>".repeat(MAX_TAGS - 1) + "<b>deep</b>";
        let t = std::time::Instant::now();
        assert!(sanitize_remote(&nested).contains("<b>deep</b>"));
        assert!(t.elapsed() < std::time::Duration::from_secs(5));
    }

    #[test]
    fn only_http_urls_are_kept() {
        assert_eq!(
            http_url("https://m.example/@a/1"),
            Some("https://m.example/@a/1")
        );
        for bad in [
            "javascript:alert(1)",
            "data:text/html,x",
            "ftp://x/y",
            "nope",
        ] {
            assert_eq!(http_url(bad), None, "{bad}");
        }
    }
}
