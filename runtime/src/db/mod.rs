//! Connection pools, migrations and the schema gate (R-DB, R-ROLE-5).

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

/// The schema version this binary expects: the newest migration it carries.
pub fn expected_schema_version() -> i64 {
    MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0)
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
                return Ok(PgPoolOptions::new()
                    .max_connections(max)
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

/// Applies every pending migration (`hollo migrate`). Serialised across processes by the
/// migrator's own advisory lock.
pub async fn migrate(pool: &PgPool) -> Result<i64> {
    MIGRATOR.run(pool).await.context("applying migrations")?;
    schema_version(pool).await
}

pub async fn schema_version(pool: &PgPool) -> Result<i64> {
    let exists: bool = sqlx::query_scalar("SELECT to_regclass('_sqlx_migrations') IS NOT NULL")
        .fetch_one(pool)
        .await?;
    if !exists {
        return Ok(0);
    }
    let v: Option<i64> =
        sqlx::query_scalar("SELECT max(version) FROM _sqlx_migrations WHERE success")
            .fetch_one(pool)
            .await?;
    Ok(v.unwrap_or(0))
}

/// `hollo serve` refuses an outdated schema (R-ROLE-5), and a newer one too: that means a newer
/// version migrated the database and this binary's messages may no longer be understood.
pub async fn check_schema(pool: &PgPool) -> Result<()> {
    let have = schema_version(pool).await?;
    let want = expected_schema_version();
    if have < want {
        bail!(
            "the database schema is at version {have} but this binary needs {want}: run `hollo migrate` \
             (or let the operator's migration Job finish) before starting nodes"
        );
    }
    if have > want {
        let known = MIGRATOR.iter().any(|m| m.version == have);
        if !known {
            tracing::warn!(
                database = have,
                binary = want,
                "the database schema is newer than this binary; continuing, but stop old nodes before upgrading"
            );
        }
    }
    Ok(())
}
