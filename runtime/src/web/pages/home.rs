//! `/`: the instance — what it is, and its accounts (the first [`MAX_ACCOUNTS`] by name), each
//! linking to its profile.

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use serde::Serialize;
use uuid::Uuid;

use super::{AuthorView, Meta, author_view, excerpt, page_or_error, plain_text, site_view};
use crate::web::AppState;

const MAX_ACCOUNTS: i64 = 100;

#[derive(Serialize)]
struct AccountView {
    author: AuthorView,
    note: String,
    statuses: i64,
    followers: i64,
}

pub async fn handler(State(s): State<AppState>, headers: HeaderMap) -> Response {
    page_or_error(&s, load(&s, &headers).await)
}

async fn load(s: &AppState, headers: &HeaderMap) -> Result<Response, sqlx::Error> {
    // In `accounts_username` (lower(username)) order; the table holds only our accounts.
    let ids: Vec<Uuid> =
        sqlx::query_scalar("SELECT id FROM accounts ORDER BY lower(username) LIMIT $1")
            .bind(MAX_ACCOUNTS)
            .fetch_all(&s.pool)
            .await?;
    let mut conn = s.pool.acquire().await?;
    // The accounts, in the order shown, are the page's key; their facts are its validator.
    let key = format!("home {ids:?}");
    let tag = super::validator::etag(&mut conn, &s.public_origin, &key, &ids, &[]).await?;
    if let Some(resp) = super::not_modified(s, headers, &tag, "text/html; charset=utf-8") {
        return Ok(resp);
    }
    let mut found = crate::mastodon::account::locals(&mut conn, s.site().urls, &ids).await?;
    let accounts: Vec<AccountView> = ids
        .iter()
        .filter_map(|id| found.remove(id))
        .map(|a| AccountView {
            author: author_view(s, &a),
            note: excerpt(&plain_text(&a.note), 160),
            statuses: a.statuses_count,
            followers: a.followers_count,
        })
        .collect();
    let site = site_view(s);
    // The instance's picture: its first account's avatar (the accounts are its face here).
    let (image, image_alt) = accounts
        .iter()
        .find_map(|a| {
            let a = &a.author;
            a.avatar
                .clone()
                .map(|url| (url, format!("Avatar of {}", a.name)))
        })
        .unzip();
    let meta = Meta {
        title: site.host.clone(),
        description: format!(
            "{} is a Hollo server ({} accounts)",
            site.host,
            accounts.len()
        ),
        canonical: format!("{}/", s.public_origin),
        activity: Some(format!("{}/actor", s.public_origin)),
        og_type: "website",
        image,
        image_alt,
        ..Meta::default()
    };
    Ok(super::render_page(
        s,
        headers,
        "home.html",
        minijinja::context! { site => site, meta => meta, accounts => accounts },
        super::HTML,
        None,
        Some(tag),
    ))
}
