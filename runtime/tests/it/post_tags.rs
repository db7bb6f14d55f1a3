//! The tag timeline's index, `post_tags` (R-MAPI-4): one row per (tag, post) of `statuses`
//! and `remote_posts`, kept by triggers from their `tags` arrays. The triggers fire only when
//! there is something to do (a tagged insert, a change of tags, a tagged post deleted), so an
//! untagged note costs the inbox no function call (issue 36 item 3); after every step the
//! table must still equal the arrays, whichever way a row got there.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use sqlx::PgPool;
use support::{account_with_token, fresh_db};

/// `post_tags` as stored, and as the two tables' arrays say it should be.
async fn kept_and_derived(pool: &PgPool) -> (Vec<(String, String)>, Vec<(String, String)>) {
    let kept: Vec<(String, String)> =
        sqlx::query_as("SELECT tag, post_id::text FROM post_tags ORDER BY 1, 2")
            .fetch_all(pool)
            .await
            .unwrap();
    let derived: Vec<(String, String)> = sqlx::query_as(
        "SELECT DISTINCT t, id::text FROM (
             SELECT id, unnest(tags) AS t FROM statuses
             UNION ALL SELECT id, unnest(tags) FROM remote_posts) x
          ORDER BY 1, 2",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    (kept, derived)
}

async fn check(pool: &PgPool, rows: usize, step: &str) {
    let (kept, derived) = kept_and_derived(pool).await;
    assert_eq!(kept, derived, "{step}: post_tags against the tags arrays");
    assert_eq!(kept.len(), rows, "{step}: rows");
}

async fn run(pool: &PgPool, sql: &str) {
    sqlx::query(sqlx::AssertSqlSafe(sql.to_string()))
        .execute(pool)
        .await
        .unwrap();
}

#[tokio::test]
async fn post_tags_follow_the_tags_of_local_and_remote_posts() {
    let db = fresh_db().await;
    let pool = &db.pool;
    let (account, _) = account_with_token(pool, "tagger").await;
    let status = |id: &str, tags: &str| {
        format!(
            "INSERT INTO statuses (id, account_id, uri, content, tags)
             VALUES ('{id}', '{account}', 'https://hollo.example/s/{id}', 'x', '{tags}')"
        )
    };
    let remote = |id: &str, tags: &str| {
        format!(
            "INSERT INTO remote_posts (id, iri, actor, body, tags)
             VALUES ('{id}', 'https://r.example/n/{id}', 'https://r.example/u/a', '{{}}', '{tags}')"
        )
    };
    const L1: &str = "00000000-0000-7000-8000-000000000001";
    const L2: &str = "00000000-0000-7000-8000-000000000002";
    const R1: &str = "00000000-0000-7000-8000-000000000011";
    const R2: &str = "00000000-0000-7000-8000-000000000012";

    run(pool, &status(L1, "{rust,go}")).await;
    run(pool, &status(L2, "{}")).await;
    run(pool, &remote(R1, "{rust}")).await;
    run(pool, &remote(R2, "{}")).await;
    check(pool, 3, "inserted, two tagged and two not").await;

    run(
        pool,
        &format!("UPDATE statuses SET tags = '{{go}}' WHERE id = '{L1}'"),
    )
    .await;
    run(
        pool,
        &format!("UPDATE statuses SET tags = '{{zig,zig}}' WHERE id = '{L2}'"),
    )
    .await;
    run(
        pool,
        &format!("UPDATE remote_posts SET tags = '{{}}' WHERE id = '{R1}'"),
    )
    .await;
    run(
        pool,
        &format!("UPDATE remote_posts SET tags = '{{c}}' WHERE id = '{R2}'"),
    )
    .await;
    check(pool, 3, "tags changed, added, emptied").await;

    // An update that leaves the tags as they were (an edit of the text) keeps the rows.
    run(
        pool,
        &format!("UPDATE statuses SET content = 'y', tags = tags WHERE id = '{L1}'"),
    )
    .await;
    run(
        pool,
        &format!("UPDATE remote_posts SET content = 'y' WHERE id = '{R2}'"),
    )
    .await;
    check(pool, 3, "untouched tags").await;

    run(
        pool,
        &format!("DELETE FROM statuses WHERE id IN ('{L1}', '{L2}')"),
    )
    .await;
    run(pool, &format!("DELETE FROM remote_posts WHERE id = '{R1}'")).await;
    check(pool, 1, "deleted, tagged and not").await;
    run(pool, &format!("DELETE FROM remote_posts WHERE id = '{R2}'")).await;
    check(pool, 0, "all gone").await;
}
