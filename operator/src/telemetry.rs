//! Operator telemetry (R-OP-HA): JSON logs, Prometheus metrics, `/healthz` and `/readyz`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;

/// `LOG_FORMAT=json` (the default) or `text`; level from `RUST_LOG` (default `info`).
pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let text = std::env::var("LOG_FORMAT").is_ok_and(|f| f == "text");
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    if text {
        builder.init();
    } else {
        builder.json().flatten_event(true).init();
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabels {
    pub error: String,
}

pub struct Metrics {
    registry: Registry,
    pub reconciles: Counter,
    pub failures: Family<ErrorLabels, Counter>,
    pub duration: Histogram,
    pub leader: Gauge,
    /// API writes (applies, creates, scales, deletes, status): a steady reconcile adds none.
    pub writes: Counter,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("hollo_operator");
        let reconciles = Counter::default();
        let failures = Family::<ErrorLabels, Counter>::default();
        let duration = Histogram::new(exponential_buckets(0.01, 2.0, 12));
        let leader = Gauge::default();
        let writes = Counter::default();
        registry.register("reconciles", "Reconciliations run", reconciles.clone());
        registry.register(
            "reconcile_failures",
            "Reconciliations that failed, by error kind",
            failures.clone(),
        );
        registry.register(
            "reconcile_duration_seconds",
            "Duration of one reconciliation",
            duration.clone(),
        );
        registry.register(
            "leader",
            "1 while this replica holds the lease",
            leader.clone(),
        );
        registry.register(
            "api_writes",
            "Writes to the API server by the reconciler",
            writes.clone(),
        );
        Self {
            registry,
            reconciles,
            failures,
            duration,
            leader,
            writes,
        }
    }
}

impl Metrics {
    pub fn observe(&self, elapsed: Duration, error: Option<&str>) {
        self.reconciles.inc();
        self.duration.observe(elapsed.as_secs_f64());
        if let Some(e) = error {
            self.failures
                .get_or_create(&ErrorLabels {
                    error: e.to_string(),
                })
                .inc();
        }
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail; an error would only mean a broken metric name.
        if encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }
}

/// Shared state of the HTTP endpoints.
#[derive(Default)]
pub struct Health {
    pub metrics: Metrics,
    /// Connected to the API server (a standby replica is ready too: it is healthy and waiting).
    pub ready: AtomicBool,
}

pub fn router(health: Arc<Health>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .with_state(health)
}

async fn metrics(
    State(h): State<Arc<Health>>,
) -> (StatusCode, [(&'static str, &'static str); 1], String) {
    (
        StatusCode::OK,
        [(
            "content-type",
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        h.metrics.render(),
    )
}

async fn readyz(State(h): State<Arc<Health>>) -> (StatusCode, &'static str) {
    if h.ready.load(Ordering::Relaxed) {
        (StatusCode::OK, "ready")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready")
    }
}

pub async fn serve(
    addr: std::net::SocketAddr,
    health: Arc<Health>,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    tracing::info!(%addr, "serving /metrics, /healthz, /readyz");
    axum::serve(listener, router(health))
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_render_counts_and_errors() {
        let m = Metrics::default();
        m.observe(Duration::from_millis(20), None);
        m.observe(Duration::from_millis(40), Some("kube"));
        let text = m.render();
        assert!(text.contains("hollo_operator_reconciles_total 2"), "{text}");
        assert!(
            text.contains("hollo_operator_reconcile_failures_total{error=\"kube\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("hollo_operator_reconcile_duration_seconds_count 2"),
            "{text}"
        );
    }

    #[tokio::test]
    async fn endpoints_answer() {
        let health = Arc::new(Health::default());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let app = router(health.clone());
        let server = tokio::spawn(async move { axum::serve(listener, app).await });
        let get = |path: &'static str| async move {
            let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            s.write_all(
                format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
            )
            .await
            .expect("write");
            let mut out = String::new();
            s.read_to_string(&mut out).await.expect("read");
            out
        };
        assert!(get("/healthz").await.starts_with("HTTP/1.1 200"));
        assert!(get("/readyz").await.starts_with("HTTP/1.1 503"));
        health.ready.store(true, Ordering::Relaxed);
        assert!(get("/readyz").await.starts_with("HTTP/1.1 200"));
        assert!(
            get("/metrics")
                .await
                .contains("hollo_operator_reconciles_total")
        );
        server.abort();
    }
}
