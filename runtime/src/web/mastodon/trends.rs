//! Trends (R-MAPI-6): `GET /api/v1/trends/tags` (also `/api/v1/trends`, as old clients ask),
//! `/api/v1/trends/statuses` and `/api/v1/trends/links`, each paged by `offset` and `limit`
//! with a `Link` header, as Mastodon pages them. What trends is decided by `crate::trends`,
//! at most once per period per node; what each reader is shown of it is decided here, per
//! request: a post through the one visibility check (`statuses::render`, R-MAPI-VIS) and
//! without the accounts and servers the reader mutes or blocks, a tag with `following`.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderValue, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::Serialize;
use uuid::Uuid;

use super::pagination::{param, params};
use super::statuses::render;
use crate::mastodon::preview_card::{self, TrendsLink};
use crate::mastodon::tag::{History, Tag};
use crate::statuses::hidden::Hidden;
use crate::trends::{self, Trends};
use crate::web::auth::{MaybeNeeds, need};
use crate::web::{ApiError, AppState};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/trends", get(tags))
        .route("/api/v1/trends/tags", get(tags))
        .route("/api/v1/trends/statuses", get(statuses))
        .route("/api/v1/trends/links", get(links))
}

/// The trends, computed when this node's last computation is older than the period.
async fn current(s: &AppState) -> Result<Arc<Trends>, ApiError> {
    let pool = &s.pool;
    Ok(s.trends
        .get(|| async {
            let mut conn = pool.acquire().await?;
            let t = trends::compute(&mut conn, chrono::Utc::now()).await?;
            Ok::<_, sqlx::Error>(Arc::new(t))
        })
        .await?)
}

/// `offset` (default 0) and `limit` (default `default`, at most `most`) of a trends request;
/// anything but a whole number is a 422, as Mastodon's other list parameters.
fn window(uri: &Uri, default: usize, most: usize) -> Result<(usize, usize), ApiError> {
    let params = params(uri);
    let number = |key: &str, absent: usize| -> Result<usize, ApiError> {
        match param(&params, key).filter(|v| !v.is_empty()) {
            None => Ok(absent),
            Some(v) => v
                .parse::<usize>()
                .map_err(|_| ApiError::unprocessable(format!("{key} must be a whole number"))),
        }
    };
    let offset = number("offset", 0)?;
    let limit = number("limit", default)?.clamp(1, most);
    Ok((offset, limit))
}

/// A page of trends with Mastodon's `Link` header: `next` when more follow, `prev` when this
/// is not the first page.
struct OffsetPage<T> {
    items: Vec<T>,
    link: Option<String>,
}

impl<T> OffsetPage<T> {
    fn new(items: Vec<T>, s: &AppState, uri: &Uri, at: (usize, usize), more: bool) -> Self {
        let (offset, limit) = at;
        let to = |o: usize| {
            format!(
                "<{}{}?offset={o}&limit={limit}>",
                s.public_origin,
                uri.path()
            )
        };
        let mut rels = Vec::new();
        if more {
            rels.push(format!("{}; rel=\"next\"", to(offset + limit)));
        }
        if offset > 0 {
            rels.push(format!(
                "{}; rel=\"prev\"",
                to(offset.saturating_sub(limit))
            ));
        }
        OffsetPage {
            items,
            link: (!rels.is_empty()).then(|| rels.join(", ")),
        }
    }
}

impl<T: Serialize> IntoResponse for OffsetPage<T> {
    fn into_response(self) -> Response {
        let mut resp = Json(self.items).into_response();
        if let Some(link) = self.link.and_then(|l| HeaderValue::from_str(&l).ok()) {
            resp.headers_mut().insert(header::LINK, link);
        }
        resp
    }
}

/// Tags, 10 by default, at most 20; `following` for a signed-in reader.
async fn tags(
    State(s): State<AppState>,
    MaybeNeeds(viewer, _): MaybeNeeds<need::ReadAccounts>,
    uri: Uri,
) -> Result<OffsetPage<Tag>, ApiError> {
    let at = window(&uri, 10, 20)?;
    let now = current(&s).await?;
    let (page, more) = trends::window(&now.tags, at.0, at.1);
    let followed = match &viewer {
        Some(v) => {
            let names: Vec<String> = page.iter().map(|(n, _)| n.clone()).collect();
            let mut conn = s.pool.acquire().await?;
            Some(crate::tags::followed_among(&mut conn, v.id, &names).await?)
        }
        None => None,
    };
    let items = page
        .iter()
        .map(|(name, week)| {
            let following = followed.as_ref().map(|f| f.contains(name));
            Tag::new(s.site().urls, name, week, following)
        })
        .collect();
    Ok(OffsetPage::new(items, &s, &uri, at, more))
}

/// Posts, 20 by default, at most 40: those the reader may read and has not muted or blocked
/// the author (or server) of, in trend order. A page is cut from what the reader is shown,
/// so it is full and the next page starts where it ends.
async fn statuses(
    State(s): State<AppState>,
    MaybeNeeds(viewer, _): MaybeNeeds<need::ReadStatuses>,
    uri: Uri,
) -> Result<OffsetPage<crate::mastodon::Status>, ApiError> {
    let at = window(&uri, 20, 40)?;
    let now = current(&s).await?;
    let viewer = viewer.map(|a| a.id);
    let mut conn = s.pool.acquire().await?;
    let hidden = Hidden::load(&mut conn, s.site().urls, viewer).await?;
    let ids: Vec<Uuid> = if hidden.is_empty() {
        now.statuses.clone()
    } else {
        let kept: Vec<Uuid> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT p.id FROM posts p WHERE p.id = ANY($1){}",
            hidden.post_sql("p", 2, 3)
        )))
        .bind(&now.statuses)
        .bind(&hidden.ids)
        .bind(&hidden.domains)
        .fetch_all(&mut *conn)
        .await?;
        now.statuses
            .iter()
            .copied()
            .filter(|id| kept.contains(id))
            .collect()
    };
    let shown = render(&s, &mut conn, viewer, &ids).await?;
    let (page, more) = trends::window(&shown, at.0, at.1);
    Ok(OffsetPage::new(page, &s, &uri, at, more))
}

/// Links, 10 by default, at most 20: preview cards with their week of use.
async fn links(
    State(s): State<AppState>,
    MaybeNeeds(_, _): MaybeNeeds<need::ReadStatuses>,
    uri: Uri,
) -> Result<OffsetPage<TrendsLink>, ApiError> {
    let at = window(&uri, 10, 20)?;
    let now = current(&s).await?;
    let (page, more) = trends::window(&now.links, at.0, at.1);
    let ids: Vec<Uuid> = page.iter().map(|(id, _)| *id).collect();
    let mut conn = s.pool.acquire().await?;
    let mut cards = preview_card::by_ids(&mut conn, s.site().drive, &ids).await?;
    let items = page
        .iter()
        .filter_map(|(id, week)| {
            cards.remove(id).map(|card| TrendsLink {
                card,
                history: History::of(week),
            })
        })
        .collect();
    Ok(OffsetPage::new(items, &s, &uri, at, more))
}
