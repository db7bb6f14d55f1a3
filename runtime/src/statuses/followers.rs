//! Which local accounts follow an actor, local or remote, for what: every accepted follower
//! may get its posts at home (`of`); only those who kept boosts on get its boosts
//! (`boost_readers`); only those who asked to be notified get a `status` notification for
//! each new post (`notified_of_posts`). Local and remote actors alike are named by IRI
//! (`follows.target_iri`), so one query serves both.

use sqlx::PgConnection;
use uuid::Uuid;

async fn select(
    conn: &mut PgConnection,
    actor: &str,
    condition: &'static str,
) -> Result<Vec<Uuid>, sqlx::Error> {
    sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT account_id FROM follows
          WHERE target_iri = $1 AND state = 'accepted' AND {condition}"
    )))
    .bind(actor)
    .fetch_all(conn)
    .await
}

/// Local accounts whose follow of `actor` was accepted.
pub async fn of(conn: &mut PgConnection, actor: &str) -> Result<Vec<Uuid>, sqlx::Error> {
    select(conn, actor, "true").await
}

/// Followers of `actor` who see its boosts at home (`reblogs` left on when following).
pub async fn boost_readers(conn: &mut PgConnection, actor: &str) -> Result<Vec<Uuid>, sqlx::Error> {
    select(conn, actor, "show_reblogs").await
}

/// Followers of `actor` who asked to be notified of its posts (`notify` when following).
pub async fn notified_of_posts(
    conn: &mut PgConnection,
    actor: &str,
) -> Result<Vec<Uuid>, sqlx::Error> {
    select(conn, actor, "notify").await
}
