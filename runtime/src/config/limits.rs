//! What a client may hold of a node: HTTP timeouts and connections, streams, imports and
//! write rates.

use std::time::Duration;

use super::{ConfigError, Env, vars};

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
            header_timeout: vars::HTTP_HEADER_TIMEOUT_SECONDS.default_duration(),
            idle_timeout: vars::HTTP_IDLE_TIMEOUT_SECONDS.default_duration(),
            body_timeout: vars::HTTP_BODY_TIMEOUT_SECONDS.default_duration(),
            max_connections: vars::HTTP_MAX_CONNECTIONS.int_default() as usize,
        }
    }
}

impl HttpLimits {
    pub fn from_env(env: &Env) -> Result<Self, ConfigError> {
        Ok(HttpLimits {
            header_timeout: env.duration(&vars::HTTP_HEADER_TIMEOUT_SECONDS)?,
            idle_timeout: env.duration(&vars::HTTP_IDLE_TIMEOUT_SECONDS)?,
            body_timeout: env.duration(&vars::HTTP_BODY_TIMEOUT_SECONDS)?,
            max_connections: env.int(&vars::HTTP_MAX_CONNECTIONS)?,
        })
    }
}

/// How many streaming connections (`/api/v1/streaming`) a node holds (R-API). Each
/// also holds one of the node's `HTTP_MAX_CONNECTIONS` slots while it is open; past either
/// limit the upgrade is refused with 429 before it happens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamLimits {
    /// `STREAMS_PER_TOKEN`: open streams of one access token on one node. A
    /// Mastodon client multiplexes its timelines over one socket or opens one per column (the
    /// web UI one, Tusky and Elk a few): 8 leaves room for a client with a few columns and a
    /// reconnect overlapping its old socket.
    pub per_token: usize,
    /// `STREAMS_MAX`: open streams of the node, so
    /// streams alone never take every connection slot from the API.
    pub max: usize,
}

impl StreamLimits {
    pub fn from_env(env: &Env, http: &HttpLimits) -> Result<Self, ConfigError> {
        let cap = i64::try_from(http.max_connections).unwrap_or(i64::MAX);
        Ok(StreamLimits {
            per_token: env.int(&vars::STREAMS_PER_TOKEN)?,
            max: env.int_with(&vars::STREAMS_MAX, streams_max_default(cap), cap)?,
        })
    }
}

/// `STREAMS_MAX` when unset: half the connection cap, at least one stream.
fn streams_max_default(max_connections: i64) -> i64 {
    (max_connections / 2).max(1)
}

impl Default for StreamLimits {
    fn default() -> Self {
        StreamLimits {
            per_token: vars::STREAMS_PER_TOKEN.int_default() as usize,
            max: streams_max_default(vars::HTTP_MAX_CONNECTIONS.int_default()) as usize,
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
            max_bytes: (vars::IMPORT_MAX_MIB.int_default() as usize) << 20,
            max_rows: vars::IMPORT_MAX_ROWS.int_default() as usize,
        }
    }
}

impl ImportLimits {
    pub fn from_env(env: &Env) -> Result<Self, ConfigError> {
        Ok(ImportLimits {
            max_bytes: env.int::<usize>(&vars::IMPORT_MAX_MIB)? << 20,
            max_rows: env.int(&vars::IMPORT_MAX_ROWS)?,
        })
    }
}

/// Per-account write rate limits (R-API, `web::write_limits`): statuses an account
/// may create per period, as a token bucket (Mastodon's default: 300 per 3 hours).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteLimits {
    /// `STATUS_RATE_LIMIT`: the bucket's size.
    pub statuses: u32,
    /// `STATUS_RATE_PERIOD_SECONDS`: how long a full refill takes.
    pub period: Duration,
    /// `SCHEDULED_STATUS_MIN_SECONDS`: how far ahead `scheduled_at`
    /// must be (Mastodon's five minutes); a time in the past publishes at once, as Mastodon's.
    pub scheduled_min_offset: Duration,
}

impl Default for WriteLimits {
    fn default() -> Self {
        WriteLimits {
            statuses: vars::STATUS_RATE_LIMIT.int_default() as u32,
            period: vars::STATUS_RATE_PERIOD_SECONDS.default_duration(),
            scheduled_min_offset: vars::SCHEDULED_STATUS_MIN_SECONDS.default_duration(),
        }
    }
}

impl WriteLimits {
    pub fn from_env(env: &Env) -> Result<Self, ConfigError> {
        Ok(WriteLimits {
            statuses: env.int(&vars::STATUS_RATE_LIMIT)?,
            period: env.duration(&vars::STATUS_RATE_PERIOD_SECONDS)?,
            scheduled_min_offset: env.duration(&vars::SCHEDULED_STATUS_MIN_SECONDS)?,
        })
    }
}
