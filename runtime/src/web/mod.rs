//! HTTP: the API, health, version and admin status on web nodes (`PORT`), and the small health
//! server every node has (`HEALTH_PORT`: `/healthz`, `/readyz`, `/metrics`). `/metrics` is
//! served on the health port only: it is for the cluster's scrapers, not for anyone who can
//! reach the public port (R-API). Errors are `{"error": "…"}` with a real status code.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::extract::{DefaultBodyLimit, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::json;
use sqlx::PgPool;

pub mod activitypub;
pub mod api;
pub mod auth;
pub mod body;
pub mod edge;
pub mod exports;
pub mod jobs;
pub mod mastodon;
pub mod media_files;
pub mod media_proxy;
pub mod oauth;
pub mod pages;
pub mod permalinks;
pub mod polls;
pub mod recent;
pub mod replies;
pub mod server;
pub mod write_limits;

use crate::config::Role;
use crate::federation::Federation;
use crate::metrics::{Metrics, QueueLabels};
use crate::queue::{QueueName, stats};

#[derive(Clone)]
pub struct AppState {
    pub pool: PgPool,
    pub metrics: Arc<Metrics>,
    pub role: Role,
    pub admin_token: Option<String>,
    /// False once shutdown starts, so load balancers and probes take the node out first.
    pub accepting: Arc<AtomicBool>,
    /// `None` when `SECRET_KEY` is unset: ActivityPub endpoints answer 503 then.
    pub fed: Option<Arc<Federation>>,
    /// `RUNTIME_ENV`, recorded on every job this node registers (R-JOB-9).
    pub environment: String,
    /// `FS_STORAGE_PATH`, checked before a media cleanup is accepted.
    pub storage_path: Option<std::path::PathBuf>,
    /// `IMPORT_MAX_MIB` / `IMPORT_MAX_ROWS`.
    pub imports: crate::config::ImportLimits,
    /// `HTTP_*` timeouts; the body deadline applies where bodies are read.
    pub http: crate::config::HttpLimits,
    /// `POLL_WAKEUP_CHUNK_SECONDS`: the longest wakeup delay web nodes schedule (R-POLL-3).
    pub poll_wakeup_chunk: std::time::Duration,
    /// `PUBLIC_URL` without its trailing slash: the OAuth issuer, and whether sign-in cookies
    /// are `Secure`.
    pub public_origin: String,
    /// `BEHIND_PROXY`: believe `X-Forwarded-Proto` / `X-Forwarded-For`.
    pub behind_proxy: bool,
    /// Where media files are stored and the public URLs they have (R-MAPI-3); statuses pass it
    /// to `media::entities_for` / `media::documents_for`.
    pub drive: Arc<crate::media::Drive>,
    /// `MEDIA_*` limits (and the drive's settings).
    pub media: crate::config::MediaConfig,
    /// `STATUS_RATE_*`: per-account write rate limits (R-API).
    pub writes: crate::config::WriteLimits,
    /// This node's open streaming connections and the events its listener hears (R-MAPI-5).
    pub streams: Arc<crate::streaming::Hub>,
    /// The instance's user and status counts, recounted at most every
    /// `INSTANCE_STATS_SECONDS` (R-API).
    pub instance_stats: Arc<mastodon::instance::UsageCache>,
    /// The trends, recomputed at most every `trends::PERIOD` (R-MAPI-6).
    pub trends: Arc<recent::Recent<Arc<crate::trends::Trends>>>,
    /// The bound on password checks (`PASSWORD_HASH_CONCURRENCY`, R-API).
    pub hashing: Arc<crate::passwords::Hashing>,
    /// Remote images shown through this server (`media::proxy`); `None` without `SECRET_KEY`.
    pub media_proxy: Option<Arc<crate::media::proxy::MediaProxy>>,
    /// The media proxy's fetches, and what it relayed or saw fail (`media::proxy`).
    pub proxy_relay: Arc<crate::media::proxy::Relay>,
}

impl AppState {
    /// A node's HTTP state with the defaults of an `all` node: accepting, fresh metrics, no
    /// admin token, environment `production`, no storage path. Callers set what differs with
    /// struct-update syntax, so a new field does not break every place that builds one.
    pub fn new(pool: PgPool, fed: Option<Arc<Federation>>) -> Self {
        let metrics = Metrics::new();
        AppState {
            pool,
            fed: fed.clone(),
            streams: crate::streaming::Hub::new(metrics.clone()),
            metrics,
            role: Role::All,
            admin_token: None,
            accepting: Arc::new(AtomicBool::new(true)),
            environment: "production".into(),
            storage_path: None,
            imports: Default::default(),
            http: Default::default(),
            poll_wakeup_chunk: std::time::Duration::from_secs(7 * 86_400),
            public_origin: "http://localhost:3000".into(),
            behind_proxy: false,
            drive: Arc::new(crate::media::Drive::disabled("http://localhost:3000")),
            media_proxy: None,
            proxy_relay: Arc::new(crate::media::proxy::Relay::new(0, 1)),
            media: Default::default(),
            writes: Default::default(),
            instance_stats: mastodon::instance::UsageCache::new(Duration::from_secs(300)),
            trends: recent::Recent::new(crate::trends::PERIOD),
            hashing: crate::passwords::Hashing::new(
                std::thread::available_parallelism().map_or(1, |n| n.get()),
            ),
        }
    }
}

impl AppState {
    /// What entities are rendered with: `PUBLIC_URL`'s URLs and the media drive.
    pub fn site(&self) -> crate::mastodon::Site<'_> {
        crate::mastodon::Site::new(
            &self.public_origin,
            &self.drive,
            self.media_proxy.as_deref(),
        )
    }
}

#[derive(Debug)]
pub struct ApiError(pub StatusCode, pub String);

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError(status, message.into())
    }

    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, message)
    }

    pub fn unauthorized(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::UNAUTHORIZED, message)
    }

    pub fn forbidden(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::FORBIDDEN, message)
    }

    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, message)
    }

    /// Mastodon's 404 for a record that does not exist or that the caller may not see (the
    /// two are one answer, so ids cannot be probed).
    pub fn record_not_found() -> ApiError {
        ApiError::not_found("Record not found")
    }

    /// A well-formed request the rules refuse (Mastodon's 422).
    pub fn unprocessable(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, message)
    }

    pub fn too_many_requests(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::TOO_MANY_REQUESTS, message)
    }

    pub fn unavailable(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::SERVICE_UNAVAILABLE, message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0, Json(json!({ "error": self.1 }))).into_response()
    }
}

impl From<sqlx::Error> for ApiError {
    fn from(e: sqlx::Error) -> Self {
        tracing::warn!(error = %e, "database error while serving a request");
        ApiError::unavailable("database unavailable")
    }
}

/// A resource id from the path. Ids are UUIDs; a path segment that is not one names nothing,
/// so it is the same 404 as an unknown id on every route (as on Mastodon).
pub fn parse_id(raw: &str, what: &str) -> Result<uuid::Uuid, ApiError> {
    uuid::Uuid::parse_str(raw).map_err(|_| ApiError::not_found(format!("{what} not found")))
}

/// Health endpoints every listener serves.
fn health_routes() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
}

/// What every router ends with: the JSON 404, bodies bounded to the JSON limit unless a route
/// sets its own (the import upload, the inbox), and the edge checks of `edge`.
fn finish(routes: Router<AppState>, state: AppState) -> Router {
    let app = routes
        .fallback(|| async { ApiError::not_found("not found") })
        .layer(DefaultBodyLimit::max(body::JSON_MAX_BYTES))
        .layer(axum::middleware::map_response(edge::json_errors))
        .layer(axum::middleware::from_fn(edge::guard))
        .layer(axum::middleware::map_response_with_state(
            state.clone(),
            edge::close_when_stopping,
        ))
        .with_state(state);
    // Before routing (a layer on the router would run after it): Mastodon clients ask for
    // `/api/v1/instance/` and the like, which Mastodon answers as without the slash.
    Router::new().fallback_service(tower::ServiceExt::map_request(
        app,
        edge::trim_trailing_slash,
    ))
}

/// The full router of a web (or `all`) node.
pub fn router(state: AppState) -> Router {
    let routes = routes(&state);
    finish(routes, state)
}

/// Every route of a web node's public port, before `finish` adds the fallback and the edge
/// layers (the HTTP routes reference is generated from it).
pub fn routes(state: &AppState) -> Router<AppState> {
    health_routes()
        .route("/api/version", get(version))
        .route("/api/admin/status", get(admin_status))
        .merge(activitypub::routes())
        .merge(permalinks::routes())
        .merge(api::routes())
        .merge(jobs::routes(state))
        .merge(exports::routes())
        .merge(polls::routes())
        .merge(replies::routes())
        .merge(oauth::routes())
        .merge(mastodon::routes(state))
        .merge(media_files::routes())
        .merge(media_proxy::routes())
        .merge(pages::routes())
}

/// The health server every node runs on `HEALTH_PORT`: probes and `/metrics`.
pub fn health_router(state: AppState) -> Router {
    finish(health_port_routes(), state)
}

/// Every route of the health port.
pub fn health_port_routes() -> Router<AppState> {
    health_routes().route("/metrics", get(metrics))
}

async fn healthz() -> Json<serde_json::Value> {
    Json(json!({ "status": "ok" }))
}

async fn readyz(State(s): State<AppState>) -> Result<Json<serde_json::Value>, ApiError> {
    if !s.accepting.load(Ordering::SeqCst) {
        return Err(ApiError::unavailable("shutting down"));
    }
    let ping = tokio::time::timeout(
        Duration::from_secs(2),
        sqlx::query("SELECT 1").execute(&s.pool),
    )
    .await;
    match ping {
        Ok(Ok(_)) => Ok(Json(json!({ "status": "ready", "role": s.role.as_str() }))),
        _ => Err(ApiError::unavailable("database unreachable")),
    }
}

/// Renders what the node has counted and sampled, and nothing else: no database access, so a
/// scrape costs the same with 200 000 queued messages as with none, and any number of
/// scrapers cannot slow the database (R-API). Depths come from [`sample_depth_loop`].
async fn metrics(State(s): State<AppState>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        s.metrics.render(),
    )
}

/// Samples the queue depths into `metrics` now and then every `every` until `stop`. Counting
/// the queue tables is what costs (68 ms at 200 000 queued), so it happens here, once per
/// interval per node, and never because someone scraped; a slow or absent database only skips
/// a sample (the gauges keep the last one).
pub async fn sample_depth_loop(
    pool: PgPool,
    metrics: Arc<Metrics>,
    every: Duration,
    stop: tokio_util::sync::CancellationToken,
) {
    loop {
        sample_depth(&pool, &metrics, every.min(Duration::from_secs(10))).await;
        tokio::select! { _ = stop.cancelled() => return, _ = tokio::time::sleep(every) => {} }
    }
}

async fn sample_depth(pool: &PgPool, metrics: &Metrics, within: Duration) {
    for q in QueueName::ALL {
        let Ok(Ok(st)) = tokio::time::timeout(within, stats::queue_stats(pool, q)).await else {
            continue;
        };
        for (state, v) in [
            ("queued", st.queued),
            ("ready", st.ready),
            ("delayed", st.delayed),
            ("in_flight", st.in_flight),
        ] {
            metrics
                .depth
                .get_or_create(&QueueLabels {
                    queue: q.as_str().into(),
                    state: state.into(),
                })
                .set(v);
        }
    }
    metrics.depth_samples.inc();
}

async fn version(State(s): State<AppState>) -> Result<Json<serde_json::Value>, ApiError> {
    let schema = crate::db::schema_version(&s.pool)
        .await
        .map_err(|e| ApiError::unavailable(e.to_string()))?;
    Ok(Json(crate::version_json(Some(schema))))
}

#[derive(sqlx::FromRow)]
struct NodeRow {
    node_id: uuid::Uuid,
    role: String,
    version: String,
    task_definition_version: i32,
    environment: String,
    hostname: String,
    pid: i32,
    started_at: chrono::DateTime<chrono::Utc>,
    last_seen: chrono::DateTime<chrono::Utc>,
    stopped_at: Option<chrono::DateTime<chrono::Utc>>,
    in_flight: serde_json::Value,
    age: f64,
}

/// Nodes seen within this window are live; older rows are stale (crashed or stopped).
const LIVE_WINDOW_SECONDS: f64 = 45.0;

async fn admin_status(
    State(s): State<AppState>,
    _: auth::Admin,
) -> Result<Json<serde_json::Value>, ApiError> {
    let rows: Vec<NodeRow> = sqlx::query_as(
        "SELECT node_id, role, version, task_definition_version, environment, hostname, pid, started_at, last_seen,
                stopped_at, in_flight, EXTRACT(EPOCH FROM now() - last_seen)::float8 AS age
           FROM hollo_node WHERE last_seen > now() - interval '1 day' ORDER BY started_at",
    )
    .fetch_all(&s.pool)
    .await?;
    let nodes: Vec<_> = rows
        .into_iter()
        .map(|n| {
            let state = if n.stopped_at.is_some() {
                "stopped"
            } else if n.age <= LIVE_WINDOW_SECONDS {
                "live"
            } else {
                "stale"
            };
            json!({
                "nodeId": n.node_id, "role": n.role, "version": n.version,
                "taskDefinitionVersion": n.task_definition_version, "environment": n.environment,
                "hostname": n.hostname, "pid": n.pid, "startedAt": n.started_at, "lastSeen": n.last_seen,
                "stoppedAt": n.stopped_at, "state": state, "inFlight": n.in_flight,
            })
        })
        .collect();
    let mut queues = Vec::new();
    for q in QueueName::ALL {
        queues.push(stats::queue_stats(&s.pool, q).await?);
    }
    Ok(Json(json!({ "nodes": nodes, "queues": queues })))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::Request;
    use sqlx::postgres::PgPoolOptions;
    use tower::ServiceExt;

    async fn get_text(app: Router, path: &str) -> (StatusCode, String) {
        let resp = app
            .oneshot(Request::get(path).body(Body::empty()).expect("request"))
            .await
            .expect("infallible");
        let status = resp.status();
        let body = axum::body::to_bytes(resp.into_body(), 1 << 20)
            .await
            .expect("body");
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    /// R-API, structurally: `/metrics` answers from memory. The node's pool points at
    /// a port where no database listens, so any query would wait out the pool's acquire
    /// timeout (5 s) and fail; fifty scrapes answer at once with the sampled depth, and only
    /// the health router has the route.
    #[tokio::test]
    async fn scrapes_never_touch_the_database_and_the_public_router_has_no_metrics() {
        let pool = PgPoolOptions::new()
            .acquire_timeout(Duration::from_secs(5))
            .connect_lazy("postgres://hollo@127.0.0.1:1/none")
            .expect("lazy pool");
        let state = AppState::new(pool, None);
        state
            .metrics
            .depth
            .get_or_create(&QueueLabels {
                queue: "task".into(),
                state: "ready".into(),
            })
            .set(7);
        let health = health_router(state.clone());
        let started = std::time::Instant::now();
        for _ in 0..50 {
            let (status, text) = get_text(health.clone(), "/metrics").await;
            assert_eq!(status, StatusCode::OK);
            assert!(
                text.contains("hollo_queue_depth{queue=\"task\",state=\"ready\"} 7"),
                "{text}"
            );
        }
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "a scrape waited for the database: {:?}",
            started.elapsed()
        );
        let (status, _) = get_text(router(state.clone()), "/metrics").await;
        assert_eq!(
            status,
            StatusCode::NOT_FOUND,
            "no /metrics on the public port"
        );
        let (status, _) = get_text(router(state), "/healthz").await;
        assert_eq!(status, StatusCode::OK, "probes stay on the public port too");
    }
}
