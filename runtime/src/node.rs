//! A running node: role gate, pools, heartbeat row, consumers, HTTP, and the drain on SIGTERM.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use sqlx::PgPool;
use tokio::sync::Notify;
use uuid::Uuid;

use crate::config::{Config, Role};
use crate::db;
use crate::db::listen::{self, Subscriptions};
use crate::federation::Federation;
use crate::metrics::Metrics;
use crate::queue::consumer::{Consumer, InFlight};
use crate::queue::{QueueName, Registry};
use crate::shutdown::Shutdown;
use crate::tasks::{self, TASK_DEFINITION_VERSION};
use crate::web::{self, AppState};

/// The exact line a worker logs once it consumes (R-ROLE-3); tests and operators grep for it.
pub const WORKER_STARTED: &str = "Worker started (Fedify activity/task queues + Job recovery)";

/// How often a web node deletes old streaming events, and how old they get first: a stream is
/// live, and a node that was cut off longer than this reloads rather than catches up.
const STREAM_CLEANUP_EVERY: Duration = Duration::from_secs(60);
const STREAM_EVENTS_KEPT: Duration = Duration::from_secs(300);

/// How long a stopping node waits for its streams to say goodbye.
const STREAM_CLOSE_WITHIN: Duration = Duration::from_secs(3);

/// R-ROLE-2: a consumer subsystem refuses to start in a role that must not run it, instead of
/// silently double-consuming or, worse, consuming on a web node sized for HTTP.
pub fn assert_may_consume(role: Role, subsystem: &str) -> Result<()> {
    if !role.consumes() {
        bail!(
            "{subsystem} must not run on a {role} node (NODE_TYPE={role}); run it with NODE_TYPE=worker or all"
        );
    }
    Ok(())
}

/// `hollo serve`: a node with signal handling, run until it has stopped.
pub async fn serve(config: Config) -> Result<()> {
    match Node::builder(config).with_signals().start().await {
        Ok(node) => node.wait().await,
        Err(e) if e.is::<StoppedBeforeStart>() => {
            tracing::info!(reason = %e, "stopped before the database became reachable");
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// The one way to start a node, for `hollo serve` and for every test: everything the role
/// runs (pools, heartbeat, consumers with every task kind, recovery, HTTP) wired from one
/// `Config`.
pub struct Node;

impl Node {
    pub fn builder(config: Config) -> NodeBuilder {
        NodeBuilder {
            config,
            listener: None,
            signals: false,
        }
    }
}

pub struct NodeBuilder {
    config: Config,
    listener: Option<tokio::net::TcpListener>,
    signals: bool,
}

/// The shutdown signal fired while the node was still waiting for its database.
#[derive(Debug, thiserror::Error)]
#[error("stopped while waiting for the database")]
pub struct StoppedBeforeStart;

impl NodeBuilder {
    /// Serve on this bound listener instead of binding `BIND:PORT` (or `HEALTH_PORT`): a test
    /// binds port 0 first so it knows the address its `PUBLIC_URL` names.
    pub fn listener(mut self, listener: tokio::net::TcpListener) -> Self {
        self.listener = Some(listener);
        self
    }

    /// SIGTERM/SIGINT start the drain (R-SHUT-1); `hollo serve` wants this, tests do not.
    pub fn with_signals(mut self) -> Self {
        self.signals = true;
        self
    }

    /// Connects, registers and starts everything the role runs; returns once the node
    /// serves (its HTTP or health listener is bound and every consumer started). The phases,
    /// in order: the drain window and signals, the database, the node's row and heartbeat,
    /// the work beside HTTP (consumers, streaming, LISTEN), the HTTP servers; what is left
    /// runs in `run_until_stopped`.
    pub async fn start(self) -> Result<NodeHandle> {
        let NodeBuilder {
            config,
            listener,
            signals,
        } = self;
        let (prestop, window) = drain_window(&config);
        let shutdown = Shutdown::new();
        if signals {
            shutdown
                .install(window)
                .context("installing signal handlers")?;
        }
        let (urls, local_pg, pool) = connect_database(&config, &shutdown).await?;
        let fed = federation(&config)?;
        let node = Registered::register(&pool, &config).await?;
        let base = Base {
            pool: &pool,
            node_id: node.node_id,
            metrics: &node.metrics,
            shutdown: &shutdown,
            in_flight: &node.in_flight,
            background: &node.background,
        };
        let work = start_work(&config, &urls, fed.clone(), &base).await?;
        let http = start_http(
            &config,
            listener,
            fed.clone(),
            &base,
            &work.streams,
            prestop,
        )
        .await?;
        let (addr, health_addr, node_id) = (http.addr, http.health_addr, node.node_id);
        if config.role.serves_http() {
            // Before any account exists: say where the node is and how to make the first
            // account (the whole greeting on the local default, how a newcomer meets the
            // product; a log line with the first-run link elsewhere).
            let public_url = config.federation.public_url.as_str();
            let local_default = config.db.url.is_none();
            crate::first_run::greet_when_new(
                &pool,
                addr,
                public_url.trim_end_matches('/'),
                local_default,
            )
            .await;
        }
        let stopped = Stopped {
            pool: pool.clone(),
            local_pg,
        };
        let run = run_until_stopped(shutdown.abort.clone(), http, work, node, stopped);
        Ok(NodeHandle {
            addr,
            health_addr,
            node_id,
            drain: window,
            pool,
            federation: fed,
            shutdown,
            run: tokio::spawn(run),
        })
    }
}

/// The pre-stop delay and the whole window a stopping node has. A web node keeps serving
/// through its pre-stop delay after SIGTERM, then drains: its window is both (the operator's
/// grace period is delay + drain + a margin). A worker has no delay: nothing routes to it.
fn drain_window(config: &Config) -> (Duration, Duration) {
    let prestop = if config.role.serves_http() {
        config.prestop
    } else {
        Duration::ZERO
    };
    (prestop, prestop + config.drain)
}

/// The node as registered: its `hollo_node` row is written and its heartbeat runs before
/// anything consumes or serves, so the node is visible (and its in-flight work with it) from
/// its first message on.
struct Registered {
    node_id: Uuid,
    metrics: Arc<Metrics>,
    in_flight: InFlight,
    /// Stops the background loops (heartbeat, LISTEN, streaming, queue sampler), which run
    /// until the node has drained.
    background: tokio_util::sync::CancellationToken,
    heartbeat: tokio::task::JoinHandle<()>,
}

impl Registered {
    async fn register(pool: &PgPool, config: &Config) -> Result<Registered> {
        let node_id = Uuid::new_v4();
        let metrics = Metrics::new();
        let in_flight = InFlight::default();
        register_node(pool, node_id, config).await?;
        let background = tokio_util::sync::CancellationToken::new();
        let heartbeat = tokio::spawn(heartbeat_loop(
            pool.clone(),
            node_id,
            config.heartbeat_interval,
            in_flight.clone(),
            background.clone(),
        ));
        Ok(Registered {
            node_id,
            metrics,
            in_flight,
            background,
            heartbeat,
        })
    }
}

/// What runs beside HTTP until the drain: the consumers (a consuming role), the streaming
/// hub and its tasks (a role that serves HTTP), and the node's one LISTEN connection, which
/// wakes them all; it connects only once all of them have subscribed.
struct Work {
    consuming: Option<Consuming>,
    streams: Arc<crate::streaming::Hub>,
    streaming_tasks: Vec<tokio::task::JoinHandle<()>>,
    listening: tokio::task::JoinHandle<()>,
}

async fn start_work(
    config: &Config,
    urls: &db::Urls,
    fed: Option<Arc<Federation>>,
    base: &Base<'_>,
) -> Result<Work> {
    let mut subs = Subscriptions::default();
    let consuming = if config.role.consumes() {
        Some(start_consuming(config, urls, fed, base, &mut subs).await?)
    } else {
        None
    };
    let streams = crate::streaming::Hub::with_limits(base.metrics.clone(), config.streams);
    let streaming_tasks = if config.role.serves_http() {
        start_streaming(base.pool, &streams, base.background, &mut subs)
    } else {
        Vec::new()
    };
    let source = match &config.db.direct_url {
        Some(_) => listen::Source::Direct(urls.direct.clone()),
        None => listen::Source::Pool(base.pool.clone()),
    };
    let listening = tokio::spawn(listen::run(source, subs, base.background.clone()));
    Ok(Work {
        consuming,
        streams,
        streaming_tasks,
        listening,
    })
}

/// The node's HTTP side, bound: every node has the health server on HEALTH_PORT (probes,
/// `/metrics`); a web node has its API on PORT besides, and `/metrics` only on the health
/// port (R-API). `server` is the main server, not yet polled; the health server of a web
/// node runs on its own until `run_until_stopped` closes it after the API has drained.
struct Http {
    addr: std::net::SocketAddr,
    health_addr: std::net::SocketAddr,
    server: futures::future::BoxFuture<'static, std::io::Result<()>>,
    health_server: Option<(
        tokio::task::JoinHandle<std::io::Result<()>>,
        tokio_util::sync::CancellationToken,
    )>,
    /// Queue depths for `/metrics`, sampled in the background: a scrape counts nothing.
    sampler: tokio::task::JoinHandle<()>,
}

async fn start_http(
    config: &Config,
    listener: Option<tokio::net::TcpListener>,
    fed: Option<Arc<Federation>>,
    base: &Base<'_>,
    streams: &Arc<crate::streaming::Hub>,
    prestop: Duration,
) -> Result<Http> {
    let accepting = Arc::new(AtomicBool::new(true));
    let state = app_state(config, base.pool, fed, streams, base.metrics, &accepting)?;
    let health_app = web::health_router(state.clone());
    let app = config
        .role
        .serves_http()
        .then(|| web::router(state.clone()));
    let (listener, health_listener) = bind_listeners(config, listener, app.is_some()).await?;
    let addr = listener.local_addr()?;
    let health_addr = match &health_listener {
        Some(h) => h.local_addr()?,
        None => addr,
    };
    let sampler = tokio::spawn(web::sample_depth_loop(
        base.pool.clone(),
        base.metrics.clone(),
        config.metrics_sample,
        base.background.clone(),
    ));
    let http_stop = http_stop(base.shutdown, prestop, accepting, streams.clone());
    let (main_app, health_server) = match (app, health_listener) {
        (Some(app), Some(hl)) => {
            // The health server stops after the API has drained: probes and scrapes answer
            // (readiness 503) until the node is done.
            let closing = tokio_util::sync::CancellationToken::new();
            let done = closing.clone();
            let health = tokio::spawn(web::server::serve(
                hl,
                health_app,
                config.http,
                async move { done.cancelled().await },
            ));
            (app, Some((health, closing)))
        }
        (Some(app), None) => (app, None),
        (None, _) => (health_app, None),
    };
    let server = Box::pin(web::server::serve(
        listener,
        main_app,
        config.http,
        http_stop,
    ));
    Ok(Http {
        addr,
        health_addr,
        server,
        health_server,
        sampler,
    })
}

/// What is closed last: the general pool and, when the node started it, the local
/// PostgreSQL.
struct Stopped {
    pool: PgPool,
    local_pg: Option<db::local::LocalPostgres>,
}

/// The node's life after `start`: HTTP until it has drained (or the drain window is over),
/// then the rest in dependency order — streams say goodbye, the health server closes, the
/// consumers drain, the background loops stop, the node's row is marked stopped and the
/// database closed. The order is why this is one function.
async fn run_until_stopped(
    abort: tokio_util::sync::CancellationToken,
    http: Http,
    work: Work,
    node: Registered,
    stopped: Stopped,
) -> Result<()> {
    tokio::select! {
        r = http.server => r.context("HTTP server")?,
        _ = async { abort.cancelled().await; tokio::time::sleep(Duration::from_secs(1)).await } => {
            tracing::warn!("drain window over with HTTP requests still open");
        }
    }
    work.streams.close(STREAM_CLOSE_WITHIN).await;
    if let Some((health, closing)) = http.health_server {
        closing.cancel();
        let _ = health.await;
    }
    if let Some(c) = work.consuming {
        c.drained().await;
    }
    node.background.cancel();
    let _ = work.listening.await;
    for t in work.streaming_tasks {
        let _ = t.await;
    }
    let _ = http.sampler.await;
    let _ = node.heartbeat.await;
    let _ = sqlx::query("UPDATE hollo_node SET stopped_at = now(), last_seen = now(), in_flight = '{}' WHERE node_id = $1")
        .bind(node.node_id)
        .execute(&stopped.pool)
        .await;
    stopped.pool.close().await;
    if let Some(pg) = stopped.local_pg {
        let _ = tokio::task::spawn_blocking(move || pg.stop()).await;
    }
    tracing::info!("stopped");
    Ok(())
}

/// The general pool (a local PostgreSQL started first when `DATABASE_URL` is unset, and
/// migrated: the local default is for trying things out), with the schema checked.
async fn connect_database(
    config: &Config,
    shutdown: &Shutdown,
) -> Result<(db::Urls, Option<db::local::LocalPostgres>, PgPool)> {
    let (urls, local_pg) = db::resolve_urls(&config.db).await?;
    let pool_max = if config.role.consumes() {
        config.db.worker_pool_max
    } else {
        config.db.web_pool_max
    };
    let pool = match db::connect_pool(&urls.url, pool_max, "general", &shutdown.stop).await {
        Ok(pool) => pool,
        Err(e) if shutdown.stop.is_cancelled() => {
            return Err(anyhow::Error::new(StoppedBeforeStart).context(e));
        }
        Err(e) => return Err(e),
    };
    if local_pg.is_some() {
        // The local default is for trying things out: keep it one command.
        let v = db::migrate(&pool).await?;
        tracing::info!(schema_version = v, "local database migrated");
    }
    db::check_schema(&pool).await?;
    tracing::info!(
        role = %config.role, pool = pool_max,
        item_locks = if config.role.consumes() { config.db.item_lock_pool_size } else { 0 },
        budget = config.connection_budget(),
        "database connection budget for this process (R-DB-2)"
    );
    Ok((urls, local_pg, pool))
}

/// The node's federation state, if `SECRET_KEY` is set.
fn federation(config: &Config) -> Result<Option<Arc<Federation>>> {
    let fed = Federation::from_config(&config.federation)?;
    match &fed {
        Some(f) => {
            tracing::info!(public_url = %f.origin, allow_private_address = config.federation.allow_private_address,
                host_concurrency = config.federation.host_concurrency, "federation enabled")
        }
        None => tracing::warn!(
            "SECRET_KEY is unset: federation is disabled on this node (no inbox, delivery or accounts)"
        ),
    }
    Ok(fed)
}

/// What a consuming node runs: one consumer per queue (woken by the node's LISTEN connection)
/// and the recovery loop.
struct Consuming {
    consumers: Vec<tokio::task::JoinHandle<()>>,
    recovery: tokio::task::JoinHandle<()>,
}

impl Consuming {
    /// Waits for the consumers to drain and the recovery loop to finish its pass (it stops at
    /// SIGTERM after the pass it is in: its transaction commits); the LISTEN connection is
    /// left for the caller to stop after them.
    async fn drained(self) {
        for c in self.consumers {
            let _ = c.await;
        }
        let _ = self.recovery.await;
    }
}

/// What every part of a node shares once it is registered.
struct Base<'a> {
    pool: &'a PgPool,
    node_id: Uuid,
    metrics: &'a Arc<Metrics>,
    shutdown: &'a Shutdown,
    in_flight: &'a InFlight,
    background: &'a tokio_util::sync::CancellationToken,
}

async fn start_consuming(
    config: &Config,
    urls: &db::Urls,
    fed: Option<Arc<Federation>>,
    base: &Base<'_>,
    subs: &mut Subscriptions,
) -> Result<Consuming> {
    let registry = tasks::registry_for_node(config, fed, &base.shutdown.stop);
    let item_locks = db::connect_pool(
        &urls.url,
        config.db.item_lock_pool_size,
        "item-locks",
        &base.shutdown.stop,
    )
    .await?;
    let wiring = Wiring {
        pool: base.pool,
        item_locks,
        node_id: base.node_id,
        metrics: base.metrics,
        registry: &registry,
        shutdown: base.shutdown,
        in_flight: base.in_flight,
        subs,
    };
    let consumers = start_consumers(config, wiring)?;
    assert_may_consume(config.role, "recovery scans")?;
    let recovery = tokio::spawn(crate::recovery::run_loop(
        base.pool.clone(),
        crate::recovery::scans(config),
        config.queue.recovery_interval,
        base.shutdown.stop.clone(),
    ));
    tracing::info!(node_id = %base.node_id, role = %config.role, "{WORKER_STARTED}");
    Ok(Consuming {
        consumers,
        recovery,
    })
}

/// The streaming API (R-MAPI-5): nodes that serve it hear every node's and worker's events on
/// the node's LISTEN connection and delete old events now and then.
fn start_streaming(
    pool: &PgPool,
    streams: &Arc<crate::streaming::Hub>,
    background: &tokio_util::sync::CancellationToken,
    subs: &mut Subscriptions,
) -> Vec<tokio::task::JoinHandle<()>> {
    vec![
        tokio::spawn(crate::streaming::listen::run(
            subs.feed(crate::streaming::CHANNEL),
            pool.clone(),
            streams.clone(),
            background.clone(),
        )),
        tokio::spawn(crate::streaming::listen::cleanup_loop(
            pool.clone(),
            STREAM_CLEANUP_EVERY,
            STREAM_EVENTS_KEPT,
            background.clone(),
        )),
    ]
}

/// What every request handler shares.
fn app_state(
    config: &Config,
    pool: &PgPool,
    fed: Option<Arc<Federation>>,
    streams: &Arc<crate::streaming::Hub>,
    metrics: &Arc<Metrics>,
    accepting: &Arc<AtomicBool>,
) -> Result<AppState> {
    Ok(AppState {
        streams: streams.clone(),
        metrics: metrics.clone(),
        role: config.role,
        admin_token: config.admin_token.clone(),
        accepting: accepting.clone(),
        environment: config.environment.clone(),
        storage_path: config.storage_path.clone(),
        imports: config.imports,
        http: config.http,
        // Web nodes schedule poll wakeups too (R-POLL-3).
        poll_wakeup_chunk: config.queue.poll_wakeup_chunk,
        public_origin: config
            .federation
            .public_url
            .as_str()
            .trim_end_matches('/')
            .to_string(),
        behind_proxy: config.behind_proxy,
        drive: Arc::new(
            crate::media::Drive::from_config(&config.media)
                .context("setting up the media drive (DRIVE_DISK)")?,
        ),
        media: config.media.clone(),
        writes: config.writes,
        instance_stats: web::mastodon::instance::UsageCache::new(config.instance_stats_ttl),
        hashing: crate::passwords::Hashing::new(config.password_hash_concurrency),
        media_proxy: config
            .federation
            .secret_key
            .as_ref()
            .map(|k| Arc::new(crate::media::proxy::MediaProxy::new(k.expose()))),
        proxy_relay: Arc::new(crate::media::proxy::Relay::new(
            config.media.proxy_cache_bytes,
            config.media.proxy_concurrency,
        )),
        ..AppState::new(pool.clone(), fed)
    })
}

/// The node's listeners: the API on PORT and the health server on HEALTH_PORT for a node that
/// serves HTTP, else the health server alone (on the listener a test passes in, if any).
async fn bind_listeners(
    config: &Config,
    given: Option<tokio::net::TcpListener>,
    serves_api: bool,
) -> Result<(tokio::net::TcpListener, Option<tokio::net::TcpListener>)> {
    let bind = |port: u16| {
        let host = config.bind.clone();
        async move {
            tokio::net::TcpListener::bind((host.as_str(), port))
                .await
                .with_context(|| format!("binding {host}:{port}"))
        }
    };
    let (listener, health_listener) = if serves_api {
        let l = match given {
            Some(l) => l,
            None => bind(config.port).await?,
        };
        (l, Some(bind(config.health_port).await?))
    } else {
        let l = match given {
            Some(l) => l,
            None => bind(config.health_port).await?,
        };
        (l, None)
    };
    let addr = listener.local_addr()?;
    let health_addr = match &health_listener {
        Some(h) => h.local_addr()?,
        None => addr,
    };
    if serves_api {
        tracing::info!(address = %addr, health = %health_addr, role = %config.role,
                "listening for HTTP (health server: /healthz, /readyz, /metrics)");
    } else {
        tracing::info!(address = %addr, "health server listening (/healthz, /readyz, /metrics)");
    }
    Ok((listener, health_listener))
}

/// Resolves when HTTP should stop accepting: after SIGTERM and the pre-stop delay, so load
/// balancers drop the node first (R-SHUT-3). Readiness fails at once and every response asks
/// for `Connection: close` (web::edge), but new connections are still served until the
/// Service's endpoints no longer route here; then in-flight requests finish, the drain
/// deadline bounding it.
fn http_stop(
    shutdown: &Shutdown,
    prestop: Duration,
    accepting: Arc<AtomicBool>,
    streams: Arc<crate::streaming::Hub>,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    let stop = shutdown.stop.clone();
    let abort = shutdown.abort.clone();
    async move {
        stop.cancelled().await;
        accepting.store(false, Ordering::SeqCst);
        tokio::select! { _ = tokio::time::sleep(prestop) => {}, _ = abort.cancelled() => {} }
        tracing::info!(
            prestop_seconds = prestop.as_secs(),
            "pre-stop delay over: no new HTTP connections, finishing open requests"
        );
        // Upgraded sockets are no HTTP requests the server waits for: streams are told
        // to go away now, and their clients reconnect to a node that stays.
        streams.go_away();
    }
}

/// A started node.
pub struct NodeHandle {
    addr: std::net::SocketAddr,
    health_addr: std::net::SocketAddr,
    node_id: Uuid,
    drain: Duration,
    pool: PgPool,
    federation: Option<Arc<Federation>>,
    shutdown: Shutdown,
    run: tokio::task::JoinHandle<Result<()>>,
}

impl NodeHandle {
    /// Where it serves HTTP (web, all) or its health endpoints (worker).
    pub fn addr(&self) -> std::net::SocketAddr {
        self.addr
    }

    /// Where it serves `/healthz`, `/readyz` and `/metrics` (`HEALTH_PORT`; a worker's only
    /// listener, so its [`NodeHandle::addr`] too).
    pub fn health_addr(&self) -> std::net::SocketAddr {
        self.health_addr
    }

    pub fn node_id(&self) -> Uuid {
        self.node_id
    }

    /// Its general pool (tests read the database through it).
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    pub fn federation(&self) -> Option<&Arc<Federation>> {
        self.federation.as_ref()
    }

    /// Starts the drain as SIGTERM would, without waiting for it (R-SHUT-1).
    pub fn begin_shutdown(&self) {
        self.shutdown.begin(self.drain);
    }

    /// Drains and stops the node as SIGTERM would; returns once it has stopped.
    pub async fn shutdown(self) -> Result<()> {
        self.begin_shutdown();
        self.wait().await
    }

    /// Waits until the node has stopped (after a signal, or `begin_shutdown`).
    pub async fn wait(self) -> Result<()> {
        self.run.await.context("node task")?
    }
}

/// What the consumers of one node share.
struct Wiring<'a> {
    pool: &'a PgPool,
    item_locks: PgPool,
    node_id: Uuid,
    metrics: &'a Arc<Metrics>,
    registry: &'a Registry,
    shutdown: &'a Shutdown,
    in_flight: &'a InFlight,
    /// The node's LISTEN subscriptions, which the consumers' wake-ups join.
    subs: &'a mut Subscriptions,
}

fn start_consumers(config: &Config, w: Wiring<'_>) -> Result<Vec<tokio::task::JoinHandle<()>>> {
    assert_may_consume(config.role, "the activity and task queue consumers")?;
    let mut handles = Vec::new();
    for queue in QueueName::ALL {
        let own = match queue {
            QueueName::Activity => config.queue.activity_concurrency,
            QueueName::Task => config.queue.task_concurrency,
        };
        // The queue's own slots, then one consumer per slot pool of the queue (deliveries).
        let pools = std::iter::once((None, own)).chain(
            w.registry
                .slot_pools_of(queue)
                .into_iter()
                .map(|p| (Some(p.name), p.limit)),
        );
        for (slot_pool, limit) in pools {
            let consumer = Consumer {
                queue,
                slot_pool,
                limit,
                registry: w.registry.clone(),
                pool: w.pool.clone(),
                item_locks: Some(w.item_locks.clone()),
                node: w.node_id,
                lease: config.queue.lease,
                poll: config.queue.poll_interval,
                metrics: w.metrics.clone(),
            };
            let wake = Arc::new(Notify::new());
            // Woken only by the kinds it runs: an inbox backlog must not make the deliveries'
            // consumer claim (and scan that backlog) once per enqueued activity.
            let kinds = consumer.kinds().map(|k| k.spec.name.to_string()).collect();
            w.subs.wake_for(queue.channel(), kinds, wake.clone());
            handles.push(tokio::spawn(consumer.run(
                wake,
                w.shutdown.stop.clone(),
                w.shutdown.abort.clone(),
                w.in_flight.clone(),
            )));
        }
    }
    Ok(handles)
}

async fn register_node(pool: &PgPool, node_id: Uuid, config: &Config) -> Result<()> {
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "unknown".into());
    sqlx::query(
        "INSERT INTO hollo_node (node_id, role, version, task_definition_version, environment, hostname, pid)
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(node_id)
    .bind(config.role.as_str())
    .bind(crate::VERSION)
    .bind(TASK_DEFINITION_VERSION)
    .bind(&config.environment)
    .bind(hostname)
    .bind(std::process::id() as i32)
    .execute(pool)
    .await
    .context("registering this node")?;
    // Old rows of long-gone nodes are of no use to anyone.
    let _ = sqlx::query("DELETE FROM hollo_node WHERE last_seen < now() - interval '7 days'")
        .execute(pool)
        .await;
    Ok(())
}

/// R-ROLE-4: refresh `last_seen` and the in-flight counts. A failed write is logged and retried
/// on the next beat; the node keeps working through a database blip.
async fn heartbeat_loop(
    pool: PgPool,
    node_id: Uuid,
    every: Duration,
    in_flight: InFlight,
    stop: tokio_util::sync::CancellationToken,
) {
    loop {
        tokio::select! { _ = stop.cancelled() => return, _ = tokio::time::sleep(every) => {} }
        let counts = serde_json::to_value(in_flight.snapshot()).unwrap_or_default();
        if let Err(e) = sqlx::query(
            "UPDATE hollo_node SET last_seen = now(), in_flight = $2 WHERE node_id = $1",
        )
        .bind(node_id)
        .bind(counts)
        .execute(&pool)
        .await
        {
            tracing::warn!(error = %e, "heartbeat failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_web_node_refuses_to_start_consumers() {
        let err = assert_may_consume(Role::Web, "the task queue consumer")
            .unwrap_err()
            .to_string();
        assert!(err.contains("must not run on a web node"), "{err}");
        assert!(assert_may_consume(Role::Worker, "x").is_ok());
        assert!(assert_may_consume(Role::All, "x").is_ok());
    }
}
