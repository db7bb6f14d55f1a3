//! The database: where it is, the pools' sizes, how long one-shot commands wait for it.

use std::time::Duration;

use super::{ConfigError, Env, vars};

/// Database connection settings shared by every command.
#[derive(Clone, Debug)]
pub struct DbConfig {
    /// `DATABASE_URL`; `None` means "start a local PostgreSQL under `.hollo/`".
    pub url: Option<String>,
    /// `DATABASE_DIRECT_URL`: bypasses a transaction-mode pooler for LISTEN/NOTIFY and migrations.
    pub direct_url: Option<String>,
    /// `DATABASE_POOL_MAX`: pool of a web node (R-DB-1).
    pub web_pool_max: u32,
    /// `WORKER_POOL_MAX`: general pool of a worker (R-DB-1).
    pub worker_pool_max: u32,
    /// `ITEM_LOCK_POOL_SIZE`: connections dedicated to item locks on a worker (R-DB-1).
    pub item_lock_pool_size: u32,
    /// `HOLLO_HOME`: where the local PostgreSQL lives when `DATABASE_URL` is unset.
    pub home: String,
    /// `DATABASE_WAIT_SECONDS`: how long a one-shot command (`migrate`,
    /// `account create`, …) waits for an unreachable database before it fails. `serve` waits
    /// for as long as it runs (R-DB-3).
    pub wait: Duration,
}

impl DbConfig {
    pub fn from_env(env: &Env) -> Result<Self, ConfigError> {
        let url = env.url(&vars::DATABASE_URL)?;
        let direct_url = env.url(&vars::DATABASE_DIRECT_URL)?;
        if url.is_none() && direct_url.is_some() {
            return Err(ConfigError::Inconsistent(
                "DATABASE_DIRECT_URL is set but DATABASE_URL is not; set both or neither".into(),
            ));
        }
        Ok(DbConfig {
            url,
            direct_url,
            web_pool_max: env.int(&vars::DATABASE_POOL_MAX)?,
            worker_pool_max: env.int(&vars::WORKER_POOL_MAX)?,
            item_lock_pool_size: env.int(&vars::ITEM_LOCK_POOL_SIZE)?,
            home: env.text(&vars::HOLLO_HOME).unwrap_or_default(),
            wait: env.duration(&vars::DATABASE_WAIT_SECONDS)?,
        })
    }
}
