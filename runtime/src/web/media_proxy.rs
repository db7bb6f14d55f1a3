//! `GET /media/proxy/<mac>?url=<remote image>`: remote images shown through this server
//! (`media::proxy`): only URLs this node minted (their MAC checks), fetched through the guarded
//! fetcher in one of the node's bounded fetch places, sniffed as uploads are (JPEG, PNG, GIF or
//! WebP of at most `media::proxy::MAX_BYTES`, sent under the type sniffed), streamed through
//! or served from memory with the policy headers of our own media. Anything else is the same
//! 404, so the route tells nothing about what it refuses; a remote that fails (now or a few
//! minutes ago) is one generic 502 — what went wrong is logged, never answered, as it could
//! say what an internal name resolves to — and a node with no free fetch place answers 503
//! with `Retry-After`.

use axum::Json;
use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Deserialize;

use super::{ApiError, AppState};
use crate::media::processing::Format;
use crate::media::proxy::{PATH, Refusal, Served, Source};

/// Seconds a reader turned away as busy is told to wait.
const BUSY_RETRY_SECONDS: u64 = 2;

pub fn routes() -> Router<AppState> {
    Router::new().route(&format!("{PATH}/{{mac}}"), get(serve))
}

#[derive(Deserialize)]
struct Target {
    url: Option<String>,
}

fn outcome(o: &str) {
    crate::metrics::MEDIA_PROXY_REQUESTS
        .get_or_create(&crate::metrics::OutcomeLabels { outcome: o.into() })
        .inc();
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
    let served = match s.proxy_relay.serve(&fed.fetch, &url).await {
        Ok(served) => served,
        Err(Refusal::Busy) => {
            outcome("busy");
            return Ok(busy());
        }
        Err(Refusal::Failed) => {
            outcome("error");
            return Err(ApiError(
                StatusCode::BAD_GATEWAY,
                "the remote image could not be fetched".into(),
            ));
        }
    };
    let (mut resp, format) = match served {
        Served::Whole { image, source } => {
            outcome(match source {
                Source::Cache => "hit",
                Source::Remote => "miss",
            });
            (image.bytes.into_response(), image.format)
        }
        Served::Streamed {
            format,
            length,
            body,
        } => {
            outcome("miss");
            let mut resp = Body::new(body).into_response();
            if let Some(n) = length {
                resp.headers_mut()
                    .insert(header::CONTENT_LENGTH, HeaderValue::from(n));
            }
            (resp, format)
        }
    };
    policy_headers(&mut resp, format);
    Ok(resp)
}

/// The headers of a relayed image: the type we sniffed (never the remote's), `nosniff` so a
/// browser believes it, and a CSP that sandboxes the response should it be opened as a page.
fn policy_headers(resp: &mut Response, format: Format) {
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(format.mime()),
    );
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
}

fn busy() -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        [(header::RETRY_AFTER, HeaderValue::from(BUSY_RETRY_SECONDS))],
        Json(serde_json::json!({ "error": "too many remote images at once, retry later" })),
    )
        .into_response()
}
