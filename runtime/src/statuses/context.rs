//! A status's thread (`GET /api/v1/statuses/:id/context`): its ancestors, oldest first, and
//! its descendants in time order, ours and theirs alike (the `posts` view links replies by
//! their parent's IRI), each filtered by the one visibility rule for the viewer. Walks are
//! bounded in depth and size, so a long or cyclic chain cannot run away.

use sqlx::PgConnection;
use uuid::Uuid;

use super::access::visible_sql;

/// How far up or down a thread is followed.
const MAX_DEPTH: i32 = 64;
/// At most this many descendants are shown (Mastodon caps its own list too).
const MAX_DESCENDANTS: i64 = 4096;

/// The ancestors of `id` that `viewer` may see, the root first.
pub async fn ancestors(
    conn: &mut PgConnection,
    viewer: Option<Uuid>,
    id: Uuid,
) -> Result<Vec<Uuid>, sqlx::Error> {
    let rule = visible_sql("p", 2);
    let sql = format!(
        "WITH RECURSIVE up(id, parent, depth) AS (
             SELECT id, in_reply_to_uri, 0 FROM posts WHERE id = $1
           UNION
             SELECT p.id, p.in_reply_to_uri, up.depth + 1
               FROM up JOIN posts p ON p.uri = up.parent
              WHERE up.depth < {MAX_DEPTH}
         )
         SELECT p.id FROM up JOIN posts p ON p.id = up.id
          WHERE up.depth > 0 AND {rule}
          ORDER BY up.depth DESC"
    );
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
        .bind(id)
        .bind(viewer)
        .fetch_all(conn)
        .await
}

/// The replies to `id`, and theirs, that `viewer` may see, oldest first.
pub async fn descendants(
    conn: &mut PgConnection,
    viewer: Option<Uuid>,
    id: Uuid,
) -> Result<Vec<Uuid>, sqlx::Error> {
    let rule = visible_sql("p", 2);
    let sql = format!(
        "WITH RECURSIVE down(id, uri, depth) AS (
             SELECT id, uri, 0 FROM posts WHERE id = $1
           UNION
             SELECT c.id, c.uri, down.depth + 1
               FROM down JOIN posts c ON c.in_reply_to_uri = down.uri
              WHERE down.depth < {MAX_DEPTH}
         )
         SELECT DISTINCT p.id FROM down JOIN posts p ON p.id = down.id
          WHERE down.depth > 0 AND p.id <> $1 AND {rule}
          ORDER BY p.id LIMIT {MAX_DESCENDANTS}"
    );
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
        .bind(id)
        .bind(viewer)
        .fetch_all(conn)
        .await
}
