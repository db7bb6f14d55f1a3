//! Statuses in the Mastodon client API (R-MAPI-3): writing (`create`,
//! `edit`, `delete`), single reads (`read`: the status, its history and source) and threads
//! (`context`). Storage and its rules live in `statuses::write`; these handlers parse
//! (`body`: JSON, urlencoded and multipart forms alike) and render.

use axum::Router;
use axum::routing::get;
use sqlx::PgConnection;
use uuid::Uuid;

use crate::mastodon::status::{self, Status};
use crate::statuses::access;
use crate::statuses::write::WriteError;
use crate::web::{ApiError, AppState};

pub mod body;
pub mod context;
pub mod create;
pub mod delete;
pub mod edit;
pub mod read;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/statuses", get(read::many).post(create::create))
        .route(
            "/api/v1/statuses/{id}",
            get(read::show).put(edit::edit).delete(delete::delete),
        )
        .route("/api/v1/statuses/{id}/history", get(read::history))
        .route("/api/v1/statuses/{id}/source", get(read::source))
        .route("/api/v1/statuses/{id}/context", get(context::context))
}

impl From<WriteError> for ApiError {
    fn from(e: WriteError) -> Self {
        match e {
            WriteError::NotFound => ApiError::not_found(e.to_string()),
            WriteError::NotAuthor | WriteError::Blocked => ApiError::forbidden(e.to_string()),
            WriteError::NotPermitted(m) => ApiError::forbidden(m),
            WriteError::Invalid(m) => ApiError::unprocessable(m),
            WriteError::Db(e) => e.into(),
        }
    }
}

/// Status entities for the `ids` that `viewer` may read (the rest are left out), with their
/// media (R-MAPI-VIS: `mastodon::status::render` is where who may read is enforced).
pub(crate) async fn render(
    s: &AppState,
    conn: &mut PgConnection,
    viewer: Option<Uuid>,
    ids: &[Uuid],
) -> Result<Vec<Status>, ApiError> {
    Ok(status::render(conn, s.site(), viewer, ids).await?)
}

/// One status `viewer` may see, rendered; 404 otherwise.
pub(crate) async fn visible_one(
    s: &AppState,
    viewer: Option<Uuid>,
    id: Uuid,
) -> Result<Status, ApiError> {
    let mut conn = s.pool.acquire().await?;
    if !access::can_see(&mut conn, viewer, id).await? {
        return Err(ApiError::record_not_found());
    }
    render(s, &mut conn, viewer, &[id])
        .await?
        .pop()
        .ok_or_else(ApiError::record_not_found)
}
