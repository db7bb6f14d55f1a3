//! `/tags/{tag}`: our public posts with the hashtag, newest first, [`PAGE_SIZE`] a page
//! (`?max_id=`). Public only, as Mastodon's tag pages: unlisted posts stay off them. A name
//! that is not a hashtag Mastodon would make: 404.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::Response;
use uuid::Uuid;

use super::{
    Meta, PAGE_SIZE, PostView, load_posts, max_id, not_found, page_or_error, post_view, site_view,
};
use crate::statuses::access::readable_page_sql;
use crate::web::AppState;

pub async fn handler(
    State(s): State<AppState>,
    Path(tag): Path<String>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    page_or_error(&s, load(&s, &tag, uri.query(), &headers).await)
}

/// The tag's URL path segment, percent-encoded.
pub fn tag_path(s: &AppState, name: &str) -> String {
    format!(
        "{}/tags/{}",
        s.public_origin,
        url::form_urlencoded::byte_serialize(name.as_bytes()).collect::<String>()
    )
}

/// Ids of our public posts tagged `name`, newest first: the tag's `post_tags_pkey` range
/// walked backwards, each candidate probed by id under the one visibility rule
/// (`readable_page_sql`, the shape of the API's tag timeline, so a rare tag never walks every
/// public post).
pub async fn post_ids(
    s: &AppState,
    name: &str,
    max: Option<Uuid>,
    limit: i64,
) -> Result<Vec<Uuid>, sqlx::Error> {
    let page = format!(
        "{} ORDER BY c.id DESC LIMIT {limit}",
        if max.is_some() { "c.id < $3" } else { "true" }
    );
    let sql = readable_page_sql(
        &["SELECT t.post_id AS id FROM post_tags t WHERE t.tag = $1"],
        "AND p.visibility = 'public' AND p.local",
        2,
        &page,
        "",
    );
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
        .bind(name)
        .bind(None::<Uuid>)
        // `$3`, in the text only with a cursor (an unused parameter is allowed).
        .bind(max)
        .fetch_all(&s.pool)
        .await
}

/// Public posts only (tag pages and the tag feed).
pub fn public_only(posts: Vec<crate::mastodon::Status>) -> Vec<crate::mastodon::Status> {
    posts
        .into_iter()
        .filter(|p| p.visibility == "public")
        .collect()
}

async fn load(
    s: &AppState,
    raw: &str,
    query: Option<&str>,
    headers: &HeaderMap,
) -> Result<Response, sqlx::Error> {
    let missing = || Ok(not_found(s, StatusCode::NOT_FOUND));
    let Some(name) = crate::tags::normalize(raw) else {
        return missing();
    };
    let Some(max) = max_id(query) else {
        return missing();
    };
    let mut ids = post_ids(s, &name, max, PAGE_SIZE + 1).await?;
    let older_cursor = (ids.len() as i64 > PAGE_SIZE)
        .then(|| {
            ids.truncate(PAGE_SIZE as usize);
            ids.last().copied()
        })
        .flatten();
    let mut conn = s.pool.acquire().await?;
    let key = format!("tag {name} {max:?} {older_cursor:?}");
    let tag = super::validator::etag(&mut conn, &s.public_origin, &key, &[], &ids).await?;
    if let Some(resp) = super::not_modified(s, headers, &tag, "text/html; charset=utf-8") {
        return Ok(resp);
    }
    let posts: Vec<PostView> = public_only(load_posts(s, &mut conn, &ids).await?)
        .iter()
        .map(|st| post_view(s, st))
        .collect();
    let url = tag_path(s, &name);
    let (image, image_alt) = super::first_image(&posts).unzip();
    let meta = Meta {
        title: format!("#{name} · {}", site_view(s).host),
        description: format!("Public posts tagged #{name} on {}", site_view(s).host),
        canonical: url.clone(),
        // A tag has no ActivityPub document of its own; the instance actor speaks for the
        // server whose posts these are.
        activity: Some(format!("{}/actor", s.public_origin)),
        atom: Some(format!("{url}/atom.xml")),
        og_type: "website",
        image,
        image_alt,
        ..Meta::default()
    };
    let last_modified = posts.iter().map(|p| p.updated_at).max();
    let older = older_cursor.map(|c| format!("{url}?max_id={c}"));
    Ok(super::render_page(
        s,
        headers,
        "tag.html",
        minijinja::context! {
            site => site_view(s), meta => meta, tag => name, posts => posts, older => older,
        },
        super::HTML,
        last_modified,
        Some(tag),
    ))
}
