//! The configuration's unit tests: defaults, ranges and the start-up errors, through
//! `Config::from_env`.

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
        msg.contains("NODE_TYPE") && msg.contains("\"foo\"") && msg.contains("all, web, worker"),
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
}

#[test]
fn bad_media_limits_and_drives_are_startup_errors() {
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
