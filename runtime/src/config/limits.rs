//! What a client may hold of a node: HTTP timeouts and connections, streams, imports and
//! write rates.

use std::time::Duration;

use super::{ConfigError, Env};

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
