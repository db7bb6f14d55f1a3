//! Shared test plumbing: a real PostgreSQL (started on demand under target/, or the one
//! `HOLLO_TEST_DATABASE_URL` names) and a fresh, migrated database per test so tests run in
//! parallel without seeing each other.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub mod api;
pub mod clients;
pub mod consumer;
pub mod expiry;
pub mod files;
pub mod gotosocial;
pub mod hosts;
pub mod images;
pub mod moto;
pub mod multipart;
pub mod node;
pub mod peer;
pub mod process;
pub mod stream;
pub mod tls_front;
pub mod venv;

use std::time::{Duration, Instant};

use hollo_runtime::db;
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;

pub fn admin_url() -> String {
    if let Ok(url) = std::env::var("HOLLO_TEST_DATABASE_URL") {
        return url;
    }
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("test-pg");
    let pg = db::local::LocalPostgres::new(dir).expect("PostgreSQL binaries for tests");
    pg.ensure_started().expect("starting the test PostgreSQL")
}

/// URL of `db` on the same server as `admin`.
pub fn with_database(admin: &str, db: &str) -> String {
    match admin.find('?') {
        Some(q) => {
            let (base, query) = admin.split_at(q);
            let slash = base.rfind('/').expect("URL has a path");
            format!("{}/{db}{query}", &base[..slash])
        }
        None => {
            let slash = admin.rfind('/').expect("URL has a path");
            format!("{}/{db}", &admin[..slash])
        }
    }
}

pub struct TestDb {
    pub url: String,
    pub pool: PgPool,
}

/// A new database; migrated unless `migrate` is false.
pub async fn fresh_db_with(migrate: bool) -> TestDb {
    let admin = tokio::task::spawn_blocking(admin_url)
        .await
        .expect("admin url");
    let name = format!("t_{}", uuid::Uuid::new_v4().simple());
    db::create_database_if_missing(&admin, &name)
        .await
        .expect("create test database");
    let url = with_database(&admin, &name);
    let pool = PgPoolOptions::new()
        .max_connections(10)
        .connect(&url)
        .await
        .expect("connect test database");
    if migrate {
        db::migrate(&pool).await.expect("migrate test database");
    }
    TestDb { url, pool }
}

pub async fn fresh_db() -> TestDb {
    fresh_db_with(true).await
}

/// The seed's monitoring SQL over the task queue, verbatim (000_…/001_…): how many messages
/// are queued, ready, delayed, and pending poll notifications.
pub async fn seed_monitoring(pool: &PgPool) -> (i64, i64, i64, i64) {
    sqlx::query_as(
        "SELECT count(*) AS queued,
       count(*) FILTER (WHERE created + delay <= CURRENT_TIMESTAMP) AS ready,
       count(*) FILTER (WHERE created + delay > CURRENT_TIMESTAMP) AS delayed,
       count(*) FILTER (
         WHERE message->>'type' = 'task'
           AND message->>'taskName' = 'hollo.poll-notification.v1'
       ) AS pending_polls
FROM hollo_task_message_v1;",
    )
    .fetch_one(pool)
    .await
    .expect("monitoring SQL")
}

/// Polls `check` until it returns `Some`, failing the test with `what` after `deadline`.
pub async fn eventually<T, F, Fut>(deadline: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            start.elapsed() < deadline,
            "timed out after {deadline:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The `hollo` binary of this build.
pub const HOLLO: &str = env!("CARGO_BIN_EXE_hollo");

/// A local account and a bearer token for it (no keys: enough for the client API).
pub async fn account_with_token(pool: &PgPool, name: &str) -> (uuid::Uuid, String) {
    let id = uuid::Uuid::now_v7();
    let token = format!("token-{name}-{}", uuid::Uuid::new_v4().simple());
    sqlx::query(
        "INSERT INTO accounts (id, username, public_key_pem, private_key_enc) VALUES ($1, $2, '', '\\x00')",
    )
    .bind(id)
    .bind(name)
    .execute(pool)
    .await
    .expect("account");
    sqlx::query("INSERT INTO account_tokens (token_hash, account_id) VALUES ($1, $2)")
        .bind(hollo_runtime::accounts::hash_token(&token))
        .bind(id)
        .execute(pool)
        .await
        .expect("token");
    (id, token)
}
