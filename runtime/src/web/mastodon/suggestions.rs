//! Follow suggestions (R-MAPI-6): `GET /api/v2/suggestions` (Suggestion entities with their
//! `sources`), `GET /api/v1/suggestions` (the accounts alone, for older clients) and `DELETE
//! /api/v1/suggestions/{account_id}` (never suggest it again). Who is suggested and why is
//! `crate::suggestions`; `limit` is 40 by default, at most 80, as Mastodon's.

use axum::extract::{Path, State};
use axum::http::Uri;
use axum::routing::{delete, get};
use axum::{Json, Router};

use super::accounts::render_rows;
use super::found;
use super::pagination::{DEFAULT_LIMIT, MAX_LIMIT, param, params};
use crate::accounts::Account as LocalAccount;
use crate::mastodon::suggestion::Suggestion;
use crate::mastodon::{Account, Empty};
use crate::suggestions::{self, Source};
use crate::web::activitypub::federation;
use crate::web::auth::{Needs, need};
use crate::web::{ApiError, AppState};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v2/suggestions", get(v2))
        .route("/api/v1/suggestions", get(v1))
        .route("/api/v1/suggestions/{id}", delete(dismiss))
}

/// The suggestions for `viewer`, rendered: (sources, Account) in order; accounts we no
/// longer know are left out.
async fn suggested(
    s: &AppState,
    viewer: &LocalAccount,
    uri: &Uri,
) -> Result<Vec<(Vec<Source>, Account)>, ApiError> {
    let fed = federation(s)?;
    let params = params(uri);
    let limit = match param(&params, "limit").filter(|v| !v.is_empty()) {
        None => DEFAULT_LIMIT,
        Some(v) => v
            .parse::<i64>()
            .map_err(|_| ApiError::unprocessable("limit must be a whole number"))?
            .clamp(1, MAX_LIMIT),
    };
    let found = {
        let mut conn = s.pool.acquire().await?;
        suggestions::for_account(
            &mut conn,
            viewer.id,
            &fed.actor_iri(&viewer.username),
            &fed.actor_iri(""),
            limit,
        )
        .await?
    };
    // Rendered with their position as the key, to find each one's sources again.
    let rows: Vec<(usize, String)> = found
        .iter()
        .enumerate()
        .map(|(i, f)| (i, f.iri.clone()))
        .collect();
    let (accounts, keys) = render_rows(s, fed, &rows).await?;
    Ok(keys
        .iter()
        .zip(accounts)
        .filter_map(|(k, a)| {
            let i: usize = k.parse().ok()?;
            Some((found.get(i)?.sources.clone(), a))
        })
        .collect())
}

async fn v2(
    State(s): State<AppState>,
    Needs(viewer, _): Needs<need::ReadAccounts>,
    uri: Uri,
) -> Result<Json<Vec<Suggestion>>, ApiError> {
    let items = suggested(&s, &viewer, &uri).await?;
    Ok(Json(
        items
            .into_iter()
            .map(|(sources, account)| Suggestion::new(&sources, account))
            .collect(),
    ))
}

async fn v1(
    State(s): State<AppState>,
    Needs(viewer, _): Needs<need::ReadAccounts>,
    uri: Uri,
) -> Result<Json<Vec<Account>>, ApiError> {
    let items = suggested(&s, &viewer, &uri).await?;
    Ok(Json(items.into_iter().map(|(_, a)| a).collect()))
}

/// Never suggest the account again (idempotent); an unknown id is a 404.
async fn dismiss(
    State(s): State<AppState>,
    Needs(viewer, _): Needs<need::WriteAccounts>,
    Path(id): Path<String>,
) -> Result<Json<Empty>, ApiError> {
    let fed = federation(&s)?;
    let target = found(&s, &id).await?;
    let mut conn = s.pool.acquire().await?;
    suggestions::dismiss(&mut conn, viewer.id, &target.iri(fed)).await?;
    Ok(Json(Empty {}))
}
