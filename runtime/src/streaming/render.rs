//! Payloads, rendered when the event is sent (so a status deleted meanwhile is not sent): per
//! connection with the viewer's account for home timelines and notifications (`favourited`
//! and the like are the viewer's), and once per node as anyone sees it for the public streams
//! ([`public_status`]), as Mastodon renders its public stream's payloads without a viewer.

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
    status_for(pool, fed, Some(viewer), id).await
}

/// A Status entity for a public stream's payload, as an anonymous reader sees it (no
/// viewer-specific flags): the same for every stream of the node, so it is rendered once and
/// shared. `None` when no anonymous reader may see it (gone, or not public any more).
pub async fn public_status(
    pool: &PgPool,
    fed: &Federation,
    id: Uuid,
) -> Result<Option<Value>, sqlx::Error> {
    status_for(pool, fed, None, id).await
}

async fn status_for(
    pool: &PgPool,
    fed: &Federation,
    viewer: Option<Uuid>,
    id: Uuid,
) -> Result<Option<Value>, sqlx::Error> {
    let mut conn = pool.acquire().await?;
    entity::render_one(&mut conn, fed, viewer, id).await
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
