//! Every environment variable the runtime reads, in one table: its name, its default, what
//! it accepts and what it means (issue 62, R-Q-6). The parsing code takes defaults and ranges
//! from here (`Env::int(&vars::DATABASE_POOL_MAX)` and the rest, in `config::env`), and
//! `docs/reference/configuration.md` is generated from [`NODE`] and [`LOCAL`]
//! (`runtime/tests/it/reference_pages/configuration.rs`), so a default or a range is written
//! once. `Env` reads only variables of this table: its getters take a `&Var`.

use super::SECRET_KEY_MIN_LEN;

/// One environment variable.
#[derive(Clone, Copy, Debug)]
pub struct Var {
    pub name: &'static str,
    /// A second name read when `name` is unset (`LOG_LEVEL` for `RUST_LOG`).
    pub alias: Option<&'static str>,
    pub kind: Kind,
    /// What an unset (or blank) variable means.
    pub default: Unset,
}

/// What a variable accepts.
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    /// A whole number from `min` to `max`, read as `unit`.
    Int {
        min: i64,
        max: Max,
        unit: Unit,
    },
    /// `true`/`false`, `1`/`0`, `yes`/`no` or `on`/`off`, in any case.
    Bool,
    /// One of these words, in any case.
    OneOf(&'static [&'static str]),
    Url(UrlRule),
    /// A value never shown in logs or errors, of at least `min_len` characters.
    Secret {
        min_len: usize,
    },
    Text,
    Path,
    /// A `tracing` filter (`info`, `warn,hollo_runtime=debug`).
    LogFilter,
}

/// The upper bound of an integer.
#[derive(Clone, Copy, Debug)]
pub enum Max {
    Value(i64),
    /// At most the value of that variable (whose own maximum bounds the table's check).
    Of(&'static Var),
}

/// How an integer is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    Number,
    Seconds,
    Millis,
    Bytes,
    /// Mebibytes (the code multiplies by 2^20).
    Mib,
}

/// Which URLs a variable accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UrlRule {
    /// `postgres://` or `postgresql://`; its password is never shown.
    Postgres,
    /// An http(s) origin: scheme, host and port, no path.
    Origin,
    /// An http(s) URL with a host and no query or fragment, the base of other URLs.
    Base,
    /// Any http(s) URL.
    Http,
}

/// What an unset variable means.
#[derive(Clone, Copy, Debug)]
pub enum Unset {
    Int(i64),
    Bool(bool),
    Text(&'static str),
    /// No value: the variable's meaning says what its absence does.
    Nothing,
    /// Computed at start; the text (Markdown) says from what.
    Derived(&'static str),
}

/// A line of the reference: variables that share one meaning (Markdown).
#[derive(Debug)]
pub struct Row {
    pub vars: &'static [&'static Var],
    pub meaning: &'static str,
}

impl Var {
    const fn new(kind: Kind, default: Unset) -> Var {
        Var {
            name: "",
            alias: None,
            kind,
            default,
        }
    }

    const fn named(self, name: &'static str) -> Var {
        Var { name, ..self }
    }

    const fn or(self, alias: &'static str) -> Var {
        Var {
            alias: Some(alias),
            ..self
        }
    }

    const fn ranged(default: Unset, min: i64, max: Max, unit: Unit) -> Var {
        Var::new(Kind::Int { min, max, unit }, default)
    }

    const fn int(default: i64, min: i64, max: i64) -> Var {
        Var::ranged(Unset::Int(default), min, Max::Value(max), Unit::Number)
    }

    const fn int_derived(default: &'static str, min: i64, max: Max) -> Var {
        Var::ranged(Unset::Derived(default), min, max, Unit::Number)
    }

    const fn seconds(default: i64, min: i64, max: i64) -> Var {
        Var::ranged(Unset::Int(default), min, Max::Value(max), Unit::Seconds)
    }

    const fn millis(default: i64, min: i64, max: i64) -> Var {
        Var::ranged(Unset::Int(default), min, Max::Value(max), Unit::Millis)
    }

    const fn bytes(default: i64, min: i64, max: Max) -> Var {
        Var::ranged(Unset::Int(default), min, max, Unit::Bytes)
    }

    const fn mib(default: i64, min: i64, max: i64) -> Var {
        Var::ranged(Unset::Int(default), min, Max::Value(max), Unit::Mib)
    }

    const fn bool(default: bool) -> Var {
        Var::new(Kind::Bool, Unset::Bool(default))
    }

    const fn one_of(values: &'static [&'static str], default: &'static str) -> Var {
        Var::new(Kind::OneOf(values), Unset::Text(default))
    }

    const fn one_of_derived(values: &'static [&'static str], default: &'static str) -> Var {
        Var::new(Kind::OneOf(values), Unset::Derived(default))
    }

    const fn url(rule: UrlRule, default: Unset) -> Var {
        Var::new(Kind::Url(rule), default)
    }

    const fn secret(min_len: usize, default: Unset) -> Var {
        Var::new(Kind::Secret { min_len }, default)
    }

    const fn text(default: Unset) -> Var {
        Var::new(Kind::Text, default)
    }

    const fn path(default: Unset) -> Var {
        Var::new(Kind::Path, default)
    }

    const fn log_filter(default: &'static str) -> Var {
        Var::new(Kind::LogFilter, Unset::Text(default))
    }

    /// The integer default (0 for a variable without one: the table's tests rule that out
    /// for every integer read with [`super::Env::int`]), for the `Default` of the settings.
    pub const fn int_default(&self) -> i64 {
        match self.default {
            Unset::Int(v) => v,
            _ => 0,
        }
    }

    /// The fixed maximum of an integer (0 for another variable: the table's tests rule that
    /// out for every variable read with it).
    pub const fn int_max(&self) -> i64 {
        match self.kind {
            Kind::Int {
                max: Max::Value(max),
                ..
            } => max,
            _ => 0,
        }
    }

    /// The integer default as a duration, in the variable's unit.
    pub const fn default_duration(&self) -> std::time::Duration {
        let v = self.int_default() as u64;
        match self.kind {
            Kind::Int {
                unit: Unit::Millis, ..
            } => std::time::Duration::from_millis(v),
            _ => std::time::Duration::from_secs(v),
        }
    }
}

/// How the reference shows the table (`docs/reference/configuration.md`, Markdown).
impl Var {
    /// The name, with its alias.
    pub fn shown_name(&self) -> String {
        match self.alias {
            Some(alias) => format!("`{}` (or `{alias}`)", self.name),
            None => format!("`{}`", self.name),
        }
    }

    /// The default: the value, with its size in larger units when it has one.
    pub fn shown_default(&self) -> String {
        match self.default {
            Unset::Int(v) => {
                let unit = match self.kind {
                    Kind::Int { unit, .. } => unit,
                    _ => Unit::Number,
                };
                match larger_unit(v, unit) {
                    Some(larger) => format!("`{v}` ({larger})"),
                    None => format!("`{v}`"),
                }
            }
            Unset::Bool(b) => format!("`{b}`"),
            Unset::Text(t) => format!("`{t}`"),
            Unset::Nothing => "—".into(),
            Unset::Derived(text) => text.into(),
        }
    }

    /// What the variable accepts.
    pub fn accepts(&self) -> String {
        match self.kind {
            Kind::Int { min, max, unit } => {
                let unit = match unit {
                    Unit::Number => "integer",
                    Unit::Seconds => "seconds",
                    Unit::Millis => "milliseconds",
                    Unit::Bytes => "bytes",
                    Unit::Mib => "MiB",
                };
                match max {
                    Max::Value(max) => format!("{unit} {min}–{max}"),
                    Max::Of(other) => format!("{unit} {min} – `{}`", other.name),
                }
            }
            Kind::Bool => "boolean".into(),
            Kind::OneOf(values) => {
                let quoted: Vec<String> = values.iter().map(|v| format!("`{v}`")).collect();
                match quoted.split_last() {
                    Some((last, rest)) if !rest.is_empty() => {
                        format!("{} or {last}", rest.join(", "))
                    }
                    _ => quoted.join(""),
                }
            }
            Kind::Url(UrlRule::Postgres) => "`postgres://` URL".into(),
            Kind::Url(UrlRule::Origin) => "http(s) origin".into(),
            Kind::Url(UrlRule::Base | UrlRule::Http) => "http(s) URL".into(),
            Kind::Secret { min_len: 0 } => "secret".into(),
            Kind::Secret { min_len } => format!("secret, ≥ {min_len} characters"),
            Kind::Text => "text".into(),
            Kind::Path => "path".into(),
            Kind::LogFilter => "log filter".into(),
        }
    }
}

/// `v` in `unit` said in a larger unit (`604800` seconds: 7 days), when it is a whole number
/// of it.
fn larger_unit(v: i64, unit: Unit) -> Option<String> {
    let whole = |size: i64, one: &str, many: &str| {
        (v >= size && v % size == 0).then(|| {
            let n = v / size;
            format!("{n} {}", if n == 1 { one } else { many })
        })
    };
    match unit {
        Unit::Seconds => whole(86_400, "day", "days")
            .or_else(|| whole(3600, "hour", "hours"))
            .or_else(|| whole(60, "min", "min")),
        Unit::Millis => whole(1000, "s", "s"),
        Unit::Bytes => whole(1 << 20, "MiB", "MiB"),
        Unit::Number | Unit::Mib => None,
    }
}

/// `pub static NAME: Var = <spec>` named after itself.
macro_rules! var {
    ($name:ident = $spec:expr) => {
        pub static $name: Var = $spec.named(stringify!($name));
    };
}

var!(NODE_TYPE = Var::one_of(&["all", "web", "worker"], "all"));
var!(DATABASE_URL = Var::url(UrlRule::Postgres, Unset::Nothing));
var!(HOLLO_HOME = Var::path(Unset::Text(".hollo")));
var!(DATABASE_DIRECT_URL = Var::url(UrlRule::Postgres, Unset::Derived("`DATABASE_URL`")));
var!(DATABASE_POOL_MAX = Var::int(20, 1, 10_000));
var!(DATABASE_WAIT_SECONDS = Var::seconds(60, 1, 3600));
var!(WORKER_POOL_MAX = Var::int(20, 2, 10_000));
var!(ITEM_LOCK_POOL_SIZE = Var::int(4, 1, 1_000));
var!(ACTIVITY_CONCURRENCY = Var::int(10, 1, 10_000));
var!(TASK_CONCURRENCY = Var::int(4, 1, 1_000));
var!(REPLY_CONCURRENCY = Var::int(2, 0, 1_000));
var!(DELIVERY_CONCURRENCY = Var::int(64, 1, 10_000));
var!(QUEUE_LEASE_SECONDS = Var::seconds(30, 3, 3600));
var!(QUEUE_POLL_MS = Var::millis(5000, 10, 600_000));
var!(SHUTDOWN_DRAIN_SECONDS = Var::seconds(30, 0, 3600));
var!(SHUTDOWN_PRESTOP_SECONDS = Var::seconds(0, 0, 300));
var!(PORT = Var::int(3000, 0, 65_535));
var!(HEALTH_PORT = Var::int(9090, 0, 65_535));
var!(BIND = Var::text(Unset::Text("0.0.0.0")));
var!(METRICS_SAMPLE_SECONDS = Var::seconds(15, 1, 3600));
var!(INSTANCE_STATS_SECONDS = Var::seconds(300, 1, 86_400));
var!(STREAMS_PER_TOKEN = Var::int(8, 1, 10_000));
var!(
    STREAMS_MAX = Var::int_derived(
        "half of `HTTP_MAX_CONNECTIONS`",
        1,
        Max::Of(&HTTP_MAX_CONNECTIONS)
    )
);
var!(ADMIN_TOKEN = Var::secret(0, Unset::Nothing));
var!(RUNTIME_ENV = Var::text(Unset::Text("production")));
var!(LOG_FORMAT = Var::one_of(&["text", "json"], "text"));
var!(RUST_LOG = Var::log_filter("info,sqlx=warn").or("LOG_LEVEL"));
var!(PUBLIC_URL = Var::url(UrlRule::Origin, Unset::Derived("`http://localhost:$PORT`")));
var!(
    SECRET_KEY = Var::secret(
        SECRET_KEY_MIN_LEN,
        Unset::Derived(
            "— (local default: generated once into `$HOLLO_HOME/secret-key`, mode 0600)"
        ),
    )
);
var!(EXTRA_CA_CERTS_FILE = Var::path(Unset::Nothing));
var!(MEDIA_PROXY_CACHE_MB = Var::mib(64, 0, 4096));
var!(MEDIA_PROXY_CONCURRENCY = Var::int(32, 1, 1024));
var!(PREVIEW_CARDS = Var::bool(true));
var!(PREVIEW_CARD_TIMEOUT_SECONDS = Var::seconds(10, 1, 60));
var!(PREVIEW_CARD_CONCURRENCY = Var::int(4, 1, 1_000));
var!(SCHEDULED_STATUS_MIN_SECONDS = Var::seconds(300, 0, 86_400));
var!(ALLOW_PRIVATE_ADDRESS = Var::bool(false));
var!(FS_STORAGE_PATH = Var::path(Unset::Nothing));
var!(
    DRIVE_DISK = Var::one_of_derived(
        &["fs", "s3"],
        "`fs` when `FS_STORAGE_PATH` is set (the local default without `DATABASE_URL`: \
         `$HOLLO_HOME/media`), else none",
    )
);
var!(S3_BUCKET = Var::text(Unset::Nothing));
var!(S3_REGION = Var::text(Unset::Text("us-east-1")));
var!(S3_ENDPOINT_URL = Var::url(UrlRule::Http, Unset::Derived("AWS")));
var!(S3_FORCE_PATH_STYLE = Var::bool(false));
var!(AWS_ACCESS_KEY_ID = Var::text(Unset::Nothing));
var!(AWS_SECRET_ACCESS_KEY = Var::secret(0, Unset::Nothing));
var!(STORAGE_URL_BASE = Var::url(UrlRule::Base, Unset::Derived("`PUBLIC_URL` (fs)")));
var!(MEDIA_MAX_BYTES = Var::bytes(16 << 20, 1, Max::Value(1 << 30)));
var!(MEDIA_MAX_PIXELS = Var::int(33_177_600, 1, u32::MAX as i64));
var!(MEDIA_DECODE_CONCURRENCY = Var::int(2, 1, 64));
var!(MEDIA_SYNC_MAX_BYTES = Var::bytes(1 << 20, 0, Max::Of(&MEDIA_MAX_BYTES)));
var!(DELIVERY_HOST_CONCURRENCY = Var::int(4, 1, 1_000));
var!(RECOVERY_INTERVAL_SECONDS = Var::seconds(60, 1, 3600));
var!(
    PASSWORD_HASH_CONCURRENCY =
        Var::int_derived("the CPUs the process may use", 1, Max::Value(1024))
);
var!(BEHIND_PROXY = Var::bool(false));
var!(POLL_WAKEUP_CHUNK_SECONDS = Var::seconds(7 * 86_400, 1, 7 * 86_400));
var!(IMPORT_MAX_MIB = Var::mib(10, 1, 1024));
var!(IMPORT_MAX_ROWS = Var::int(50_000, 1, 10_000_000));
var!(HTTP_HEADER_TIMEOUT_SECONDS = Var::seconds(10, 1, 300));
var!(HTTP_IDLE_TIMEOUT_SECONDS = Var::seconds(60, 1, 3600));
var!(HTTP_BODY_TIMEOUT_SECONDS = Var::seconds(30, 1, 3600));
var!(HTTP_MAX_CONNECTIONS = Var::int(1024, 1, 1_000_000));
var!(REPLY_MAX_DEPTH = Var::int(2, 1, 10));
var!(REPLY_MAX_ITEMS = Var::int(100, 1, 100_000));
var!(REPLY_MAX_REQUESTS = Var::int(200, 1, 100_000));
var!(REPLY_HOST_INTERVAL_MS = Var::millis(5000, 0, 3_600_000));
var!(REPLY_COOLDOWN_SECONDS = Var::seconds(300, 0, 30 * 86_400));
var!(REPLY_RETRY_AFTER_SECONDS = Var::seconds(300, 1, 86_400));
var!(REPLY_LEASE_SECONDS = Var::seconds(900, 2, 86_400));
var!(STATUS_RATE_LIMIT = Var::int(300, 1, 1_000_000));
var!(STATUS_RATE_PERIOD_SECONDS = Var::seconds(3 * 3600, 1, 7 * 86_400));
var!(PG_BIN_DIR = Var::path(Unset::Nothing));
var!(HOLLO_PG_USER = Var::text(Unset::Text("postgres")));
var!(RETRY_AFTER_SECONDS = Var::seconds(30, 1, 3600));

/// The variables of every node (`hollo serve` and the one-shot commands), in the reference's
/// order.
pub static NODE: &[Row] = &[
    Row {
        vars: &[&NODE_TYPE],
        meaning: "`all`, `web` or `worker`",
    },
    Row {
        vars: &[&DATABASE_URL],
        meaning: "PostgreSQL URL; unset → local PostgreSQL under `HOLLO_HOME` (`.hollo`)",
    },
    Row {
        vars: &[&HOLLO_HOME],
        meaning: "with `DATABASE_URL` unset: the directory of the local PostgreSQL (`postgres/`), the \
        generated `SECRET_KEY` (`secret-key`) and the media (`media/`)",
    },
    Row {
        vars: &[&DATABASE_DIRECT_URL],
        meaning: "bypasses a transaction-mode pooler for LISTEN/NOTIFY and migrations (the pooler must be \
        PgBouncer ≥ 1.21 with `max_prepared_statements` set: the runtime uses protocol-level \
        prepared statements)",
    },
    Row {
        vars: &[&DATABASE_POOL_MAX],
        meaning: "pool of a web node",
    },
    Row {
        vars: &[&DATABASE_WAIT_SECONDS],
        meaning: "how long one-shot commands (`migrate`, `account create`, `queue stats`, `probe`) wait \
        for an unreachable database before failing (1–3600); `serve` keeps retrying, logging \
        each attempt",
    },
    Row {
        vars: &[&WORKER_POOL_MAX, &ITEM_LOCK_POOL_SIZE],
        meaning: "a worker's general pool and item-lock connections (24 in all)",
    },
    Row {
        vars: &[&ACTIVITY_CONCURRENCY, &TASK_CONCURRENCY, &REPLY_CONCURRENCY],
        meaning: "messages in flight per worker process (replies within the task slots)",
    },
    Row {
        vars: &[&DELIVERY_CONCURRENCY],
        meaning: "outgoing deliveries in flight per worker process, in slots of their own beside the \
        activity slots (a delivery mostly waits on a remote server; a large fan-out never holds \
        the inbox's slots); `worker.concurrency.deliveries` in the `Hollo` resource",
    },
    Row {
        vars: &[&QUEUE_LEASE_SECONDS],
        meaning: "lease of a claimed message; a killed worker's messages are claimable again after it",
    },
    Row {
        vars: &[&QUEUE_POLL_MS],
        meaning: "fallback poll (also how delayed messages become due)",
    },
    Row {
        vars: &[&SHUTDOWN_DRAIN_SECONDS],
        meaning: "drain window after SIGTERM (web and `all` nodes: after the pre-stop delay) for in-flight \
        requests and work; then the node exits 0",
    },
    Row {
        vars: &[&SHUTDOWN_PRESTOP_SECONDS],
        meaning: "web and `all` nodes (0–300): after SIGTERM, `/readyz` answers 503 at once but the node \
        keeps accepting and serving this long, every response with `Connection: close` so \
        keep-alive clients reconnect through the Service (whose endpoints by then route \
        elsewhere); then it stops accepting and drains. The operator sets it from \
        `spec.web.preStopSeconds` (default 5) and the pod's grace period to delay + drain + 5 s",
    },
    Row {
        vars: &[&PORT, &HEALTH_PORT, &BIND],
        meaning: "web port (the API, `/healthz`, `/readyz`; web and `all` nodes); health port of every \
        node (`/healthz`, `/readyz`, `/metrics` — the only port that serves `/metrics`). On a \
        web or `all` node they must differ; 0 picks a free port (logged)",
    },
    Row {
        vars: &[&METRICS_SAMPLE_SECONDS],
        meaning: "how often a node counts its queues for `hollo_queue_depth` (1–3600), in the background: \
        a scrape reads memory only (`hollo_queue_depth_samples_total` counts the samples)",
    },
    Row {
        vars: &[&INSTANCE_STATS_SECONDS],
        meaning: "how long a web node reuses the user and status counts of `/api/v1/instance`, \
        `/api/v2/instance` and `/nodeinfo/2.1` (1–86400): at most one count per process per \
        interval, concurrent requests wait for it",
    },
    Row {
        vars: &[&STREAMS_PER_TOKEN],
        meaning: "open streaming connections (`/api/v1/streaming`) of one access token on one node \
        (1–10000); beyond it 429 before the upgrade",
    },
    Row {
        vars: &[&STREAMS_MAX],
        meaning: "open streaming connections of one node (1 – `HTTP_MAX_CONNECTIONS`); beyond it 429. Each \
        open stream also holds one of the node's `HTTP_MAX_CONNECTIONS` places, so streams never \
        take all of them from the API",
    },
    Row {
        vars: &[&ADMIN_TOKEN],
        meaning: "bearer token for `/api/admin/*`; unset → 403",
    },
    Row {
        vars: &[&RUNTIME_ENV],
        meaning: "environment name recorded on nodes and jobs",
    },
    Row {
        vars: &[&LOG_FORMAT, &RUST_LOG],
        meaning: "`json` for structured logs; a filter that does not parse is a startup error",
    },
    Row {
        vars: &[&PUBLIC_URL],
        meaning: "the instance's public origin (no path); actor ids, key ids and WebFinger subjects \
        (`acct:name@<host[:port]>`) derive from it on every node",
    },
    Row {
        vars: &[&SECRET_KEY],
        meaning: "≥ 32 characters; account private keys are encrypted with a key derived from it \
        (HKDF-SHA256 → AES-256-GCM). Unset → federation is disabled on that node (warning at \
        start; ActivityPub endpoints answer 503, inbox/delivery messages are left for nodes that \
        have it). Use the same value on every node; changing it makes existing account keys \
        unreadable",
    },
    Row {
        vars: &[&EXTRA_CA_CERTS_FILE],
        meaning: "a PEM bundle of CA certificates trusted for outgoing fetches and deliveries besides the \
        compiled-in public roots (a private CA, a TLS-inspecting proxy); unreadable or without a \
        certificate → the node does not start. The operator sets it from `spec.pod.caBundle`",
    },
    Row {
        vars: &[&MEDIA_PROXY_CACHE_MB],
        meaning: "memory per web node for the remote images the media proxy relayed (0–4096; 0: none, \
        every reader's request is fetched)",
    },
    Row {
        vars: &[&MEDIA_PROXY_CONCURRENCY],
        meaning: "remote images the media proxy fetches at once per web node, at most 8 of them from one \
        remote host (1–1024); a reader waits up to 5 s for a place, then gets `503` with \
        `Retry-After: 2`. Each fetch holds at most 1 MiB of its image (larger ones stream \
        through), so the proxy's memory is about this × 1 MiB plus its cache",
    },
    Row {
        vars: &[&PREVIEW_CARDS, &PREVIEW_CARD_TIMEOUT_SECONDS],
        meaning: "link previews: a worker fetches the first link of each post (ours and remote ones) for \
        its card; `false` fetches nothing and posts show no card. The whole fetch of one card \
        (page, oEmbed document, image) gives up after the timeout (1–60)",
    },
    Row {
        vars: &[&PREVIEW_CARD_CONCURRENCY],
        meaning: "card fetches in flight per worker process (1–1000), in slots of their own beside the \
        task slots: pages that answer slowly or never delay no other task",
    },
    Row {
        vars: &[&SCHEDULED_STATUS_MIN_SECONDS],
        meaning: "how far ahead `scheduled_at` must be (0–86400; Mastodon's 5 minutes by default)",
    },
    Row {
        vars: &[&ALLOW_PRIVATE_ADDRESS],
        meaning: "let remote fetches and deliveries reach loopback/private/link-local addresses, over \
        plain http (development and tests only). Cloud metadata addresses stay refused",
    },
    Row {
        vars: &[&FS_STORAGE_PATH],
        meaning: "media storage directory (the `fs` drive); the media cleanup deletes orphaned files under \
        it (unset, with no S3 drive → media cleanups are refused)",
    },
    Row {
        vars: &[&DRIVE_DISK],
        meaning: "where media uploads are stored: `fs` (files under `FS_STORAGE_PATH`, served by web nodes \
        at `/media/<uuid>/<name>.<ext>`, streamed from disk with `Range` support \
        (`Accept-Ranges: bytes`; one range → 206 with `Content-Range`, an unsatisfiable one or \
        several → 416 with `Content-Range: bytes */<size>`), their type, \
        `X-Content-Type-Options: nosniff` and a year of caching) or `s3`. Without a drive `POST \
        /api/v{1,2}/media` answers 503 and the instance offers no media types",
    },
    Row {
        vars: &[
            &S3_BUCKET,
            &S3_REGION,
            &S3_ENDPOINT_URL,
            &S3_FORCE_PATH_STYLE,
        ],
        meaning: "the `s3` drive (upstream Hollo's names): bucket (required), region, endpoint of an \
        S3-compatible server, path-style requests (MinIO and the like)",
    },
    Row {
        vars: &[&AWS_ACCESS_KEY_ID, &AWS_SECRET_ACCESS_KEY],
        meaning: "the `s3` drive's keys (both or neither; neither → the usual AWS credential chain)",
    },
    Row {
        vars: &[&STORAGE_URL_BASE],
        meaning: "public URL of stored files (`<base>/<key>`); required for `s3` — the bucket, or a CDN in \
        front of it, must let anyone read the objects (e.g. a bucket policy allowing \
        `s3:GetObject`)",
    },
    Row {
        vars: &[&MEDIA_MAX_BYTES, &MEDIA_MAX_PIXELS],
        meaning: "largest upload (bytes) and image (width × height, Mastodon's 7680×4320) — of the image \
        and of every GIF frame; an image whose decoded size (from its header: width × height × \
        bytes per pixel of its colour type, so a 16-bit PNG counts 8 per pixel) passes \
        `MEDIA_MAX_PIXELS` × 4 bytes is refused too; over any → 422 and nothing stored, checked \
        from the headers before anything is decoded; reported in `/api/v2/instance` \
        `configuration.media_attachments`",
    },
    Row {
        vars: &[&MEDIA_DECODE_CONCURRENCY],
        meaning: "images decoded at once per process (uploads processed by a web node and the worker's \
        deferred processing alike; more wait for a slot) (1–64). With the decoded-size bound, a \
        node's decoding memory stays under about this many × (`MEDIA_MAX_PIXELS` × 4 + 64 MiB)",
    },
    Row {
        vars: &[&MEDIA_SYNC_MAX_BYTES],
        meaning: "`POST /api/v2/media` processes files up to this size at once (200); bigger ones are \
        stored raw, answered 202 with `url: null`, and processed by a worker \
        (`hollo.media.process.v1`); `GET /api/v1/media/:id` answers 206 until then. \
        `/api/v1/media` always processes at once (0 – `MEDIA_MAX_BYTES`)",
    },
    Row {
        vars: &[&DELIVERY_HOST_CONCURRENCY],
        meaning: "deliveries to one remote host (authority) running at once per process, within the \
        activity slots",
    },
    Row {
        vars: &[&RECOVERY_INTERVAL_SECONDS],
        meaning: "recovery scans on worker/`all` nodes: once at start, then this often (1–3600)",
    },
    Row {
        vars: &[&PASSWORD_HASH_CONCURRENCY],
        meaning: "password checks (argon2id, 19 MiB each) running at once on a node; 4 times as many more \
        may wait, later sign-ins get `503` with `Retry-After: 1`. The node's hashing memory is \
        at most this many × 19 MiB (1–1024)",
    },
    Row {
        vars: &[&BEHIND_PROXY],
        meaning: "a reverse proxy terminates TLS: `X-Forwarded-Proto: https` makes sign-in cookies \
        `Secure`, and the last `X-Forwarded-For` entry is the client address the sign-in limits \
        count",
    },
    Row {
        vars: &[&POLL_WAKEUP_CHUNK_SECONDS],
        meaning: "longest delay of a stored poll-notification wakeup; far expiries are reached in chunks \
        (1–604800)",
    },
    Row {
        vars: &[&IMPORT_MAX_MIB, &IMPORT_MAX_ROWS],
        meaning: "largest import upload (413 beyond) and most rows in it (422 beyond); nothing is stored \
        for a refused upload",
    },
    Row {
        vars: &[&HTTP_HEADER_TIMEOUT_SECONDS],
        meaning: "time a client has to send a request head, counted from when the node waits for it (so an \
        idle keep-alive connection is closed after it too) (1–300)",
    },
    Row {
        vars: &[&HTTP_IDLE_TIMEOUT_SECONDS],
        meaning: "a connection whose reads or writes make no progress this long is closed (a client that \
        stops reading the answer, or stops sending) (1–3600)",
    },
    Row {
        vars: &[&HTTP_BODY_TIMEOUT_SECONDS],
        meaning: "deadline for a whole request body; past it 408 (1–3600)",
    },
    Row {
        vars: &[&HTTP_MAX_CONNECTIONS],
        meaning: "open HTTP connections per node; past it a new connection gets `503` with `Retry-After: \
        1` and is closed (1–1000000)",
    },
    Row {
        vars: &[&REPLY_MAX_DEPTH, &REPLY_MAX_ITEMS, &REPLY_MAX_REQUESTS],
        meaning: "reply collection: levels walked, replies taken and requests made per job before it ends \
        as `partial`",
    },
    Row {
        vars: &[&REPLY_HOST_INTERVAL_MS],
        meaning: "minimum time between two reply-collection requests to one host, across all workers",
    },
    Row {
        vars: &[&REPLY_COOLDOWN_SECONDS, &REPLY_RETRY_AFTER_SECONDS],
        meaning: "no re-collection of a finished collection before the cooldown; back-off after a 429 \
        without `Retry-After`",
    },
    Row {
        vars: &[&REPLY_LEASE_SECONDS],
        meaning: "heartbeat lease of a running collection (refreshed every half lease)",
    },
    Row {
        vars: &[&STATUS_RATE_LIMIT, &STATUS_RATE_PERIOD_SECONDS],
        meaning: "statuses one account may create per period (Mastodon's 300 per 3 hours), as a token \
        bucket in PostgreSQL shared by every web node; past it `POST /api/v1/statuses` answers \
        429 with `Retry-After` (1–1000000 / 1–604800)",
    },
];

/// The variables of the local PostgreSQL and of `hollo maintenance-page`.
pub static LOCAL: &[Row] = &[
    Row {
        vars: &[&PG_BIN_DIR],
        meaning: "where `initdb` and `pg_ctl` are, for the local PostgreSQL (`DATABASE_URL` unset, `hollo \
        local-db`); otherwise `PATH` and `/usr/lib/postgresql/*/bin` are searched",
    },
    Row {
        vars: &[&HOLLO_PG_USER],
        meaning: "when `hollo` runs as root, the user the local PostgreSQL runs as (PostgreSQL refuses to \
        run as root)",
    },
    Row {
        vars: &[&RETRY_AFTER_SECONDS],
        meaning: "`hollo maintenance-page` only: the `Retry-After` of its 503 answers (1–3600; another \
        value falls back to the default). The operator sets it from \
        `web.maintenancePage.retryAfterSeconds`",
    },
];

/// Every variable of the table.
pub fn all() -> impl Iterator<Item = &'static Var> {
    NODE.iter()
        .chain(LOCAL)
        .flat_map(|row| row.vars.iter().copied())
}
