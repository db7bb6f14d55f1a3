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

/// The thread around `id` that `viewer` may see: its ancestors, the root first, and its
/// replies (and theirs), oldest first.
pub async fn thread(
    conn: &mut PgConnection,
    viewer: Option<Uuid>,
    id: Uuid,
) -> Result<(Vec<Uuid>, Vec<Uuid>), sqlx::Error> {
    let up = walk(&mut *conn, viewer, id, &ancestors_sql()).await?;
    let down = walk(&mut *conn, viewer, id, &descendants_sql()).await?;
    Ok((up, down))
}

/// The post ids `sql` selects, with `id` bound at `$1` and `viewer` at `$2`.
async fn walk(
    conn: &mut PgConnection,
    viewer: Option<Uuid>,
    id: Uuid,
    sql: &str,
) -> Result<Vec<Uuid>, sqlx::Error> {
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
        .bind(id)
        .bind(viewer)
        .fetch_all(conn)
        .await
}

/// The ancestors of `$1` that `$2` may see, the root first.
fn ancestors_sql() -> String {
    let rule = visible_sql("p", 2);
    format!(
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
    )
}

/// The replies to `$1`, and theirs, that `$2` may see, oldest first.
fn descendants_sql() -> String {
    let rule = visible_sql("p", 2);
    format!(
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
    )
}
