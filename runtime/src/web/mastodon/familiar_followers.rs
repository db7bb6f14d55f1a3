//! `GET /api/v1/accounts/familiar_followers?id[]=…` (`read:follows`): for each account named,
//! those of its followers whom the caller follows — the "followed by …" line of a profile in
//! Mastodon's web and apps (R-MAPI-2).
//!
//! We know who follows whom as far as our own tables say: a local account's follows
//! (`follows`) and a local account's followers (`followers`, remote ones too). So a local
//! account's familiar followers are all there; a remote account's are the local accounts
//! following it, since its remote followers are not fetched (as its `/followers` list is
//! empty).

use axum::extract::State;
use axum::http::Uri;
use axum::routing::get;
use axum::{Json, Router};

use super::accounts::render_rows;
use super::pagination::ids_param;
use crate::federation::actors::directory::{self, Found};
use crate::mastodon::FamiliarFollowers;
use crate::web::activitypub::federation;
use crate::web::auth::{Needs, need};
use crate::web::{ApiError, AppState};

/// Accounts one request may ask about (a profile asks for one; a list of accounts, a page).
const ACCOUNTS_AT_ONCE: usize = 80;
/// Familiar followers shown per account, the most recently followed first: a profile shows a
/// few names and "and N others".
const SHOWN_PER_ACCOUNT: i64 = 80;

pub fn routes() -> Router<AppState> {
    Router::new().route(
        "/api/v1/accounts/familiar_followers",
        get(familiar_followers),
    )
}

/// One entry per account the ids name, in the order asked (unknown ids left out, as on
/// Mastodon), its `accounts` possibly empty.
async fn familiar_followers(
    State(s): State<AppState>,
    Needs(viewer, _): Needs<need::ReadFollows>,
    uri: Uri,
) -> Result<Json<Vec<FamiliarFollowers>>, ApiError> {
    let fed = federation(&s)?;
    let ids = ids_param(&uri, ACCOUNTS_AT_ONCE)?;
    let found = directory::by_ids(&s.pool, &ids).await?;
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        let Some(target) = found.get(&id) else {
            continue;
        };
        let local = match target {
            Found::Local(a) => Some(a.id),
            Found::Remote(_) => None,
        };
        // The viewer's accepted follows (keyed by the follow's id, newest first) of accounts
        // that follow the target: by the target's followers if it is ours, or by their own
        // follows if they are ours (one hashed set: the local followers of one account).
        let rows: Vec<(i64, String)> = sqlx::query_as(
            "SELECT f.id, f.target_iri FROM follows f
              WHERE f.account_id = $1 AND f.state = 'accepted' AND f.target_iri <> $2
                AND (EXISTS (SELECT 1 FROM followers x
                              WHERE x.account_id = $3 AND x.actor_iri = f.target_iri)
                     OR f.target_iri IN (SELECT $4 || '/users/' || a.username
                                           FROM follows y JOIN accounts a ON a.id = y.account_id
                                          WHERE y.target_iri = $2 AND y.state = 'accepted'))
              ORDER BY f.id DESC LIMIT $5",
        )
        .bind(viewer.id)
        .bind(target.iri(fed))
        .bind(local)
        .bind(&fed.origin)
        .bind(SHOWN_PER_ACCOUNT)
        .fetch_all(&s.pool)
        .await?;
        let (accounts, _) = render_rows(&s, fed, &rows).await?;
        out.push(FamiliarFollowers {
            id: id.to_string(),
            accounts,
        });
    }
    Ok(Json(out))
}
