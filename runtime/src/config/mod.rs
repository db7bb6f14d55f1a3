//! Every environment variable the runtime reads, parsed and validated once at start (R-Q-6).
//! A bad value is a startup error that names the variable, the value and what is allowed.

mod database;
mod env;
mod federation;
mod limits;
mod media;
mod queue;
#[cfg(test)]
mod tests;

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

pub use database::{DbConfig, redact_url};
pub use env::{ConfigError, Env};
pub use federation::{
    EXTRA_CA_CERTS_FILE, FederationConfig, SECRET_KEY_MIN_LEN, Secret, extra_ca_certs_file,
};
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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
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
