//! `DELETE /api/v1/statuses/:id`: answers the deleted status with its `text` (what "delete
//! and redraft" fills the composer with), as Mastodon does.

use crate::mastodon::Status;
use axum::Json;
use axum::extract::State;

use super::visible_one;
use crate::statuses::write;
use crate::web::auth::{Needs, need};
use crate::web::mastodon::RecordId;
use crate::web::{ApiError, AppState};

pub async fn delete(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteStatuses>,
    RecordId(id): RecordId,
) -> Result<Json<Status>, ApiError> {
    // Rendered first (it is gone after), shown only once the deletion succeeded.
    let mut shown = visible_one(&s, Some(account.id), id).await?;
    let source = {
        let mut conn = s.pool.acquire().await?;
        write::source(&mut conn, account.id, id).await?
    };
    write::delete(&s.pool, s.fed.as_deref(), &s.drive, &account, id).await?;
    if let Some((text, spoiler_text)) = source {
        shown.text = Some(text);
        shown.spoiler_text = spoiler_text;
    }
    Ok(Json(shown))
}
