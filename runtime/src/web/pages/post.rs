//! `/@handle/{id}` (and `/users/{name}/statuses/{id}` for a browser): a local post's
//! permalink with its thread — the public and unlisted ancestors and replies the anonymous
//! reader may see. A followers-only, direct, remote, unknown or malformed id, or a post of
//! another account than the handle's: 404. A deleted post (its tombstone is kept): 410.

use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use uuid::Uuid;

use super::{Meta, PostView, excerpt, load_posts, not_found, page_or_error, post_view, site_view};
use crate::accounts;
use crate::statuses::context;
use crate::web::AppState;

/// At most this many replies are shown under a post.
const MAX_REPLIES: usize = 200;

/// The permalink page of the post `id` of `name`.
pub async fn page(s: &AppState, name: &str, id: &str, headers: &HeaderMap) -> Response {
    page_or_error(s, load(s, name, id, headers).await)
}

async fn load(
    s: &AppState,
    name: &str,
    id: &str,
    headers: &HeaderMap,
) -> Result<Response, sqlx::Error> {
    let missing = || Ok(not_found(s, StatusCode::NOT_FOUND));
    if !accounts::valid_username(name) {
        return missing();
    }
    let Ok(id) = Uuid::parse_str(id) else {
        return missing();
    };
    let Some(account) = accounts::by_username(&s.pool, name).await? else {
        return missing();
    };
    let mut conn = s.pool.acquire().await?;
    let owner = account.id.to_string();
    let Some(status) = load_posts(s, &mut conn, &[id])
        .await?
        .into_iter()
        .find(|st| st.account.id == owner)
    else {
        // Deleted: the tombstone of its IRI (kept for ActivityPub's 410 too).
        let uri = s.site().urls.status(&account.username, id);
        let gone: Option<i32> =
            sqlx::query_scalar("SELECT 1 FROM status_tombstones WHERE uri = $1")
                .bind(&uri)
                .fetch_optional(&mut *conn)
                .await?;
        return Ok(not_found(
            s,
            if gone.is_some() {
                StatusCode::GONE
            } else {
                StatusCode::NOT_FOUND
            },
        ));
    };
    let (up, mut down) = context::thread(&mut conn, None, id).await?;
    down.truncate(MAX_REPLIES);
    let ancestors: Vec<PostView> = load_posts(s, &mut conn, &up)
        .await?
        .iter()
        .map(|st| post_view(s, st))
        .collect();
    let descendants: Vec<PostView> = load_posts(s, &mut conn, &down)
        .await?
        .iter()
        .map(|st| post_view(s, st))
        .collect();
    let post = post_view(s, &status);
    // A sensitive post's pictures stay behind its warning in link previews too.
    let image = post
        .media
        .iter()
        .find(|m| m.inline && m.kind == "image" && !post.sensitive);
    let text = if post.spoiler.is_empty() {
        post.text.clone()
    } else {
        post.spoiler.clone()
    };
    let meta = Meta {
        title: format!(
            "{}: \u{201c}{}\u{201d}",
            post.author.name,
            excerpt(&text, 60)
        ),
        description: excerpt(&text, 200),
        canonical: post.url.clone(),
        activity: Some(post.iri.clone()),
        atom: Some(format!(
            "{}/atom.xml",
            super::profile_url(s, &account.username)
        )),
        og_type: "article",
        image: image
            .map(|m| m.url.clone())
            .or_else(|| post.author.avatar.clone()),
        image_alt: image.map(|m| m.alt.clone()).filter(|a| !a.is_empty()),
        author: Some(post.author.name.clone()),
        published: Some(post.published.clone()),
        theme: super::theme::shown(&s.pool, account.id).await,
    };
    let last_modified = ancestors
        .iter()
        .chain(&descendants)
        .map(|p| p.updated_at)
        .chain([post.updated_at])
        .max();
    // A thread is most of the work of its page: its body's hash is its tag.
    Ok(super::render_page(
        s,
        headers,
        "post.html",
        minijinja::context! {
            site => site_view(s), meta => meta, current => post.id.clone(), post => post,
            ancestors => ancestors, descendants => descendants,
        },
        super::HTML,
        last_modified,
        None,
    ))
}
