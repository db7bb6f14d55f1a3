//! One node's fan-out: events heard by its listener go to every open stream of the node. The
//! channel holds shared pointers and is bounded ([`FANOUT_CAPACITY`]); a stream that falls that
//! far behind is closed rather than allowed to hold memory (`session`).

use std::sync::Arc;

use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::Event;
use crate::metrics::Metrics;

/// Events a stream may lag behind the listener before it is dropped. Only `Arc`s are held, so
/// this bounds the node's memory whatever its clients do; the per-connection bound on rendered
/// messages is `session::BUFFER`.
pub const FANOUT_CAPACITY: usize = 4096;

pub struct Hub {
    tx: broadcast::Sender<Arc<Event>>,
    closing: CancellationToken,
    streams: TaskTracker,
    metrics: Arc<Metrics>,
}

impl Hub {
    pub fn new(metrics: Arc<Metrics>) -> Arc<Hub> {
        let (tx, _) = broadcast::channel(FANOUT_CAPACITY);
        Arc::new(Hub {
            tx,
            closing: CancellationToken::new(),
            streams: TaskTracker::new(),
            metrics,
        })
    }

    /// Hands a heard event to every open stream of this node.
    pub fn publish(&self, event: Event) {
        self.metrics.stream_events.inc();
        // No receiver (no open stream) is not an error: nobody is listening.
        let _ = self.tx.send(Arc::new(event));
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        self.tx.subscribe()
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Fires when the node stops serving streams (shutdown): each sends its close and ends.
    pub fn closing(&self) -> &CancellationToken {
        &self.closing
    }

    /// Runs an open stream, counted as a connection while it runs and waited for by
    /// [`Hub::close`].
    pub async fn track<F: Future<Output = ()>>(&self, stream: F) {
        let gauge = self.metrics.stream_connections.clone();
        gauge.inc();
        self.streams.track_future(stream).await;
        gauge.dec();
    }

    /// A stream closed because it could not keep up.
    pub fn dropped(&self) {
        self.metrics.stream_dropped.inc();
    }

    /// Tells every stream to close and waits (at most `within`) until they have.
    pub async fn close(&self, within: std::time::Duration) {
        self.closing.cancel();
        self.streams.close();
        if tokio::time::timeout(within, self.streams.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                open = self.streams.len(),
                "streams still open when the node stopped"
            );
        }
    }
}
