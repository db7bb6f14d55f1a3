//! `GET /api/v2/search?q=…&resolve=…&type=…&limit=…`. Without `resolve` only what is stored
//! is searched: accounts by address or name prefix, statuses by URL. With `resolve=true` an
//! address `@user@host` is resolved through WebFinger and the actor document, and a URL is
//! fetched and stored (an actor, or a post by `inbound::notes::store_note`) — every fetch through the
//! guard (SSRF rules apply), signed by the searching account. What cannot be resolved is an
//! empty result, as on Mastodon.
//!
//! `GET /api/v1/accounts/search?q=…&resolve=…&following=…&limit=…` is the accounts half, what
//! apps call for @-mention autocomplete (R-MAPI-6).

use axum::extract::State;
use axum::http::Uri;
use axum::routing::get;
use axum::{Json, Router};

use super::pagination::{param, params};
use super::statuses::render;
use crate::accounts::Account;
use crate::federation::actors::directory::{self, Found};
use crate::federation::inbound::resolve::{Resolved, resolve_url};
use crate::federation::{Federation, actors::webfinger, outbound::follows};
use crate::mastodon::Status;
use crate::web::activitypub::federation;
use crate::web::auth::{Needs, need};
use crate::web::{ApiError, AppState};

const DEFAULT_LIMIT: i64 = 20;
const MAX_LIMIT: i64 = 40;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v2/search", get(search))
        .route("/api/v1/accounts/search", get(accounts_search))
}

/// Mastodon's limits of `/api/v1/accounts/search`.
const ACCOUNTS_DEFAULT_LIMIT: i64 = 40;
const ACCOUNTS_MAX_LIMIT: i64 = 80;
/// With `following`, how many prefix matches are looked at before keeping the followed ones.
const FOLLOWING_CANDIDATES: i64 = 400;

/// The `q` parameter: required, trimmed, no NUL.
fn query(params: &[(String, String)]) -> Result<&str, ApiError> {
    let q = param(params, "q")
        .map(str::trim)
        .filter(|q| !q.is_empty())
        .ok_or_else(|| ApiError::unprocessable("q is required"))?;
    if q.contains('\0') {
        return Err(ApiError::unprocessable("NUL characters are not accepted"));
    }
    Ok(q)
}

/// `limit`, clamped to 1..=`max` (a non-number is a 422).
fn limit(params: &[(String, String)], default: i64, max: i64) -> Result<i64, ApiError> {
    match param(params, "limit") {
        None | Some("") => Ok(default),
        Some(l) => Ok(l
            .parse::<i64>()
            .map_err(|_| ApiError::unprocessable("limit must be a number"))?
            .clamp(1, max)),
    }
}

fn flag(params: &[(String, String)], key: &str) -> bool {
    matches!(param(params, key), Some("true" | "1"))
}

/// Accounts by address (`user@host`, resolved through WebFinger with `resolve`, as in
/// `/api/v2/search`) or by name prefix; with `following`, only accounts the searcher follows
/// (and nothing is resolved: an account not yet known cannot be followed).
async fn accounts_search(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::ReadAccounts>,
    uri: Uri,
) -> Result<Json<Vec<crate::mastodon::Account>>, ApiError> {
    let fed = federation(&s)?;
    let params = params(&uri);
    let q = query(&params)?;
    let limit = limit(&params, ACCOUNTS_DEFAULT_LIMIT, ACCOUNTS_MAX_LIMIT)?;
    let following = flag(&params, "following");
    let resolve = flag(&params, "resolve") && !following;
    let handle = q.trim_start_matches('@');
    let mut found: Vec<Found> = if webfinger::parse_acct(handle).is_some() {
        by_address(&s, fed, &account, handle, resolve)
            .await?
            .into_iter()
            .collect()
    } else {
        let candidates = if following {
            FOLLOWING_CANDIDATES
        } else {
            limit
        };
        directory::search(&s.pool, handle, candidates).await?
    };
    if following {
        let iris: Vec<String> = found.iter().map(|f| f.iri(fed)).collect();
        let followed: std::collections::HashSet<String> = sqlx::query_scalar(
            "SELECT target_iri FROM follows
              WHERE account_id = $1 AND state = 'accepted' AND target_iri = ANY($2)",
        )
        .bind(account.id)
        .bind(&iris)
        .fetch_all(&s.pool)
        .await?
        .into_iter()
        .collect();
        found.retain(|f| followed.contains(&f.iri(fed)));
    }
    found.truncate(usize::try_from(limit).unwrap_or(0));
    let mut out = Vec::with_capacity(found.len());
    for f in &found {
        out.push(crate::mastodon::account::of_found(&s.pool, s.site().urls, f).await?);
    }
    Ok(Json(out))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    All,
    Accounts,
    Statuses,
    Hashtags,
}

/// Mastodon's `Search` entity.
#[derive(serde::Serialize)]
struct Results {
    accounts: Vec<crate::mastodon::Account>,
    statuses: Vec<Status>,
    hashtags: Vec<crate::mastodon::tag::Tag>,
}

async fn search(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::ReadSearch>,
    uri: Uri,
) -> Result<Json<Results>, ApiError> {
    let fed = federation(&s)?;
    let params = params(&uri);
    let q = query(&params)?;
    let kind = match param(&params, "type").unwrap_or_default() {
        "" => Kind::All,
        "accounts" => Kind::Accounts,
        "statuses" => Kind::Statuses,
        "hashtags" => Kind::Hashtags,
        other => return Err(ApiError::unprocessable(format!("unknown type {other:?}"))),
    };
    let resolve = flag(&params, "resolve");
    let limit = limit(&params, DEFAULT_LIMIT, MAX_LIMIT)?;
    let mut accounts = Vec::new();
    let mut statuses = Vec::new();
    let is_url = url::Url::parse(q).is_ok_and(|u| matches!(u.scheme(), "http" | "https"));
    if is_url {
        match by_url(&s, fed, &account, q, resolve).await? {
            Some(Hit::Account(found)) if kind != Kind::Statuses && kind != Kind::Hashtags => {
                accounts
                    .push(crate::mastodon::account::of_found(&s.pool, s.site().urls, &found).await?)
            }
            Some(Hit::Status(status)) if kind != Kind::Accounts && kind != Kind::Hashtags => {
                statuses.push(*status)
            }
            _ => {}
        }
    } else if kind == Kind::All || kind == Kind::Accounts {
        let handle = q.trim_start_matches('@');
        let found = if webfinger::parse_acct(handle).is_some() {
            by_address(&s, fed, &account, handle, resolve)
                .await?
                .into_iter()
                .collect()
        } else {
            directory::search(&s.pool, handle, limit).await?
        };
        for f in &found {
            accounts.push(crate::mastodon::account::of_found(&s.pool, s.site().urls, f).await?);
        }
    }
    // Hashtags in use by prefix (R-MAPI-6), each with its week and whether the
    // searcher follows it.
    let mut hashtags = Vec::new();
    if !is_url && (kind == Kind::All || kind == Kind::Hashtags) && !q.starts_with('@') {
        let mut conn = s.pool.acquire().await?;
        let names = crate::tags::search(&mut conn, q, limit).await?;
        let followed = crate::tags::followed_among(&mut conn, account.id, &names).await?;
        for name in names {
            let history = crate::tags::history(&mut conn, &name).await?;
            let following = Some(followed.contains(&name));
            hashtags.push(crate::mastodon::tag::Tag::new(
                s.site().urls,
                &name,
                &history,
                following,
            ));
        }
    }
    Ok(Json(Results {
        accounts,
        statuses,
        hashtags,
    }))
}

/// `name@host`: stored, else (with `resolve`) WebFinger + actor fetch.
async fn by_address(
    s: &AppState,
    fed: &Federation,
    account: &Account,
    handle: &str,
    resolve: bool,
) -> Result<Option<Found>, ApiError> {
    if let Some(found) = directory::by_acct(&s.pool, fed, handle).await? {
        return Ok(Some(found));
    }
    let local = handle
        .split_once('@')
        .is_some_and(|(_, host)| host.eq_ignore_ascii_case(&fed.domain));
    if !resolve || local {
        return Ok(None);
    }
    match follows::resolve_account(&s.pool, fed, account, handle).await {
        Ok(actor) => Ok(directory::remote_by_iri(&s.pool, &actor.iri)
            .await?
            .map(Found::Remote)),
        Err(e) => {
            tracing::info!(handle, error = %e, "search could not resolve an address");
            Ok(None)
        }
    }
}

enum Hit {
    Account(Box<Found>),
    Status(Box<Status>),
}

/// A URL: a local account or status, a stored actor or post (by id or by its `url`), else
/// (with `resolve`) whatever the URL serves.
async fn by_url(
    s: &AppState,
    fed: &Federation,
    account: &Account,
    url: &str,
    resolve: bool,
) -> Result<Option<Hit>, ApiError> {
    if let Some(hit) = stored(s, fed, account, url).await? {
        return Ok(Some(hit));
    }
    if !resolve || url.starts_with(&format!("{}/", fed.origin)) {
        return Ok(None);
    }
    let signer = fed
        .signing_key(account)
        .map_err(|e| ApiError::unprocessable(format!("{e:#}")))?;
    match resolve_url(&s.pool, fed, &signer, url).await {
        Ok(Resolved::Actor(iri) | Resolved::Note(iri)) => stored(s, fed, account, &iri).await,
        Err(e) => {
            tracing::info!(url, error = %e, "search could not resolve a URL");
            Ok(None)
        }
    }
}

async fn stored(
    s: &AppState,
    fed: &Federation,
    account: &Account,
    url: &str,
) -> Result<Option<Hit>, ApiError> {
    if let Some(found) = directory::by_iri(&s.pool, fed, url).await? {
        return Ok(Some(Hit::Account(Box::new(found))));
    }
    // A status by its IRI or (remote) URL; rendered only if the searcher may read it
    // (R-MAPI-VIS): a status they may not read is the same nothing as an unknown one.
    let id: Option<uuid::Uuid> = sqlx::query_scalar(
        "SELECT id FROM statuses WHERE uri = $1
         UNION ALL
         (SELECT id FROM remote_posts WHERE (iri = $1 OR url = $1) AND deleted_at IS NULL
           ORDER BY iri = $1 DESC LIMIT 1)
         LIMIT 1",
    )
    .bind(url)
    .fetch_optional(&s.pool)
    .await?;
    let Some(id) = id else {
        return Ok(None);
    };
    let mut conn = s.pool.acquire().await?;
    Ok(render(s, &mut conn, Some(account.id), &[id])
        .await?
        .pop()
        .map(|s| Hit::Status(Box::new(s))))
}
