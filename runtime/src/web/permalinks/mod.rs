//! An account and a status each have two addresses, our ActivityPub IRI (`/users/{name}`,
//! `/users/{name}/statuses/{id}`) and Hollo's path (`/@name`, `/@name/{id}`), and every one
//! of them answers both kinds of reader (R-WEB-1): an ActivityPub client gets the document
//! (`activitypub`), a browser the page (`pages`). Only what an undecided `Accept` gets
//! differs: the IRIs default to JSON (what federation has always fetched there), the paths to
//! HTML. Both answers carry `Vary: Accept`. Kept here, above both, so that neither the
//! documents nor the pages reach into the other.

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::activitypub::{actor_document, signed_by_blocked, status_document};
use super::pages::{post, profile};
use super::{ApiError, AppState};
use crate::accounts;

pub mod negotiate;

use negotiate::Default;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/users/{name}", get(actor_iri))
        .route("/@{name}", get(profile_path))
        .route("/users/{name}/statuses/{id}", get(status_iri))
        .route("/@{name}/{id}", get(status_path))
}

async fn actor(s: &AppState, name: &str, uri: &Uri, headers: &HeaderMap, d: Default) -> Response {
    if negotiate::wants_html(headers, d) {
        return profile::page(s, name, uri.query(), headers).await;
    }
    negotiate::vary(actor_document(s, name).await.into_response())
}

async fn status(
    s: &AppState,
    name: &str,
    id: &str,
    (uri, headers): (&Uri, &HeaderMap),
    d: Default,
) -> Response {
    // Someone the author blocks, fetching with a signature, finds neither the document nor
    // the page (`statuses::access`).
    match blocked_reader(s, name, uri, headers).await {
        Ok(false) => {}
        Ok(true) => {
            return negotiate::vary(ApiError::not_found("no such status").into_response());
        }
        Err(e) => return negotiate::vary(e.into_response()),
    }
    if negotiate::wants_html(headers, d) {
        return post::page(s, name, id, headers).await;
    }
    negotiate::vary(status_document(s, name, id).await.into_response())
}

/// Whether the request for a status of our account `name` is signed by someone it blocks.
async fn blocked_reader(
    s: &AppState,
    name: &str,
    uri: &Uri,
    headers: &HeaderMap,
) -> Result<bool, ApiError> {
    let (Some(fed), Some(account)) = (s.fed.as_ref(), accounts::by_username(&s.pool, name).await?)
    else {
        return Ok(false);
    };
    signed_by_blocked(s, fed, account.id, uri, headers).await
}

async fn actor_iri(
    State(s): State<AppState>,
    Path(name): Path<String>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    actor(&s, &name, &uri, &headers, Default::Json).await
}

async fn profile_path(
    State(s): State<AppState>,
    Path(name): Path<String>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    actor(&s, &name, &uri, &headers, Default::Html).await
}

async fn status_iri(
    State(s): State<AppState>,
    Path((name, id)): Path<(String, String)>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    status(&s, &name, &id, (&uri, &headers), Default::Json).await
}

async fn status_path(
    State(s): State<AppState>,
    Path((name, id)): Path<(String, String)>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    status(&s, &name, &id, (&uri, &headers), Default::Html).await
}
