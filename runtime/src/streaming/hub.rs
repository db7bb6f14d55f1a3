//! One node's fan-out: events heard by its listener go to every open stream of the node. The
//! channel holds shared pointers and is bounded ([`FANOUT_CAPACITY`]); a stream that falls that
//! far behind is closed rather than allowed to hold memory (`session`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::Event;
use crate::config::StreamLimits;
use crate::metrics::Metrics;

/// Events a stream may lag behind the listener before it is dropped. Only `Arc`s are held, so
/// this bounds the node's memory whatever its clients do; the per-connection bound on rendered
/// messages is `outbox::BUFFER`.
pub const FANOUT_CAPACITY: usize = 4096;

pub struct Hub {
    tx: broadcast::Sender<Arc<Event>>,
    closing: CancellationToken,
    streams: TaskTracker,
    metrics: Arc<Metrics>,
    limits: StreamLimits,
    open: Mutex<Open>,
}

/// The streams admitted on this node: in all and per token (by the token's hash).
#[derive(Default)]
struct Open {
    total: usize,
    per_token: HashMap<Vec<u8>, usize>,
}

/// Why a stream was not admitted (answered 429).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("too many streams for this access token (at most {0} per token)")]
    Token(usize),
    #[error("too many streams on this server, retry later")]
    Node,
}

/// A stream's place in the node's limits, held from before the upgrade until the stream ends
/// (dropping it gives the place back).
pub struct Admission {
    hub: Arc<Hub>,
    token: Vec<u8>,
}

impl Drop for Admission {
    fn drop(&mut self) {
        // A poisoned lock only means another stream panicked while counting; the counts
        // themselves are still whole.
        let mut open = self.hub.open.lock().unwrap_or_else(|p| p.into_inner());
        open.total = open.total.saturating_sub(1);
        if let Some(n) = open.per_token.get_mut(&self.token) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.per_token.remove(&self.token);
            }
        }
    }
}

impl Hub {
    pub fn new(metrics: Arc<Metrics>) -> Arc<Hub> {
        Hub::with_limits(metrics, StreamLimits::default())
    }

    pub fn with_limits(metrics: Arc<Metrics>, limits: StreamLimits) -> Arc<Hub> {
        let (tx, _) = broadcast::channel(FANOUT_CAPACITY);
        Arc::new(Hub {
            tx,
            closing: CancellationToken::new(),
            streams: TaskTracker::new(),
            metrics,
            limits,
            open: Mutex::new(Open::default()),
        })
    }

    /// A place for one more stream of the token whose hash is `token`, within
    /// `STREAMS_PER_TOKEN` and `STREAMS_MAX`.
    pub fn admit(self: &Arc<Self>, token: &[u8]) -> Result<Admission, Refused> {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let mine = open.per_token.get(token).copied().unwrap_or(0);
        let refused = if mine >= self.limits.per_token {
            Some(Refused::Token(self.limits.per_token))
        } else if open.total >= self.limits.max {
            Some(Refused::Node)
        } else {
            None
        };
        if let Some(r) = refused {
            self.metrics.stream_refused.inc();
            return Err(r);
        }
        open.total += 1;
        *open.per_token.entry(token.to_vec()).or_insert(0) += 1;
        Ok(Admission {
            hub: self.clone(),
            token: token.to_vec(),
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

    /// A stream closed because its token was revoked.
    pub fn revoked(&self) {
        self.metrics.stream_revoked.inc();
    }

    /// A public payload rendered for every stream of the node.
    pub fn rendered_shared(&self) {
        self.metrics.stream_shared_renders.inc();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admissions_count_per_token_and_per_node_and_are_given_back() {
        let hub = Hub::with_limits(
            Metrics::new(),
            StreamLimits {
                per_token: 2,
                max: 3,
            },
        );
        let a1 = hub.admit(b"a").expect("first of a");
        let a2 = hub.admit(b"a").expect("second of a");
        assert_eq!(hub.admit(b"a").err(), Some(Refused::Token(2)));
        let b1 = hub.admit(b"b").expect("b");
        assert_eq!(hub.admit(b"c").err(), Some(Refused::Node), "node full");
        drop(a1);
        let c1 = hub.admit(b"c").expect("a place came back");
        drop((a2, b1, c1));
        let open = hub.open.lock().expect("lock");
        assert_eq!((open.total, open.per_token.len()), (0, 0), "nothing leaks");
    }
}
