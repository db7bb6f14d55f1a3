//! A queue consumer run in the test's process, as a worker node runs one, stopped by hand.

use std::sync::Arc;
use std::time::Duration;

use hollo_runtime::metrics::Metrics;
use hollo_runtime::queue::consumer::{Consumer, InFlight};
use hollo_runtime::queue::{QueueName, Registry};
use sqlx::PgPool;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

pub struct Running {
    pub stop: CancellationToken,
    pub abort: CancellationToken,
    pub handle: tokio::task::JoinHandle<()>,
    pub node: Uuid,
}

impl Running {
    /// Stops at once, handing running messages back (what SIGTERM past the drain does).
    pub async fn shutdown(self) {
        self.stop.cancel();
        self.abort.cancel();
        let _ = self.handle.await;
    }
}

/// A consumer of `queue` running `registry`'s kinds, `limit` at a time, on a new node id,
/// polling every 100 ms; `slot_pool` names the pool of slots it takes (`None`: the queue's).
pub fn start_consumer(
    pool: &PgPool,
    queue: QueueName,
    slot_pool: Option<&'static str>,
    limit: usize,
    registry: Registry,
    lease: Duration,
) -> Running {
    let node = Uuid::new_v4();
    let consumer = Consumer {
        queue,
        slot_pool,
        limit,
        registry,
        pool: pool.clone(),
        item_locks: None,
        node,
        lease,
        poll: Duration::from_millis(100),
        metrics: Metrics::new(),
    };
    let (stop, abort) = (CancellationToken::new(), CancellationToken::new());
    let handle = tokio::spawn(consumer.run(
        Arc::new(Notify::new()),
        stop.clone(),
        abort.clone(),
        InFlight::default(),
    ));
    Running {
        stop,
        abort,
        handle,
        node,
    }
}
