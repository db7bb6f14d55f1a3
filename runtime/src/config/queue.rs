//! The queues' concurrency and timings, and remote reply collection.

use std::time::Duration;

use super::{ConfigError, Env, vars};

/// Per-process queue limits and timings (SPEC.md §2).
#[derive(Clone, Debug)]
pub struct QueueConfig {
    pub activity_concurrency: usize,
    /// `DELIVERY_CONCURRENCY`: outgoing deliveries in flight per worker process, in
    /// slots of their own beside the activity slots. A delivery mostly waits on a remote
    /// server, so a fan-out needs many in flight; a slot of its own also keeps a fan-out of
    /// thousands from holding every activity slot while inbox work waits (R-AP-2).
    pub delivery_concurrency: usize,
    pub task_concurrency: usize,
    pub reply_concurrency: usize,
    pub lease: Duration,
    pub poll_interval: Duration,
    /// `RECOVERY_INTERVAL_SECONDS`: how often consuming nodes run recovery scans
    /// (R-POLL-4). Shorter only for tests and demos.
    pub recovery_interval: Duration,
    /// `POLL_WAKEUP_CHUNK_SECONDS`: the longest delay of a stored
    /// poll-notification wakeup (R-POLL-3); far expiries are reached in chunks of this size.
    pub poll_wakeup_chunk: Duration,
}

impl QueueConfig {
    pub fn from_env(env: &Env) -> Result<Self, ConfigError> {
        let task_concurrency: usize = env.int(&vars::TASK_CONCURRENCY)?;
        let reply_concurrency: usize = env.int(&vars::REPLY_CONCURRENCY)?;
        if reply_concurrency > task_concurrency {
            return Err(ConfigError::Inconsistent(format!(
                "REPLY_CONCURRENCY={reply_concurrency} exceeds TASK_CONCURRENCY={task_concurrency}: \
                 reply collections run inside the task slots"
            )));
        }
        Ok(QueueConfig {
            activity_concurrency: env.int(&vars::ACTIVITY_CONCURRENCY)?,
            delivery_concurrency: env.int(&vars::DELIVERY_CONCURRENCY)?,
            task_concurrency,
            reply_concurrency,
            lease: env.duration(&vars::QUEUE_LEASE_SECONDS)?,
            poll_interval: env.duration(&vars::QUEUE_POLL_MS)?,
            recovery_interval: env.duration(&vars::RECOVERY_INTERVAL_SECONDS)?,
            poll_wakeup_chunk: env.duration(&vars::POLL_WAKEUP_CHUNK_SECONDS)?,
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
            max_depth: env.int(&vars::REPLY_MAX_DEPTH)?,
            max_items: env.int(&vars::REPLY_MAX_ITEMS)?,
            max_requests: env.int(&vars::REPLY_MAX_REQUESTS)?,
            host_interval: env.duration(&vars::REPLY_HOST_INTERVAL_MS)?,
            cooldown: env.duration(&vars::REPLY_COOLDOWN_SECONDS)?,
            retry_after_default: env.duration(&vars::REPLY_RETRY_AFTER_SECONDS)?,
            lease: env.duration(&vars::REPLY_LEASE_SECONDS)?,
            recovery_interval,
        })
    }

    /// Heartbeat period: half the lease (7.5 min of 15), so one missed beat never loses it.
    pub fn heartbeat(&self) -> Duration {
        self.lease / 2
    }
}
