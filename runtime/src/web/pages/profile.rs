//! `/@handle` (and `/users/{name}` for a browser): a local account's profile — display name,
//! bio, fields (links as `rel="me"`, so other sites can verify them), avatar and header,
//! counts, pinned posts — and its public and unlisted posts, newest first, [`PAGE_SIZE`] a page
//! (`?max_id=` for older ones). Unknown, remote (`/@name@host`) and malformed handles: 404.

use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde::Serialize;
use uuid::Uuid;

use super::{
    Meta, PAGE_SIZE, PostView, author_view, excerpt, load_posts, max_id, not_found, page_or_error,
    plain_text, post_view, profile_url, site_view,
};
use crate::accounts;
use crate::federation::actors::profiles;
use crate::statuses::access::{local_visible_sql, visible_sql};
use crate::web::AppState;

use super::HTML;

/// The profile page of `name` (also what `/users/{name}` shows a browser).
pub async fn page(s: &AppState, name: &str, query: Option<&str>, headers: &HeaderMap) -> Response {
    page_or_error(s, load(s, name, query, headers).await)
}

#[derive(Serialize)]
struct FieldView {
    name: String,
    value: String,
    /// The value, when it is an http(s) URL: shown as a `rel="me"` link.
    href: Option<String>,
    /// When the linked page was found linking back (`rel="me"`), as a date; shown marked.
    verified: Option<String>,
}

#[derive(Serialize)]
struct ProfileView {
    name: String,
    handle: String,
    url: String,
    avatar: Option<String>,
    header: Option<String>,
    note_html: String,
    fields: Vec<FieldView>,
    statuses: i64,
    following: i64,
    followers: i64,
}

/// The ids of a page of `account`'s public and unlisted posts, newest first (the caller asks
/// one more than a page, to know whether there is an older one): a range scan of
/// `statuses_account_id`. With `boosts`, the account's public and unlisted boosts of posts an
/// anonymous reader may read are merged in by id (a boost's id is v7 of when it was made): a
/// range scan of `reblogs_account`, each boosted post probed by id under the one rule
/// ([`visible_sql`]; `render` checks it again through `statuses::access`).
pub async fn post_ids(
    s: &AppState,
    account: Uuid,
    max: Option<Uuid>,
    limit: i64,
    boosts: bool,
) -> Result<Vec<Uuid>, sqlx::Error> {
    let posts = format!(
        "SELECT s.id FROM statuses s
          WHERE s.account_id = $1 AND s.visibility IN ('public', 'unlisted') AND {}{}
          ORDER BY s.id DESC LIMIT {limit}",
        local_visible_sql("s", 2),
        if max.is_some() { " AND s.id < $3" } else { "" },
    );
    let sql = if boosts {
        let boosted = format!(
            "SELECT r.id FROM reblogs r
              CROSS JOIN LATERAL (SELECT 1 FROM posts p WHERE p.id = r.post_id AND {} LIMIT 1) ok
              WHERE r.account_id = $1 AND r.visibility IN ('public', 'unlisted'){}
              ORDER BY r.id DESC LIMIT {limit}",
            visible_sql("p", 2),
            if max.is_some() { " AND r.id < $3" } else { "" },
        );
        format!("SELECT id FROM (({posts}) UNION ALL ({boosted})) c ORDER BY id DESC LIMIT {limit}")
    } else {
        posts
    };
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
        .bind(account)
        .bind(None::<Uuid>)
        // `$3`, in the text only with a cursor (an unused parameter is allowed).
        .bind(max)
        .fetch_all(&s.pool)
        .await
}

async fn load(
    s: &AppState,
    name: &str,
    query: Option<&str>,
    headers: &HeaderMap,
) -> Result<Response, sqlx::Error> {
    let missing = || Ok(not_found(s, StatusCode::NOT_FOUND));
    if !accounts::valid_username(name) {
        return missing();
    }
    let Some(max) = max_id(query) else {
        return missing();
    };
    let Some(account) = accounts::by_username(&s.pool, name).await? else {
        return missing();
    };
    let mut conn = s.pool.acquire().await?;
    let mut ids = post_ids(s, account.id, max, PAGE_SIZE + 1, true).await?;
    let older_cursor = (ids.len() as i64 > PAGE_SIZE)
        .then(|| {
            ids.truncate(PAGE_SIZE as usize);
            ids.last().copied()
        })
        .flatten();
    // Pinned posts (at most 5 of ours) head the first page, through the same visibility
    // check: a pinned followers-only post is not shown.
    let pins = match max {
        None => crate::statuses::pins::of_local(&mut conn, account.id).await?,
        Some(_) => Vec::new(),
    };
    // The validator, before any rendering: a current copy is a 304 now.
    let shown: Vec<Uuid> = pins.iter().chain(&ids).copied().collect();
    let key = format!("profile {} {max:?} {older_cursor:?}", account.id);
    let tag =
        super::validator::etag(&mut conn, &s.public_origin, &key, &[account.id], &shown).await?;
    if let Some(resp) = super::not_modified(s, headers, &tag, HTML) {
        return Ok(resp);
    }
    let Some(profile) = profiles::load(&mut *conn, account.id).await? else {
        return missing();
    };
    let entity = crate::mastodon::account::local(&mut conn, s.site().urls, account.id).await?;
    let pinned: Vec<PostView> = load_posts(s, &mut conn, &pins)
        .await?
        .iter()
        .map(|st| post_view(s, st))
        .collect();
    let posts: Vec<PostView> = super::load_entries(s, &mut conn, &ids)
        .await?
        .iter()
        .map(|st| super::entry_view(s, st))
        .collect();
    let author = author_view(s, &entity);
    let url = profile_url(s, &account.username);
    let header = Some(entity.header.clone())
        .filter(|h| profile.header_url.is_some() && super::local_url(s, h));
    let view = ProfileView {
        name: author.name.clone(),
        handle: author.handle.clone(),
        url: url.clone(),
        avatar: author.avatar.clone(),
        header,
        note_html: super::emojify(s, &entity.note, &entity.emojis),
        fields: profile
            .fields
            .iter()
            .zip(&entity.fields)
            .map(|(f, e)| {
                let href = crate::html::http_url(f.value.trim()).map(str::to_string);
                FieldView {
                    name: f.name.clone(),
                    value: f.value.clone(),
                    verified: e
                        .verified_at
                        .filter(|_| href.is_some())
                        .map(|at| at.format("%Y-%m-%d").to_string()),
                    href,
                }
            })
            .collect(),
        statuses: entity.statuses_count,
        following: entity.following_count,
        followers: entity.followers_count,
    };
    let note = plain_text(&entity.note);
    let meta = Meta {
        title: format!("{} ({})", view.name, view.handle),
        description: if note.is_empty() {
            format!("Posts by {}", view.handle)
        } else {
            excerpt(&note, 200)
        },
        canonical: url.clone(),
        activity: Some(s.site().urls.actor(&account.username)),
        atom: Some(format!("{url}/atom.xml")),
        og_type: "profile",
        image: view.avatar.clone(),
        image_alt: view
            .avatar
            .as_ref()
            .map(|_| format!("Avatar of {}", view.name)),
        author: Some(view.name.clone()),
        published: None,
        theme: super::theme::shown(&s.pool, account.id).await,
    };
    let last_modified = posts
        .iter()
        .chain(&pinned)
        .map(|p| p.updated_at)
        .chain([profile.updated_at])
        .max();
    let older = older_cursor.map(|c| format!("{url}?max_id={c}"));
    Ok(super::render_page(
        s,
        headers,
        "profile.html",
        minijinja::context! {
            site => site_view(s), meta => meta, profile => view, pinned => pinned,
            posts => posts, older => older,
        },
        super::HTML,
        last_modified,
        Some(tag),
    ))
}
