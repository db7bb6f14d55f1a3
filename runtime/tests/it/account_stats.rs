//! A local account's counts (`account_stats`, R-MAPI-4): kept by triggers as statuses,
//! followers and follows change — one row at a time, a statement of many, concurrent writers,
//! state changes of a follow, a deleted account — and filled in by the migration for the rows
//! that were there before it. After every step each count equals a `count(*)` of its table.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use hollo_runtime::db;
use sqlx::PgPool;
use sqlx::migrate::Migrator;
use support::{account_with_token, fresh_db, fresh_db_with};
use uuid::Uuid;

/// The migration that adds the counters.
const ACCOUNT_STATS: i64 = 20261204003100;

/// `(statuses, followers, following)` as the counters hold them and as counted.
async fn both(pool: &PgPool, account: Uuid) -> ((i64, i64, i64), (i64, i64, i64)) {
    let kept: Option<(i64, i64, i64)> = sqlx::query_as(
        "SELECT statuses, followers, following FROM account_stats WHERE account_id = $1",
    )
    .bind(account)
    .fetch_optional(pool)
    .await
    .unwrap();
    let counted: (i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM statuses WHERE account_id = $1),
                (SELECT count(*) FROM followers WHERE account_id = $1),
                (SELECT count(*) FROM follows WHERE account_id = $1 AND state = 'accepted')",
    )
    .bind(account)
    .fetch_one(pool)
    .await
    .unwrap();
    (kept.unwrap_or((0, 0, 0)), counted)
}

async fn check(pool: &PgPool, account: Uuid, want: (i64, i64, i64), step: &str) {
    let (kept, counted) = both(pool, account).await;
    assert_eq!(counted, want, "{step}: the tables themselves");
    assert_eq!(kept, counted, "{step}: account_stats against count(*)");
}

/// Inserts `n` statuses of `account` in one statement.
async fn post(pool: &PgPool, account: Uuid, n: i32) {
    sqlx::query(
        "INSERT INTO statuses (id, account_id, uri, content)
         SELECT gen_random_uuid(), $1, 'https://hollo.example/s/' || gen_random_uuid(), 'x'
           FROM generate_series(1, $2)",
    )
    .bind(account)
    .bind(n)
    .execute(pool)
    .await
    .unwrap();
}

async fn followed_by(pool: &PgPool, account: Uuid, n: i32, prefix: &str) {
    sqlx::query(
        "INSERT INTO followers (account_id, actor_iri, follow_activity_id)
         SELECT $1, 'https://remote.example/' || $3 || g, 'https://remote.example/f/' || $3 || g
           FROM generate_series(1, $2) g",
    )
    .bind(account)
    .bind(n)
    .bind(prefix)
    .execute(pool)
    .await
    .unwrap();
}

async fn follows(pool: &PgPool, account: Uuid, n: i32, state: &str) {
    sqlx::query(
        "INSERT INTO follows (account_id, target_iri, follow_activity_id, state)
         SELECT $1, 'https://remote.example/' || $3 || g,
                'https://hollo.example/f/' || gen_random_uuid(), $3
           FROM generate_series(1, $2) g",
    )
    .bind(account)
    .bind(n)
    .bind(state)
    .execute(pool)
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn counters_follow_every_change_of_their_tables() {
    let db = fresh_db().await;
    let pool = &db.pool;
    let (alice, _) = account_with_token(pool, "alice").await;
    let (bob, _) = account_with_token(pool, "bob").await;
    check(pool, alice, (0, 0, 0), "a new account").await;

    post(pool, alice, 1).await;
    post(pool, alice, 50).await;
    post(pool, bob, 3).await;
    check(
        pool,
        alice,
        (51, 0, 0),
        "one status, then 50 in a statement",
    )
    .await;
    check(pool, bob, (3, 0, 0), "another account's statuses").await;
    sqlx::query(
        "DELETE FROM statuses WHERE id IN
           (SELECT id FROM statuses WHERE account_id = $1 LIMIT 10)",
    )
    .bind(alice)
    .execute(pool)
    .await
    .unwrap();
    check(pool, alice, (41, 0, 0), "10 deleted in a statement").await;

    // Eight writers at once, each its own transaction of single-row inserts.
    let writers: Vec<_> = (0..8)
        .map(|_| {
            let pool = pool.clone();
            tokio::spawn(async move {
                for _ in 0..20 {
                    post(&pool, alice, 1).await;
                }
            })
        })
        .collect();
    for w in writers {
        w.await.unwrap();
    }
    check(pool, alice, (201, 0, 0), "160 concurrent inserts").await;

    followed_by(pool, alice, 30, "a").await;
    sqlx::query(
        "INSERT INTO followers (account_id, actor_iri, follow_activity_id)
         VALUES ($1, 'https://remote.example/a1', 'again') ON CONFLICT DO NOTHING",
    )
    .bind(alice)
    .execute(pool)
    .await
    .unwrap();
    check(
        pool,
        alice,
        (201, 30, 0),
        "30 followers, a repeated Follow ignored",
    )
    .await;
    sqlx::query("DELETE FROM followers WHERE account_id = $1 AND actor_iri LIKE '%a1_'")
        .bind(alice)
        .execute(pool)
        .await
        .unwrap();
    check(pool, alice, (201, 20, 0), "10 unfollowed").await;

    follows(pool, alice, 5, "pending").await;
    follows(pool, alice, 4, "accepted").await;
    check(pool, alice, (201, 20, 4), "pending follows do not count").await;
    sqlx::query("UPDATE follows SET state = 'accepted' WHERE account_id = $1 AND state = 'pending' AND target_iri LIKE '%pending1'")
        .bind(alice)
        .execute(pool)
        .await
        .unwrap();
    check(pool, alice, (201, 20, 5), "one accepted").await;
    // One statement turning some accepted follows pending and some pending accepted.
    sqlx::query(
        "UPDATE follows SET state = CASE state WHEN 'accepted' THEN 'pending' ELSE 'accepted' END
          WHERE account_id = $1",
    )
    .bind(alice)
    .execute(pool)
    .await
    .unwrap();
    check(pool, alice, (201, 20, 4), "states swapped in one statement").await;
    sqlx::query("UPDATE follows SET updated_at = now() WHERE account_id = $1")
        .bind(alice)
        .execute(pool)
        .await
        .unwrap();
    check(pool, alice, (201, 20, 4), "an update that changes no state").await;
    sqlx::query("DELETE FROM follows WHERE account_id = $1")
        .bind(alice)
        .execute(pool)
        .await
        .unwrap();
    check(pool, alice, (201, 20, 0), "every follow deleted").await;

    // Deleting an account cascades to its rows; its counters go with it.
    sqlx::query("DELETE FROM accounts WHERE id = $1")
        .bind(alice)
        .execute(pool)
        .await
        .unwrap();
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM account_stats WHERE account_id = $1")
        .bind(alice)
        .fetch_one(pool)
        .await
        .unwrap();
    assert_eq!(left, 0, "a deleted account's counters");
    check(pool, bob, (3, 0, 0), "the other account untouched").await;
}

/// An instance upgraded with posts and followers already stored: the migration counts them.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_migration_counts_what_was_stored_before_it() {
    let db = fresh_db_with(false).await;
    let pool = &db.pool;
    let before: Vec<_> = db::MIGRATOR
        .iter()
        .filter(|m| m.version < ACCOUNT_STATS)
        .cloned()
        .collect();
    assert!(
        db::MIGRATOR.iter().any(|m| m.version == ACCOUNT_STATS),
        "the account_stats migration is {ACCOUNT_STATS}"
    );
    Migrator::with_migrations(before).run(pool).await.unwrap();
    let (alice, _) = account_with_token(pool, "alice").await;
    let (quiet, _) = account_with_token(pool, "quiet").await;
    post(pool, alice, 12).await;
    followed_by(pool, alice, 7, "b").await;
    follows(pool, alice, 3, "accepted").await;
    follows(pool, alice, 2, "pending").await;

    db::migrate(pool).await.unwrap();
    check(pool, alice, (12, 7, 3), "counted by the migration").await;
    check(pool, quiet, (0, 0, 0), "an account with nothing").await;
    post(pool, alice, 1).await;
    check(pool, alice, (13, 7, 3), "kept after it").await;
}

/// The pre-deploy migration that counts public and unlisted statuses apart (F9).
const PUBLIC_STATUSES: i64 = 20261214000200;

/// `public_statuses` as kept and as counted (public and unlisted statuses).
async fn public_both(pool: &PgPool, account: Uuid) -> (i64, i64) {
    sqlx::query_as(
        "SELECT coalesce((SELECT public_statuses FROM account_stats WHERE account_id = $1), 0),
                (SELECT count(*) FROM statuses
                  WHERE account_id = $1 AND visibility IN ('public', 'unlisted'))",
    )
    .bind(account)
    .fetch_one(pool)
    .await
    .unwrap()
}

async fn check_public(pool: &PgPool, account: Uuid, want: i64, step: &str) {
    let (kept, counted) = public_both(pool, account).await;
    assert_eq!(counted, want, "{step}: the table itself");
    assert_eq!(kept, counted, "{step}: public_statuses against count(*)");
}

/// Inserts `n` statuses of `account` as `statuses::write` does: as 'public' (the column's
/// default), then given `visibility` by an UPDATE in the same transaction.
async fn post_as(pool: &PgPool, account: Uuid, n: i32, visibility: &str) {
    let mut tx = pool.begin().await.unwrap();
    let ids: Vec<Uuid> = sqlx::query_scalar(
        "INSERT INTO statuses (id, account_id, uri, content)
         SELECT gen_random_uuid(), $1, 'https://hollo.example/s/' || gen_random_uuid(), 'x'
           FROM generate_series(1, $2) RETURNING id",
    )
    .bind(account)
    .bind(n)
    .fetch_all(&mut *tx)
    .await
    .unwrap();
    sqlx::query("UPDATE statuses SET visibility = $2 WHERE id = ANY($1)")
        .bind(&ids)
        .bind(visibility)
        .execute(&mut *tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();
}

/// What a stranger is shown of an account's posts (`public_statuses`): its public and
/// unlisted ones, whichever way a status is written, changed or deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn public_statuses_count_what_anyone_may_read() {
    let db = fresh_db().await;
    let pool = &db.pool;
    let (alice, _) = account_with_token(pool, "alice").await;
    for (n, visibility) in [
        (3, "public"),
        (2, "unlisted"),
        (4, "private"),
        (5, "direct"),
    ] {
        post_as(pool, alice, n, visibility).await;
    }
    check_public(pool, alice, 5, "written as the API writes them").await;
    check(pool, alice, (14, 0, 0), "every status in `statuses`").await;
    sqlx::query(
        "UPDATE statuses SET visibility = CASE visibility WHEN 'private' THEN 'public'
                                                          WHEN 'public' THEN 'direct'
                                                          ELSE visibility END
          WHERE account_id = $1",
    )
    .bind(alice)
    .execute(pool)
    .await
    .unwrap();
    check_public(pool, alice, 6, "visibilities swapped in one statement").await;
    sqlx::query("UPDATE statuses SET content = 'edited' WHERE account_id = $1")
        .bind(alice)
        .execute(pool)
        .await
        .unwrap();
    check_public(pool, alice, 6, "an edit that keeps the visibility").await;
    let writers: Vec<_> = (0..4)
        .map(|i| {
            let pool = pool.clone();
            tokio::spawn(async move {
                for _ in 0..10 {
                    post_as(&pool, alice, 1, ["public", "direct"][i % 2]).await;
                }
            })
        })
        .collect();
    for w in writers {
        w.await.unwrap();
    }
    check_public(pool, alice, 26, "40 concurrent posts, half of them public").await;
    sqlx::query("DELETE FROM statuses WHERE account_id = $1 AND visibility <> 'private'")
        .bind(alice)
        .execute(pool)
        .await
        .unwrap();
    check_public(pool, alice, 0, "all but the followers-only ones deleted").await;
}

/// An instance upgraded with statuses already stored: the migration counts the public ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_public_count_migration_counts_what_was_stored_before_it() {
    let db = fresh_db_with(false).await;
    let pool = &db.pool;
    assert!(
        db::MIGRATOR.iter().any(|m| m.version == PUBLIC_STATUSES),
        "the public count migration is {PUBLIC_STATUSES}"
    );
    let before: Vec<_> = db::MIGRATOR
        .iter()
        .filter(|m| m.version < PUBLIC_STATUSES)
        .cloned()
        .collect();
    Migrator::with_migrations(before).run(pool).await.unwrap();
    let (alice, _) = account_with_token(pool, "alice").await;
    post_as(pool, alice, 4, "unlisted").await;
    post_as(pool, alice, 3, "direct").await;

    db::migrate(pool).await.unwrap();
    check_public(pool, alice, 4, "counted by the migration").await;
    post_as(pool, alice, 1, "public").await;
    check_public(pool, alice, 5, "kept after it").await;
}
