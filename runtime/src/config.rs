//! Every environment variable the runtime reads, parsed and validated once at start (R-Q-6).
//! A bad value is a startup error that names the variable, the value and what is allowed.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// The process role chosen by `NODE_TYPE` (R-ROLE).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    All,
    Web,
    Worker,
}

impl Role {
    pub const ALLOWED: &'static str = "all, web, worker";

    pub fn serves_http(self) -> bool {
        matches!(self, Role::All | Role::Web)
    }

    pub fn consumes(self) -> bool {
        matches!(self, Role::All | Role::Worker)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Role::All => "all",
            Role::Web => "web",
            Role::Worker => "worker",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Role {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "" | "all" => Ok(Role::All),
            "web" => Ok(Role::Web),
            "worker" => Ok(Role::Worker),
            _ => Err(ConfigError::Invalid {
                var: "NODE_TYPE",
                value: s.to_string(),
                expected: format!("one of: {}", Role::ALLOWED),
            }),
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error("invalid {var}={value:?}: expected {expected}")]
    Invalid {
        var: &'static str,
        value: String,
        expected: String,
    },
    #[error("{0}")]
    Inconsistent(String),
}

/// `EXTRA_CA_CERTS_FILE` (R-OP-OPS): a PEM bundle of CA certificates trusted for
/// outgoing federation requests besides the compiled-in public roots (webpki), for a server
/// behind a private CA or a TLS-inspecting proxy. The operator mounts it from
/// `spec.pod.caBundle`. Unset: the public roots only.
pub const EXTRA_CA_CERTS_FILE: &str = "EXTRA_CA_CERTS_FILE";

/// The path `EXTRA_CA_CERTS_FILE` names, if any (read from the process environment, where
/// the HTTP client is built).
pub fn extra_ca_certs_file() -> Option<std::path::PathBuf> {
    std::env::var_os(EXTRA_CA_CERTS_FILE)
        .filter(|v| !v.is_empty())
        .map(std::path::PathBuf::from)
}

/// Database connection settings shared by every command.
#[derive(Clone, Debug)]
pub struct DbConfig {
    /// `DATABASE_URL`; `None` means "start a local PostgreSQL under `.hollo/`".
    pub url: Option<String>,
    /// `DATABASE_DIRECT_URL`: bypasses a transaction-mode pooler for LISTEN/NOTIFY and migrations.
    pub direct_url: Option<String>,
    /// `DATABASE_POOL_MAX`: pool of a web node (R-DB-1).
    pub web_pool_max: u32,
    /// `WORKER_POOL_MAX`: general pool of a worker (R-DB-1).
    pub worker_pool_max: u32,
    /// `ITEM_LOCK_POOL_SIZE`: connections dedicated to item locks on a worker (R-DB-1).
    pub item_lock_pool_size: u32,
    /// `HOLLO_HOME`: where the local PostgreSQL lives when `DATABASE_URL` is unset.
    pub home: String,
    /// `DATABASE_WAIT_SECONDS` (default 60): how long a one-shot command (`migrate`,
    /// `account create`, …) waits for an unreachable database before it fails. `serve` waits
    /// for as long as it runs (R-DB-3).
    pub wait: Duration,
}

/// Per-process queue limits and timings (SPEC.md §2).
#[derive(Clone, Debug)]
pub struct QueueConfig {
    pub activity_concurrency: usize,
    /// `DELIVERY_CONCURRENCY` (default 64): outgoing deliveries in flight per worker process, in
    /// slots of their own beside the activity slots. A delivery mostly waits on a remote
    /// server, so a fan-out needs many in flight; a slot of its own also keeps a fan-out of
    /// thousands from holding every activity slot while inbox work waits (R-AP-2).
    pub delivery_concurrency: usize,
    pub task_concurrency: usize,
    pub reply_concurrency: usize,
    pub lease: Duration,
    pub poll_interval: Duration,
    /// `RECOVERY_INTERVAL_SECONDS` (default 60): how often consuming nodes run recovery scans
    /// (R-POLL-4). Shorter only for tests and demos.
    pub recovery_interval: Duration,
    /// `POLL_WAKEUP_CHUNK_SECONDS` (default and maximum 7 days): the longest delay of a stored
    /// poll-notification wakeup (R-POLL-3); far expiries are reached in chunks of this size.
    pub poll_wakeup_chunk: Duration,
}

/// Everything `hollo serve` needs.
#[derive(Clone, Debug)]
pub struct Config {
    pub role: Role,
    pub db: DbConfig,
    pub queue: QueueConfig,
    pub port: u16,
    pub health_port: u16,
    pub bind: String,
    pub drain: Duration,
    pub prestop: Duration,
    pub environment: String,
    pub admin_token: Option<String>,
    pub heartbeat_interval: Duration,
    pub log_format: LogFormat,
    pub federation: FederationConfig,
    /// `BEHIND_PROXY`: a reverse proxy terminates TLS and appends the client address, so
    /// `X-Forwarded-Proto` and the last `X-Forwarded-For` entry are believed (sign-in cookies
    /// and limits).
    pub behind_proxy: bool,
    /// `FS_STORAGE_PATH`: where media files live (the media cleanup's root); unset → none.
    pub storage_path: Option<std::path::PathBuf>,
    /// Remote reply collection (R-RPL).
    pub replies: ReplyConfig,
    /// Import upload limits (R-JOB-11).
    pub imports: ImportLimits,
    /// Timeouts and the connection cap of the HTTP server.
    pub http: HttpLimits,
    /// Media uploads: limits and where files are stored (R-MAPI-3).
    pub media: MediaConfig,
    /// Per-account write rate limits (R-API).
    pub writes: WriteLimits,
    /// Streaming connections per token and per node (R-API).
    pub streams: StreamLimits,
    /// `METRICS_SAMPLE_SECONDS` (default 15): how often a node samples the queue depths that
    /// `/metrics` reports. A scrape only renders what was sampled, so scrapers cost no count
    /// of the queue tables however many there are (R-API).
    pub metrics_sample: Duration,
    /// `INSTANCE_STATS_SECONDS` (default 300): how long a web node reuses the user and status
    /// counts of `/api/v{1,2}/instance` and `/nodeinfo/2.1` (R-API); upstream Hollo
    /// caches NodeInfo as long.
    pub instance_stats_ttl: Duration,
    /// `PASSWORD_HASH_CONCURRENCY` (default: the CPUs this process may use): password checks
    /// (argon2id, 19 MiB each) running at once on a node; 4 times as many more may wait, and
    /// sign-ins past that are answered 503 (R-API).
    pub password_hash_concurrency: usize,
}

/// Where media files are stored (`DRIVE_DISK`, upstream Hollo's variable names).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DriveConfig {
    /// Neither `DRIVE_DISK` nor `FS_STORAGE_PATH` is set: uploads are refused (503).
    None,
    /// `DRIVE_DISK=fs` (or unset with `FS_STORAGE_PATH`): files under `FS_STORAGE_PATH`,
    /// served by web nodes under `/media/`.
    Fs { path: std::path::PathBuf },
    /// `DRIVE_DISK=s3`: a bucket of S3 or an S3-compatible server.
    S3(S3Config),
}

/// `S3_*` and `AWS_*`. Without the two keys, object_store's usual credential chain applies
/// (instance metadata, web identity), as with upstream Hollo's SDK.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct S3Config {
    pub bucket: String,
    pub region: String,
    pub endpoint_url: Option<String>,
    pub force_path_style: bool,
    pub access_key_id: Option<String>,
    pub secret_access_key: Option<Secret>,
}

/// Media uploads (R-MAPI-3): size and pixel limits (over them: 422, nothing stored), the size
/// above which a v2 upload is processed by a worker, the drive and the public URL base of its
/// files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MediaConfig {
    /// `MEDIA_MAX_BYTES` (default 16 MiB).
    pub max_bytes: usize,
    /// `MEDIA_MAX_PIXELS` (default 33,177,600: Mastodon's 7680×4320).
    pub max_pixels: u64,
    /// `MEDIA_SYNC_MAX_BYTES` (default 1 MiB): larger v2 uploads are answered 202 and processed
    /// by the `hollo.media.process.v1` task.
    pub sync_max_bytes: usize,
    /// `MEDIA_DECODE_CONCURRENCY` (default 2, 1–64): images decoded at once per process (web
    /// uploads and the worker's processing together); more wait. Decoding is CPU work and
    /// each decode may hold up to `MEDIA_MAX_PIXELS` × 4 bytes plus the decoder's buffers, so
    /// this bounds a node's decoding memory (R-API).
    pub decode_concurrency: usize,
    /// `MEDIA_PROXY_CACHE_MB` (default 64, 0–4096; 0: no cache): remote images the media proxy
    /// keeps in memory per web node for an hour, so a busy post's images are fetched once, not
    /// once per reader.
    pub proxy_cache_bytes: usize,
    /// `MEDIA_PROXY_CONCURRENCY` (default 32, 1–1024): remote images the media proxy fetches at
    /// once per web node (at most 8 of them from one remote host); a reader waits up to 5 s
    /// for a place, then gets 503. Each fetch holds at most 1 MiB of the image (larger ones
    /// stream through), so this bounds the proxy's memory besides its cache (R-API).
    pub proxy_concurrency: usize,
    pub drive: DriveConfig,
    /// `STORAGE_URL_BASE`: the public URL files are reachable under (`<base>/<key>`). Default
    /// for `fs`: `PUBLIC_URL` (the web node serves `/media/…`); required for `s3`.
    pub url_base: String,
}

impl Default for MediaConfig {
    fn default() -> Self {
        MediaConfig {
            max_bytes: 16 * 1024 * 1024,
            max_pixels: 33_177_600,
            sync_max_bytes: 1024 * 1024,
            decode_concurrency: 2,
            proxy_cache_bytes: 64 * 1024 * 1024,
            proxy_concurrency: 32,
            drive: DriveConfig::None,
            url_base: "http://localhost:3000".into(),
        }
    }
}

impl MediaConfig {
    pub fn from_env(env: &Env, public_url: &url::Url) -> Result<Self, ConfigError> {
        let d = MediaConfig::default();
        let max_bytes = env.count("MEDIA_MAX_BYTES", d.max_bytes as u32, 1, 1 << 30)? as usize;
        let max_pixels = env.count("MEDIA_MAX_PIXELS", d.max_pixels as u32, 1, u32::MAX)? as u64;
        let sync_max_bytes = env.count(
            "MEDIA_SYNC_MAX_BYTES",
            (d.sync_max_bytes as u32).min(max_bytes as u32),
            0,
            max_bytes as u32,
        )? as usize;
        let decode_concurrency = env.count(
            "MEDIA_DECODE_CONCURRENCY",
            d.decode_concurrency as u32,
            1,
            64,
        )? as usize;
        let proxy_cache_bytes = env.count(
            "MEDIA_PROXY_CACHE_MB",
            (d.proxy_cache_bytes >> 20) as u32,
            0,
            4096,
        )? as usize
            * 1024
            * 1024;
        let proxy_concurrency = env.count(
            "MEDIA_PROXY_CONCURRENCY",
            d.proxy_concurrency as u32,
            1,
            1024,
        )? as usize;
        let fs_path = env
            .get("FS_STORAGE_PATH")
            .map(|p| std::path::PathBuf::from(p.trim()));
        let drive = match env.get("DRIVE_DISK").map(str::trim) {
            None => fs_path.map_or(DriveConfig::None, |path| DriveConfig::Fs { path }),
            Some("fs") => DriveConfig::Fs {
                path: fs_path.ok_or_else(|| {
                    ConfigError::Inconsistent(
                        "DRIVE_DISK=fs needs FS_STORAGE_PATH (the directory media files go to)"
                            .into(),
                    )
                })?,
            },
            Some("s3") => DriveConfig::S3(S3Config::from_env(env)?),
            Some(other) => {
                return Err(ConfigError::Invalid {
                    var: "DRIVE_DISK",
                    value: other.to_string(),
                    expected: "fs or s3".into(),
                });
            }
        };
        let url_base = match env.get("STORAGE_URL_BASE").map(str::trim) {
            Some(raw) => {
                let ok = url::Url::parse(raw).is_ok_and(|u| {
                    matches!(u.scheme(), "http" | "https")
                        && u.host_str().is_some()
                        && u.query().is_none()
                        && u.fragment().is_none()
                });
                if !ok {
                    return Err(ConfigError::Invalid {
                        var: "STORAGE_URL_BASE",
                        value: raw.to_string(),
                        expected: "an http(s) URL without query, e.g. https://media.example.com"
                            .into(),
                    });
                }
                raw.trim_end_matches('/').to_string()
            }
            None if matches!(drive, DriveConfig::S3(_)) => {
                return Err(ConfigError::Inconsistent(
                    "DRIVE_DISK=s3 needs STORAGE_URL_BASE (the public URL of the bucket's files)"
                        .into(),
                ));
            }
            None => public_url.as_str().trim_end_matches('/').to_string(),
        };
        Ok(MediaConfig {
            max_bytes,
            max_pixels,
            decode_concurrency,
            sync_max_bytes,
            proxy_cache_bytes,
            proxy_concurrency,
            drive,
            url_base,
        })
    }

    /// The storage root of the `fs` drive (what the media cleanup scans).
    pub fn fs_path(&self) -> Option<&std::path::Path> {
        match &self.drive {
            DriveConfig::Fs { path } => Some(path),
            _ => None,
        }
    }
}

impl S3Config {
    fn from_env(env: &Env) -> Result<Self, ConfigError> {
        let bucket = env
            .get("S3_BUCKET")
            .map(str::trim)
            .ok_or_else(|| ConfigError::Inconsistent("DRIVE_DISK=s3 needs S3_BUCKET".into()))?;
        let endpoint_url = match env.get("S3_ENDPOINT_URL").map(str::trim) {
            None => None,
            Some(raw)
                if url::Url::parse(raw).is_ok_and(|u| matches!(u.scheme(), "http" | "https")) =>
            {
                Some(raw.trim_end_matches('/').to_string())
            }
            Some(raw) => {
                return Err(ConfigError::Invalid {
                    var: "S3_ENDPOINT_URL",
                    value: raw.to_string(),
                    expected: "an http(s) URL such as https://s3.example.com".into(),
                });
            }
        };
        let access_key_id = env.get("AWS_ACCESS_KEY_ID").map(|s| s.trim().to_string());
        let secret_access_key = env.get("AWS_SECRET_ACCESS_KEY").map(Secret::new);
        if access_key_id.is_some() != secret_access_key.is_some() {
            return Err(ConfigError::Inconsistent(
                "set both AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or neither".into(),
            ));
        }
        Ok(S3Config {
            bucket: bucket.to_string(),
            region: env
                .get("S3_REGION")
                .unwrap_or("us-east-1")
                .trim()
                .to_string(),
            endpoint_url,
            force_path_style: env.bool("S3_FORCE_PATH_STYLE", false)?,
            access_key_id,
            secret_access_key,
        })
    }
}

/// What one client may hold of a node's HTTP server (R-API): a stalled or slow client is
/// closed, and past the connection cap new connections get a 503 instead of a slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HttpLimits {
    /// `HTTP_HEADER_TIMEOUT_SECONDS`: time to send a request's head, counted from when the
    /// server waits for it (so a keep-alive connection idle this long is closed too).
    pub header_timeout: Duration,
    /// `HTTP_IDLE_TIMEOUT_SECONDS`: a connection on which a read or a write makes no progress
    /// for this long is closed (a client that stops reading our answer, or stops sending).
    pub idle_timeout: Duration,
    /// `HTTP_BODY_TIMEOUT_SECONDS`: deadline for reading a whole request body; past it 408.
    pub body_timeout: Duration,
    /// `HTTP_MAX_CONNECTIONS`: open connections one node serves at once.
    pub max_connections: usize,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            body_timeout: Duration::from_secs(30),
            max_connections: 1024,
        }
    }
}

impl HttpLimits {
    pub fn from_env(env: &Env) -> Result<Self, ConfigError> {
        let d = HttpLimits::default();
        Ok(HttpLimits {
            header_timeout: env.seconds(
                "HTTP_HEADER_TIMEOUT_SECONDS",
                d.header_timeout.as_secs(),
                1,
                300,
            )?,
            idle_timeout: env.seconds(
                "HTTP_IDLE_TIMEOUT_SECONDS",
                d.idle_timeout.as_secs(),
                1,
                3600,
            )?,
            body_timeout: env.seconds(
                "HTTP_BODY_TIMEOUT_SECONDS",
                d.body_timeout.as_secs(),
                1,
                3600,
            )?,
            max_connections: env.count(
                "HTTP_MAX_CONNECTIONS",
                d.max_connections as u32,
                1,
                1_000_000,
            )? as usize,
        })
    }
}

/// How many streaming connections (`/api/v1/streaming`) a node holds (R-API). Each
/// also holds one of the node's `HTTP_MAX_CONNECTIONS` slots while it is open; past either
/// limit the upgrade is refused with 429 before it happens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamLimits {
    /// `STREAMS_PER_TOKEN` (default 8): open streams of one access token on one node. A
    /// Mastodon client multiplexes its timelines over one socket or opens one per column (the
    /// web UI one, Tusky and Elk a few): 8 leaves room for a client with a few columns and a
    /// reconnect overlapping its old socket.
    pub per_token: usize,
    /// `STREAMS_MAX` (default half of `HTTP_MAX_CONNECTIONS`): open streams of the node, so
    /// streams alone never take every connection slot from the API.
    pub max: usize,
}

impl StreamLimits {
    pub fn from_env(env: &Env, http: &HttpLimits) -> Result<Self, ConfigError> {
        let cap = u32::try_from(http.max_connections).unwrap_or(u32::MAX);
        Ok(StreamLimits {
            per_token: env.count("STREAMS_PER_TOKEN", 8, 1, 10_000)? as usize,
            max: env.count("STREAMS_MAX", (cap / 2).max(1), 1, cap)? as usize,
        })
    }
}

impl Default for StreamLimits {
    fn default() -> Self {
        StreamLimits {
            per_token: 8,
            max: 512,
        }
    }
}

/// Upload limits of imports (R-JOB-11): the CSV's size and its rows. A bigger file is refused
/// with 413, more rows with 422, and nothing is stored either way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImportLimits {
    pub max_bytes: usize,
    pub max_rows: usize,
}

impl Default for ImportLimits {
    fn default() -> Self {
        ImportLimits {
            max_bytes: 10 * 1024 * 1024,
            max_rows: 50_000,
        }
    }
}

impl ImportLimits {
    pub fn from_env(env: &Env) -> Result<Self, ConfigError> {
        Ok(ImportLimits {
            max_bytes: env.count("IMPORT_MAX_MIB", 10, 1, 1024)? as usize * 1024 * 1024,
            max_rows: env.count("IMPORT_MAX_ROWS", 50_000, 1, 10_000_000)? as usize,
        })
    }
}

/// Per-account write rate limits (R-API, `web::write_limits`): statuses an account
/// may create per period, as a token bucket (Mastodon's default: 300 per 3 hours).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteLimits {
    /// `STATUS_RATE_LIMIT` (default 300, 1–1,000,000): the bucket's size.
    pub statuses: u32,
    /// `STATUS_RATE_PERIOD_SECONDS` (default 10,800, 1–604,800): how long a full refill takes.
    pub period: Duration,
    /// `SCHEDULED_STATUS_MIN_SECONDS` (default 300, 0–86,400): how far ahead `scheduled_at`
    /// must be (Mastodon's five minutes); a time in the past publishes at once, as Mastodon's.
    pub scheduled_min_offset: Duration,
}

impl Default for WriteLimits {
    fn default() -> Self {
        WriteLimits {
            statuses: 300,
            period: Duration::from_secs(3 * 3600),
            scheduled_min_offset: Duration::from_secs(300),
        }
    }
}

impl WriteLimits {
    pub fn from_env(env: &Env) -> Result<Self, ConfigError> {
        let d = WriteLimits::default();
        Ok(WriteLimits {
            statuses: env.count("STATUS_RATE_LIMIT", d.statuses, 1, 1_000_000)?,
            period: env.seconds(
                "STATUS_RATE_PERIOD_SECONDS",
                d.period.as_secs(),
                1,
                7 * 86_400,
            )?,
            scheduled_min_offset: env.seconds(
                "SCHEDULED_STATUS_MIN_SECONDS",
                d.scheduled_min_offset.as_secs(),
                0,
                86_400,
            )?,
        })
    }
}

/// Remote reply collection limits and timings (SPEC.md §6, R-RPL). Defaults are the spec's;
/// every one is an env var so tests (and small instances) can shorten them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplyConfig {
    /// `REPLY_MAX_DEPTH`: reply levels walked (1 = direct replies only).
    pub max_depth: u32,
    /// `REPLY_MAX_ITEMS`: reply objects one job takes before it ends as partial.
    pub max_items: u32,
    /// `REPLY_MAX_REQUESTS`: HTTP requests one job makes before it ends as partial.
    pub max_requests: u32,
    /// `REPLY_HOST_INTERVAL_MS`: minimum time between two requests to one host, all workers.
    pub host_interval: Duration,
    /// `REPLY_COOLDOWN_SECONDS`: a finished collection is not collected again before this.
    pub cooldown: Duration,
    /// `REPLY_RETRY_AFTER_SECONDS`: back-off after a 429 without a usable `Retry-After`.
    pub retry_after_default: Duration,
    /// `REPLY_LEASE_SECONDS`: a running job's heartbeat lease; refreshed every half lease.
    pub lease: Duration,
    /// The shared recovery period (`RECOVERY_INTERVAL_SECONDS`): a dispatch the scan enqueues
    /// is reserved for one period, so the next scan does not enqueue it again.
    pub recovery_interval: Duration,
}

impl ReplyConfig {
    pub fn from_env(env: &Env, recovery_interval: Duration) -> Result<Self, ConfigError> {
        Ok(ReplyConfig {
            max_depth: env.count("REPLY_MAX_DEPTH", 2, 1, 10)?,
            max_items: env.count("REPLY_MAX_ITEMS", 100, 1, 100_000)?,
            max_requests: env.count("REPLY_MAX_REQUESTS", 200, 1, 100_000)?,
            host_interval: Duration::from_millis(u64::from(env.count(
                "REPLY_HOST_INTERVAL_MS",
                5000,
                0,
                3_600_000,
            )?)),
            cooldown: env.seconds("REPLY_COOLDOWN_SECONDS", 300, 0, 30 * 86_400)?,
            retry_after_default: env.seconds("REPLY_RETRY_AFTER_SECONDS", 300, 1, 86_400)?,
            lease: env.seconds("REPLY_LEASE_SECONDS", 900, 2, 86_400)?,
            recovery_interval,
        })
    }

    /// Heartbeat period: half the lease (7.5 min of 15), so one missed beat never loses it.
    pub fn heartbeat(&self) -> Duration {
        self.lease / 2
    }
}

/// A secret whose `Debug` never prints it, so a logged config cannot leak it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: impl Into<String>) -> Self {
        Secret(s.into())
    }
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// Federation settings (SPEC.md §8, R-RPL-8): the public origin every IRI derives from, the key
/// that encrypts account private keys, and the outbound fetch guard.
#[derive(Clone, Debug)]
pub struct FederationConfig {
    /// `PUBLIC_URL`: scheme, host and port only (default `http://localhost:$PORT`).
    pub public_url: url::Url,
    /// `SECRET_KEY`: at least 32 characters. Unset → federation is disabled on this node.
    pub secret_key: Option<Secret>,
    /// `ALLOW_PRIVATE_ADDRESS`: let remote fetches and deliveries reach loopback and private
    /// addresses over plain http (development and tests only).
    pub allow_private_address: bool,
    /// `DELIVERY_HOST_CONCURRENCY`: deliveries to one remote host running at once per process.
    pub host_concurrency: usize,
    /// `PREVIEW_CARDS` (default true): fetch link previews for posts (`cards`). Off, no page
    /// is fetched and posts show no card.
    pub preview_cards: bool,
    /// `PREVIEW_CARD_TIMEOUT_SECONDS` (default 10, 1–60): the whole fetch of one card (page,
    /// oEmbed, image) gives up after this; a slow page gets no card.
    pub preview_card_timeout: Duration,
    /// `PREVIEW_CARD_CONCURRENCY` (default 4, 1–1000): card fetches in flight per worker
    /// process, in slots of their own beside the task slots, so slow pages delay no other
    /// task.
    pub preview_card_concurrency: usize,
}

/// Minimum length of `SECRET_KEY`: it is the root of the account key encryption.
pub const SECRET_KEY_MIN_LEN: usize = 32;

impl FederationConfig {
    pub fn from_env(env: &Env, port: u16) -> Result<Self, ConfigError> {
        let raw = env
            .get("PUBLIC_URL")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|| format!("http://localhost:{port}"));
        let public_url = parse_public_url(&raw)?;
        let secret_key = match env.get("SECRET_KEY") {
            None => None,
            Some(k) if k.len() < SECRET_KEY_MIN_LEN => {
                return Err(ConfigError::Invalid {
                    var: "SECRET_KEY",
                    value: "***".into(),
                    expected: format!(
                        "at least {SECRET_KEY_MIN_LEN} characters (e.g. `openssl rand -hex 32`)"
                    ),
                });
            }
            Some(k) => Some(Secret::new(k)),
        };
        Ok(FederationConfig {
            public_url,
            secret_key,
            allow_private_address: env.bool("ALLOW_PRIVATE_ADDRESS", false)?,
            host_concurrency: env.count("DELIVERY_HOST_CONCURRENCY", 4, 1, 1_000)? as usize,
            preview_cards: env.bool("PREVIEW_CARDS", true)?,
            preview_card_timeout: env.seconds("PREVIEW_CARD_TIMEOUT_SECONDS", 10, 1, 60)?,
            preview_card_concurrency: env.count("PREVIEW_CARD_CONCURRENCY", 4, 1, 1_000)? as usize,
        })
    }
}

/// `PUBLIC_URL` is an origin: actor ids are `<origin>/users/<name>`, so a path, query or
/// fragment would silently produce IRIs nobody serves.
fn parse_public_url(raw: &str) -> Result<url::Url, ConfigError> {
    let invalid = || ConfigError::Invalid {
        var: "PUBLIC_URL",
        value: raw.to_string(),
        expected: "an http(s) origin such as https://hollo.example.com (no path)".into(),
    };
    let url = url::Url::parse(raw).map_err(|_| invalid())?;
    let origin_only = matches!(url.path(), "" | "/")
        && url.query().is_none()
        && url.fragment().is_none()
        && url.username().is_empty()
        && url.password().is_none();
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() || !origin_only {
        return Err(invalid());
    }
    Ok(url)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

/// A view over the environment, so tests can validate configuration without touching the
/// process environment (which is shared between parallel tests).
pub struct Env(HashMap<String, String>);

impl Env {
    pub fn from_process() -> Self {
        Env(std::env::vars().collect())
    }

    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        Env(pairs
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect())
    }

    /// A set, non-blank value.
    pub fn get(&self, var: &str) -> Option<&str> {
        self.0
            .get(var)
            .map(|v| v.as_str())
            .filter(|v| !v.trim().is_empty())
    }

    fn parse<T: FromStr>(
        &self,
        var: &'static str,
        default: T,
        expected: &str,
    ) -> Result<T, ConfigError> {
        match self.get(var) {
            None => Ok(default),
            Some(raw) => raw.trim().parse().map_err(|_| ConfigError::Invalid {
                var,
                value: raw.to_string(),
                expected: expected.to_string(),
            }),
        }
    }

    fn count(
        &self,
        var: &'static str,
        default: u32,
        min: u32,
        max: u32,
    ) -> Result<u32, ConfigError> {
        let expected = format!("an integer from {min} to {max}");
        let v: i64 = self.parse(var, i64::from(default), &expected)?;
        if v < i64::from(min) || v > i64::from(max) {
            return Err(ConfigError::Invalid {
                var,
                value: v.to_string(),
                expected,
            });
        }
        Ok(v as u32)
    }

    fn seconds(
        &self,
        var: &'static str,
        default: u64,
        min: u64,
        max: u64,
    ) -> Result<Duration, ConfigError> {
        let expected = format!("a whole number of seconds from {min} to {max}");
        let v: i64 = self.parse(var, default as i64, &expected)?;
        if v < min as i64 || v > max as i64 {
            return Err(ConfigError::Invalid {
                var,
                value: v.to_string(),
                expected,
            });
        }
        Ok(Duration::from_secs(v as u64))
    }

    fn bool(&self, var: &'static str, default: bool) -> Result<bool, ConfigError> {
        match self.get(var).map(|v| v.trim().to_ascii_lowercase()) {
            None => Ok(default),
            Some(v) if matches!(v.as_str(), "1" | "true" | "yes" | "on") => Ok(true),
            Some(v) if matches!(v.as_str(), "0" | "false" | "no" | "off") => Ok(false),
            Some(v) => Err(ConfigError::Invalid {
                var,
                value: v,
                expected: "true or false".into(),
            }),
        }
    }
}

impl DbConfig {
    pub fn from_env(env: &Env) -> Result<Self, ConfigError> {
        let url = env.get("DATABASE_URL").map(str::to_string);
        for (var, value) in [
            ("DATABASE_URL", &url),
            (
                "DATABASE_DIRECT_URL",
                &env.get("DATABASE_DIRECT_URL").map(str::to_string),
            ),
        ] {
            if let Some(v) = value
                && !(v.starts_with("postgres://") || v.starts_with("postgresql://"))
            {
                return Err(ConfigError::Invalid {
                    var,
                    value: redact_url(v),
                    expected: "a postgres:// or postgresql:// URL".into(),
                });
            }
        }
        let direct_url = env.get("DATABASE_DIRECT_URL").map(str::to_string);
        if url.is_none() && direct_url.is_some() {
            return Err(ConfigError::Inconsistent(
                "DATABASE_DIRECT_URL is set but DATABASE_URL is not; set both or neither".into(),
            ));
        }
        Ok(DbConfig {
            url,
            direct_url,
            web_pool_max: env.count("DATABASE_POOL_MAX", 20, 1, 10_000)?,
            worker_pool_max: env.count("WORKER_POOL_MAX", 20, 2, 10_000)?,
            item_lock_pool_size: env.count("ITEM_LOCK_POOL_SIZE", 4, 1, 1_000)?,
            home: env.get("HOLLO_HOME").unwrap_or(".hollo").to_string(),
            wait: env.seconds("DATABASE_WAIT_SECONDS", 60, 1, 3600)?,
        })
    }
}

impl QueueConfig {
    pub fn from_env(env: &Env) -> Result<Self, ConfigError> {
        let task_concurrency = env.count("TASK_CONCURRENCY", 4, 1, 1_000)? as usize;
        let reply_concurrency = env.count("REPLY_CONCURRENCY", 2, 0, 1_000)? as usize;
        if reply_concurrency > task_concurrency {
            return Err(ConfigError::Inconsistent(format!(
                "REPLY_CONCURRENCY={reply_concurrency} exceeds TASK_CONCURRENCY={task_concurrency}: \
                 reply collections run inside the task slots"
            )));
        }
        let lease = env.seconds("QUEUE_LEASE_SECONDS", 30, 3, 3600)?;
        Ok(QueueConfig {
            activity_concurrency: env.count("ACTIVITY_CONCURRENCY", 10, 1, 10_000)? as usize,
            delivery_concurrency: env.count("DELIVERY_CONCURRENCY", 64, 1, 10_000)? as usize,
            task_concurrency,
            reply_concurrency,
            lease,
            poll_interval: Duration::from_millis(u64::from(env.count(
                "QUEUE_POLL_MS",
                5000,
                10,
                600_000,
            )?)),
            recovery_interval: env.seconds("RECOVERY_INTERVAL_SECONDS", 60, 1, 3600)?,
            poll_wakeup_chunk: env.seconds(
                "POLL_WAKEUP_CHUNK_SECONDS",
                7 * 86_400,
                1,
                7 * 86_400,
            )?,
        })
    }
}

impl Config {
    pub fn from_env(env: &Env) -> Result<Self, ConfigError> {
        let role: Role = env.get("NODE_TYPE").unwrap_or("all").parse()?;
        let port = env.count("PORT", 3000, 0, 65535)? as u16; // 0: any free port (logged)
        let health_port = env.count("HEALTH_PORT", 9090, 0, 65535)? as u16;
        let drain = env.seconds("SHUTDOWN_DRAIN_SECONDS", 30, 0, 3600)?;
        let prestop = env.seconds("SHUTDOWN_PRESTOP_SECONDS", 0, 0, 300)?;
        let log_format = match env.get("LOG_FORMAT").map(|v| v.trim().to_ascii_lowercase()) {
            None => LogFormat::Text,
            Some(v) if v == "text" => LogFormat::Text,
            Some(v) if v == "json" => LogFormat::Json,
            Some(v) => {
                return Err(ConfigError::Invalid {
                    var: "LOG_FORMAT",
                    value: v,
                    expected: "text or json".into(),
                });
            }
        };
        let behind_proxy = env.bool("BEHIND_PROXY", false)?;
        let federation = FederationConfig::from_env(env, port)?;
        let media = MediaConfig::from_env(env, &federation.public_url)?;
        let queue = QueueConfig::from_env(env)?;
        if role.serves_http() && port != 0 && port == health_port {
            return Err(ConfigError::Inconsistent(format!(
                "PORT and HEALTH_PORT are both {port}: a {role} node serves its API on PORT and \
                 /healthz, /readyz and /metrics on HEALTH_PORT"
            )));
        }
        let http = HttpLimits::from_env(env)?;
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let password_hash_concurrency =
            env.count("PASSWORD_HASH_CONCURRENCY", cpus.min(1024) as u32, 1, 1024)? as usize;
        Ok(Config {
            password_hash_concurrency,
            role,
            db: DbConfig::from_env(env)?,
            replies: ReplyConfig::from_env(env, queue.recovery_interval)?,
            imports: ImportLimits::from_env(env)?,
            writes: WriteLimits::from_env(env)?,
            streams: StreamLimits::from_env(env, &http)?,
            metrics_sample: env.seconds("METRICS_SAMPLE_SECONDS", 15, 1, 3600)?,
            instance_stats_ttl: env.seconds("INSTANCE_STATS_SECONDS", 300, 1, 86_400)?,
            http,
            media,
            queue,
            port,
            health_port,
            bind: env.get("BIND").unwrap_or("0.0.0.0").to_string(),
            drain,
            prestop,
            environment: env.get("RUNTIME_ENV").unwrap_or("production").to_string(),
            admin_token: env.get("ADMIN_TOKEN").map(str::to_string),
            heartbeat_interval: Duration::from_secs(5),
            log_format,
            federation,
            behind_proxy,
            storage_path: env
                .get("FS_STORAGE_PATH")
                .filter(|p| !p.trim().is_empty())
                .map(std::path::PathBuf::from),
        })
    }

    /// Connections this process may open at most (R-DB-2), logged at start.
    /// The node's one LISTEN connection (the queues' wake-ups and the streaming API's events,
    /// `db::listen`) comes out of the general pool unless `DATABASE_DIRECT_URL` sends it around
    /// the pooler, where it is one more.
    pub fn connection_budget(&self) -> u32 {
        let direct_listeners = u32::from(self.db.direct_url.is_some());
        match self.role {
            Role::Web => self.db.web_pool_max + direct_listeners,
            Role::Worker | Role::All => {
                self.db.worker_pool_max + self.db.item_lock_pool_size + direct_listeners
            }
        }
    }
}

impl Config {
    /// The local default (no `DATABASE_URL`) is the one-command way to try the product, so it
    /// gets a `SECRET_KEY` too: generated once under `HOLLO_HOME` (mode 0600) and reused.
    /// Deployments with a real database always bring their own.
    pub fn fill_local_secret_key(&mut self) -> std::io::Result<()> {
        if self.db.url.is_some() || self.federation.secret_key.is_some() {
            return Ok(());
        }
        let path = std::path::Path::new(&self.db.home).join("secret-key");
        let existing = std::fs::read_to_string(&path)
            .ok()
            .map(|k| k.trim().to_string());
        let key = match existing.filter(|k| k.len() >= SECRET_KEY_MIN_LEN) {
            Some(k) => k,
            None => {
                use std::io::Write;
                use std::os::unix::fs::OpenOptionsExt;
                std::fs::create_dir_all(&self.db.home)?;
                // Two v4 UUIDs come from the OS random source: 244 random bits in hex.
                let k = format!(
                    "{}{}",
                    uuid::Uuid::new_v4().simple(),
                    uuid::Uuid::new_v4().simple()
                );
                let mut f = std::fs::OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .mode(0o600)
                    .open(&path)?;
                f.write_all(k.as_bytes())?;
                tracing::info!(path = %path.display(), "generated a SECRET_KEY for the local default");
                k
            }
        };
        self.federation.secret_key = Some(Secret::new(key));
        Ok(())
    }
}

impl Config {
    /// The local default (no `DATABASE_URL`) keeps media under `HOLLO_HOME/media` when no
    /// drive is configured, so uploads work in the one-command trial too. Deployments always
    /// choose their drive.
    pub fn fill_local_media_drive(&mut self) {
        if self.db.url.is_some() || self.media.drive != DriveConfig::None {
            return;
        }
        let path = std::path::Path::new(&self.db.home).join("media");
        self.storage_path = Some(path.clone());
        self.media.drive = DriveConfig::Fs { path };
    }
}

/// Hide the password of a connection URL in logs and errors.
pub fn redact_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let creds = &url[scheme + 3..at];
            match creds.find(':') {
                Some(colon) => format!(
                    "{}{}:***{}",
                    &url[..scheme + 3],
                    &creds[..colon],
                    &url[at..]
                ),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The configuration of these variables (and defaults for the rest); panics if invalid.
    fn valid<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Config {
        Config::from_env(&Env::from_pairs(pairs)).expect("a valid configuration")
    }

    /// The start-up error these variables give; panics if they are accepted.
    fn refused<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> ConfigError {
        Config::from_env(&Env::from_pairs(pairs)).expect_err("refused at start")
    }

    /// Each of `cases` alone is a start-up error that names its variable.
    fn each_refused_naming_its_variable(cases: &[(&str, &str)]) {
        for &(var, value) in cases {
            let err = refused([(var, value)]);
            assert!(err.to_string().contains(var), "{var}={value}: {err}");
        }
    }

    #[test]
    fn defaults_match_the_spec() {
        let c = valid([]);
        assert_eq!(c.role, Role::All);
        assert_eq!(c.port, 3000);
        assert_eq!(c.queue.activity_concurrency, 10);
        assert_eq!(c.queue.delivery_concurrency, 64);
        assert_eq!(c.queue.task_concurrency, 4);
        assert_eq!(c.queue.reply_concurrency, 2);
        assert_eq!(c.queue.lease, Duration::from_secs(30));
        assert_eq!(c.queue.poll_interval, Duration::from_secs(5));
        assert_eq!(c.queue.recovery_interval, Duration::from_secs(60));
        assert_eq!(c.queue.poll_wakeup_chunk, Duration::from_secs(7 * 86_400));
        assert_eq!(c.db.web_pool_max, 20);
        assert_eq!(c.db.worker_pool_max + c.db.item_lock_pool_size, 24);
        assert_eq!(c.drain, Duration::from_secs(30));
        assert_eq!(c.environment, "production");
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert_eq!(c.password_hash_concurrency, cpus);
    }

    #[test]
    fn password_hash_concurrency_is_validated() {
        let c = valid([("PASSWORD_HASH_CONCURRENCY", "3")]);
        assert_eq!(c.password_hash_concurrency, 3);
        for bad in ["0", "-1", "1025", "many", "1.5"] {
            let err = refused([("PASSWORD_HASH_CONCURRENCY", bad)]);
            assert!(
                err.to_string().contains("PASSWORD_HASH_CONCURRENCY"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn unknown_node_type_names_the_allowed_values() {
        let err = refused([("NODE_TYPE", "foo")]);
        let msg = err.to_string();
        assert!(
            msg.contains("NODE_TYPE")
                && msg.contains("\"foo\"")
                && msg.contains("all, web, worker"),
            "{msg}"
        );
    }

    #[test]
    fn negative_or_zero_pool_is_rejected() {
        for bad in ["-1", "0", "abc", "1.5"] {
            let err = refused([("DATABASE_POOL_MAX", bad)]);
            assert!(err.to_string().contains("DATABASE_POOL_MAX"), "{err}");
        }
    }

    #[test]
    fn recovery_interval_and_poll_chunk_are_validated() {
        each_refused_naming_its_variable(&[
            ("RECOVERY_INTERVAL_SECONDS", "0"),
            ("RECOVERY_INTERVAL_SECONDS", "soon"),
            ("POLL_WAKEUP_CHUNK_SECONDS", "0"),
            ("POLL_WAKEUP_CHUNK_SECONDS", "604801"),
        ]);
        let c = valid([
            ("RECOVERY_INTERVAL_SECONDS", "2"),
            ("POLL_WAKEUP_CHUNK_SECONDS", "3"),
        ]);
        assert_eq!(c.queue.recovery_interval, Duration::from_secs(2));
        assert_eq!(c.queue.poll_wakeup_chunk, Duration::from_secs(3));
    }

    #[test]
    fn reply_limit_must_fit_in_task_slots() {
        let err = refused([("TASK_CONCURRENCY", "2"), ("REPLY_CONCURRENCY", "3")]);
        assert!(err.to_string().contains("REPLY_CONCURRENCY=3"), "{err}");
    }

    #[test]
    fn database_url_must_be_postgres_and_is_redacted() {
        let err = refused([("DATABASE_URL", "mysql://u:secret@h/db")]);
        let msg = err.to_string();
        assert!(
            msg.contains("DATABASE_URL") && !msg.contains("secret"),
            "{msg}"
        );
        assert_eq!(
            redact_url("postgres://u:pw@h:5432/db"),
            "postgres://u:***@h:5432/db"
        );
    }

    #[test]
    fn federation_settings_are_validated() {
        let c = valid([("PORT", "4000")]);
        assert_eq!(c.federation.public_url.as_str(), "http://localhost:4000/");
        assert!(c.federation.secret_key.is_none());
        assert!(!c.federation.allow_private_address);
        assert_eq!(c.federation.host_concurrency, 4);
        assert_eq!(c.federation.preview_card_concurrency, 4);
        for bad in [
            "ftp://x",
            "https://x.example/sub",
            "not a url",
            "https://x.example/?q=1",
        ] {
            let err = refused([("PUBLIC_URL", bad)]);
            assert!(err.to_string().contains("PUBLIC_URL"), "{err}");
        }
        let err = refused([("SECRET_KEY", "short-secret")]);
        let msg = err.to_string();
        assert!(
            msg.contains("SECRET_KEY") && !msg.contains("short-secret"),
            "{msg}"
        );
        let c = valid([
            ("SECRET_KEY", "0123456789abcdef0123456789abcdef"),
            ("PUBLIC_URL", "https://hollo.example.com"),
            ("ALLOW_PRIVATE_ADDRESS", "true"),
        ]);
        assert!(format!("{c:?}").contains("Secret(***)"));
        assert!(!format!("{c:?}").contains("0123456789abcdef"));
        assert!(c.federation.allow_private_address);
    }

    #[test]
    fn reply_collection_defaults_match_the_spec_and_are_validated() {
        let c = valid([]);
        let r = &c.replies;
        assert_eq!((r.max_depth, r.max_items, r.max_requests), (2, 100, 200));
        assert_eq!(r.host_interval, Duration::from_secs(5));
        assert_eq!(r.cooldown, Duration::from_secs(300));
        assert_eq!(r.retry_after_default, Duration::from_secs(300));
        assert_eq!(r.lease, Duration::from_secs(900));
        assert_eq!(r.heartbeat(), Duration::from_secs(450));
        assert_eq!(r.recovery_interval, Duration::from_secs(60));
        each_refused_naming_its_variable(&[
            ("REPLY_MAX_DEPTH", "0"),
            ("REPLY_MAX_ITEMS", "-1"),
            ("REPLY_HOST_INTERVAL_MS", "fast"),
            ("REPLY_LEASE_SECONDS", "1"),
        ]);
    }

    #[test]
    fn import_limits_default_to_10_mib_and_50k_rows_and_bad_values_are_startup_errors() {
        let c = valid([]);
        assert_eq!(c.imports, ImportLimits::default());
        assert_eq!(
            (c.imports.max_bytes, c.imports.max_rows),
            (10 * 1024 * 1024, 50_000)
        );
        let c = valid([("IMPORT_MAX_MIB", "64"), ("IMPORT_MAX_ROWS", "200000")]);
        assert_eq!(
            (c.imports.max_bytes, c.imports.max_rows),
            (64 * 1024 * 1024, 200_000)
        );
        each_refused_naming_its_variable(&[
            ("IMPORT_MAX_MIB", "0"),
            ("IMPORT_MAX_MIB", "2048"),
            ("IMPORT_MAX_ROWS", "lots"),
        ]);
    }

    #[test]
    fn http_limits_have_defaults_and_bad_values_are_startup_errors() {
        let c = valid([]);
        assert_eq!(c.http, HttpLimits::default());
        let c = valid([
            ("HTTP_HEADER_TIMEOUT_SECONDS", "5"),
            ("HTTP_IDLE_TIMEOUT_SECONDS", "120"),
            ("HTTP_BODY_TIMEOUT_SECONDS", "90"),
            ("HTTP_MAX_CONNECTIONS", "64"),
        ]);
        assert_eq!(
            c.http,
            HttpLimits {
                header_timeout: Duration::from_secs(5),
                idle_timeout: Duration::from_secs(120),
                body_timeout: Duration::from_secs(90),
                max_connections: 64,
            }
        );
        each_refused_naming_its_variable(&[
            ("HTTP_HEADER_TIMEOUT_SECONDS", "0"),
            ("HTTP_HEADER_TIMEOUT_SECONDS", "301"),
            ("HTTP_IDLE_TIMEOUT_SECONDS", "soon"),
            ("HTTP_BODY_TIMEOUT_SECONDS", "-1"),
            ("HTTP_MAX_CONNECTIONS", "0"),
        ]);
    }

    #[test]
    fn write_limits_are_validated_at_start() {
        let c = valid([("PORT", "4000")]);
        assert_eq!(c.writes, WriteLimits::default());
        assert_eq!(
            (c.writes.statuses, c.writes.period),
            (300, Duration::from_secs(10_800))
        );
        let c = valid([
            ("STATUS_RATE_LIMIT", "5"),
            ("STATUS_RATE_PERIOD_SECONDS", "60"),
        ]);
        assert_eq!((c.writes.statuses, c.writes.period.as_secs()), (5, 60));
        assert_eq!(c.writes.scheduled_min_offset, Duration::from_secs(300));
        each_refused_naming_its_variable(&[
            ("STATUS_RATE_LIMIT", "0"),
            ("STATUS_RATE_LIMIT", "lots"),
            ("STATUS_RATE_PERIOD_SECONDS", "0"),
            ("STATUS_RATE_PERIOD_SECONDS", "999999999"),
            ("SCHEDULED_STATUS_MIN_SECONDS", "-5"),
            ("SCHEDULED_STATUS_MIN_SECONDS", "86401"),
        ]);
    }

    #[test]
    fn stream_limits_default_to_half_the_connection_cap_and_are_validated() {
        let c = valid([]);
        assert_eq!(
            c.streams,
            StreamLimits {
                per_token: 8,
                max: 512
            }
        );
        assert_eq!(c.metrics_sample, Duration::from_secs(15));
        assert_eq!(c.instance_stats_ttl, Duration::from_secs(300));
        let c = valid([("HTTP_MAX_CONNECTIONS", "1")]);
        assert_eq!(c.streams.max, 1, "at least one stream");
        let c = valid([("STREAMS_PER_TOKEN", "2"), ("STREAMS_MAX", "100")]);
        assert_eq!((c.streams.per_token, c.streams.max), (2, 100));
        each_refused_naming_its_variable(&[
            ("STREAMS_PER_TOKEN", "0"),
            ("STREAMS_MAX", "0"),
            // More streams than connections could never be open.
            ("STREAMS_MAX", "1025"),
            ("METRICS_SAMPLE_SECONDS", "0"),
            ("INSTANCE_STATS_SECONDS", "never"),
        ]);
        let err = refused([("PORT", "9090")]);
        assert!(err.to_string().contains("HEALTH_PORT"), "{err}");
        assert!(
            Config::from_env(&Env::from_pairs([
                ("NODE_TYPE", "worker"),
                ("PORT", "9090")
            ]))
            .is_ok(),
            "a worker serves no API on PORT"
        );
    }

    #[test]
    fn media_limits_and_drive_are_validated_at_start() {
        let c = valid([("PORT", "4000")]);
        assert_eq!(c.media.max_bytes, 16 * 1024 * 1024);
        assert_eq!(c.media.max_pixels, 33_177_600);
        assert_eq!(c.media.sync_max_bytes, 1024 * 1024);
        assert_eq!(c.media.decode_concurrency, 2);
        assert_eq!(c.media.proxy_cache_bytes, 64 << 20);
        assert_eq!(c.media.proxy_concurrency, 32);
        assert_eq!(
            valid([("MEDIA_PROXY_CONCURRENCY", "4")])
                .media
                .proxy_concurrency,
            4
        );
        assert_eq!(c.media.drive, DriveConfig::None);
        assert_eq!(c.media.url_base, "http://localhost:4000");
        let c = valid([
            ("FS_STORAGE_PATH", "/srv/media"),
            ("MEDIA_MAX_BYTES", "1000"),
            ("MEDIA_SYNC_MAX_BYTES", "0"),
        ]);
        assert_eq!(
            c.media.drive,
            DriveConfig::Fs {
                path: "/srv/media".into()
            }
        );
        assert_eq!((c.media.max_bytes, c.media.sync_max_bytes), (1000, 0));
        let c = valid([
            ("DRIVE_DISK", "s3"),
            ("S3_BUCKET", "b"),
            ("S3_ENDPOINT_URL", "http://127.0.0.1:9000"),
            ("S3_FORCE_PATH_STYLE", "true"),
            ("AWS_ACCESS_KEY_ID", "id"),
            ("AWS_SECRET_ACCESS_KEY", "very-secret"),
            ("STORAGE_URL_BASE", "https://cdn.example.com/b/"),
        ]);
        assert_eq!(c.media.url_base, "https://cdn.example.com/b");
        assert!(!format!("{c:?}").contains("very-secret"));
        let DriveConfig::S3(s3) = &c.media.drive else {
            panic!("s3 drive")
        };
        assert_eq!(
            (s3.bucket.as_str(), s3.region.as_str(), s3.force_path_style),
            ("b", "us-east-1", true)
        );
        for (pairs, var) in [
            (vec![("MEDIA_MAX_BYTES", "0")], "MEDIA_MAX_BYTES"),
            (vec![("MEDIA_MAX_BYTES", "16MiB")], "MEDIA_MAX_BYTES"),
            (vec![("MEDIA_MAX_PIXELS", "-5")], "MEDIA_MAX_PIXELS"),
            (
                vec![("MEDIA_PROXY_CACHE_MB", "4097")],
                "MEDIA_PROXY_CACHE_MB",
            ),
            (
                vec![("MEDIA_PROXY_CACHE_MB", "lots")],
                "MEDIA_PROXY_CACHE_MB",
            ),
            (
                vec![("MEDIA_PROXY_CONCURRENCY", "0")],
                "MEDIA_PROXY_CONCURRENCY",
            ),
            (
                vec![("MEDIA_PROXY_CONCURRENCY", "1025")],
                "MEDIA_PROXY_CONCURRENCY",
            ),
            (
                vec![("MEDIA_DECODE_CONCURRENCY", "0")],
                "MEDIA_DECODE_CONCURRENCY",
            ),
            (
                vec![("MEDIA_DECODE_CONCURRENCY", "many")],
                "MEDIA_DECODE_CONCURRENCY",
            ),
            (
                vec![("MEDIA_MAX_BYTES", "100"), ("MEDIA_SYNC_MAX_BYTES", "101")],
                "MEDIA_SYNC_MAX_BYTES",
            ),
            (vec![("DRIVE_DISK", "ftp")], "DRIVE_DISK"),
            (vec![("DRIVE_DISK", "fs")], "FS_STORAGE_PATH"),
            (vec![("DRIVE_DISK", "s3")], "S3_BUCKET"),
            (
                vec![("DRIVE_DISK", "s3"), ("S3_BUCKET", "b")],
                "STORAGE_URL_BASE",
            ),
            (
                vec![
                    ("DRIVE_DISK", "s3"),
                    ("S3_BUCKET", "b"),
                    ("STORAGE_URL_BASE", "https://x.example"),
                    ("AWS_ACCESS_KEY_ID", "id"),
                ],
                "AWS_SECRET_ACCESS_KEY",
            ),
            (
                vec![
                    ("DRIVE_DISK", "s3"),
                    ("S3_BUCKET", "b"),
                    ("STORAGE_URL_BASE", "https://x.example"),
                    ("S3_ENDPOINT_URL", "not a url"),
                ],
                "S3_ENDPOINT_URL",
            ),
            (vec![("STORAGE_URL_BASE", "ftp://x")], "STORAGE_URL_BASE"),
        ] {
            let err = Config::from_env(&Env::from_pairs(pairs)).unwrap_err();
            assert!(err.to_string().contains(var), "{var}: {err}");
        }
    }

    #[test]
    fn the_local_default_keeps_media_under_hollo_home() {
        let mut c = valid([("HOLLO_HOME", "/tmp/h")]);
        c.fill_local_media_drive();
        let want = std::path::PathBuf::from("/tmp/h/media");
        assert_eq!(c.media.drive, DriveConfig::Fs { path: want.clone() });
        assert_eq!(c.storage_path, Some(want));
        let mut c = valid([("DATABASE_URL", "postgres://u@h/db")]);
        c.fill_local_media_drive();
        assert_eq!(c.media.drive, DriveConfig::None, "deployments choose");
    }

    #[test]
    fn worker_budget_is_24() {
        let c = valid([("NODE_TYPE", "worker")]);
        assert_eq!(c.connection_budget(), 24);
        let w = valid([("NODE_TYPE", "web"), ("DATABASE_POOL_MAX", "7")]);
        assert_eq!(w.connection_budget(), 7);
    }
}
