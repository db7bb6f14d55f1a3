//! Files of the `fs` media drive, served by web nodes at `GET /media/<uuid>/<name>.<ext>` (the
//! drive's key is the path). The type comes from the extension, which we chose from the sniffed
//! bytes at upload; `nosniff` and a sandboxing CSP keep a browser from reading a file as
//! anything else; keys never change content, so caches may keep them for a year. With an S3
//! drive files are served by the bucket (`STORAGE_URL_BASE`) and this route answers 404.

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tower::ServiceExt;
use tower_http::services::ServeFile;

use super::{ApiError, AppState};
use crate::media::DriveKind;
use crate::media::processing::Format;
use crate::media::storage::CACHE_CONTROL;

pub fn routes() -> Router<AppState> {
    Router::new().route("/media/{id}/{file}", get(serve))
}

/// Streams the file from disk (R-API): tower-http's `ServeFile` reads it in chunks
/// as the client takes them, so a slow reader costs a buffer, not the file, and answers
/// `Range` requests (one range: 206 with `Content-Range`; unsatisfiable or several: 416),
/// `If-Modified-Since` and `HEAD`. We then put back our type and policy headers, and make its
/// bare error answers our JSON ones.
async fn serve(
    State(s): State<AppState>,
    Path((id, file)): Path<(String, String)>,
    req: Request,
) -> Result<Response, ApiError> {
    let not_found = || ApiError::not_found("not found");
    let key = format!("media/{id}/{file}");
    if s.drive.kind() != DriveKind::Fs {
        return Err(not_found());
    }
    let format = Format::from_key(&key).ok_or_else(not_found)?;
    let path = s.drive.local_path(&key).ok_or_else(not_found)?;
    let resp = match ServeFile::new(&path).oneshot(req).await {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(key, error = %e, "reading a media file");
            return Err(ApiError::unavailable("media storage unavailable"));
        }
    };
    let status = resp.status();
    let mut resp = match status {
        StatusCode::NOT_FOUND => return Err(not_found()),
        StatusCode::RANGE_NOT_SATISFIABLE => {
            // Keep `Content-Range: bytes */<size>` (RFC 9110 §15.5.17), with a JSON body.
            let content_range = resp.headers().get(header::CONTENT_RANGE).cloned();
            let mut r = ApiError(status, "range not satisfiable".into()).into_response();
            if let Some(v) = content_range {
                r.headers_mut().insert(header::CONTENT_RANGE, v);
            }
            r
        }
        s if s.is_success() || s == StatusCode::NOT_MODIFIED => resp.map(Body::new),
        other => {
            tracing::warn!(key, status = %other, "serving a media file");
            return Err(ApiError::unavailable("media storage unavailable"));
        }
    };
    let h = resp.headers_mut();
    if status.is_success() {
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(format.mime()),
        );
    }
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static(CACHE_CONTROL),
    );
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'none'; sandbox"),
    );
    h.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    Ok(resp)
}
