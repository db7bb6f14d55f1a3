//! `GET /api/v1/exports/<file>.csv` (R-MAPI-6): the account's relationships in
//! Mastodon's export formats (`exports`), for the token holder only, each behind the read
//! scope of what it holds. What `POST /api/v1/imports` takes in comes out here in the same
//! shape, so a move between accounts or servers is an export and an import.

use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::activitypub::federation;
use super::auth::{Needs, need};
use super::{ApiError, AppState};
use crate::exports::{self, Export};

pub fn routes() -> Router<AppState> {
    // Literal paths with their method, so `tests/visibility.rs` reads them from this source and
    // attacks them like every other route (R-MAPI-VIS).
    Router::new()
        .route("/api/v1/exports/following.csv", get(following))
        .route("/api/v1/exports/followers.csv", get(followers))
        .route("/api/v1/exports/lists.csv", get(lists))
        .route("/api/v1/exports/mutes.csv", get(mutes))
        .route("/api/v1/exports/blocked_accounts.csv", get(blocks))
        .route("/api/v1/exports/bookmarks.csv", get(bookmarks))
        .route("/api/v1/exports/blocked_domains.csv", get(domain_blocks))
}

/// One handler per export, each behind the read scope of what it holds.
macro_rules! exports {
    ($($name:ident: $need:ty => $what:expr;)*) => {$(
        async fn $name(
            State(s): State<AppState>,
            Needs(account, _): Needs<$need>,
        ) -> Result<Response, ApiError> {
            respond(&s, account.id, $what).await
        }
    )*};
}

exports! {
    following: need::ReadFollows => Export::Following;
    followers: need::ReadFollows => Export::Followers;
    lists: need::ReadLists => Export::Lists;
    mutes: need::ReadMutes => Export::Mutes;
    blocks: need::ReadBlocks => Export::Blocks;
    bookmarks: need::ReadBookmarks => Export::Bookmarks;
    domain_blocks: need::ReadBlocks => Export::DomainBlocks;
}

async fn respond(s: &AppState, account: uuid::Uuid, what: Export) -> Result<Response, ApiError> {
    let fed = federation(s)?;
    let body = exports::csv(&s.pool, fed, account, what).await?;
    Ok((
        [
            (header::CONTENT_TYPE, "text/csv; charset=utf-8"),
            (header::CACHE_CONTROL, "private, no-store"),
        ],
        body,
    )
        .into_response())
}
