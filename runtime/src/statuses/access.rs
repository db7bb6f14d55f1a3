//! Who may read a status (R-MAPI-3): public and unlisted posts, anyone; followers-only and
//! direct ones, their local author and the local accounts in their `audience` (the mentioned,
//! and for a remote followers-only post the local followers of its author when it arrived).
//! Anything else is answered as if the status did not exist (404, no existence leak).
//!
//! One rule, in SQL, so single reads, lists and timelines cannot disagree (R-MAPI-VIS): list
//! queries filter with [`visible_sql`] / [`entry_visible_sql`] so their pages are full, and
//! every Status entity is rendered by `entity::render`, which keeps only the ids [`visible`]
//! allows — a path that forgets to filter shows less, never more.

use std::collections::HashSet;

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

/// A page of post ids that the viewer bound as `$viewer_param` may read: `candidates` is a
/// query yielding post ids as column `id` in the order of an index (a table's own rows, not
/// the `posts` view); each candidate, in `page` order (`Page::keyset` on `c.id`), is looked up
/// in `posts` by id and kept if [`visible_sql`] and the timeline's `extra` condition on `p`
/// (e.g. `AND p.visibility = 'public'`) hold — until the page is full.
///
/// Why the shape (issue 38): the remote half of `posts` is a join, which PostgreSQL plans on
/// its own, without the outer `ORDER BY … LIMIT`, so filtering the view and then ordering it
/// reads every remote post. Here the order comes from the candidates' index and the view is
/// only probed by primary key (the `LIMIT 1` keeps the probe a per-row subquery instead of a
/// join of the whole view), so a page costs its size, and the rule stays this module's.
pub fn readable_page_sql(candidates: &str, extra: &str, viewer_param: u32, page: &str) -> String {
    let rule = visible_sql("p", viewer_param);
    format!(
        "SELECT c.id FROM ({candidates}) c
          CROSS JOIN LATERAL (SELECT 1 FROM posts p WHERE p.id = c.id AND {rule} {extra} LIMIT 1) ok
         WHERE {page}"
    )
}

/// Whether `viewer` may read the post or boost `id`.
pub async fn can_see(
    conn: &mut PgConnection,
    viewer: Option<Uuid>,
    id: Uuid,
) -> Result<bool, sqlx::Error> {
    Ok(visible(conn, viewer, &[id]).await?.contains(&id))
}

/// An SQL condition: the entry whose id is the expression `id_expr` (a post or a boost) is
/// readable by the viewer bound as `$viewer_param` — [`visible_sql`] for a post, and for a
/// boost the boosted post's rule plus the boost's own visibility (a followers-only boost is
/// its booster's). For filters over other tables (notifications, stream events) so that a
/// page is filtered in its query, not shortened after it.
pub fn entry_visible_sql(id_expr: &str, viewer_param: u32) -> String {
    let rule = visible_sql("vp", viewer_param);
    format!(
        "(EXISTS (SELECT 1 FROM posts vp WHERE vp.id = {id_expr} AND {rule}) \
          OR EXISTS (SELECT 1 FROM reblogs vr JOIN posts vp ON vp.id = vr.post_id \
                      WHERE vr.id = {id_expr} AND {rule} \
                        AND (vr.visibility IN ('public', 'unlisted') \
                             OR vr.account_id = ${viewer_param}::uuid)))"
    )
}

/// Which of `ids` (posts or boosts) `viewer` may read: the one check every rendered status
/// goes through (`entity::render` calls it, so no caller can forget it).
pub async fn visible(
    conn: &mut PgConnection,
    viewer: Option<Uuid>,
    ids: &[Uuid],
) -> Result<HashSet<Uuid>, sqlx::Error> {
    if ids.is_empty() {
        return Ok(HashSet::new());
    }
    let rule = visible_sql("p", 2);
    let sql = format!(
        "SELECT p.id FROM posts p WHERE p.id = ANY($1) AND {rule}
         UNION ALL
         SELECT r.id FROM reblogs r JOIN posts p ON p.id = r.post_id
          WHERE r.id = ANY($1) AND {rule}
            AND (r.visibility IN ('public', 'unlisted') OR r.account_id = $2::uuid)"
    );
    let rows: Vec<Uuid> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
        .bind(ids)
        .bind(viewer)
        .fetch_all(conn)
        .await?;
    Ok(rows.into_iter().collect())
}
