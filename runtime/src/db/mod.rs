//! Connection pools, migrations and the schema gate (R-DB, R-ROLE-5).

pub mod listen;
pub mod local;

use std::str::FromStr;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::{ConnectOptions, Connection, Executor};
use tokio_util::sync::CancellationToken;

use crate::config::{DbConfig, redact_url};
use crate::queue::Backoff;

/// Pre-deploy migrations (R-OP-ZD): every file of `migrations/`. Additive only — the
/// previous version keeps working on the schema they leave (new tables, new nullable or
/// defaulted columns, indexes built concurrently) — so they run while the old pods serve.
/// Their table is sqlx's default `_sqlx_migrations`, so every database migrated before the
/// split reads as pre-migrated and no file's checksum changes.
#[cfg(not(feature = "e2e-next"))]
pub static MIGRATOR: Migrator = sqlx::migrate!("../migrations");

/// The end-to-end suite's "next version" build (feature `e2e-next`, e2e/README.md): the
/// project's migrations plus e2e/next/migrations, so the real-node upgrade scenarios have a
/// second version with one more migration. Never part of a release build.
#[cfg(feature = "e2e-next")]
pub static MIGRATOR: std::sync::LazyLock<Migrator> = std::sync::LazyLock::new(|| {
    let mut all: Vec<_> = sqlx::migrate!("../migrations").iter().cloned().collect();
    all.extend(sqlx::migrate!("../e2e/next/migrations").iter().cloned());
    Migrator::with_migrations(all)
});

/// The table of the post-deploy migrator: a second sqlx migrator with a table of its own,
/// so the two kinds are applied, listed and checksummed independently (sqlx skips the
/// `post/` directory when it reads `migrations/`).
pub const POST_TABLE: &str = "_hollo_post_migrations";

/// Post-deploy migrations (R-OP-ZD): every file of `migrations/post/`. Contract
/// changes (drop, rename's second half, NOT NULL after a backfill) the previous version may
/// not survive: they run only once no pod of an older version is left.
pub static POST_MIGRATOR: std::sync::LazyLock<Migrator> = std::sync::LazyLock::new(|| {
    #[allow(unused_mut)]
    let mut all: Vec<_> = sqlx::migrate!("../migrations/post")
        .iter()
        .cloned()
        .collect();
    #[cfg(feature = "e2e-next")]
    all.extend(
        sqlx::migrate!("../e2e/next/migrations/post")
            .iter()
            .cloned(),
    );
    let mut m = Migrator::with_migrations(all);
    m.dangerous_set_table_name(POST_TABLE);
    m
});

/// The schema version this binary expects: the newest pre-deploy migration it carries.
pub fn expected_schema_version() -> i64 {
    MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0)
}

/// The newest post-deploy migration this binary carries (0: none).
pub fn expected_post_schema_version() -> i64 {
    POST_MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0)
}

/// The oldest (pre-deploy) schema this binary runs on: its code reads what every pre-deploy
/// migration it carries creates, so all of them must be applied. Newer pre-deploy schemas are
/// fine (they only add); see [`check_schema`] for the post-deploy side.
pub fn min_schema_version() -> i64 {
    expected_schema_version()
}

/// Resolved URLs: `url` for pools, `direct` for LISTEN/NOTIFY and migrations.
#[derive(Clone, Debug)]
pub struct Urls {
    pub url: String,
    pub direct: String,
}

/// Resolves `DATABASE_URL`, starting the local PostgreSQL under `HOLLO_HOME` when it is unset.
pub async fn resolve_urls(cfg: &DbConfig) -> Result<(Urls, Option<local::LocalPostgres>)> {
    if let Some(url) = &cfg.url {
        let direct = cfg.direct_url.clone().unwrap_or_else(|| url.clone());
        return Ok((
            Urls {
                url: url.clone(),
                direct,
            },
            None,
        ));
    }
    let home = std::path::PathBuf::from(&cfg.home).join("postgres");
    let pg = tokio::task::spawn_blocking(move || -> Result<(String, local::LocalPostgres)> {
        let pg = local::LocalPostgres::new(home)?;
        pg.ensure_started()?;
        Ok((pg.url("hollo"), pg))
    })
    .await??;
    let (url, pg) = pg;
    create_database_if_missing(&pg.url("postgres"), "hollo").await?;
    tracing::info!(url = %url, "DATABASE_URL is unset: using the local PostgreSQL");
    Ok((
        Urls {
            url: url.clone(),
            direct: url,
        },
        Some(pg),
    ))
}

pub async fn create_database_if_missing(admin_url: &str, name: &str) -> Result<()> {
    let opts = connect_options(admin_url)?;
    let mut conn = opts
        .connect()
        .await
        .context("connecting to the local PostgreSQL")?;
    let exists: Option<i32> = sqlx::query_scalar("SELECT 1 FROM pg_database WHERE datname = $1")
        .bind(name)
        .fetch_optional(&mut conn)
        .await?;
    if exists.is_none() {
        conn.execute(sqlx::AssertSqlSafe(format!(
            "CREATE DATABASE \"{}\"",
            name.replace('"', "")
        )))
        .await?;
    }
    Ok(())
}

pub fn connect_options(url: &str) -> Result<PgConnectOptions> {
    let opts = PgConnectOptions::from_str(url)
        .with_context(|| format!("parsing database URL {}", redact_url(url)))?
        .application_name("hollo")
        .log_statements(tracing::log::LevelFilter::Trace);
    Ok(opts)
}

/// A connection idle for less than this is handed out without a liveness check.
pub const PING_IF_IDLE_FOR: Duration = Duration::from_secs(1);

/// The options of every pool of a node (and of the queue benchmark, so it measures the same).
///
/// sqlx checks each idle connection before handing it out (`test_before_acquire`): a Sync
/// message and its ReadyForQuery, a full round trip to PostgreSQL in front of every statement
/// or transaction. Under load that was one extra round trip per query: in the queue's drain a
/// claim became two round trips. The check is there to catch a connection that died while
/// idle (a restarted or failed-over server, a NAT or pooler timeout), which takes time to go
/// stale; so only a connection idle for [`PING_IF_IDLE_FOR`] or longer is checked (a pool's
/// common bypass window, like HikariCP's). A connection that fails within that second fails
/// its statement, as a statement in flight at that moment would anyway, and is discarded.
pub fn pool_options(max: u32) -> PgPoolOptions {
    PgPoolOptions::new()
        .max_connections(max)
        .test_before_acquire(false)
        .before_acquire(|conn, meta| {
            Box::pin(async move {
                alive_if_idle(conn, meta.idle_for).await?;
                Ok(true)
            })
        })
}

/// The liveness rule of [`pool_options`], for a connection held outside the pool too (the
/// queue consumer keeps its claim connection through a backlog): one idle for
/// [`PING_IF_IDLE_FOR`] or longer is pinged, a fresher one is trusted.
pub async fn alive_if_idle(
    conn: &mut sqlx::PgConnection,
    idle_for: Duration,
) -> Result<(), sqlx::Error> {
    if idle_for >= PING_IF_IDLE_FOR {
        conn.ping().await?;
    }
    Ok(())
}

/// Builds a pool, waiting for the database with back-off and a clear log line per attempt
/// (R-DB-3). Gives up only when `stop` fires.
pub async fn connect_pool(
    url: &str,
    max: u32,
    what: &str,
    stop: &CancellationToken,
) -> Result<PgPool> {
    let opts = connect_options(url)?;
    let mut backoff = Backoff::new(Duration::from_millis(250), Duration::from_secs(10));
    let mut attempt = 1u32;
    loop {
        // One plain connection first: a pool would hide "refused" behind its acquire timeout.
        let probe = tokio::select! {
            _ = stop.cancelled() => bail!("stopped while waiting for the database"),
            r = tokio::time::timeout(Duration::from_secs(10), opts.connect()) => match r {
                Ok(r) => r.map_err(|e| e.to_string()),
                Err(_) => Err("connection attempt timed out after 10 s".to_string()),
            },
        };
        match probe {
            Ok(conn) => {
                let _ = conn.close().await;
                if attempt > 1 {
                    tracing::info!(pool = what, attempt, "database reachable again");
                }
                return Ok(pool_options(max)
                    .min_connections(0)
                    .acquire_timeout(Duration::from_secs(30))
                    .connect_lazy_with(opts));
            }
            Err(e) => {
                let delay = backoff.next_wait();
                tracing::warn!(
                    pool = what, attempt, retry_in_ms = delay.as_millis() as u64, url = %redact_url(url),
                    error = %e, "database unreachable; retrying"
                );
                tokio::select! {
                    _ = stop.cancelled() => bail!("stopped while waiting for the database: {e}"),
                    _ = tokio::time::sleep(delay) => {}
                }
                attempt += 1;
            }
        }
    }
}

/// Applies every pending migration, pre- then post-deploy (`hollo migrate`: the
/// stop-migrate-start path, where no old pod is left to protect). Serialised across
/// processes by the migrator's own advisory lock. Returns the pre-deploy schema version.
pub async fn migrate(pool: &PgPool) -> Result<i64> {
    let v = migrate_pre(pool).await?;
    migrate_post(pool).await?;
    Ok(v)
}

/// Applies the pending pre-deploy migrations (`hollo migrate --pre`), with old pods serving.
pub async fn migrate_pre(pool: &PgPool) -> Result<i64> {
    MIGRATOR
        .run(pool)
        .await
        .context("applying pre-deploy migrations")?;
    rebuild_invalid_indexes(pool).await?;
    schema_version(pool).await
}

/// The indexes migrations build `CONCURRENTLY` (on tables too busy to lock). A build that is
/// interrupted — the migration Job's pod evicted, a lock timeout, a deadlock with a second
/// migrator waiting on the migrations' advisory lock — leaves its index in the catalog,
/// marked invalid: PostgreSQL keeps it up to date but never reads it. The migration was not
/// recorded, so it runs again, and its `IF NOT EXISTS` then finds that index and stops.
pub const CONCURRENT_INDEXES: &[&str] = &["hollo_activity_message_v1_kind_due"];

/// Rebuilds each of [`CONCURRENT_INDEXES`] that an interrupted build left invalid, again
/// without blocking writes (`REINDEX … CONCURRENTLY`).
async fn rebuild_invalid_indexes(pool: &PgPool) -> Result<()> {
    let invalid: Vec<String> = sqlx::query_scalar(
        "SELECT c.relname::text FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
          WHERE NOT i.indisvalid AND c.relname = ANY($1) AND pg_table_is_visible(c.oid)",
    )
    .bind(CONCURRENT_INDEXES)
    .fetch_all(pool)
    .await
    .context("looking for invalid indexes")?;
    for name in invalid {
        tracing::warn!(index = %name, "an interrupted concurrent build left this index invalid; rebuilding it");
        // `name` is one of CONCURRENT_INDEXES, constants of this module.
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "REINDEX INDEX CONCURRENTLY {name}"
        )))
        .execute(pool)
        .await
        .with_context(|| format!("rebuilding the invalid index {name}"))?;
    }
    Ok(())
}

/// Applies the pending post-deploy migrations (`hollo migrate --post`), once no old pod is
/// left. Pre-deploy ones first if any is pending: a post-deploy migration may contract what a
/// pre-deploy one of the same release replaced, never the other way round.
pub async fn migrate_post(pool: &PgPool) -> Result<i64> {
    if schema_version(pool).await? < expected_schema_version() {
        migrate_pre(pool).await?;
    }
    POST_MIGRATOR
        .run(pool)
        .await
        .context("applying post-deploy migrations")?;
    post_schema_version(pool).await
}

/// The newest applied migration recorded in `table` (0: none, or no table yet).
async fn applied_version(pool: &PgPool, table: &str) -> Result<i64> {
    let exists: bool = sqlx::query_scalar("SELECT to_regclass($1) IS NOT NULL")
        .bind(table)
        .fetch_one(pool)
        .await?;
    if !exists {
        return Ok(0);
    }
    // `table` is one of two constants of this module, never input.
    let v: Option<i64> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT max(version) FROM {table} WHERE success"
    )))
    .fetch_one(pool)
    .await?;
    Ok(v.unwrap_or(0))
}

/// The database's pre-deploy schema version.
pub async fn schema_version(pool: &PgPool) -> Result<i64> {
    applied_version(pool, "_sqlx_migrations").await
}

/// The database's post-deploy schema version.
pub async fn post_schema_version(pool: &PgPool) -> Result<i64> {
    applied_version(pool, POST_TABLE).await
}

/// `hollo serve` refuses an outdated schema (R-ROLE-5): one below [`min_schema_version`].
/// A schema newer by pre-deploy migrations only is accepted (R-OP-ZD: they are
/// additive, which is what lets the old pods serve while a newer version pre-migrates); one
/// with a post-deploy migration this binary does not carry is refused: a newer version has
/// contracted the schema (dropped or tightened something this binary may read).
pub async fn check_schema(pool: &PgPool) -> Result<()> {
    let have = schema_version(pool).await?;
    let post = post_schema_version(pool).await?;
    schema_verdict(have, post)?;
    if have > expected_schema_version() {
        tracing::info!(
            database = have,
            binary = expected_schema_version(),
            "the database schema is newer than this binary by pre-deploy migrations only (additive): running on it"
        );
    }
    Ok(())
}

/// The pure part of [`check_schema`]: the database's pre- and post-deploy versions.
pub fn schema_verdict(pre: i64, post: i64) -> Result<()> {
    let min = min_schema_version();
    if pre < min {
        bail!(
            "the database schema is at version {pre} but this binary needs {min}: run `hollo migrate` \
             (or let the operator's migration Job finish) before starting nodes"
        );
    }
    let known_post = expected_post_schema_version();
    if post > known_post {
        bail!(
            "the database has post-deploy migration {post}, newer than this binary's {known_post}: \
             a newer version contracted the schema this binary may rely on; run that version \
             (a downgrade past a post-deploy migration is not possible)"
        );
    }
    Ok(())
}
