//! Media uploads of the Mastodon client API (R-MAPI-3):
//!
//! - `POST /api/v2/media` (multipart `file`, `thumbnail`, `description`, `focus` "x,y"):
//!   200 with the processed attachment, or 202 with `url: null` when the file is over
//!   `MEDIA_SYNC_MAX_BYTES` and a worker processes it.
//! - `POST /api/v1/media`: the same, always processed before answering (200).
//! - `GET /api/v1/media/:id`: 206 while processing, 200 when ready, 422 when processing failed.
//! - `PUT /api/v1/media/:id` (JSON or form: `description`, `focus`), `DELETE /api/v1/media/:id`.
//!
//! Only the owner's uploads not yet attached to a status are visible here (Mastodon's rule);
//! anything else is the same 404 as an unknown id. A file that is not JPEG, PNG, GIF or WebP
//! by its bytes, or over `MEDIA_MAX_BYTES` or `MEDIA_MAX_PIXELS`, is a 422 and nothing is
//! stored. The token must hold `write:media` (Mastodon asks it of every media route).

use std::collections::HashMap;

use axum::extract::{DefaultBodyLimit, FromRequest, Multipart, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::Value;

use super::RecordId;
use crate::mastodon::MediaAttachment;
use crate::media::attach::AttachError;
use crate::media::upload::{self, Mode, Upload, UploadError};
use crate::media::{DriveError, MediaRow};
use crate::web::auth::{Needs, need};
use crate::web::body::{self, BodyError};
use crate::web::{ApiError, AppState};

/// Room for the multipart framing and the text fields around the files.
const FRAMING: usize = 64 * 1024;
/// Longest text field (`description`, `focus`) read from a form.
const MAX_TEXT_FIELD: usize = 16 * 1024;

pub fn routes(state: &AppState) -> Router<AppState> {
    // A file and a thumbnail, each up to MEDIA_MAX_BYTES; a bigger body is refused unread.
    let limit = DefaultBodyLimit::max(state.media.max_bytes.saturating_mul(2) + FRAMING);
    Router::new()
        .route("/api/v1/media", post(create_v1).layer(limit))
        .route("/api/v2/media", post(create_v2).layer(limit))
        .route("/api/v1/media/{id}", get(show).put(update).delete(destroy))
}

impl From<UploadError> for ApiError {
    fn from(e: UploadError) -> Self {
        match e {
            UploadError::Invalid(m) => ApiError::unprocessable(m),
            UploadError::Drive(DriveError::Disabled) => {
                ApiError::unavailable(DriveError::Disabled.to_string())
            }
            UploadError::Drive(e) => {
                tracing::warn!(error = %e, "media storage failed while serving a request");
                ApiError::unavailable("media storage unavailable")
            }
            UploadError::Db(e) => e.into(),
        }
    }
}

impl From<AttachError> for ApiError {
    /// For statuses: every refusal is Mastodon's 422.
    fn from(e: AttachError) -> Self {
        match e {
            AttachError::Db(e) => e.into(),
            other => ApiError::unprocessable(other.to_string()),
        }
    }
}

fn too_large(s: &AppState) -> ApiError {
    ApiError::unprocessable(format!(
        "Validation failed: File size must be at most {} bytes",
        s.media.max_bytes
    ))
}

/// 206 while processing, 200 when ready; a failed upload is Mastodon's 422.
fn answer(s: &AppState, row: &MediaRow, processing: StatusCode) -> Response {
    match row.state.as_str() {
        "failed" => ApiError::unprocessable(format!(
            "Error processing thumbnail for uploaded media: {}",
            row.error.as_deref().unwrap_or("unknown error")
        ))
        .into_response(),
        "processing" => (processing, Json(MediaAttachment::local(&s.drive, row))).into_response(),
        _ => (StatusCode::OK, Json(MediaAttachment::local(&s.drive, row))).into_response(),
    }
}

async fn create_v1(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteMedia>,
    req: Request,
) -> Result<Response, ApiError> {
    create(s, account.id, req, Mode::Sync).await
}

async fn create_v2(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteMedia>,
    req: Request,
) -> Result<Response, ApiError> {
    create(s, account.id, req, Mode::Auto).await
}

async fn create(
    s: AppState,
    account: uuid::Uuid,
    req: Request,
    mode: Mode,
) -> Result<Response, ApiError> {
    if !s.drive.is_enabled() {
        return Err(UploadError::Drive(DriveError::Disabled).into());
    }
    let deadline = s.http.body_timeout;
    let form = tokio::time::timeout(deadline, read_form(&s, req))
        .await
        .map_err(|_| ApiError::from(BodyError::Timeout(deadline)))??;
    let row = upload::create(&s.pool, &s.drive, &s.media, account, form, mode).await?;
    Ok(answer(&s, &row, StatusCode::ACCEPTED))
}

/// The multipart form, each file bounded by `MEDIA_MAX_BYTES` (past it: 422 at once, the rest
/// unread), text fields by [`MAX_TEXT_FIELD`].
async fn read_form(s: &AppState, req: Request) -> Result<Upload, ApiError> {
    if !body::is_content_type(req.headers(), "multipart/form-data") {
        return Err(ApiError::unprocessable(
            "Validation failed: the upload must be a multipart/form-data form with a `file`",
        ));
    }
    let mut form = Multipart::from_request(req, s)
        .await
        .map_err(|e| ApiError::bad_request(format!("bad multipart body: {e}")))?;
    let multipart_error = |e: axum::extract::multipart::MultipartError| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            too_large(s)
        } else {
            ApiError::bad_request(format!("bad multipart body: {e}"))
        }
    };
    let mut upload = Upload::default();
    let mut file = None;
    while let Some(mut field) = form.next_field().await.map_err(multipart_error)? {
        let name = field.name().unwrap_or_default().to_string();
        let limit = match name.as_str() {
            "file" | "thumbnail" => s.media.max_bytes,
            "description" | "focus" => MAX_TEXT_FIELD,
            _ => continue,
        };
        let mut buf = Vec::new();
        while let Some(chunk) = field.chunk().await.map_err(multipart_error)? {
            if buf.len() + chunk.len() > limit {
                return Err(match name.as_str() {
                    "file" | "thumbnail" => too_large(s),
                    _ => ApiError::unprocessable(format!("Validation failed: {name} is too long")),
                });
            }
            buf.extend_from_slice(&chunk);
        }
        match name.as_str() {
            "file" => file = Some(buf),
            "thumbnail" => upload.thumbnail = Some(buf),
            text => {
                let value = String::from_utf8(buf).map_err(|_| {
                    ApiError::unprocessable(format!("Validation failed: {text} is not UTF-8"))
                })?;
                if text == "focus" {
                    upload.focus = upload::parse_focus(&value)?;
                } else {
                    upload.description = Some(value);
                }
            }
        }
    }
    upload.file =
        file.ok_or_else(|| ApiError::unprocessable("Validation failed: File can't be blank"))?;
    Ok(upload)
}

async fn show(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteMedia>,
    RecordId(id): RecordId,
) -> Result<Response, ApiError> {
    let row = upload::find_own(&s.pool, account.id, id)
        .await?
        .ok_or_else(ApiError::record_not_found)?;
    Ok(answer(&s, &row, StatusCode::PARTIAL_CONTENT))
}

/// `description` and `focus` of a JSON or form body; absent fields are left alone.
fn update_fields(
    content_type: &str,
    bytes: &[u8],
) -> Result<(Option<Option<String>>, Option<String>), ApiError> {
    if content_type.starts_with("application/x-www-form-urlencoded") {
        let form: HashMap<String, String> = serde_urlencoded::from_bytes(bytes)
            .map_err(|e| ApiError::bad_request(format!("bad form body: {e}")))?;
        return Ok((
            form.get("description").map(|d| Some(d.clone())),
            form.get("focus").cloned(),
        ));
    }
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok((None, None));
    }
    let v: Value = body::parse_json(bytes, StatusCode::UNPROCESSABLE_ENTITY)?;
    let description = match v.get("description") {
        None => None,
        Some(Value::Null) => Some(None),
        Some(Value::String(d)) => Some(Some(d.clone())),
        Some(_) => {
            return Err(ApiError::unprocessable(
                "Validation failed: description must be a string",
            ));
        }
    };
    let focus = match v.get("focus") {
        None | Some(Value::Null) => None,
        Some(Value::String(f)) => Some(f.clone()),
        Some(_) => {
            return Err(ApiError::unprocessable(
                "Validation failed: focus must be \"x,y\"",
            ));
        }
    };
    Ok((description, focus))
}

async fn update(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteMedia>,
    RecordId(id): RecordId,
    req: Request,
) -> Result<Response, ApiError> {
    let (parts, body) = req.into_parts();
    let bytes = body::read_limited(
        &parts.headers,
        body,
        body::JSON_MAX_BYTES,
        s.http.body_timeout,
    )
    .await?;
    let (description, focus) = update_fields(&body::content_type(&parts.headers), &bytes)?;
    let description = match description {
        Some(d) => Some(upload::check_description(d)?),
        None => None,
    };
    let focus = focus.map(|f| upload::parse_focus(&f)).transpose()?;
    let row = upload::update(&s.pool, account.id, id, description, focus)
        .await?
        .ok_or_else(ApiError::record_not_found)?;
    Ok(answer(&s, &row, StatusCode::PARTIAL_CONTENT))
}

async fn destroy(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteMedia>,
    RecordId(id): RecordId,
) -> Result<Response, ApiError> {
    upload::delete(&s.pool, &s.drive, account.id, id)
        .await?
        .ok_or_else(ApiError::record_not_found)?;
    Ok(Json(serde_json::json!({})).into_response())
}
