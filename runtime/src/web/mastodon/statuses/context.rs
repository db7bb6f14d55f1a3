//! `GET /api/v1/statuses/:id/context`: ancestors and descendants, local and remote, each
//! filtered by visibility for the viewer; a remote post's replies are collected on view.

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use serde_json::Value;

use super::render;
use crate::filters::Context::Thread;
use crate::filters::active::Active;
use crate::mastodon::Status;
use crate::statuses::{access, context as thread};
use crate::web::auth::{MaybeNeeds, need};
use crate::web::mastodon::RecordId;
use crate::web::{ApiError, AppState};

/// Mastodon's `Context` entity, with the reply-collection job (if one was asked for) riding
/// along as `replyCollection` (clients ignore fields they do not know).
#[derive(Serialize)]
pub struct Context {
    ancestors: Vec<Status>,
    descendants: Vec<Status>,
    #[serde(rename = "replyCollection")]
    reply_collection: Option<Value>,
}

pub async fn context(
    State(s): State<AppState>,
    MaybeNeeds(viewer, _): MaybeNeeds<need::ReadStatuses>,
    RecordId(id): RecordId,
) -> Result<Json<Context>, ApiError> {
    let viewer = viewer.map(|a| a.id);
    let filters = Active::of(&s.pool, viewer).await?;
    let mut conn = s.pool.acquire().await?;
    if !access::can_see(&mut conn, viewer, id).await? {
        return Err(ApiError::record_not_found());
    }
    let (up, down) = thread::thread(&mut conn, viewer, id).await?;
    let ancestors = render(&s, &mut conn, viewer, &up).await?;
    let descendants = render(&s, &mut conn, viewer, &down).await?;
    drop(conn);
    let ancestors = filters.apply(Thread, ancestors).await?;
    let descendants = filters.apply(Thread, descendants).await?;
    // A signed-in viewer of a remote post asks for the replies we have not seen yet.
    let job = match viewer {
        Some(v) => crate::web::replies::request_on_view(&s, id, v).await?,
        None => None,
    };
    Ok(Json(Context {
        ancestors,
        descendants,
        reply_collection: job,
    }))
}
