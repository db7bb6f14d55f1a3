//! Payloads, rendered when the event is sent (so a status deleted meanwhile is not sent): per
//! connection with the viewer's account for home timelines and notifications (`favourited`
//! and the like are the viewer's), and once per node as anyone sees it for the public streams
//! ([`public_status`]), as Mastodon renders its public stream's payloads without a viewer.
//! The entities are the client API's (`mastodon`); the viewer's filters are applied by the
//! session before they are serialized ([`json`]).

use sqlx::PgPool;
use uuid::Uuid;

use crate::mastodon::{Notification, Site, Status, notification, status};

/// A Status entity for an `update`/`status.update` payload, if the status still exists and
/// the viewer may read it.
pub async fn status(
    pool: &PgPool,
    site: Site<'_>,
    viewer: Uuid,
    id: Uuid,
) -> Result<Option<Status>, sqlx::Error> {
    status_for(pool, site, Some(viewer), id).await
}

/// A Status entity for a public stream's payload, as an anonymous reader sees it (no
/// viewer-specific flags): the same for every stream of the node, so it is rendered once and
/// shared. `None` when no anonymous reader may see it (gone, or not public any more).
pub async fn public_status(
    pool: &PgPool,
    site: Site<'_>,
    id: Uuid,
) -> Result<Option<Status>, sqlx::Error> {
    status_for(pool, site, None, id).await
}

async fn status_for(
    pool: &PgPool,
    site: Site<'_>,
    viewer: Option<Uuid>,
    id: Uuid,
) -> Result<Option<Status>, sqlx::Error> {
    let mut conn = pool.acquire().await?;
    status::render_one(&mut conn, site, viewer, id).await
}

/// A Notification entity for a `notification` payload, if it still exists, is the viewer's
/// and what it is about is still readable (R-MAPI-VIS: one about a status the viewer may not
/// read any more is not sent at all, as the notifications API leaves it out).
pub async fn notification(
    pool: &PgPool,
    site: Site<'_>,
    viewer: Uuid,
    id: i64,
) -> Result<Option<Notification>, sqlx::Error> {
    notification::one(pool, site, viewer, id).await
}

/// Entities are plain structs of strings, numbers and lists: serializing cannot fail.
pub fn json(v: &impl serde::Serialize) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".into())
}
