//! `GET /api/v1/exports/<file>.csv` (issue 31 item 5): the account's relationships in
//! Mastodon's export formats (`exports`), for the token holder only, each behind the read
//! scope of what it holds. What `POST /api/v1/imports` takes in comes out here in the same
//! shape, so a move between accounts or servers is an export and an import.

use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get};

use super::activitypub::federation;
use super::auth::{Need, Needs, need};
use super::{ApiError, AppState};
use crate::exports::{self, Export};

pub fn routes() -> Router<AppState> {
    let at = |file: &str| format!("/api/v1/exports/{file}");
    Router::new()
        .route(
            &at("following.csv"),
            export::<need::ReadFollows>(Export::Following),
        )
        .route(
            &at("followers.csv"),
            export::<need::ReadFollows>(Export::Followers),
        )
        .route(&at("lists.csv"), export::<need::ReadLists>(Export::Lists))
        .route(&at("mutes.csv"), export::<need::ReadMutes>(Export::Mutes))
        .route(
            &at("blocked_accounts.csv"),
            export::<need::ReadBlocks>(Export::Blocks),
        )
        .route(
            &at("bookmarks.csv"),
            export::<need::ReadBookmarks>(Export::Bookmarks),
        )
        .route(
            &at("blocked_domains.csv"),
            export::<need::ReadBlocks>(Export::DomainBlocks),
        )
}

/// The route of one export, behind the scope `N`.
fn export<N: Need>(what: Export) -> MethodRouter<AppState> {
    get(
        move |State(s): State<AppState>, Needs(account, _): Needs<N>| async move {
            let fed = federation(&s)?;
            let body = exports::csv(&s.pool, fed, account.id, what).await?;
            Ok::<Response, ApiError>(
                (
                    [
                        (header::CONTENT_TYPE, "text/csv; charset=utf-8"),
                        (header::CACHE_CONTROL, "private, no-store"),
                    ],
                    body,
                )
                    .into_response(),
            )
        },
    )
}
