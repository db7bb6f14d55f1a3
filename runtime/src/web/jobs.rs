//! Import and cleanup jobs over HTTP (R-JOB, R-API):
//!
//! - `POST /api/v1/imports?type=following|blocks|mutes|bookmarks|lists&mode=merge|overwrite`
//!   (account token; the CSV as the body or as a multipart field `data`/`file`) → 202 with the
//!   job, or 200 with the existing job when the same bytes are already queued, running or done.
//! - `GET /api/v1/imports/{id}` progress (final outcomes only); `DELETE` cancels.
//! - `POST /api/v1/admin/cleanups {"kind":"remote_posts","olderThanDays":N}` or
//!   `{"kind":"media"}` (`ADMIN_TOKEN`) → 202; `GET`/`DELETE /api/v1/admin/cleanups/{id}`.
//!
//! The upload is parsed here, on the web node, and the job, every item and the first dispatch
//! are written in one transaction: a bad upload is rejected before anything is written, and no
//! staging file is ever shared with a worker.

use axum::extract::{DefaultBodyLimit, FromRequest, Multipart, Path, Query, Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures::StreamExt;
use serde::Deserialize;
use serde_json::json;

use super::auth::{Admin, Needs, need};
use super::body::{self, ApiJson, BodyError, RequestBody};
use super::{ApiError, AppState, parse_id};
use crate::accounts::Account;
use crate::tasks::cleanups;
use crate::tasks::imports::{self, ImportType};
use crate::tasks::jobs::{self, Created, Family, JobView, NewJob};

/// Room for a multipart form's framing around the CSV.
const MULTIPART_FRAMING: usize = 64 * 1024;

pub fn routes(state: &AppState) -> Router<AppState> {
    // The only large body there is: the upload, up to `IMPORT_MAX_MIB` (read as a stream and
    // refused as soon as it passes the limit).
    let upload_limit = DefaultBodyLimit::max(state.imports.max_bytes + MULTIPART_FRAMING);
    Router::new()
        .route("/api/v1/imports", post(create_import).layer(upload_limit))
        .route(
            "/api/v1/imports/{id}",
            get(show_import).delete(cancel_import),
        )
        .route("/api/v1/admin/cleanups", post(create_cleanup))
        .route(
            "/api/v1/admin/cleanups/{id}",
            get(show_cleanup).delete(cancel_cleanup),
        )
}

fn too_large(max_bytes: usize) -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!(
            "the upload is larger than {} MiB (IMPORT_MAX_MIB)",
            max_bytes / (1024 * 1024)
        ),
    )
}

fn job_response(status: StatusCode, view: &JobView) -> Response {
    (status, Json(view)).into_response()
}

/// Reads the CSV: the raw body, or the `data` (Mastodon's name) or `file` field of a
/// multipart form; at most `IMPORT_MAX_MIB` either way (a declared bigger length is refused
/// unread), within `HTTP_BODY_TIMEOUT_SECONDS`.
async fn read_upload(s: &AppState, req: Request) -> Result<Vec<u8>, ApiError> {
    let max = s.imports.max_bytes;
    let deadline = s.http.body_timeout;
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<usize>().ok());
    if declared.is_some_and(|n| n > max + MULTIPART_FRAMING) {
        return Err(too_large(max));
    }
    tokio::time::timeout(deadline, read_upload_stream(s, req, max))
        .await
        .map_err(|_| ApiError::from(BodyError::Timeout(deadline)))?
}

async fn read_upload_stream(s: &AppState, req: Request, max: usize) -> Result<Vec<u8>, ApiError> {
    if body::is_content_type(req.headers(), "multipart/form-data") {
        let mut form = Multipart::from_request(req, s).await.map_err(|e| {
            ApiError::new(StatusCode::BAD_REQUEST, format!("bad multipart body: {e}"))
        })?;
        while let Some(mut field) = form.next_field().await.map_err(|e| {
            if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                too_large(max)
            } else {
                ApiError::new(StatusCode::BAD_REQUEST, format!("bad multipart body: {e}"))
            }
        })? {
            if !matches!(field.name(), Some("data") | Some("file")) {
                continue;
            }
            let mut buf = Vec::new();
            while let Some(chunk) = field.chunk().await.map_err(|e| {
                if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                    too_large(max)
                } else {
                    ApiError::new(StatusCode::BAD_REQUEST, format!("bad multipart body: {e}"))
                }
            })? {
                if buf.len() + chunk.len() > max {
                    return Err(too_large(max));
                }
                buf.extend_from_slice(&chunk);
            }
            return Ok(buf);
        }
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "the multipart form has no `data` (or `file`) field with the CSV",
        ));
    }
    let mut stream = req.into_body().into_data_stream();
    let mut buf = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| {
            ApiError::new(StatusCode::BAD_REQUEST, format!("reading the body: {e}"))
        })?;
        if buf.len() + chunk.len() > max {
            return Err(too_large(max));
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(buf)
}

/// `?type=…&mode=…` of an import upload.
#[derive(Deserialize)]
pub struct ImportParams {
    #[serde(rename = "type")]
    ty: Option<String>,
    mode: Option<String>,
}

/// Why the query of an import is refused (400); values are quoted as excerpts.
#[derive(Debug, thiserror::Error)]
pub enum ImportParamError {
    #[error("missing `type` ({names})", names = ImportType::NAMES)]
    MissingType,
    #[error("unknown import type {0:?} (expected {names})", names = ImportType::NAMES)]
    UnknownType(String),
    #[error("unknown mode {0:?} (expected merge or overwrite)")]
    UnknownMode(String),
}

impl From<ImportParamError> for ApiError {
    fn from(e: ImportParamError) -> Self {
        ApiError::bad_request(e.to_string())
    }
}

impl ImportParams {
    /// The import type and mode (`merge` unless given).
    fn validate(&self) -> Result<(ImportType, String), ImportParamError> {
        let ty = self.ty.as_deref().ok_or(ImportParamError::MissingType)?;
        let ty = ImportType::parse(ty)
            .ok_or_else(|| ImportParamError::UnknownType(imports::excerpt(ty)))?;
        match self.mode.as_deref().unwrap_or("merge") {
            m @ ("merge" | "overwrite") => Ok((ty, m.to_string())),
            m => Err(ImportParamError::UnknownMode(imports::excerpt(m))),
        }
    }
}

async fn create_import(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteAccounts>,
    Query(params): Query<ImportParams>,
    req: Request,
) -> Result<Response, ApiError> {
    let (ty, mode) = params.validate()?;
    let bytes = read_upload(&s, req).await?;
    let items = imports::parse(ty, &bytes, s.imports.max_rows)
        .map_err(|e| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, e.to_string()))?;
    let mut tx = s.pool.begin().await?;
    let created = jobs::create(
        &mut tx,
        imports::FAMILY,
        NewJob {
            account_id: Some(account.id),
            kind: ty.as_str().into(),
            mode,
            params: json!({}),
            content_sha256: Some(imports::sha256_hex(&bytes)),
            environment: s.environment.clone(),
            items,
        },
    )
    .await?;
    tx.commit().await?;
    let (status, id) = match created {
        Created::New(id) => (StatusCode::ACCEPTED, id),
        Created::Existing(id) => (StatusCode::OK, id),
    };
    let view = jobs::show(&s.pool, imports::FAMILY, id)
        .await?
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "import not found"))?;
    Ok(job_response(status, &view))
}

/// The import, if it is the caller's (someone else's import is as good as absent).
async fn own_import(s: &AppState, account: &Account, id: &str) -> Result<JobView, ApiError> {
    let id = parse_id(id, "import")?;
    jobs::show(&s.pool, imports::FAMILY, id)
        .await?
        .filter(|v| v.account_id == Some(account.id))
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "import not found"))
}

async fn show_import(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::ReadAccounts>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let view = own_import(&s, &account, &id).await?;
    Ok(job_response(StatusCode::OK, &view))
}

async fn cancel_import(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteAccounts>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let view = own_import(&s, &account, &id).await?;
    cancel(&s, imports::FAMILY, view).await
}

async fn cancel(s: &AppState, fam: Family, view: JobView) -> Result<Response, ApiError> {
    jobs::cancel(&s.pool, fam, view.id).await?;
    let view = jobs::show(&s.pool, fam, view.id)
        .await?
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "not found"))?;
    match view.status.as_str() {
        "cancelled" => Ok(job_response(StatusCode::OK, &view)),
        other => Err(ApiError::new(
            StatusCode::CONFLICT,
            format!("the job is already {other}"),
        )),
    }
}

/// `POST /api/v1/admin/cleanups`: the kind names the variant; an unknown kind is a 400.
#[derive(Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum CleanupRequest {
    RemotePosts {
        #[serde(rename = "olderThanDays")]
        older_than_days: Option<i64>,
    },
    Media,
}

impl RequestBody for CleanupRequest {
    const SHAPE_STATUS: StatusCode = StatusCode::BAD_REQUEST;
}

/// Why a well-formed cleanup request cannot run (422).
#[derive(Debug, thiserror::Error)]
pub enum CleanupError {
    #[error("`olderThanDays` must be a whole number of days from 1 to 36500")]
    Days,
    #[error("media cleanup needs FS_STORAGE_PATH (the media storage directory)")]
    NoStorage,
}

impl From<CleanupError> for ApiError {
    fn from(e: CleanupError) -> Self {
        ApiError::unprocessable(e.to_string())
    }
}

impl CleanupRequest {
    /// The job's kind and parameters.
    fn job(&self, s: &AppState) -> Result<(&'static str, serde_json::Value), CleanupError> {
        match self {
            CleanupRequest::RemotePosts { older_than_days } => {
                let days = older_than_days
                    .filter(|d| (1..=36_500).contains(d))
                    .ok_or(CleanupError::Days)?;
                let cutoff = chrono::Utc::now() - chrono::Duration::days(days);
                Ok((
                    "remote_posts",
                    json!({ "olderThanDays": days, "cutoff": cutoff }),
                ))
            }
            CleanupRequest::Media
                if s.storage_path.is_none() && s.drive.kind() != crate::media::DriveKind::S3 =>
            {
                Err(CleanupError::NoStorage)
            }
            CleanupRequest::Media => Ok(("media", json!({}))),
        }
    }
}

async fn create_cleanup(
    State(s): State<AppState>,
    _: Admin,
    ApiJson(req): ApiJson<CleanupRequest>,
) -> Result<Response, ApiError> {
    let (kind, params) = req.job(&s)?;
    let mut tx = s.pool.begin().await?;
    let created = jobs::create(
        &mut tx,
        cleanups::FAMILY,
        NewJob {
            account_id: None,
            kind: kind.into(),
            mode: "delete".into(),
            params,
            content_sha256: None,
            environment: s.environment.clone(),
            items: vec![cleanups::first_item(kind)],
        },
    )
    .await?;
    tx.commit().await?;
    let id = match created {
        Created::New(id) | Created::Existing(id) => id,
    };
    let view = jobs::show(&s.pool, cleanups::FAMILY, id)
        .await?
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "cleanup not found"))?;
    Ok(job_response(StatusCode::ACCEPTED, &view))
}

async fn admin_cleanup(s: &AppState, id: &str) -> Result<JobView, ApiError> {
    let id = parse_id(id, "cleanup")?;
    jobs::show(&s.pool, cleanups::FAMILY, id)
        .await?
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "cleanup not found"))
}

async fn show_cleanup(
    State(s): State<AppState>,
    _: Admin,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let view = admin_cleanup(&s, &id).await?;
    Ok(job_response(StatusCode::OK, &view))
}

async fn cancel_cleanup(
    State(s): State<AppState>,
    _: Admin,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let view = admin_cleanup(&s, &id).await?;
    cancel(&s, cleanups::FAMILY, view).await
}
