//! Who may read a status (R-MAPI-3): public and unlisted posts, anyone; followers-only ones,
//! their local author, the local accounts in their `audience` (those the post names: the
//! mentioned, and for a remote post the addressed) and whoever follows their author *now* —
//! an accepted row of `follows`, read when the post is read, so a follower blocked, removed
//! or gone no longer reads it and one who follows later does, as on Mastodon; direct ones,
//! their author and their `audience`. A reply or boost of ours still waiting for a remote
//! author's approval (`approvals`) is its author's alone, whatever its visibility. Whomever
//! its author blocks reads none of it, public ones included (Mastodon's rule): a local author
//! by a block of its own, a remote one by the `Block` it sent us; a remote reader's signed
//! fetch by [`blocks_remote_reader`]. Anything else is answered as if the status did not
//! exist (404, no existence leak).
//!
//! One rule, in SQL, so single reads, lists and timelines cannot disagree (R-MAPI-VIS): list
//! queries filter with [`visible_sql`] / [`entry_visible_sql`] so their pages are full, and
//! every Status entity is rendered by `mastodon::status::render`, which keeps only the ids
//! [`visible`] allows — a path that forgets to filter shows less, never more.
//!
//! The follow is one probe of `follows`' primary key (viewer, author's actor IRI), made only
//! for a followers-only post the viewer neither wrote nor is named by. Follows name their
//! target by actor IRI, ours too; a remote post has its author's in `actor_iri`, and the IRI
//! of one of ours is `<author's actor IRI>/statuses/<id>` (`polls::insert_status` mints it
//! so), which [`author_iri_sql`] cuts it from.

use std::collections::HashSet;

use sqlx::PgConnection;
use uuid::Uuid;

/// The rule over the `posts` view aliased `p`, for the viewer bound as `$VIEWER` (a
/// `uuid`, NULL for an anonymous reader). Callers substitute their parameter number:
/// `visible_sql("p", 2)`.
pub fn visible_sql(alias: &str, viewer_param: u32) -> String {
    let blocked = format!(
        "({} OR {})",
        local_author_blocks_sql(alias, viewer_param, &author_iri_sql(alias)),
        remote_author_blocks_sql(alias, viewer_param)
    );
    rule(alias, viewer_param, &author_iri_sql(alias), &blocked)
}

/// [`visible_sql`] over our own `statuses` table aliased `alias` (its author is local).
pub fn local_visible_sql(alias: &str, viewer_param: u32) -> String {
    let author_iri = local_author_iri_sql(alias);
    let blocked = local_author_blocks_sql(alias, viewer_param, &author_iri);
    rule(alias, viewer_param, &author_iri, &blocked)
}

/// The viewer's username (an uncorrelated subquery: computed once per query, NULL for an
/// anonymous reader).
fn viewer_name_sql(viewer_param: u32) -> String {
    format!("(SELECT reader.username FROM accounts reader WHERE reader.id = ${viewer_param}::uuid)")
}

/// Whether the local author of the row `alias` (whose actor IRI is the expression
/// `author_iri`) blocks the viewer: one probe of `account_blocks`' key. The viewer is local
/// too, so its actor IRI is the author's with the last segment (the name) replaced by its own.
fn local_author_blocks_sql(alias: &str, viewer_param: u32, author_iri: &str) -> String {
    format!(
        "coalesce((SELECT true FROM account_blocks author_block \
                    WHERE author_block.account_id = {alias}.account_id \
                      AND author_block.target_iri = \
                          regexp_replace({author_iri}, '[^/]*$', '') || {}), false)",
        viewer_name_sql(viewer_param)
    )
}

/// Whether the remote author of the `posts` row `alias` sent a `Block` of the viewer that
/// stands: one probe of `remote_interactions_blocks` (the blocks its author sent). The object
/// of such a block is our actor IRI `<origin>/users/<name>`; its name is compared, which can
/// only match more than the viewer's IRI when the author blocked someone of that name
/// elsewhere — and then hides nothing but that author's own posts.
fn remote_author_blocks_sql(alias: &str, viewer_param: u32) -> String {
    let suffix = format!("('/users/' || {})", viewer_name_sql(viewer_param));
    format!(
        "coalesce((SELECT true FROM remote_interactions author_block \
                    WHERE author_block.actor = {alias}.actor_iri \
                      AND author_block.kind = 'block' AND author_block.undone_at IS NULL \
                      AND right(author_block.object, length({suffix})) = {suffix} \
                    LIMIT 1), false)"
    )
}

/// The actor IRI of the author of the `posts` row `alias`: a remote post's `actor_iri`, else
/// the one its own IRI starts with ([`local_author_iri_sql`]).
pub fn author_iri_sql(alias: &str) -> String {
    format!(
        "coalesce({alias}.actor_iri, {})",
        local_author_iri_sql(alias)
    )
}

/// The actor IRI of the author of our status `alias` (`statuses` or a `posts` row of ours):
/// its IRI up to its last `/statuses/`.
pub fn local_author_iri_sql(alias: &str) -> String {
    format!("substring({alias}.uri FROM '^(.*)/statuses/')")
}

/// The rule over the row `alias` whose author's actor IRI is the expression `author_iri` and
/// for which `blocked` says whether its author blocks the viewer (asked of a signed-in viewer
/// only). The follow is asked last, and only of a followers-only post, as a scalar subquery:
/// one probe of `follows`' primary key per post. (An `EXISTS` there was planned as a hashed
/// alternative reading all of the viewer's follows, or as a probe of `follows_target_accepted`
/// reading every local follower of the author.)
fn rule(alias: &str, viewer_param: u32, author_iri: &str, blocked: &str) -> String {
    format!(
        "({alias}.account_id = ${viewer_param}::uuid \
          OR (NOT {alias}.pending_approval \
              AND NOT (${viewer_param}::uuid IS NOT NULL AND {blocked}) \
              AND ({alias}.visibility IN ('public', 'unlisted') \
                   OR ${viewer_param}::uuid = ANY({alias}.audience) \
                   OR ({alias}.visibility = 'private' \
                       AND coalesce((SELECT live_follow.state = 'accepted' \
                                       FROM follows live_follow \
                                      WHERE live_follow.account_id = ${viewer_param}::uuid \
                                        AND live_follow.target_iri = {author_iri}), false)))))"
    )
}

/// A page of post ids that the viewer bound as `$viewer_param` may read. Each of `halves` is
/// a query over one table yielding post ids as column `id` (and whatever `page` orders by)
/// that an index returns in `page` order; its candidates, in that order (`page` is
/// `Page::keyset` on `c.id`: cursors, `ORDER BY`, `LIMIT`), are looked up in `posts` by id and
/// kept if [`visible_sql`] and the timeline's `extra` condition on `p` (e.g.
/// `AND p.visibility = 'public'`) hold, until the page is full. Several halves (ours and
/// theirs) are each paged so, then merged by `merge` (`ORDER BY c.id … LIMIT …`).
///
/// Why the shape (R-MAPI-4): the remote half of `posts` is a join, which PostgreSQL plans on
/// its own, without the outer `ORDER BY … LIMIT`, so filtering the view and then ordering it
/// read every remote post; and PostgreSQL 15 does not merge a `UNION ALL` of two index scans
/// under a `LIMIT` either (it sorts them). Here each half walks its own index and stops, and
/// the view is only probed by id (the `LIMIT 1` keeps the probe a per-row subquery, not a
/// join of the whole view), so a page costs its size, and the rule stays this module's.
pub fn readable_page_sql(
    halves: &[&str],
    extra: &str,
    viewer_param: u32,
    page: &str,
    merge: &str,
) -> String {
    let rule = visible_sql("p", viewer_param);
    let paged = |half: &str| {
        format!(
            "SELECT c.id FROM ({half}) c
              CROSS JOIN LATERAL (SELECT 1 FROM posts p WHERE p.id = c.id AND {rule} {extra} LIMIT 1) ok
             WHERE {page}"
        )
    };
    match halves {
        [one] => paged(one),
        _ => format!(
            "SELECT c.id FROM ({}) c {merge}",
            halves
                .iter()
                .map(|h| format!("({})", paged(h)))
                .collect::<Vec<_>>()
                .join(" UNION ALL ")
        ),
    }
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
    // The boosted post is probed by id in a LATERAL subquery: a join with `posts` would be
    // planned against the whole view (R-MAPI-4). The boost is a scalar subquery, not an
    // EXISTS: PostgreSQL may plan an EXISTS as a hashed alternative that reads all of
    // `reblogs` once, which a scalar subquery never is (it stays one probe of its key).
    format!(
        "(EXISTS (SELECT 1 FROM posts vp WHERE vp.id = {id_expr} AND {rule}) \
          OR coalesce((SELECT true FROM reblogs vr \
                      CROSS JOIN LATERAL (SELECT 1 FROM posts vp \
                                           WHERE vp.id = vr.post_id AND {rule} LIMIT 1) ok \
                      WHERE vr.id = {id_expr} \
                        AND ((vr.visibility IN ('public', 'unlisted') \
                              AND NOT vr.pending_approval) \
                             OR vr.account_id = ${viewer_param}::uuid) \
                      LIMIT 1), false))"
    )
}

/// Which of `ids` (posts or boosts) `viewer` may read: the one check every rendered status
/// goes through (`mastodon::status::render` calls it, so no caller can forget it).
pub async fn visible(
    conn: &mut PgConnection,
    viewer: Option<Uuid>,
    ids: &[Uuid],
) -> Result<HashSet<Uuid>, sqlx::Error> {
    if ids.is_empty() {
        return Ok(HashSet::new());
    }
    let rule = visible_sql("p", 2);
    // A boost's post is probed by id (LATERAL), not joined with the view: a join made the
    // generic plan hash every remote post and actor (R-MAPI-4).
    let sql = format!(
        "SELECT p.id FROM posts p WHERE p.id = ANY($1) AND {rule}
         UNION ALL
         SELECT r.id FROM reblogs r
          CROSS JOIN LATERAL (SELECT 1 FROM posts p WHERE p.id = r.post_id AND {rule} LIMIT 1) ok
          WHERE r.id = ANY($1)
            AND ((r.visibility IN ('public', 'unlisted') AND NOT r.pending_approval)
                 OR r.account_id = $2::uuid)"
    );
    let rows: Vec<Uuid> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
        .bind(ids)
        .bind(viewer)
        .fetch_all(conn)
        .await?;
    Ok(rows.into_iter().collect())
}

/// Whether our account `author` blocks anyone or any server: only then is it worth finding
/// out who signed a fetch of its documents ([`blocks_remote_reader`]).
pub async fn blocks_anyone(conn: &mut PgConnection, author: Uuid) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM account_blocks WHERE account_id = $1)
             OR EXISTS (SELECT 1 FROM account_domain_blocks WHERE account_id = $1)",
    )
    .bind(author)
    .fetch_one(conn)
    .await
}

/// Whether our account `author` blocks the remote actor `reader` (who signed a fetch of one of
/// its documents), or its server: then none of its statuses is that reader's to fetch, public
/// ones included, as Mastodon answers such a fetch.
pub async fn blocks_remote_reader(
    conn: &mut PgConnection,
    author: Uuid,
    reader: &str,
) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM account_blocks WHERE account_id = $1 AND target_iri = $2)
             OR EXISTS (SELECT 1 FROM account_domain_blocks d
                         WHERE d.account_id = $1
                           AND hollo_host_in(hollo_iri_host($2), ARRAY[d.domain]))",
    )
    .bind(author)
    .bind(reader)
    .fetch_one(conn)
    .await
}
