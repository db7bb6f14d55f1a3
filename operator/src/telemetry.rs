//! Operator telemetry (R-OP-HA): JSON logs, Prometheus metrics, `/healthz` and `/readyz`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use futures::FutureExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;

use crate::budget::Budget;
use crate::crd::{HolloStatus, Phase};

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

/// `hollo_operator_build_info`: which build runs, so a dashboard shows when an upgrade of the
/// operator itself reached the cluster.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BuildLabels {
    pub version: &'static str,
    /// The git commit the binary was built from (`HOLLO_GIT_COMMIT` at compile time), else
    /// `unknown`.
    pub revision: &'static str,
}

impl BuildLabels {
    pub fn of_this_binary() -> Self {
        Self {
            version: env!("CARGO_PKG_VERSION"),
            revision: revision(option_env!("HOLLO_GIT_COMMIT")),
        }
    }
}

/// A commit id as a label value: hexadecimal, at most 64 characters (a SHA-256 object id),
/// else `unknown` (the variable is set by whoever builds; a label stays bounded).
fn revision(commit: Option<&'static str>) -> &'static str {
    match commit {
        Some(c) if !c.is_empty() && c.len() <= 64 && c.chars().all(|c| c.is_ascii_hexdigit()) => c,
        _ => "unknown",
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct VerbLabels {
    pub verb: &'static str,
}

/// The Kubernetes verb of one API request: `watch`, `list`, `get`, `create`, `update`, `patch`,
/// `delete`, `deletecollection` (the apiserver's audit vocabulary), from its method, path and
/// query. `GET` of a collection is a `list`, with `watch=true` (or `1`) a `watch`.
pub fn verb(method: &http::Method, path: &str, query: Option<&str>) -> &'static str {
    let watch = query.is_some_and(|q| q.split('&').any(|kv| kv == "watch=true" || kv == "watch=1"));
    // After `/api/v1` or `/apis/GROUP/VERSION`: [namespaces, NS,] RESOURCE [, NAME [, SUB]].
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let rest = match segments.first() {
        Some(&"api") => segments.get(2..),
        Some(&"apis") => segments.get(3..),
        _ => None,
    }
    .unwrap_or_default();
    let rest = match rest {
        ["namespaces", _ns, tail @ ..] if !tail.is_empty() => tail,
        other => other,
    };
    let collection = rest.len() <= 1;
    match *method {
        http::Method::GET if watch => "watch",
        http::Method::GET if collection => "list",
        http::Method::GET => "get",
        http::Method::POST => "create",
        http::Method::PUT => "update",
        http::Method::PATCH => "patch",
        http::Method::DELETE if collection => "deletecollection",
        http::Method::DELETE => "delete",
        _ => "other",
    }
}

/// A tower layer for kube's client stack that counts every request in `requests` by [`verb`]
/// (a watch counts once, when it is opened).
pub fn count_requests<B>(
    requests: Family<VerbLabels, Counter>,
) -> tower::util::MapRequestLayer<impl Fn(http::Request<B>) -> http::Request<B> + Clone> {
    tower::util::MapRequestLayer::new(move |req: http::Request<B>| {
        let v = verb(req.method(), req.uri().path(), req.uri().query());
        requests.get_or_create(&VerbLabels { verb: v }).inc();
        req
    })
}

pub struct Metrics {
    registry: Registry,
    pub reconciles: Counter,
    pub failures: Family<ErrorLabels, Counter>,
    pub duration: Histogram,
    pub leader: Gauge,
    /// API writes (applies, creates, scales, deletes, status): a steady reconcile adds none.
    pub writes: Counter,
    /// Every request the client sent, by verb (reads, writes, watches, events, the lease).
    pub requests: Family<VerbLabels, Counter>,
    /// Per-`Hollo` state (R-OP-OPS), re-encoded from `hollos` at every scrape.
    per_hollo: PerHollo,
    hollos: Mutex<BTreeMap<HolloKey, HolloState>>,
}

/// Every phase, so a phase gauge reads 0 for the phases a `Hollo` is not in.
const PHASES: [Phase; 13] = [
    Phase::Pending,
    Phase::CheckingCompatibility,
    Phase::ScalingDown,
    Phase::Migrating,
    Phase::PreMigrating,
    Phase::PostMigrating,
    Phase::MigrationFailed,
    Phase::RollingOut,
    Phase::Running,
    Phase::Stopped,
    Phase::BackingUp,
    Phase::BackupFailed,
    Phase::WaitingForWindow,
];

/// `(namespace, name)` of a `Hollo`.
pub type HolloKey = (String, String);

/// What the operator last computed for one `Hollo`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HolloState {
    pub status: HolloStatus,
    pub connections: i64,
    pub max_connections: i64,
    /// Start to completion of the last succeeded migration Job seen.
    pub migration_seconds: Option<f64>,
    pub errors: u64,
}

/// The labels every per-`Hollo` series carries. Not `namespace`: a scrape of the operator's
/// pod sets that target label to the operator's namespace.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HolloLabels {
    pub hollo_namespace: String,
    pub hollo: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PhaseLabels {
    #[prometheus(flatten)]
    pub hollo: HolloLabels,
    pub phase: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RoleLabels {
    #[prometheus(flatten)]
    pub hollo: HolloLabels,
    pub role: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ConditionLabels {
    #[prometheus(flatten)]
    pub hollo: HolloLabels,
    pub condition: String,
}

/// Declares the per-`Hollo` families once each (field, type, metric name, help): the struct,
/// their registration in that order, and `clear`, so that no family is registered without
/// being re-encoded at every scrape.
macro_rules! per_hollo_families {
    ($($field:ident: $ty:ty = $name:literal, $help:literal;)+) => {
        #[derive(Default)]
        struct PerHollo {
            $($field: $ty,)+
        }

        impl PerHollo {
            fn register(&self, registry: &mut Registry) {
                $(registry.register($name, $help, self.$field.clone());)+
            }

            /// Empties every family.
            fn clear(&self) {
                $(self.$field.clear();)+
            }
        }
    };
}

per_hollo_families! {
    phase: Family<PhaseLabels, Gauge> = "hollo_phase",
        "1 for the phase a Hollo is in (status.phase), 0 for the others";
    replicas: Family<RoleLabels, Gauge> = "hollo_replicas",
        "Desired pods of a Hollo's role (status.web/worker.replicas)";
    ready_replicas: Family<RoleLabels, Gauge> = "hollo_ready_replicas",
        "Ready pods of a Hollo's role (status.web/worker.readyReplicas)";
    condition: Family<ConditionLabels, Gauge> = "hollo_condition",
        "1 when a Hollo's condition is True, 0 when False";
    connections: Family<HolloLabels, Gauge> = "hollo_connections",
        "Database connections a Hollo may open (the connection budget, autoscalers at their maximum)";
    max_connections: Family<HolloLabels, Gauge> = "hollo_max_connections",
        "database.maxConnections (or the CloudNativePG Cluster's max_connections)";
    migration_seconds: Family<HolloLabels, Gauge<f64, AtomicU64>> = "hollo_migration_duration_seconds",
        "Start to completion of a Hollo's last succeeded migration Job";
    errors: Family<HolloLabels, Counter> = "hollo_reconcile_errors",
        "Failed reconciliations of a Hollo";
}

impl PerHollo {
    /// Re-encodes the families from `hollos` (a deleted `Hollo` leaves no series behind).
    fn fill(&self, hollos: &BTreeMap<HolloKey, HolloState>) {
        self.clear();
        for ((ns, name), st) in hollos {
            let h = HolloLabels {
                hollo_namespace: ns.clone(),
                hollo: name.clone(),
            };
            for p in PHASES {
                let labels = PhaseLabels {
                    hollo: h.clone(),
                    phase: p.as_str().into(),
                };
                self.phase
                    .get_or_create(&labels)
                    .set(i64::from(st.status.phase == p));
            }
            for (role, r) in [("web", &st.status.web), ("worker", &st.status.worker)] {
                let labels = RoleLabels {
                    hollo: h.clone(),
                    role: role.into(),
                };
                self.replicas
                    .get_or_create(&labels)
                    .set(i64::from(r.replicas));
                self.ready_replicas
                    .get_or_create(&labels)
                    .set(i64::from(r.ready_replicas));
            }
            for c in &st.status.conditions {
                let labels = ConditionLabels {
                    hollo: h.clone(),
                    condition: c.type_.clone(),
                };
                self.condition
                    .get_or_create(&labels)
                    .set(i64::from(c.status == "True"));
            }
            self.connections.get_or_create(&h).set(st.connections);
            self.max_connections
                .get_or_create(&h)
                .set(st.max_connections);
            if let Some(s) = st.migration_seconds {
                self.migration_seconds.get_or_create(&h).set(s);
            }
            if st.errors > 0 {
                self.errors.get_or_create(&h).inc_by(st.errors);
            }
        }
    }
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("hollo_operator");
        let reconciles = Counter::default();
        let failures = Family::<ErrorLabels, Counter>::default();
        let duration = Histogram::new(exponential_buckets(0.01, 2.0, 12));
        let leader = Gauge::default();
        let writes = Counter::default();
        let requests = Family::<VerbLabels, Counter>::default();
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
        registry.register(
            "api_requests",
            "Requests to the API server, by verb (a watch counts when it is opened)",
            requests.clone(),
        );
        registry.register(
            "build",
            "The running build: its version and git commit (revision; unknown unless the build set HOLLO_GIT_COMMIT)",
            prometheus_client::metrics::info::Info::new(BuildLabels::of_this_binary()),
        );
        let per_hollo = PerHollo::default();
        per_hollo.register(&mut registry);
        Self {
            registry,
            reconciles,
            failures,
            duration,
            leader,
            writes,
            requests,
            per_hollo,
            hollos: Mutex::default(),
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

    /// Records what a reconcile computed for one `Hollo` (its status as written, its budget,
    /// the duration of its last succeeded migration Job when one is still there).
    pub fn record_hollo(
        &self,
        key: HolloKey,
        status: &HolloStatus,
        budget: &Budget,
        migration_seconds: Option<f64>,
    ) {
        if let Ok(mut m) = self.hollos.lock() {
            let st = m.entry(key).or_default();
            // What `PerHollo::fill` reads: the phase, the roles' counts, each condition's type
            // and status (not their messages: at 1 000 `Hollo`s, megabytes nobody scrapes).
            st.status = HolloStatus {
                phase: status.phase,
                web: status.web.clone(),
                worker: status.worker.clone(),
                conditions: status
                    .conditions
                    .iter()
                    .map(|c| Condition {
                        type_: c.type_.clone(),
                        status: c.status.clone(),
                        last_transition_time: c.last_transition_time.clone(),
                        message: String::new(),
                        observed_generation: None,
                        reason: String::new(),
                    })
                    .collect(),
                ..HolloStatus::default()
            };
            st.connections = budget.total();
            st.max_connections = budget.max_connections;
            st.migration_seconds = migration_seconds.or(st.migration_seconds);
        }
    }

    /// Counts a failed reconcile of one `Hollo`.
    pub fn hollo_error(&self, key: HolloKey) {
        if let Ok(mut m) = self.hollos.lock() {
            m.entry(key).or_default().errors += 1;
        }
    }

    /// Keeps only the `Hollo`s `live` says exist (the controller's cache at scrape time).
    pub fn retain_hollos(&self, live: impl Fn(&HolloKey) -> bool) {
        if let Ok(mut m) = self.hollos.lock() {
            m.retain(|k, _| live(k));
        }
    }

    pub fn render(&self) -> String {
        // One scrape at a time re-encodes the per-Hollo families from the recorded state.
        let hollos = self.hollos.lock();
        if let Ok(h) = &hollos {
            self.per_hollo.fill(h);
        }
        let mut out = String::new();
        // Writing into a String cannot fail; an error would only mean a broken metric name.
        if encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        // The per-Hollo series live only for the scrape: `fill` makes them again from the
        // recorded state, and at 1 000 `Hollo`s they are tens of thousands of label sets.
        self.per_hollo.clear();
        out
    }
}

/// Shared state of the HTTP endpoints.
#[derive(Default)]
pub struct Health {
    pub metrics: Metrics,
    /// Connected to the API server (a standby replica is ready too: it is healthy and waiting).
    pub ready: AtomicBool,
    /// The controller's cache of `Hollo`s (set by the leader): a scrape drops the per-Hollo
    /// series of those no longer in it.
    pub hollos: OnceLock<kube::runtime::reflector::Store<crate::crd::Hollo>>,
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
    if let Some(store) = h.hollos.get()
        && store.wait_until_ready().now_or_never().is_some()
    {
        h.metrics.retain_hollos(|(ns, name)| {
            store
                .get(&kube::runtime::reflector::ObjectRef::new(name).within(ns))
                .is_some()
        });
    }
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
        let build = format!(
            "hollo_operator_build_info{{version=\"{}\",revision=\"",
            env!("CARGO_PKG_VERSION")
        );
        assert!(text.contains(&build), "{text}");
    }

    #[test]
    fn the_revision_label_is_a_commit_or_unknown() {
        assert_eq!(revision(Some("0123abcdef")), "0123abcdef");
        for bad in [None, Some(""), Some("main\"} 1\n"), Some("g1234")] {
            assert_eq!(revision(bad), "unknown", "{bad:?}");
        }
        let long: &'static str = "a".repeat(65).leak();
        assert_eq!(revision(Some(long)), "unknown");
    }

    #[test]
    fn per_hollo_gauges_follow_the_recorded_status_and_forget_deleted_hollos() {
        use crate::crd::RoleStatus;
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
        let m = Metrics::default();
        let key = ("fedi".to_string(), "social".to_string());
        let cond = |t: &str, s: &str| Condition {
            type_: t.into(),
            status: s.into(),
            reason: "R".into(),
            message: String::new(),
            observed_generation: None,
            last_transition_time: Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
        };
        let status = HolloStatus {
            phase: Phase::MigrationFailed,
            web: RoleStatus {
                replicas: 2,
                ready_replicas: 1,
            },
            conditions: vec![cond("Degraded", "True"), cond("ConnectionBudget", "False")],
            ..HolloStatus::default()
        };
        let mut spec = crate::testutil::spec();
        spec.database.max_connections = 10;
        let budget = Budget::for_spec(&spec);
        m.record_hollo(key.clone(), &status, &budget, Some(42.5));
        m.hollo_error(key.clone());
        m.hollo_error(key.clone());
        let text = m.render();
        let l = r#"hollo_namespace="fedi",hollo="social""#;
        for line in [
            format!("hollo_operator_hollo_phase{{{l},phase=\"MigrationFailed\"}} 1"),
            format!("hollo_operator_hollo_phase{{{l},phase=\"Running\"}} 0"),
            format!("hollo_operator_hollo_replicas{{{l},role=\"web\"}} 2"),
            format!("hollo_operator_hollo_ready_replicas{{{l},role=\"web\"}} 1"),
            format!("hollo_operator_hollo_condition{{{l},condition=\"Degraded\"}} 1"),
            format!("hollo_operator_hollo_condition{{{l},condition=\"ConnectionBudget\"}} 0"),
            format!("hollo_operator_hollo_connections{{{l}}} {}", budget.total()),
            format!("hollo_operator_hollo_max_connections{{{l}}} 10"),
            format!("hollo_operator_hollo_migration_duration_seconds{{{l}}} 42.5"),
            format!("hollo_operator_hollo_reconcile_errors_total{{{l}}} 2"),
        ] {
            assert!(text.contains(&line), "{line} missing from\n{text}");
        }
        // A later reconcile without a migration Job keeps the last duration.
        m.record_hollo(key.clone(), &HolloStatus::default(), &budget, None);
        assert!(
            m.render()
                .contains("hollo_operator_hollo_migration_duration_seconds{")
        );
        m.retain_hollos(|k| k != &key);
        assert!(
            !m.render().contains("hollo=\"social\""),
            "deleted Hollo forgotten"
        );
    }

    #[test]
    fn verbs_follow_the_apiservers_vocabulary() {
        use http::Method;
        let cases = [
            (
                Method::GET,
                "/apis/apps/v1/deployments",
                Some("watch=true&timeoutSeconds=290"),
                "watch",
            ),
            (
                Method::GET,
                "/apis/apps/v1/namespaces/fedi/deployments",
                Some("labelSelector=x"),
                "list",
            ),
            (
                Method::GET,
                "/apis/apps/v1/namespaces/fedi/deployments/social-web",
                None,
                "get",
            ),
            (
                Method::GET,
                "/api/v1/namespaces/fedi/secrets/hollo-db",
                None,
                "get",
            ),
            (
                Method::GET,
                "/api/v1/namespaces/fedi/pods",
                Some("labelSelector=a%3Db"),
                "list",
            ),
            (Method::GET, "/api/v1/namespaces", None, "list"),
            (Method::GET, "/api/v1/namespaces/fedi", None, "get"),
            (
                Method::GET,
                "/apis/hollo.social/v1alpha1/hollos",
                Some("watch=1"),
                "watch",
            ),
            (
                Method::PATCH,
                "/apis/apps/v1/namespaces/fedi/deployments/w/scale",
                None,
                "patch",
            ),
            (
                Method::PATCH,
                "/apis/hollo.social/v1alpha1/namespaces/fedi/hollos/s/status",
                None,
                "patch",
            ),
            (
                Method::POST,
                "/apis/events.k8s.io/v1/namespaces/fedi/events",
                None,
                "create",
            ),
            (
                Method::PUT,
                "/apis/coordination.k8s.io/v1/namespaces/op/leases/l",
                None,
                "update",
            ),
            (
                Method::DELETE,
                "/apis/batch/v1/namespaces/fedi/jobs/m",
                None,
                "delete",
            ),
            (
                Method::DELETE,
                "/apis/batch/v1/namespaces/fedi/jobs",
                None,
                "deletecollection",
            ),
        ];
        for (method, path, query, want) in cases {
            assert_eq!(
                verb(&method, path, query),
                want,
                "{method} {path}?{query:?}"
            );
        }
    }

    /// The layer on a real kube `Client` (its answers from a mocked apiserver) counts what the
    /// client sends, and the counts are exported.
    #[tokio::test]
    async fn the_client_layer_counts_requests_by_verb() {
        use crate::testutil::mock;
        use http::Response;
        use k8s_openapi::api::core::v1::Secret;
        use kube::client::Body;
        let m = Metrics::default();
        let (service, mut handle) = mock::pair();
        let service = tower::ServiceBuilder::new()
            .layer(count_requests(m.requests.clone()))
            .service(service);
        let client = kube::Client::new(service, "fedi");
        let server = tokio::spawn(async move {
            while let Some((request, send)) = handle.next_request().await {
                let body = if request.uri().path().ends_with("/secrets") {
                    serde_json::json!({"apiVersion": "v1", "kind": "SecretList",
                                       "metadata": {"resourceVersion": "1"}, "items": []})
                } else {
                    serde_json::json!({"apiVersion": "v1", "kind": "Secret",
                                       "metadata": {"name": "s", "namespace": "fedi"}})
                };
                let body = serde_json::to_vec(&body).expect("json");
                send.send_response(
                    Response::builder()
                        .body(Body::from(body))
                        .expect("response"),
                );
            }
        });
        let secrets: kube::Api<Secret> = kube::Api::namespaced(client, "fedi");
        secrets.get("s").await.expect("get");
        secrets.get("s").await.expect("get");
        secrets.list(&Default::default()).await.expect("list");
        let patch =
            kube::api::Patch::Merge(serde_json::json!({"metadata": {"labels": {"a": "b"}}}));
        secrets
            .patch("s", &kube::api::PatchParams::default(), &patch)
            .await
            .expect("patch");
        let text = m.render();
        for line in [
            r#"hollo_operator_api_requests_total{verb="get"} 2"#,
            r#"hollo_operator_api_requests_total{verb="list"} 1"#,
            r#"hollo_operator_api_requests_total{verb="patch"} 1"#,
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
        assert!(!text.contains(r#"verb="watch""#), "{text}");
        server.abort();
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
