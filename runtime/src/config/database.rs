//! The database: where it is, the pools' sizes, how long one-shot commands wait for it.

use std::time::Duration;

use super::{ConfigError, Env};

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
    /// `DATABASE_WAIT_SECONDS` (default 60): how long a one-shot command (`migrate`,
    /// `account create`, …) waits for an unreachable database before it fails. `serve` waits
    /// for as long as it runs (R-DB-3).
    pub wait: Duration,
}

impl DbConfig {
    pub fn from_env(env: &Env) -> Result<Self, ConfigError> {
        let url = env.get("DATABASE_URL").map(str::to_string);
        for (var, value) in [
            ("DATABASE_URL", &url),
            (
                "DATABASE_DIRECT_URL",
                &env.get("DATABASE_DIRECT_URL").map(str::to_string),
            ),
        ] {
            if let Some(v) = value
                && !(v.starts_with("postgres://") || v.starts_with("postgresql://"))
            {
                return Err(ConfigError::Invalid {
                    var,
                    value: redact_url(v),
                    expected: "a postgres:// or postgresql:// URL".into(),
                });
            }
        }
        let direct_url = env.get("DATABASE_DIRECT_URL").map(str::to_string);
        if url.is_none() && direct_url.is_some() {
            return Err(ConfigError::Inconsistent(
                "DATABASE_DIRECT_URL is set but DATABASE_URL is not; set both or neither".into(),
            ));
        }
        Ok(DbConfig {
            url,
            direct_url,
            web_pool_max: env.count("DATABASE_POOL_MAX", 20, 1, 10_000)?,
            worker_pool_max: env.count("WORKER_POOL_MAX", 20, 2, 10_000)?,
            item_lock_pool_size: env.count("ITEM_LOCK_POOL_SIZE", 4, 1, 1_000)?,
            home: env.get("HOLLO_HOME").unwrap_or(".hollo").to_string(),
            wait: env.seconds("DATABASE_WAIT_SECONDS", 60, 1, 3600)?,
        })
    }
}

/// Hide the password of a connection URL in logs and errors.
pub fn redact_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let creds = &url[scheme + 3..at];
            match creds.find(':') {
                Some(colon) => format!(
                    "{}{}:***{}",
                    &url[..scheme + 3],
                    &creds[..colon],
                    &url[at..]
                ),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}
