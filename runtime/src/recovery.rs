//! Recovery scans (R-JOB-4, R-POLL-4, R-SHUT-2): on consuming nodes only, once at start and then every
//! `RECOVERY_INTERVAL_SECONDS`, each registered scan finds work whose queue message is missing
//! (never enqueued, deferred, evicted, failed for good, lost with a crashed node) and schedules
//! it again through the normal enqueue path. Scans only schedule; handlers do the work.
//!
//! Every scan pauses while the shared queues hold `PAUSE_READY_DEPTH` ready messages: recovery
//! must not pile more onto a backlog the workers are already behind on (R-POLL-8).

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use crate::queue::stats::ready_depth;
use crate::tasks::{cleanups, imports, jobs};

pub const PAUSE_READY_DEPTH: i64 = 200;

/// One kind's scan. Implementations must be idempotent: two nodes may run them concurrently
/// (each scan serialises itself, e.g. by locking its cursor row).
pub trait Scan: Send + Sync {
    fn name(&self) -> &'static str;
    /// One pass; returns a short summary for the debug log.
    fn run<'a>(&'a self, pool: &'a PgPool) -> BoxFuture<'a, Result<String, sqlx::Error>>;
}

/// The poll-notification scan.
pub struct PollScan {
    pub chunk: Duration,
}

impl Scan for PollScan {
    fn name(&self) -> &'static str {
        "poll-notifications"
    }
    fn run<'a>(&'a self, pool: &'a PgPool) -> BoxFuture<'a, Result<String, sqlx::Error>> {
        Box::pin(async move {
            let r = crate::polls::recovery::scan_page(pool, self.chunk).await?;
            Ok(format!("{r:?}"))
        })
    }
}

/// Import or cleanup jobs of this node's environment (R-JOB-4, R-JOB-9): re-enqueue missing
/// dispatches and interrupted items of up to 100 active jobs.
pub struct JobScan {
    pub family: jobs::Family,
    pub environment: String,
}

impl Scan for JobScan {
    fn name(&self) -> &'static str {
        self.family.name
    }
    fn run<'a>(&'a self, pool: &'a PgPool) -> BoxFuture<'a, Result<String, sqlx::Error>> {
        Box::pin(async move {
            let n = jobs::recover(pool, self.family, &self.environment).await?;
            if let Some(n) = n.filter(|n| *n > 0) {
                tracing::info!(family = self.family.name, environment = %self.environment, jobs = n,
                    "recovery: dispatch re-enqueued");
            }
            Ok(format!("{n:?}"))
        })
    }
}

/// Remote reply collections (R-RPL-4, R-RPL-5): expired jobs, orphaned host leases, and up to
/// 50 runnable collections dispatched, one per host. It never fetches anything.
pub struct ReplyScan {
    pub cfg: crate::config::ReplyConfig,
}

impl Scan for ReplyScan {
    fn name(&self) -> &'static str {
        "reply-collections"
    }
    fn run<'a>(&'a self, pool: &'a PgPool) -> BoxFuture<'a, Result<String, sqlx::Error>> {
        Box::pin(async move {
            let r = crate::tasks::replies::recovery::scan(pool, &self.cfg).await?;
            if r.expired + r.orphaned + r.dispatched > 0 {
                tracing::info!(
                    expired = r.expired,
                    orphaned = r.orphaned,
                    dispatched = r.dispatched,
                    "reply-collection recovery"
                );
            }
            Ok(format!("{r:?}"))
        })
    }
}

/// Every scan of this binary.
pub fn scans(config: &crate::config::Config) -> Vec<Arc<dyn Scan>> {
    vec![
        Arc::new(PollScan {
            chunk: config.queue.poll_wakeup_chunk,
        }),
        Arc::new(JobScan {
            family: imports::FAMILY,
            environment: config.environment.clone(),
        }),
        Arc::new(JobScan {
            family: cleanups::FAMILY,
            environment: config.environment.clone(),
        }),
        Arc::new(ReplyScan {
            cfg: config.replies.clone(),
        }),
    ]
}

/// Runs every scan once unless the queues are too busy. Returns whether the scans ran.
pub async fn tick(pool: &PgPool, scans: &[Arc<dyn Scan>]) -> bool {
    match ready_depth(pool).await {
        Ok(depth) if depth >= PAUSE_READY_DEPTH => {
            tracing::debug!(depth, "recovery paused: the queues hold enough ready work");
            return false;
        }
        Ok(_) => {}
        Err(e) => {
            tracing::warn!(error = %e, "recovery skipped: cannot read queue depth");
            return false;
        }
    }
    for s in scans {
        match s.run(pool).await {
            Ok(summary) => tracing::debug!(scan = s.name(), %summary, "recovery scan"),
            Err(e) => {
                tracing::warn!(scan = s.name(), error = %e, "recovery scan failed; next interval retries")
            }
        }
    }
    true
}

/// At start, then every `every` until `stop`. A running pass is finished before returning, so
/// shutdown waits for its transaction (R-POLL-5).
pub async fn run_loop(
    pool: PgPool,
    scans: Vec<Arc<dyn Scan>>,
    every: Duration,
    stop: CancellationToken,
) {
    loop {
        if stop.is_cancelled() {
            return;
        }
        tick(&pool, &scans).await;
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(every) => {}
        }
    }
}
