//! Recovery scans (R-JOB-4): on worker and `all` nodes, at start and every minute, each kind's
//! scan re-enqueues what a lost message or a dead worker left behind. Scans only enqueue; they
//! never run work themselves, and they pause while the shared queue is busy (ready ≥ 200).
//! Each kind plugs in one function here.

use std::time::Duration;

use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use crate::tasks::{cleanups, imports, jobs};

pub const INTERVAL: Duration = Duration::from_secs(60);

/// Runs the scans now and then every [`INTERVAL`] until `stop` fires.
pub async fn run(pool: PgPool, environment: String, stop: CancellationToken) {
    loop {
        pass(&pool, &environment).await;
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(INTERVAL) => {}
        }
    }
}

/// One pass over every kind; a failing scan is logged and retried on the next pass.
pub async fn pass(pool: &PgPool, environment: &str) {
    recover_imports(pool, environment).await;
    recover_cleanups(pool, environment).await;
}

/// Import jobs of this environment (R-JOB-4, R-JOB-9).
pub async fn recover_imports(pool: &PgPool, environment: &str) {
    recover_jobs(pool, imports::FAMILY, environment).await;
}

/// Cleanup jobs of this environment (R-JOB-4, R-JOB-9).
pub async fn recover_cleanups(pool: &PgPool, environment: &str) {
    recover_jobs(pool, cleanups::FAMILY, environment).await;
}

async fn recover_jobs(pool: &PgPool, fam: jobs::Family, environment: &str) {
    match jobs::recover(pool, fam, environment).await {
        Ok(Some(0)) => {}
        Ok(Some(n)) => {
            tracing::info!(
                family = fam.name,
                environment,
                jobs = n,
                "recovery: dispatch re-enqueued"
            )
        }
        Ok(None) => {
            tracing::debug!(
                family = fam.name,
                "recovery paused: ready depth at or above 200"
            )
        }
        Err(e) => tracing::warn!(family = fam.name, error = %e, "recovery scan failed"),
    }
}
