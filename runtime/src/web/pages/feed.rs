//! Atom feeds (RFC 4287): `/@handle/atom.xml` (the account's public and unlisted posts, as its
//! profile) and `/tags/{tag}/atom.xml` (our public posts with the tag), the newest
//! [`PAGE_SIZE`]. Entries carry the post's HTML as `content type="html"`: escaped once by
//! the template (minijinja escapes `.xml` templates), so a reader unescapes it back to the
//! sanitized HTML. Characters XML 1.0 cannot carry (C0 controls but tab and line breaks) are
//! dropped from everything written.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde::Serialize;

use super::{
    PAGE_SIZE, PostView, excerpt, load_posts, not_found, page_or_error, post_view, profile_url,
    site_view,
};
use crate::accounts;
use crate::web::AppState;

const ATOM: &str = "application/atom+xml; charset=utf-8";

/// `s` without the characters XML 1.0 does not allow.
pub fn xml_clean(s: &str) -> String {
    s.chars()
        .filter(|&c| {
            matches!(c, '\t' | '\n' | '\r') || (c >= ' ' && c != '\u{fffe}' && c != '\u{ffff}')
        })
        .collect()
}

#[derive(Serialize)]
struct FeedView {
    id: String,
    title: String,
    subtitle: String,
    updated: String,
    html: String,
    icon: Option<String>,
}

#[derive(Serialize)]
struct EntryView {
    #[serde(flatten)]
    post: PostView,
    title: String,
}

fn entries(s: &AppState, posts: &[crate::mastodon::Status]) -> Vec<EntryView> {
    posts
        .iter()
        .map(|st| {
            let mut p = post_view(s, st);
            p.content_html = xml_clean(&p.content_html);
            p.spoiler = xml_clean(&p.spoiler);
            p.author.name = xml_clean(&p.author.name);
            for m in &mut p.media {
                m.alt = xml_clean(&m.alt);
            }
            let title = if p.spoiler.is_empty() {
                excerpt(&xml_clean(&p.text), 80)
            } else {
                p.spoiler.clone()
            };
            EntryView {
                title: if title.is_empty() {
                    format!("Post by {}", p.author.name)
                } else {
                    title
                },
                post: p,
            }
        })
        .collect()
}

fn render(
    s: &AppState,
    headers: &HeaderMap,
    feed: FeedView,
    posts: Vec<EntryView>,
    tag: String,
) -> Response {
    let last_modified = posts.iter().map(|e| e.post.updated_at).max();
    super::render_page(
        s,
        headers,
        "feed.xml",
        minijinja::context! { feed => feed, posts => posts },
        ATOM,
        last_modified,
        Some(tag),
    )
}

pub async fn account_handler(
    State(s): State<AppState>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Response {
    page_or_error(&s, account_feed(&s, &name, &headers).await)
}

async fn account_feed(
    s: &AppState,
    name: &str,
    headers: &HeaderMap,
) -> Result<Response, sqlx::Error> {
    if !accounts::valid_username(name) {
        return Ok(not_found(s, StatusCode::NOT_FOUND));
    }
    let Some(account) = accounts::by_username(&s.pool, name).await? else {
        return Ok(not_found(s, StatusCode::NOT_FOUND));
    };
    let Some(profile) = crate::federation::actors::profiles::load(&s.pool, account.id).await?
    else {
        return Ok(not_found(s, StatusCode::NOT_FOUND));
    };
    // The feed carries the account's own posts (as Mastodon's), not its boosts.
    let ids = super::profile::post_ids(s, account.id, None, PAGE_SIZE, false).await?;
    let mut conn = s.pool.acquire().await?;
    let key = format!("account feed {}", account.id);
    let tag =
        super::validator::etag(&mut conn, &s.public_origin, &key, &[account.id], &ids).await?;
    if let Some(resp) = super::not_modified(s, headers, &tag, ATOM) {
        return Ok(resp);
    }
    let posts = entries(s, &load_posts(s, &mut conn, &ids).await?);
    let entity = crate::mastodon::account::local(&mut conn, s.site().urls, account.id).await?;
    let author = super::author_view(s, &entity);
    let html = profile_url(s, &account.username);
    let updated = posts
        .iter()
        .map(|e| e.post.updated_at)
        .chain([profile.updated_at])
        .max()
        .unwrap_or(profile.updated_at);
    let feed = FeedView {
        id: format!("{html}/atom.xml"),
        title: xml_clean(&format!("{} ({})", author.name, author.handle)),
        subtitle: xml_clean(&excerpt(&super::plain_text(&entity.note), 200)),
        updated: updated.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        html,
        icon: author.avatar,
    };
    Ok(render(s, headers, feed, posts, tag))
}

pub async fn tag_handler(
    State(s): State<AppState>,
    Path(tag): Path<String>,
    headers: HeaderMap,
) -> Response {
    page_or_error(&s, tag_feed(&s, &tag, &headers).await)
}

async fn tag_feed(s: &AppState, raw: &str, headers: &HeaderMap) -> Result<Response, sqlx::Error> {
    let Some(name) = crate::tags::normalize(raw) else {
        return Ok(not_found(s, StatusCode::NOT_FOUND));
    };
    let ids = super::tag::post_ids(s, &name, None, PAGE_SIZE).await?;
    let mut conn = s.pool.acquire().await?;
    let key = format!("tag feed {name}");
    let tag = super::validator::etag(&mut conn, &s.public_origin, &key, &[], &ids).await?;
    if let Some(resp) = super::not_modified(s, headers, &tag, ATOM) {
        return Ok(resp);
    }
    let posts = entries(
        s,
        &super::tag::public_only(load_posts(s, &mut conn, &ids).await?),
    );
    let html = super::tag::tag_path(s, &name);
    let updated = posts
        .iter()
        .map(|e| e.post.updated_at)
        .max()
        .unwrap_or(chrono::DateTime::<chrono::Utc>::UNIX_EPOCH);
    let feed = FeedView {
        id: format!("{html}/atom.xml"),
        title: format!("#{name} · {}", site_view(s).host),
        subtitle: format!("Public posts tagged #{name}"),
        updated: updated.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        html,
        icon: None,
    };
    Ok(render(s, headers, feed, posts, tag))
}
