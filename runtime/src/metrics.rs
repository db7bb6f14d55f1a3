//! Prometheus metrics (text exposition on `/metrics`), per queue and task kind.

use std::sync::atomic::AtomicI64;
use std::sync::{Arc, LazyLock};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// This process's peak resident set size in KiB (`VmHWM` in /proc/self/status; 0 where there
/// is none), as the bench binaries report it.
pub fn peak_rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
        })
        .unwrap_or(0)
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    pub queue: String,
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QueueLabels {
    pub queue: String,
    pub state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    pub outcome: String,
}

/// Poll-notification enqueue attempts by outcome (R-POLL-9): inserted, advanced, coalesced,
/// evicted, deferred-capacity, lock-timeout, not-needed, error, rescheduled (by the handler).
/// Process-wide (admission runs on web and worker nodes, outside any one `Metrics`), and
/// registered into every `Metrics` registry.
pub static POLL_ENQUEUE_ATTEMPTS: LazyLock<Family<OutcomeLabels, Counter>> =
    LazyLock::new(Family::default);

/// Requests of the remote media proxy by outcome: `hit` (served from this node's cache),
/// `miss` (fetched from the remote), `error` (the remote failed or sent no image, now or within
/// the failure TTL), `busy` (no fetch place came free: 503). Process-wide like the poll counter.
pub static MEDIA_PROXY_REQUESTS: LazyLock<Family<OutcomeLabels, Counter>> =
    LazyLock::new(Family::default);

/// Link preview fetches by outcome: `stored` (a card was made) or `failed` (the page gave
/// none: refused, too large, too slow, not HTML, nothing to show).
pub static PREVIEW_CARDS: LazyLock<Family<OutcomeLabels, Counter>> = LazyLock::new(Family::default);

fn latency_histogram() -> Histogram {
    // 1 ms … ~65 s
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

pub struct Metrics {
    registry: Registry,
    pub enqueued: Family<KindLabels, Counter>,
    pub started: Family<KindLabels, Counter>,
    pub succeeded: Family<KindLabels, Counter>,
    pub failed: Family<KindLabels, Counter>,
    pub retried: Family<KindLabels, Counter>,
    pub in_flight: Family<KindLabels, Gauge<i64, AtomicI64>>,
    pub depth: Family<QueueLabels, Gauge<i64, AtomicI64>>,
    pub latency: Family<KindLabels, Histogram, fn() -> Histogram>,
    /// Streaming API (R-MAPI-5): open streams, events heard, streams dropped for lagging.
    pub stream_connections: Gauge<i64, AtomicI64>,
    pub stream_events: Counter,
    pub stream_dropped: Counter,
    /// Streams refused (429) by `STREAMS_PER_TOKEN` / `STREAMS_MAX`, and streams closed because
    /// their token was revoked (R-API).
    pub stream_refused: Counter,
    pub stream_revoked: Counter,
    /// Status payloads rendered for public streams: once per event and node, whatever the
    /// number of streams (R-API).
    pub stream_shared_renders: Counter,
    /// Depth samples taken (`METRICS_SAMPLE_SECONDS`); scrapes take none (R-API).
    pub depth_samples: Counter,
}

/// One kind's handler series, taken from the families once per consumer and kind: a
/// family lookup hashes and allocates the label set under a lock, five times a message.
#[derive(Clone)]
pub struct KindMetrics {
    pub started: Counter,
    pub succeeded: Counter,
    pub failed: Counter,
    pub retried: Counter,
    pub in_flight: Gauge<i64, AtomicI64>,
    pub latency: Histogram,
}

impl Metrics {
    pub fn new() -> Arc<Self> {
        let mut registry = Registry::with_prefix("hollo");
        let enqueued = Family::<KindLabels, Counter>::default();
        let started = Family::<KindLabels, Counter>::default();
        let succeeded = Family::<KindLabels, Counter>::default();
        let failed = Family::<KindLabels, Counter>::default();
        let retried = Family::<KindLabels, Counter>::default();
        let in_flight = Family::<KindLabels, Gauge<i64, AtomicI64>>::default();
        let depth = Family::<QueueLabels, Gauge<i64, AtomicI64>>::default();
        let latency = Family::<KindLabels, Histogram, fn() -> Histogram>::new_with_constructor(
            latency_histogram as fn() -> Histogram,
        );
        registry.register(
            "queue_enqueued",
            "Messages enqueued by this process",
            enqueued.clone(),
        );
        registry.register("queue_started", "Handler runs started", started.clone());
        registry.register(
            "queue_succeeded",
            "Handler runs that succeeded",
            succeeded.clone(),
        );
        registry.register(
            "queue_failed",
            "Messages that failed for good (retry policy exhausted or permanent error)",
            failed.clone(),
        );
        registry.register(
            "queue_retried",
            "Recorded failures scheduled for another run",
            retried.clone(),
        );
        registry.register(
            "queue_in_flight",
            "Messages running in this process",
            in_flight.clone(),
        );
        registry.register(
            "queue_depth",
            "Stored messages by state (sampled)",
            depth.clone(),
        );
        registry.register(
            "queue_enqueue_to_start_seconds",
            "Time from a message becoming due to its handler starting",
            latency.clone(),
        );
        registry.register(
            "poll_notification_enqueue_attempts",
            "Poll-notification scheduling attempts by outcome (inserted, advanced, coalesced, evicted, deferred-capacity, lock-timeout, not-needed, error, rescheduled); not stored messages",
            POLL_ENQUEUE_ATTEMPTS.clone(),
        );
        registry.register(
            "media_proxy_requests",
            "Remote media proxy requests by outcome (hit: this node's cache; miss: fetched; error; busy: 503)",
            MEDIA_PROXY_REQUESTS.clone(),
        );
        registry.register(
            "preview_card_fetches",
            "Link preview fetches by outcome (stored: a card was made; failed: the page gave none)",
            PREVIEW_CARDS.clone(),
        );
        let stream_connections = Gauge::<i64, AtomicI64>::default();
        let stream_events = Counter::default();
        let stream_dropped = Counter::default();
        registry.register(
            "streaming_connections",
            "Open streaming API connections (WebSocket) on this node",
            stream_connections.clone(),
        );
        registry.register(
            "streaming_events",
            "Streaming events this node heard and fanned out",
            stream_events.clone(),
        );
        registry.register(
            "streaming_dropped_clients",
            "Streaming clients disconnected because they fell too far behind",
            stream_dropped.clone(),
        );
        let stream_refused = Counter::default();
        let stream_revoked = Counter::default();
        let stream_shared_renders = Counter::default();
        let depth_samples = Counter::default();
        registry.register(
            "streaming_refused",
            "Streaming connections refused by the per-token or per-node stream limit",
            stream_refused.clone(),
        );
        registry.register(
            "streaming_revoked",
            "Streams closed because their access token was revoked",
            stream_revoked.clone(),
        );
        registry.register(
            "streaming_shared_renders",
            "Public status payloads rendered once for every stream of this node",
            stream_shared_renders.clone(),
        );
        registry.register(
            "queue_depth_samples",
            "Samples of the queue depths (taken in the background, never by a scrape)",
            depth_samples.clone(),
        );
        Arc::new(Metrics {
            registry,
            stream_refused,
            stream_revoked,
            stream_shared_renders,
            depth_samples,
            stream_connections,
            stream_events,
            stream_dropped,
            enqueued,
            started,
            succeeded,
            failed,
            retried,
            in_flight,
            depth,
            latency,
        })
    }

    /// The series of `kind` in `queue` (they share their values with the families').
    pub fn of_kind(&self, queue: &str, kind: &str) -> KindMetrics {
        let labels = Self::labels(queue, kind);
        KindMetrics {
            started: self.started.get_or_create(&labels).clone(),
            succeeded: self.succeeded.get_or_create(&labels).clone(),
            failed: self.failed.get_or_create(&labels).clone(),
            retried: self.retried.get_or_create(&labels).clone(),
            in_flight: self.in_flight.get_or_create(&labels).clone(),
            latency: self.latency.get_or_create(&labels).clone(),
        }
    }

    pub fn labels(queue: &str, kind: &str) -> KindLabels {
        KindLabels {
            queue: queue.to_string(),
            kind: kind.to_string(),
        }
    }

    /// Prometheus text format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }
}
