//! The queues' concurrency and timings, and remote reply collection.

use std::time::Duration;

use super::{ConfigError, Env};

/// Per-process queue limits and timings (SPEC.md §2).
#[derive(Clone, Debug)]
pub struct QueueConfig {
    pub activity_concurrency: usize,
    /// `DELIVERY_CONCURRENCY` (default 64): outgoing deliveries in flight per worker process, in
    /// slots of their own beside the activity slots. A delivery mostly waits on a remote
    /// server, so a fan-out needs many in flight; a slot of its own also keeps a fan-out of
    /// thousands from holding every activity slot while inbox work waits (R-AP-2).
    pub delivery_concurrency: usize,
    pub task_concurrency: usize,
    pub reply_concurrency: usize,
    pub lease: Duration,
    pub poll_interval: Duration,
    /// `RECOVERY_INTERVAL_SECONDS` (default 60): how often consuming nodes run recovery scans
    /// (R-POLL-4). Shorter only for tests and demos.
    pub recovery_interval: Duration,
    /// `POLL_WAKEUP_CHUNK_SECONDS` (default and maximum 7 days): the longest delay of a stored
    /// poll-notification wakeup (R-POLL-3); far expiries are reached in chunks of this size.
    pub poll_wakeup_chunk: Duration,
}

impl QueueConfig {
    pub fn from_env(env: &Env) -> Result<Self, ConfigError> {
        let task_concurrency = env.count("TASK_CONCURRENCY", 4, 1, 1_000)? as usize;
        let reply_concurrency = env.count("REPLY_CONCURRENCY", 2, 0, 1_000)? as usize;
        if reply_concurrency > task_concurrency {
            return Err(ConfigError::Inconsistent(format!(
                "REPLY_CONCURRENCY={reply_concurrency} exceeds TASK_CONCURRENCY={task_concurrency}: \
                 reply collections run inside the task slots"
            )));
        }
        let lease = env.seconds("QUEUE_LEASE_SECONDS", 30, 3, 3600)?;
        Ok(QueueConfig {
            activity_concurrency: env.count("ACTIVITY_CONCURRENCY", 10, 1, 10_000)? as usize,
            delivery_concurrency: env.count("DELIVERY_CONCURRENCY", 64, 1, 10_000)? as usize,
            task_concurrency,
            reply_concurrency,
            lease,
            poll_interval: Duration::from_millis(u64::from(env.count(
                "QUEUE_POLL_MS",
                5000,
                10,
                600_000,
            )?)),
            recovery_interval: env.seconds("RECOVERY_INTERVAL_SECONDS", 60, 1, 3600)?,
            poll_wakeup_chunk: env.seconds(
                "POLL_WAKEUP_CHUNK_SECONDS",
                7 * 86_400,
                1,
                7 * 86_400,
            )?,
        })
    }
}

/// Remote reply collection limits and timings (SPEC.md §6, R-RPL). Defaults are the spec's;
/// every one is an env var so tests (and small instances) can shorten them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplyConfig {
    /// `REPLY_MAX_DEPTH`: reply levels walked (1 = direct replies only).
    pub max_depth: u32,
    /// `REPLY_MAX_ITEMS`: reply objects one job takes before it ends as partial.
    pub max_items: u32,
    /// `REPLY_MAX_REQUESTS`: HTTP requests one job makes before it ends as partial.
    pub max_requests: u32,
    /// `REPLY_HOST_INTERVAL_MS`: minimum time between two requests to one host, all workers.
    pub host_interval: Duration,
    /// `REPLY_COOLDOWN_SECONDS`: a finished collection is not collected again before this.
    pub cooldown: Duration,
    /// `REPLY_RETRY_AFTER_SECONDS`: back-off after a 429 without a usable `Retry-After`.
    pub retry_after_default: Duration,
    /// `REPLY_LEASE_SECONDS`: a running job's heartbeat lease; refreshed every half lease.
    pub lease: Duration,
    /// The shared recovery period (`RECOVERY_INTERVAL_SECONDS`): a dispatch the scan enqueues
    /// is reserved for one period, so the next scan does not enqueue it again.
    pub recovery_interval: Duration,
}

impl ReplyConfig {
    pub fn from_env(env: &Env, recovery_interval: Duration) -> Result<Self, ConfigError> {
        Ok(ReplyConfig {
            max_depth: env.count("REPLY_MAX_DEPTH", 2, 1, 10)?,
            max_items: env.count("REPLY_MAX_ITEMS", 100, 1, 100_000)?,
            max_requests: env.count("REPLY_MAX_REQUESTS", 200, 1, 100_000)?,
            host_interval: Duration::from_millis(u64::from(env.count(
                "REPLY_HOST_INTERVAL_MS",
                5000,
                0,
                3_600_000,
            )?)),
            cooldown: env.seconds("REPLY_COOLDOWN_SECONDS", 300, 0, 30 * 86_400)?,
            retry_after_default: env.seconds("REPLY_RETRY_AFTER_SECONDS", 300, 1, 86_400)?,
            lease: env.seconds("REPLY_LEASE_SECONDS", 900, 2, 86_400)?,
            recovery_interval,
        })
    }

    /// Heartbeat period: half the lease (7.5 min of 15), so one missed beat never loses it.
    pub fn heartbeat(&self) -> Duration {
        self.lease / 2
    }
}
