//! `GET /media/proxy/<mac>?url=<remote image>`: remote images shown through this server
//! (`media::proxy`): only URLs this node minted (their MAC checks), fetched through the guarded
//! fetcher, a raster image of at most `media::proxy::MAX_BYTES`, served with the policy headers
//! of our own media. Anything else is the same 404, so the route tells nothing about what it
//! refuses; a remote that fails is a 502.

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Deserialize;

use super::{ApiError, AppState};
use crate::media::proxy::{MAX_BYTES, PATH, Source};

pub fn routes() -> Router<AppState> {
    Router::new().route(&format!("{PATH}/{{mac}}"), get(serve))
}

#[derive(Deserialize)]
struct Target {
    url: Option<String>,
}

async fn serve(
    State(s): State<AppState>,
    Path(mac): Path<String>,
    Query(q): Query<Target>,
) -> Result<Response, ApiError> {
    let not_found = || ApiError::not_found("not found");
    let (Some(proxy), Some(fed), Some(url)) = (s.media_proxy.as_deref(), s.fed.as_deref(), q.url)
    else {
        return Err(not_found());
    };
    if !proxy.verify(&mac, &url) {
        return Err(not_found());
    }
    let outcome = |o: &str| {
        crate::metrics::MEDIA_PROXY_REQUESTS
            .get_or_create(&crate::metrics::OutcomeLabels { outcome: o.into() })
            .inc();
    };
    let fetched = s
        .proxy_cache
        .get_or_fetch(&url, || fed.fetch.get_image(&url, MAX_BYTES))
        .await;
    let (image, source) = fetched.map_err(|e| {
        outcome("error");
        tracing::info!(url, error = %e, "a proxied image could not be fetched");
        ApiError(
            StatusCode::BAD_GATEWAY,
            format!("the remote image could not be fetched: {e}"),
        )
    })?;
    outcome(match source {
        Source::Cache => "hit",
        Source::Remote => "miss",
    });
    let mut resp = image.bytes.into_response();
    let h = resp.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&image.media_type) {
        h.insert(header::CONTENT_TYPE, v);
    }
    // A day: the remote may change its image; a browser keeps what it has meanwhile.
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=86400"),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'none'; sandbox"),
    );
    Ok(resp)
}
