//! Payloads, rendered per connection with the viewer's account when the event is sent (so
//! `favourited` and the like are the viewer's, and a status deleted meanwhile is not sent).

use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

use crate::federation::Federation;
use crate::federation::directory;
use crate::statuses::entity;
use crate::web::mastodon::entities;

/// A Status entity for an `update`/`status.update` payload, if the status still exists and
/// the viewer may read it.
pub async fn status(
    pool: &PgPool,
    fed: &Federation,
    viewer: Uuid,
    id: Uuid,
) -> Result<Option<Value>, sqlx::Error> {
    let mut conn = pool.acquire().await?;
    entity::render_one(&mut conn, fed, Some(viewer), id).await
}

/// A Notification entity for a `notification` payload, if it still exists and is the
/// viewer's. Minimal on purpose, and the one function to swap for the notifications API's
/// renderer: `id`, `type`, `created_at`, `account` (who caused it) and `status`.
pub async fn notification(
    pool: &PgPool,
    fed: &Federation,
    viewer: Uuid,
    id: i64,
) -> Result<Option<Value>, sqlx::Error> {
    #[derive(sqlx::FromRow)]
    struct Row {
        kind: String,
        created_at: DateTime<Utc>,
        from: Option<Uuid>,
        post: Option<Uuid>,
    }
    let row: Option<Row> = sqlx::query_as(
        "SELECT type AS kind, created_at, from_account_id AS \"from\",
                coalesce(post_id, status_id) AS post
           FROM notifications WHERE id = $1 AND account_id = $2",
    )
    .bind(id)
    .bind(viewer)
    .fetch_optional(pool)
    .await?;
    let Some(Row {
        kind,
        created_at,
        from,
        post,
    }) = row
    else {
        return Ok(None);
    };
    // A notification about a status the viewer may not read (any more) is not sent at all
    // (R-MAPI-VIS), as the notifications API leaves it out.
    let status = match post {
        Some(p) => match status(pool, fed, viewer, p).await? {
            Some(s) => Some(s),
            None => return Ok(None),
        },
        None => None,
    };
    let account = match from {
        Some(a) => match directory::by_id(pool, a).await? {
            Some(found) => entities::account(pool, fed, &found).await?,
            None => Value::Null,
        },
        // A poll's end names the poll's author (as `polls::render` does).
        None => status
            .as_ref()
            .and_then(|s| s.get("account").cloned())
            .unwrap_or(Value::Null),
    };
    Ok(Some(json!({
        "id": id.to_string(),
        "type": kind,
        "created_at": created_at,
        "account": account,
        "status": status,
    })))
}
