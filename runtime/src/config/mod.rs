//! Every environment variable the runtime reads, parsed and validated once at start (R-Q-6).
//! A bad value is a startup error that names the variable, the value and what is allowed.

mod database;
mod env;
mod federation;
mod limits;
mod media;
mod queue;
#[cfg(test)]
mod table_tests;
#[cfg(test)]
mod tests;
pub mod vars;

use std::fmt;
use std::time::Duration;

pub use database::DbConfig;
pub use env::{ConfigError, Env, redact_url};
pub use federation::{FederationConfig, SECRET_KEY_MIN_LEN, Secret, extra_ca_certs_file};
pub use limits::{HttpLimits, ImportLimits, StreamLimits, WriteLimits};
pub use media::{DriveConfig, MediaConfig, S3Config};
pub use queue::{QueueConfig, ReplyConfig};

/// The process role chosen by `NODE_TYPE` (R-ROLE).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    All,
    Web,
    Worker,
}

impl Role {
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

    /// `NODE_TYPE`, or its default.
    pub fn from_env(env: &Env) -> Result<Role, ConfigError> {
        Ok(match env.choice(&vars::NODE_TYPE)? {
            Some("web") => Role::Web,
            Some("worker") => Role::Worker,
            // `all`: the table allows no other word, and it is the default.
            _ => Role::All,
        })
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

impl LogFormat {
    /// `LOG_FORMAT`, or its default.
    pub fn from_env(env: &Env) -> Result<LogFormat, ConfigError> {
        Ok(match env.choice(&vars::LOG_FORMAT)? {
            Some("json") => LogFormat::Json,
            _ => LogFormat::Text,
        })
    }
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
    /// `METRICS_SAMPLE_SECONDS`: how often a node samples the queue depths that
    /// `/metrics` reports. A scrape only renders what was sampled, so scrapers cost no count
    /// of the queue tables however many there are (R-API).
    pub metrics_sample: Duration,
    /// `INSTANCE_STATS_SECONDS`: how long a web node reuses the user and status
    /// counts of `/api/v{1,2}/instance` and `/nodeinfo/2.1` (R-API); upstream Hollo
    /// caches NodeInfo as long.
    pub instance_stats_ttl: Duration,
    /// `PASSWORD_HASH_CONCURRENCY`: password checks
    /// (argon2id, 19 MiB each) running at once on a node; 4 times as many more may wait, and
    /// sign-ins past that are answered 503 (R-API).
    pub password_hash_concurrency: usize,
}

impl Config {
    pub fn from_env(env: &Env) -> Result<Self, ConfigError> {
        let role = Role::from_env(env)?;
        let port: u16 = env.int(&vars::PORT)?; // 0: any free port (logged)
        let health_port: u16 = env.int(&vars::HEALTH_PORT)?;
        let drain = env.duration(&vars::SHUTDOWN_DRAIN_SECONDS)?;
        let prestop = env.duration(&vars::SHUTDOWN_PRESTOP_SECONDS)?;
        let log_format = LogFormat::from_env(env)?;
        let behind_proxy = env.bool(&vars::BEHIND_PROXY)?;
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
        let hashes = &vars::PASSWORD_HASH_CONCURRENCY;
        let password_hash_concurrency = env.int_with(
            hashes,
            i64::try_from(cpus)
                .unwrap_or(i64::MAX)
                .min(hashes.int_max()),
            hashes.int_max(),
        )?;
        Ok(Config {
            password_hash_concurrency,
            role,
            db: DbConfig::from_env(env)?,
            replies: ReplyConfig::from_env(env, queue.recovery_interval)?,
            imports: ImportLimits::from_env(env)?,
            writes: WriteLimits::from_env(env)?,
            streams: StreamLimits::from_env(env, &http)?,
            metrics_sample: env.duration(&vars::METRICS_SAMPLE_SECONDS)?,
            instance_stats_ttl: env.duration(&vars::INSTANCE_STATS_SECONDS)?,
            http,
            media,
            queue,
            port,
            health_port,
            bind: env.text(&vars::BIND).unwrap_or_default(),
            drain,
            prestop,
            environment: env.text(&vars::RUNTIME_ENV).unwrap_or_default(),
            admin_token: env
                .secret(&vars::ADMIN_TOKEN)?
                .map(|token| token.expose().to_string()),
            heartbeat_interval: Duration::from_secs(5),
            log_format,
            federation,
            behind_proxy,
            storage_path: env.path(&vars::FS_STORAGE_PATH),
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
