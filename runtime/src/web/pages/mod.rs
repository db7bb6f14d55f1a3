//! The public pages (R-WEB-1): `/` (the instance and its accounts), `/@handle`
//! (a profile and its public and unlisted posts, newest first), `/@handle/{id}` (a post and
//! its thread), `/tags/{tag}` (public posts with the tag), and an Atom feed per account and
//! per tag. Server-rendered with minijinja (HTML auto-escaping; only HTML that was sanitized
//! or rendered from escaped text when stored is marked safe), no JavaScript, one small
//! stylesheet from our own origin.
//!
//! Who reads what: every page is the anonymous reader's view. Posts are rendered through
//! `mastodon::status::render` with no viewer, so `statuses::access` (R-MAPI-VIS) keeps only
//! public and unlisted ones whatever the list query selected; the queries select no more
//! (profile: public + unlisted, tag pages and the tag feed: public only, as Mastodon). A
//! followers-only, direct, unknown or remote post, a remote or unknown account: the same
//! 404 page. Handlers load, then hand plain data to the templates.

use std::sync::OnceLock;

use axum::Router;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use chrono::{DateTime, Utc};
use minijinja::Environment;
use serde::Serialize;
use sqlx::PgConnection;
use uuid::Uuid;

use super::AppState;
use crate::mastodon::{Account, Status};

pub mod cache;
pub mod feed;
pub mod home;
pub mod post;
pub mod profile;
pub mod tag;
pub mod theme;
pub mod validator;

/// Posts per page and per feed.
pub const PAGE_SIZE: i64 = 20;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/", get(home::handler))
        .route("/@{name}/atom.xml", get(feed::account_handler))
        .route("/tags/{tag}", get(tag::handler))
        .route("/tags/{tag}/atom.xml", get(feed::tag_handler))
        .route("/assets/pages.css", get(stylesheet))
}

const TEMPLATES: &[(&str, &str)] = &[
    ("layout.html", include_str!("templates/layout.html")),
    ("post_item.html", include_str!("templates/post_item.html")),
    ("posts.html", include_str!("templates/posts.html")),
    ("profile.html", include_str!("templates/profile.html")),
    ("post.html", include_str!("templates/post.html")),
    ("tag.html", include_str!("templates/tag.html")),
    ("home.html", include_str!("templates/home.html")),
    ("error.html", include_str!("templates/error.html")),
    ("feed.xml", include_str!("templates/feed.xml")),
];

const CSS: &str = include_str!("templates/pages.css");

/// The stylesheet served: `pages.css` and the accounts' theme colours (`theme`).
fn stylesheet_text() -> &'static str {
    static TEXT: OnceLock<String> = OnceLock::new();
    TEXT.get_or_init(|| format!("{CSS}{}", theme::css()))
}

fn env() -> &'static Environment<'static> {
    static ENV: OnceLock<Environment<'static>> = OnceLock::new();
    ENV.get_or_init(|| environment(TEMPLATES))
}

/// A template environment of `templates` (name, source), compiled into the binary. They are
/// covered by the tests; one that does not parse is logged and then renders as the error
/// page, never a panic.
pub(crate) fn environment(templates: &[(&'static str, &'static str)]) -> Environment<'static> {
    let mut env = Environment::new();
    for (name, source) in templates {
        if let Err(e) = env.add_template(name, source) {
            tracing::error!(template = name, error = %e, "a page template does not parse");
        }
    }
    env
}

/// The stylesheet's version: its SHA-256, so its URL changes with it and may be cached for a
/// year.
pub fn css_version() -> &'static str {
    static V: OnceLock<String> = OnceLock::new();
    V.get_or_init(|| {
        use sha2::Digest;
        let d = sha2::Sha256::digest(stylesheet_text().as_bytes());
        d.iter().take(8).map(|b| format!("{b:02x}")).collect()
    })
}

async fn stylesheet() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/css; charset=utf-8"),
            (header::CACHE_CONTROL, "public, max-age=31536000, immutable"),
        ],
        stylesheet_text(),
    )
        .into_response()
}

/// `template` rendered with `ctx`, or the error text when a template is broken (logged).
pub fn render_text(template: &str, ctx: minijinja::Value) -> Result<String, StatusCode> {
    env()
        .get_template(template)
        .and_then(|t| t.render(ctx))
        .map_err(|e| {
            tracing::error!(template, error = %e, "rendering a page failed");
            StatusCode::INTERNAL_SERVER_ERROR
        })
}

/// The policy of every page: nothing runs, nothing is loaded from another origin (images
/// and media from ours, or from the media drive's when it has its own), no framing.
pub fn content_security_policy(s: &AppState) -> String {
    let drive = drive_origin(s)
        .filter(|d| d != &s.public_origin)
        .map(|d| format!(" {d}"))
        .unwrap_or_default();
    format!(
        "default-src 'none'; img-src 'self'{drive}; media-src 'self'{drive}; style-src 'self'; \
         base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )
}

/// The origin media files are served from (`STORAGE_URL_BASE`'s).
fn drive_origin(s: &AppState) -> Option<String> {
    let u = url::Url::parse(&s.drive.url("x")).ok()?;
    Some(u.origin().ascii_serialization()).filter(|o| o != "null")
}

/// Whether an image URL may be shown without a request to another origin.
pub fn local_url(s: &AppState, url: &str) -> bool {
    let Ok(u) = url::Url::parse(url) else {
        return false;
    };
    let origin = u.origin().ascii_serialization();
    origin == s.public_origin || drive_origin(s).is_some_and(|d| d == origin)
}

/// `html` (sanitized) with each `:shortcode:` of `emojis` in its text shown as the emoji's
/// image, as Mastodon's web pages show them. Only text is touched — never a tag or an attribute
/// value — and only emojis served from our origin (ours, or remote ones through the media
/// proxy), so the page still loads nothing from elsewhere.
pub fn emojify(s: &AppState, html: &str, emojis: &[crate::mastodon::CustomEmoji]) -> String {
    let shown: Vec<(&str, &str)> = emojis
        .iter()
        .filter(|e| local_url(s, &e.url))
        .map(|e| (e.shortcode.as_str(), e.url.as_str()))
        .collect();
    emoji_images(html, &shown)
}

/// [`emojify`]'s rewrite, for `(shortcode, url)` pairs already allowed.
fn emoji_images(html: &str, emojis: &[(&str, &str)]) -> String {
    if emojis.is_empty() || !html.contains(':') {
        return html.to_string();
    }
    let mut out = String::with_capacity(html.len());
    // Inside a tag (and inside a quoted attribute value of one) nothing is replaced.
    let (mut in_tag, mut in_quote) = (false, false);
    let mut rest = html;
    while let Some(c) = rest.chars().next() {
        if !in_tag && c == ':' {
            let code: String = rest[1..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if rest[1 + code.len()..].starts_with(':')
                && let Some((_, url)) = emojis.iter().find(|(sc, _)| *sc == code)
            {
                let alt = format!(":{code}:");
                out.push_str(&format!(
                    "<img class=\"emoji\" src=\"{}\" alt=\"{alt}\" title=\"{alt}\">",
                    crate::html::escape(url)
                ));
                rest = &rest[code.len() + 2..];
                continue;
            }
        }
        match c {
            '<' if !in_tag => in_tag = true,
            '"' if in_tag => in_quote = !in_quote,
            '>' if in_tag && !in_quote => in_tag = false,
            _ => {}
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// The headers every page has.
fn page_headers(s: &AppState, resp: &mut Response, content_type: &'static str) {
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    if let Ok(v) = HeaderValue::from_str(&content_security_policy(s)) {
        h.insert(header::CONTENT_SECURITY_POLICY, v);
    }
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    // The IRIs and `/@` paths answer JSON or HTML by `Accept` (`permalinks`).
    h.insert(header::VARY, HeaderValue::from_static("Accept"));
}

/// A rendered page (or feed) as a response; `cache` decides 200 or 304 from the request.
pub struct Rendered {
    pub body: String,
    pub content_type: &'static str,
    /// The newest time of what the page shows.
    pub last_modified: Option<DateTime<Utc>>,
    /// The validator computed before rendering (`validator::etag`); `None`: the body's hash.
    pub etag: Option<String>,
}

/// A page's answer: 200 with the body, or 304 when the reader's copy is current.
/// A page's content type.
pub const HTML: &str = "text/html; charset=utf-8";

/// The page `template` renders from `ctx`, as `content_type`, answered as `respond` answers
/// (`last_modified` and `etag` as in `Rendered`); a template that does not render is the
/// error page.
pub fn render_page(
    s: &AppState,
    req: &HeaderMap,
    template: &str,
    ctx: minijinja::Value,
    content_type: &'static str,
    last_modified: Option<DateTime<Utc>>,
    etag: Option<String>,
) -> Response {
    match render_text(template, ctx) {
        Ok(body) => respond(
            s,
            req,
            Rendered {
                body,
                content_type,
                last_modified,
                etag,
            },
        ),
        Err(status) => not_found(s, status),
    }
}

pub fn respond(s: &AppState, req: &HeaderMap, page: Rendered) -> Response {
    let mut resp = cache::conditional(req, page.body, page.last_modified, page.etag);
    page_headers(s, &mut resp, page.content_type);
    resp
}

/// The 304 of a page whose validator `tag` (computed before rendering) the reader already
/// has, with the page's headers; `None`: render it.
pub fn not_modified(
    s: &AppState,
    req: &HeaderMap,
    tag: &str,
    content_type: &'static str,
) -> Option<Response> {
    let mut resp = cache::not_modified(req, tag)?;
    page_headers(s, &mut resp, content_type);
    Some(resp)
}

/// A page that does not exist: one answer for unknown, remote, followers-only and direct
/// alike (`status` 404), or a deleted post (410).
pub fn not_found(s: &AppState, status: StatusCode) -> Response {
    let (title, message) = match status {
        StatusCode::NOT_FOUND => ("Not found", "There is nothing here, or it is not public."),
        StatusCode::GONE => ("Deleted", "This post has been deleted."),
        _ => (
            "Unavailable",
            "This page cannot be shown right now; try again shortly.",
        ),
    };
    let ctx = minijinja::context! { site => site_view(s), title => title, message => message };
    let body = render_text("error.html", ctx).unwrap_or_default();
    let mut resp = (status, body).into_response();
    page_headers(s, &mut resp, "text/html; charset=utf-8");
    resp.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=60"),
    );
    resp
}

/// A page answer from a handler's result: its page, or a database error's 503 page.
pub fn page_or_error(s: &AppState, r: Result<Response, sqlx::Error>) -> Response {
    r.unwrap_or_else(|e| {
        tracing::warn!(error = %e, "database error while rendering a page");
        let mut resp = not_found(s, StatusCode::SERVICE_UNAVAILABLE);
        resp.headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        resp
    })
}

/// What every page says about the site.
#[derive(Serialize)]
pub struct SiteView {
    pub origin: String,
    pub host: String,
    pub css: String,
}

pub fn site_view(s: &AppState) -> SiteView {
    let host = url::Url::parse(&s.public_origin)
        .ok()
        .and_then(|u| u.host_str().map(str::to_string))
        .unwrap_or_default();
    SiteView {
        origin: s.public_origin.clone(),
        host,
        css: format!("/assets/pages.css?v={}", css_version()),
    }
}

/// A page's `<head>` facts: title, description, OpenGraph and Twitter card, canonical and
/// ActivityPub alternates, feed.
#[derive(Serialize, Default)]
pub struct Meta {
    pub title: String,
    pub description: String,
    pub canonical: String,
    /// The ActivityPub document of this page (`<link rel="alternate" type="application/activity+json">`).
    pub activity: Option<String>,
    pub atom: Option<String>,
    pub og_type: &'static str,
    pub image: Option<String>,
    pub image_alt: Option<String>,
    pub author: Option<String>,
    pub published: Option<String>,
    /// The colour of the account the page is about (`theme`), a class on `<body>`.
    pub theme: Option<String>,
}

/// A profile's or a post author's face on a page.
#[derive(Serialize, Clone)]
pub struct AuthorView {
    pub name: String,
    pub handle: String,
    pub url: String,
    pub avatar: Option<String>,
    pub local: bool,
}

#[derive(Serialize)]
pub struct MediaView {
    pub kind: String,
    pub url: String,
    pub preview: String,
    pub alt: String,
    pub width: Option<u64>,
    pub height: Option<u64>,
    /// Shown inline (an image or video on our origin); otherwise a link.
    pub inline: bool,
}

/// A poll's options and tally (public for a public post, as on Mastodon's pages).
#[derive(Serialize)]
pub struct PollView {
    pub options: Vec<PollOptionView>,
    /// `None`: a remote poll whose server does not say.
    pub voters: Option<i64>,
    pub expired: bool,
    /// `None`: a remote poll without end.
    pub closes: Option<String>,
}

#[derive(Serialize)]
pub struct PollOptionView {
    pub title: String,
    pub votes: i64,
    /// Of all votes, rounded.
    pub percent: i64,
}

#[derive(Serialize)]
pub struct TagView {
    pub name: String,
    pub url: String,
}

/// One post as pages and feeds show it.
#[derive(Serialize)]
pub struct PostView {
    pub id: String,
    /// The permalink page (`/@name/{id}`) for ours, the post's own URL for theirs.
    pub url: String,
    pub iri: String,
    pub published: String,
    pub published_human: String,
    pub updated: String,
    pub author: AuthorView,
    /// Sanitized HTML (ours rendered from escaped text, theirs through ammonia on arrival).
    pub content_html: String,
    /// Plain text, for descriptions.
    pub text: String,
    pub spoiler: String,
    pub sensitive: bool,
    pub visibility: String,
    pub media: Vec<MediaView>,
    pub poll: Option<PollView>,
    pub tags: Vec<TagView>,
    pub reply: bool,
    pub replies: i64,
    pub boosts: i64,
    pub favourites: i64,
    pub local: bool,
    /// The post's language (`lang` of its article), when known.
    pub language: Option<String>,
    /// On a profile, when this item is the account's boost of the post: the booster.
    pub boosted_by: Option<AuthorView>,
    #[serde(skip)]
    pub updated_at: DateTime<Utc>,
}

/// The first image a list of posts shows inline (its URL and alt text), for `og:image`; else
/// the first local author's avatar.
pub fn first_image(posts: &[PostView]) -> Option<(String, String)> {
    posts
        .iter()
        .flat_map(|p| &p.media)
        .find(|m| m.inline && m.kind == "image")
        .map(|m| (m.url.clone(), m.alt.clone()))
        .or_else(|| {
            posts.iter().find_map(|p| {
                let a = &p.author;
                a.avatar
                    .clone()
                    .map(|url| (url, format!("Avatar of {}", a.name)))
            })
        })
}

/// `/@name` of a local account, absolute.
pub fn profile_url(s: &AppState, username: &str) -> String {
    format!("{}/@{username}", s.public_origin)
}

/// The permalink page of a local post.
pub fn post_url(s: &AppState, username: &str, id: &str) -> String {
    format!("{}/@{username}/{id}", s.public_origin)
}

pub fn author_view(s: &AppState, a: &Account) -> AuthorView {
    let local = !a.acct.contains('@');
    AuthorView {
        name: if a.display_name.trim().is_empty() {
            a.username.clone()
        } else {
            a.display_name.clone()
        },
        handle: if local {
            format!("@{}@{}", a.username, site_view(s).host)
        } else {
            format!("@{}", a.acct)
        },
        url: if local {
            profile_url(s, &a.username)
        } else {
            a.url.clone()
        },
        avatar: Some(a.avatar.clone()).filter(|u| local_url(s, u)),
        local,
    }
}

pub fn post_view(s: &AppState, st: &Status) -> PostView {
    let author = author_view(s, &st.account);
    let url = if author.local {
        post_url(s, &st.account.username, &st.id)
    } else {
        st.url.clone()
    };
    let media = st
        .media_attachments
        .iter()
        .filter_map(|m| {
            let url = m.url.clone()?;
            let preview = m.preview_url.clone().unwrap_or_else(|| url.clone());
            let dims = m.meta.small.as_ref().or(m.meta.original.as_ref());
            Some(MediaView {
                inline: local_url(s, &url) && local_url(s, &preview),
                kind: m.kind.clone(),
                alt: m.description.clone().unwrap_or_default(),
                width: dims.map(|d| d.width),
                height: dims.map(|d| d.height),
                url,
                preview,
            })
        })
        .collect();
    let tags = st
        .tags
        .iter()
        .map(|t| TagView {
            url: format!(
                "{}/tags/{}",
                s.public_origin,
                url::form_urlencoded::byte_serialize(t.name.as_bytes()).collect::<String>()
            ),
            name: t.name.clone(),
        })
        .collect();
    let poll = st.poll.as_ref().map(|p| PollView {
        options: p
            .options
            .iter()
            .map(|o| PollOptionView {
                title: o.title.clone(),
                votes: o.votes_count,
                percent: (o.votes_count * 100)
                    .checked_div(p.votes_count)
                    .unwrap_or_default(),
            })
            .collect(),
        voters: p.voters_count,
        expired: p.expired,
        closes: p
            .expires_at
            .map(|t| t.format("%Y-%m-%d %H:%M UTC").to_string()),
    });
    let updated_at = st.edited_at.unwrap_or(st.created_at);
    PostView {
        poll,
        id: st.id.clone(),
        iri: st.uri.clone(),
        published: st
            .created_at
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        published_human: st.created_at.format("%Y-%m-%d %H:%M UTC").to_string(),
        updated: updated_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        text: plain_text(&st.content),
        content_html: emojify(s, &st.content, &st.emojis),
        spoiler: st.spoiler_text.clone(),
        sensitive: st.sensitive,
        visibility: st.visibility.clone(),
        media,
        tags,
        reply: st.in_reply_to_id.is_some(),
        replies: st.replies_count,
        boosts: st.reblogs_count,
        favourites: st.favourites_count,
        local: author.local,
        language: st.language.clone().filter(|l| {
            !l.is_empty()
                && l.len() <= 16
                && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        }),
        author,
        url,
        boosted_by: None,
        updated_at,
    }
}

/// One item of a profile's list: a post, or the account's boost of one (the boosted post,
/// marked with its booster; newer of the two times).
pub fn entry_view(s: &AppState, st: &Status) -> PostView {
    match &st.reblog {
        Some(inner) => {
            let mut v = post_view(s, inner);
            v.boosted_by = Some(author_view(s, &st.account));
            v.updated_at = v.updated_at.max(st.created_at);
            v
        }
        None => post_view(s, st),
    }
}

/// Statuses for `ids` as the anonymous reader may see them (the one visibility check), in
/// order; boosts are left out (a page shows posts).
pub async fn load_posts(
    s: &AppState,
    conn: &mut PgConnection,
    ids: &[Uuid],
) -> Result<Vec<Status>, sqlx::Error> {
    let all = crate::mastodon::status::render(conn, s.site(), None, ids).await?;
    Ok(all
        .into_iter()
        .filter(|st| st.reblog.is_none() && matches!(st.visibility.as_str(), "public" | "unlisted"))
        .collect())
}

/// Like [`load_posts`], boosts included: a boost is kept only when `statuses::access` (in
/// `render`) let it through and both it and its post are public or unlisted.
pub async fn load_entries(
    s: &AppState,
    conn: &mut PgConnection,
    ids: &[Uuid],
) -> Result<Vec<Status>, sqlx::Error> {
    let all = crate::mastodon::status::render(conn, s.site(), None, ids).await?;
    let shown = |v: &str| matches!(v, "public" | "unlisted");
    Ok(all
        .into_iter()
        .filter(|st| {
            shown(&st.visibility) && st.reblog.as_ref().is_none_or(|r| shown(&r.visibility))
        })
        .collect())
}

/// The text of stored HTML, for descriptions: tags dropped (block ends and line breaks as a
/// space, inline tags as nothing, so `#<span>tag</span>` stays `#tag`), the few entities our
/// HTML has decoded, whitespace collapsed.
pub fn plain_text(html: &str) -> String {
    let mut out = String::with_capacity(html.len());
    let mut tag: Option<String> = None;
    for c in html.chars() {
        match (&mut tag, c) {
            (None, '<') => tag = Some(String::new()),
            (None, c) => out.push(c),
            (Some(name), '>') => {
                let name = name.trim_start_matches('/').to_ascii_lowercase();
                let name = name.split([' ', '/']).next().unwrap_or_default();
                if matches!(name, "p" | "br" | "li" | "div" | "blockquote" | "pre") {
                    out.push(' ');
                }
                tag = None;
            }
            (Some(name), c) => name.push(c),
        }
    }
    let decoded = out
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&#x27;", "'")
        .replace("&#x2F;", "/")
        .replace("&#x2f;", "/")
        .replace("&nbsp;", " ")
        .replace("&amp;", "&");
    decoded.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// At most `max` characters of `text`, with an ellipsis when cut.
pub fn excerpt(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut cut: String = text.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// A `max_id` query parameter: `Some(None)` when absent, `Some(id)` for a post id, `None`
/// for anything else (it names no page).
pub fn max_id(query: Option<&str>) -> Option<Option<Uuid>> {
    let Some(q) = query else {
        return Some(None);
    };
    for (k, v) in url::form_urlencoded::parse(q.as_bytes()) {
        if k == "max_id" && !v.is_empty() {
            return Uuid::parse_str(&v).ok().map(Some);
        }
    }
    Some(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_and_excerpts() {
        assert_eq!(
            plain_text("<p>a &amp; b &lt;c&gt;</p><p>d<br>e</p>"),
            "a & b <c> d e"
        );
        assert_eq!(
            plain_text("<p>x <a href=\"/tags/t\" class=\"hashtag\">#<span>t</span></a></p>"),
            "x #t"
        );
        assert_eq!(excerpt("abcdef", 4), "abc…");
        assert_eq!(excerpt("abc", 4), "abc");
    }

    #[test]
    fn max_id_is_an_id_or_nothing() {
        assert_eq!(max_id(None), Some(None));
        assert_eq!(max_id(Some("a=b")), Some(None));
        assert_eq!(max_id(Some("max_id=99999999999999999999999999")), None);
        let id = Uuid::now_v7();
        assert_eq!(max_id(Some(&format!("max_id={id}"))), Some(Some(id)));
    }

    #[test]
    fn every_template_parses() {
        for (name, _) in TEMPLATES {
            assert!(env().get_template(name).is_ok(), "{name}");
        }
    }
}

#[cfg(test)]
mod emoji_tests {
    use super::emoji_images;

    #[test]
    fn shortcodes_in_text_become_images_and_nothing_else_changes() {
        let e = [("party", "https://h.example/media/e/party.png?a=1&b=2")];
        assert_eq!(
            emoji_images("<p>hi :party: and :nope: and :party::party:</p>", &e),
            "<p>hi <img class=\"emoji\" src=\"https://h.example/media/e/party.png?a=1&amp;b=2\" \
             alt=\":party:\" title=\":party:\"> and :nope: and <img class=\"emoji\" \
             src=\"https://h.example/media/e/party.png?a=1&amp;b=2\" alt=\":party:\" \
             title=\":party:\"><img class=\"emoji\" src=\"https://h.example/media/e/party.png?a=1&amp;b=2\" \
             alt=\":party:\" title=\":party:\"></p>"
        );
        // Tags and attribute values (even with a '>' inside) are left alone.
        let html = r#"<a href="https://x.example/:party:" title="a>:party:">x</a>"#;
        assert_eq!(emoji_images(html, &e), html);
        assert_eq!(emoji_images("<p>:party:</p>", &[]), "<p>:party:</p>");
        assert_eq!(emoji_images("<p>::</p>:", &e), "<p>::</p>:");
        assert_eq!(emoji_images("<p>é:party</p>", &e), "<p>é:party</p>");
    }
}
