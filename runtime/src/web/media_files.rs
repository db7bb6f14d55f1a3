//! Files of the `fs` media drive, served by web nodes at `GET /media/<uuid>/<name>.<ext>` (the
//! drive's key is the path). The type comes from the extension, which we chose from the sniffed
//! bytes at upload; `nosniff` and a sandboxing CSP keep a browser from reading a file as
//! anything else; keys never change content, so caches may keep them for a year. With an S3
//! drive files are served by the bucket (`STORAGE_URL_BASE`) and this route answers 404.

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::{ApiError, AppState};
use crate::media::processing::Format;
use crate::media::storage::CACHE_CONTROL;
use crate::media::{DriveError, DriveKind};
use crate::tasks::cleanups::valid_media_key;

pub fn routes() -> Router<AppState> {
    Router::new().route("/media/{id}/{file}", get(serve))
}

async fn serve(
    State(s): State<AppState>,
    Path((id, file)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let not_found = || ApiError(StatusCode::NOT_FOUND, "not found".into());
    let key = format!("media/{id}/{file}");
    if s.drive.kind() != DriveKind::Fs || !valid_media_key(&key) {
        return Err(not_found());
    }
    let format = Format::from_key(&key).ok_or_else(not_found)?;
    let bytes = match s.drive.get(&key).await {
        Ok(b) => b,
        Err(DriveError::NotFound) => return Err(not_found()),
        Err(e) => {
            tracing::warn!(key, error = %e, "reading a media file");
            return Err(ApiError(
                StatusCode::SERVICE_UNAVAILABLE,
                "media storage unavailable".into(),
            ));
        }
    };
    let mut resp = bytes.into_response();
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(format.mime()),
    );
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
    Ok(resp)
}
