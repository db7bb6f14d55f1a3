//! `GET`, `POST`, `DELETE /api/v1/domain_blocks` (R-MAPI-6): the servers an account
//! hides, as Mastodon answers them — the list is of domain strings, newest block first, paged
//! by the block with a `Link` header; `domain` in the body (JSON or form) or the query. What a
//! block does is `federation::outbound::domain_blocks`'.

use axum::extract::State;
use axum::http::Uri;
use axum::routing::get;
use axum::{Json, Router};

use super::pagination::{Paged, Paging, param, params};
use super::statuses::body::StatusBody;
use crate::federation::outbound::domain_blocks::{self, LIST_SELECT, normalize};
use crate::mastodon::Empty;
use crate::web::activitypub::federation;
use crate::web::auth::{Needs, need};
use crate::web::{ApiError, AppState};

pub fn routes() -> Router<AppState> {
    Router::new().route(
        "/api/v1/domain_blocks",
        get(list).post(block).delete(unblock),
    )
}

async fn list(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::ReadBlocks>,
    Paging { page, uri }: Paging<i64>,
) -> Result<Paged<String>, ApiError> {
    let rows: Vec<(i64, String)> = page.fetch_by_id(&s.pool, LIST_SELECT, account.id).await?;
    let keys: Vec<String> = rows.iter().map(|(id, _)| id.to_string()).collect();
    let domains = rows.into_iter().map(|(_, d)| d).collect();
    Ok(Paged::new(domains, &keys, &s.public_origin, &uri))
}

#[derive(Debug, Default, serde::Deserialize)]
struct DomainBody {
    #[serde(default)]
    domain: Option<String>,
}

/// The domain a request names (body, else query), normalized; 422 when missing or not a
/// host name, or when it is this server's own.
fn domain(s: &AppState, body: DomainBody, uri: &Uri) -> Result<String, ApiError> {
    let raw = match body.domain {
        Some(d) => d,
        None => param(&params(uri), "domain")
            .unwrap_or_default()
            .to_string(),
    };
    if raw.trim().is_empty() {
        return Err(ApiError::unprocessable("domain is missing"));
    }
    let d = normalize(&raw)
        .ok_or_else(|| ApiError::unprocessable(format!("{raw:?} is not a domain")))?;
    let own = federation(s)?.domain.split(':').next().unwrap_or_default();
    if d.eq_ignore_ascii_case(own) {
        return Err(ApiError::unprocessable("you cannot block your own domain"));
    }
    Ok(d)
}

async fn block(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteBlocks>,
    uri: Uri,
    StatusBody(body): StatusBody<DomainBody>,
) -> Result<Json<Empty>, ApiError> {
    let d = domain(&s, body, &uri)?;
    let fed = federation(&s)?;
    let mut tx = s.pool.begin().await?;
    let dropped = domain_blocks::block(&mut tx, fed, &account, &d).await?;
    tx.commit().await?;
    tracing::info!(account = %account.id, domain = %d, ?dropped, "domain blocked");
    Ok(Json(Empty {}))
}

async fn unblock(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteBlocks>,
    uri: Uri,
    StatusBody(body): StatusBody<DomainBody>,
) -> Result<Json<Empty>, ApiError> {
    let d = domain(&s, body, &uri)?;
    let mut tx = s.pool.begin().await?;
    domain_blocks::unblock(&mut tx, &account, &d).await?;
    tx.commit().await?;
    Ok(Json(Empty {}))
}
