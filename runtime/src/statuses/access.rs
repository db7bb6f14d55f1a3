//! Who may read a status (R-MAPI-3): public and unlisted posts, anyone; followers-only and
//! direct ones, their local author and the local accounts in their `audience` (the mentioned,
//! and for a remote followers-only post the local followers of its author when it arrived).
//! Anything else is answered as if the status did not exist (404, no existence leak).
//!
//! One rule, in SQL, so single reads, lists and timelines cannot disagree.

use sqlx::PgConnection;
use uuid::Uuid;

/// The rule over the `posts` view aliased `p`, for the viewer bound as `$VIEWER` (a
/// `uuid`, NULL for an anonymous reader). Callers substitute their parameter number:
/// `visible_sql("p", 2)`.
pub fn visible_sql(alias: &str, viewer_param: u32) -> String {
    format!(
        "({alias}.visibility IN ('public', 'unlisted') OR {alias}.account_id = ${viewer_param}::uuid \
          OR ${viewer_param}::uuid = ANY({alias}.audience))"
    )
}

/// Whether `viewer` may read the post or boost `id`. A boost is readable when its post is
/// and the boost itself is not followers-only to someone else.
pub async fn can_see(
    conn: &mut PgConnection,
    viewer: Option<Uuid>,
    id: Uuid,
) -> Result<bool, sqlx::Error> {
    let rule = visible_sql("p", 2);
    let sql = format!(
        "SELECT EXISTS (
             SELECT 1 FROM posts p WHERE p.id = $1 AND {rule}
           UNION ALL
             SELECT 1 FROM reblogs r JOIN posts p ON p.id = r.post_id
              WHERE r.id = $1 AND {rule}
                AND (r.visibility IN ('public', 'unlisted') OR r.account_id = $2::uuid))"
    );
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
        .bind(id)
        .bind(viewer)
        .fetch_one(conn)
        .await
}
