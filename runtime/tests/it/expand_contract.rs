//! Expand/contract migrations (R-OP-ZD, R-OP-MIG, R-OP-UPG): `hollo migrate --pre` /
//! `--post`, what `hollo version --json` reports of them, and the startup schema check that
//! lets a binary run on a schema newer by pre-deploy migrations only — the premise of the
//! operator's zero-downtime upgrade, where the old pods keep serving on the schema the new
//! version pre-migrated. Real PostgreSQL, the real binary.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::time::Duration;

use hollo_runtime::db;
use hollo_runtime::node::WORKER_STARTED;
use hollo_runtime::queue::QueueName;
use hollo_runtime::tasks::probe;
use sqlx::PgPool;
use sqlx::migrate::{Migration, MigrationType, Migrator};
use support::process::{Hollo, run};
use support::{eventually, fresh_db_with};

/// A version far beyond any real migration: "the next release's".
const NEXT_PRE: i64 = 99_990_101_000_001;
const NEXT_POST: i64 = 99_990_101_000_002;

fn migration(version: i64, description: &'static str, sql: &'static str) -> Migration {
    Migration::new(
        version,
        description.into(),
        MigrationType::Simple,
        sqlx::SqlSafeStr::into_sql_str(sql),
        false,
    )
}

/// Applies this binary's pre-deploy migrations plus one more of a (simulated) next release:
/// additive, as a pre-deploy migration must be — a new table and a new nullable column on
/// the task queue this binary writes and reads.
async fn pre_migrate_as_the_next_release(pool: &PgPool) {
    let mut all: Vec<Migration> = db::MIGRATOR.iter().cloned().collect();
    all.push(migration(
        NEXT_PRE,
        "next release additive",
        "CREATE TABLE next_release_marker (id bigint PRIMARY KEY);
         ALTER TABLE hollo_task_message_v1 ADD COLUMN next_release_note text;",
    ));
    Migrator::with_migrations(all).run(pool).await.unwrap();
}

/// Records a post-deploy migration this binary does not carry (a newer release's contract).
async fn post_migrate_as_the_next_release(pool: &PgPool) {
    let mut all: Vec<Migration> = db::POST_MIGRATOR.iter().cloned().collect();
    all.push(migration(
        NEXT_POST,
        "next release contract",
        "DROP TABLE next_release_marker;",
    ));
    let mut m = Migrator::with_migrations(all);
    m.dangerous_set_table_name(db::POST_TABLE);
    m.run(pool).await.unwrap();
}

#[tokio::test]
async fn version_json_reports_both_schema_versions_and_the_minimum() {
    let out = run(&["version", "--json"], &[]);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let pre = db::expected_schema_version();
    assert_eq!(v["schemaVersion"], pre, "{v}");
    assert_eq!(v["preSchemaVersion"], pre, "{v}");
    assert_eq!(v["postSchemaVersion"], db::expected_post_schema_version());
    assert_eq!(v["minSchemaVersion"], db::min_schema_version());
    assert!(v["minSchemaVersion"].as_i64().is_some_and(|m| m <= pre));
    assert_eq!(
        v["taskDefinitionVersion"],
        hollo_runtime::tasks::TASK_DEFINITION_VERSION
    );
}

/// The startup check's verdicts, pure: below the minimum refused, newer by pre-deploy
/// migrations accepted, an unknown post-deploy migration refused.
#[test]
fn the_schema_verdict_is_a_window() {
    let min = db::min_schema_version();
    let post = db::expected_post_schema_version();
    assert!(db::schema_verdict(min, post).is_ok());
    assert!(db::schema_verdict(min + 1, post).is_ok(), "newer by pre");
    assert!(db::schema_verdict(NEXT_PRE, 0).is_ok(), "post not yet run");
    let below = db::schema_verdict(min - 1, post).expect_err("below the minimum");
    assert!(below.to_string().contains("run `hollo migrate`"), "{below}");
    let contracted = db::schema_verdict(min, NEXT_POST).expect_err("unknown post");
    assert!(
        contracted.to_string().contains("post-deploy migration"),
        "{contracted}"
    );
}

/// `--pre` applies only `migrations/`, `--post` only `migrations/post/` (each recorded in its
/// own table); plain `migrate` both.
#[tokio::test]
async fn migrate_pre_and_post_apply_their_own_kind() {
    let db = fresh_db_with(false).await;
    let url = [("DATABASE_URL", db.url.as_str())];
    let out = run(&["migrate", "--pre"], &url);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        db::schema_version(&db.pool).await.unwrap(),
        db::expected_schema_version()
    );
    let post_table: bool = sqlx::query_scalar("SELECT to_regclass($1) IS NOT NULL")
        .bind(db::POST_TABLE)
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert!(!post_table, "--pre touches nothing post-deploy");
    let out = run(&["migrate", "--post"], &url);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        db::post_schema_version(&db.pool).await.unwrap(),
        db::expected_post_schema_version()
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("post-deploy"), "{stdout}");
    let out = run(&["migrate", "--pre", "--post"], &url);
    assert!(
        !out.status.success(),
        "one kind or both, not a contradiction"
    );

    // Plain `migrate`, as the README and the stop-migrate-start Job run it: both kinds.
    let fresh = fresh_db_with(false).await;
    let out = run(&["migrate"], &[("DATABASE_URL", fresh.url.as_str())]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        db::schema_version(&fresh.pool).await.unwrap(),
        db::expected_schema_version()
    );
    let recorded: bool = sqlx::query_scalar("SELECT to_regclass($1) IS NOT NULL")
        .bind(db::POST_TABLE)
        .fetch_one(&fresh.pool)
        .await
        .unwrap();
    assert!(recorded, "the post-deploy migrator ran (its table exists)");
}

/// Mastodon's two-step check, for this binary as "the previous version": its startup check
/// refuses a schema below its minimum, accepts (and really works on) one a next release has
/// pre-migrated, and refuses one that release has post-migrated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_previous_binary_runs_on_the_next_pre_schema_only() {
    let db = fresh_db_with(false).await;
    let pool = &db.pool;
    let newest = db::expected_schema_version();
    let below: Vec<Migration> = db::MIGRATOR
        .iter()
        .filter(|m| m.version < newest)
        .cloned()
        .collect();
    Migrator::with_migrations(below).run(pool).await.unwrap();
    let e = db::check_schema(pool).await.expect_err("below the minimum");
    assert!(e.to_string().contains("needs"), "{e}");

    db::migrate(pool).await.unwrap();
    db::check_schema(pool).await.expect("its own schema");
    pre_migrate_as_the_next_release(pool).await;
    assert_eq!(db::schema_version(pool).await.unwrap(), NEXT_PRE);
    db::check_schema(pool)
        .await
        .expect("newer by pre-deploy migrations only");

    // Not just the check: a worker of this binary starts on that schema and runs tasks
    // enqueued through the widened table.
    let mut w = Hollo::serve(&[
        ("DATABASE_URL", db.url.as_str()),
        ("NODE_TYPE", "worker"),
        ("HEALTH_PORT", "0"),
    ]);
    w.wait_log(WORKER_STARTED, Duration::from_secs(30)).await;
    probe::enqueue(pool, QueueName::Task, "next-pre", 5, 0, 0, Duration::ZERO)
        .await
        .unwrap();
    eventually(
        Duration::from_secs(30),
        "probes done on the pre-migrated schema",
        || async { (probe::stats(pool).await.ok()?.completed == 5).then_some(()) },
    )
    .await;
    w.signal("TERM");
    assert!(w.wait_exit(Duration::from_secs(20)).success());

    // The next release's post-deploy migration contracts the schema: refused from now on.
    post_migrate_as_the_next_release(pool).await;
    let e = db::check_schema(pool).await.expect_err("contracted");
    assert!(e.to_string().contains("post-deploy migration"), "{e}");
    let mut w = Hollo::serve(&[
        ("DATABASE_URL", db.url.as_str()),
        ("NODE_TYPE", "worker"),
        ("HEALTH_PORT", "0"),
    ]);
    let status = w.wait_exit(Duration::from_secs(30));
    assert!(!status.success(), "{}", w.logs());
    assert!(w.logs().contains("post-deploy migration"), "{}", w.logs());
}

/// Whether `index` exists and is valid (readable by plans).
async fn index_valid(pool: &PgPool, index: &str) -> Option<bool> {
    sqlx::query_scalar(
        "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
          WHERE c.relname = $1",
    )
    .bind(index)
    .fetch_optional(pool)
    .await
    .unwrap()
}

/// R-OP-MIG: a `CREATE INDEX CONCURRENTLY` migration that is interrupted leaves an invalid
/// index, and the migration's `IF NOT EXISTS` would accept it on the retry. Here the build is
/// stopped by a lock timeout while a writer's transaction is open (as an evicted Job's would
/// be stopped); the next migrate rebuilds it, and claims read it again.
#[tokio::test]
async fn an_interrupted_concurrent_index_build_is_rebuilt_by_the_next_migrate() {
    let db = fresh_db_with(true).await;
    let index = "hollo_activity_message_v1_kind_due";
    assert!(db::CONCURRENT_INDEXES.contains(&index));
    assert_eq!(index_valid(&db.pool, index).await, Some(true));
    sqlx::query(sqlx::AssertSqlSafe(format!("DROP INDEX {index}")))
        .execute(&db.pool)
        .await
        .unwrap();

    // A writer's open transaction: the concurrent build waits for it, and gives up.
    let mut writer = db.pool.begin().await.unwrap();
    sqlx::query("INSERT INTO hollo_activity_message_v1 (id, message, kind) VALUES ($1, '{}', 'x')")
        .bind(uuid::Uuid::new_v4())
        .execute(&mut *writer)
        .await
        .unwrap();
    let mut builder = db.pool.acquire().await.unwrap();
    sqlx::query("SET lock_timeout = '300ms'")
        .execute(&mut *builder)
        .await
        .unwrap();
    let build = sqlx::query(sqlx::AssertSqlSafe(format!(
        "CREATE INDEX CONCURRENTLY IF NOT EXISTS {index} ON hollo_activity_message_v1 (kind, due)"
    )))
    .execute(&mut *builder)
    .await;
    assert!(build.is_err(), "the build had to wait for the writer");
    sqlx::query("RESET lock_timeout")
        .execute(&mut *builder)
        .await
        .unwrap();
    drop(builder);
    writer.rollback().await.unwrap();
    assert_eq!(
        index_valid(&db.pool, index).await,
        Some(false),
        "the interrupted build left an invalid index"
    );

    db::migrate_pre(&db.pool).await.unwrap();
    assert_eq!(index_valid(&db.pool, index).await, Some(true));
    // Still the index the migration builds.
    let def: String = sqlx::query_scalar("SELECT indexdef FROM pg_indexes WHERE indexname = $1")
        .bind(index)
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert!(def.ends_with("USING btree (kind, due)"), "{def}");
}
