//! The `hollo` binary as operators run it: real processes, real signals, a real PostgreSQL.
//! (R-ROLE, R-DB-3, R-SHUT, R-Q-2.)
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test panics with its message

use crate::support;

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use hollo_runtime::node::WORKER_STARTED;
use hollo_runtime::tasks::probe;
use support::process::{Hollo, run};
use support::{eventually, fresh_db, fresh_db_with};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// A minimal HTTP/1.1 GET; returns (status, body).
fn http_get(port: u16, path: &str, bearer: Option<&str>) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let auth = bearer
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\n{auth}Connection: close\r\n\r\n"
    )
    .ok()?;
    let mut raw = String::new();
    s.read_to_string(&mut raw).ok()?;
    let status = raw.split_whitespace().nth(1)?.parse().ok()?;
    let body = raw
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Some((status, body))
}

fn worker_env<'a>(url: &'a str, extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut env = vec![
        ("DATABASE_URL", url),
        ("NODE_TYPE", "worker"),
        ("QUEUE_POLL_MS", "200"),
        ("HEALTH_PORT", "0"),
        ("WORKER_POOL_MAX", "6"),
        ("ITEM_LOCK_POOL_SIZE", "1"),
    ];
    env.extend_from_slice(extra);
    env
}

async fn in_flight_keys(pool: &sqlx::PgPool) -> BTreeSet<String> {
    sqlx::query_scalar::<_, String>(
        "SELECT message->'data'->>'key' FROM hollo_task_message_v1 WHERE lease_owner IS NOT NULL AND due > now()",
    )
    .fetch_all(pool)
    .await
    .unwrap_or_default()
    .into_iter()
    .collect()
}

async fn done_keys(pool: &sqlx::PgPool) -> BTreeSet<String> {
    sqlx::query_scalar::<_, String>("SELECT key FROM hollo_probe_result")
        .fetch_all(pool)
        .await
        .unwrap_or_default()
        .into_iter()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_mid_handler_loses_nothing_and_consumes_no_attempt() {
    let db = fresh_db().await;
    probe::enqueue(&db.pool, probe_queue(), "kill", 12, 1500, 0, Duration::ZERO)
        .await
        .unwrap();
    let mut a = Hollo::serve(&worker_env(
        &db.url,
        &[("QUEUE_LEASE_SECONDS", "3"), ("TASK_CONCURRENCY", "4")],
    ));
    let running = eventually(
        Duration::from_secs(30),
        "worker A to hold messages",
        || async {
            let k = in_flight_keys(&db.pool).await;
            (!k.is_empty()).then_some(k)
        },
    )
    .await;
    a.signal("KILL");
    assert!(!a.wait_exit(Duration::from_secs(10)).success());
    let done_at_kill = done_keys(&db.pool).await;
    assert!(
        running.iter().any(|k| !done_at_kill.contains(k)),
        "the kill cut handlers off mid-run"
    );

    let _b = Hollo::serve(&worker_env(&db.url, &[("QUEUE_LEASE_SECONDS", "3")]));
    let stats = eventually(
        Duration::from_secs(60),
        "worker B to finish every probe",
        || async {
            let s = probe::stats(&db.pool).await.ok()?;
            (s.completed == 12).then_some(s)
        },
    )
    .await;
    assert_eq!((stats.pending, stats.failed, stats.duplicates), (0, 0, 0));
    let max_attempts: i32 = sqlx::query_scalar("SELECT max(attempts) FROM hollo_probe_result")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(max_attempts, 1, "a SIGKILL is not a recorded failure");
}

fn probe_queue() -> hollo_runtime::queue::QueueName {
    hollo_runtime::queue::QueueName::Task
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_finishes_in_flight_work_claims_nothing_new_and_exits_zero() {
    let db = fresh_db().await;
    probe::enqueue(&db.pool, probe_queue(), "drain", 8, 2000, 0, Duration::ZERO)
        .await
        .unwrap();
    let mut w = Hollo::serve(&worker_env(
        &db.url,
        &[("TASK_CONCURRENCY", "2"), ("SHUTDOWN_DRAIN_SECONDS", "20")],
    ));
    let running = eventually(Duration::from_secs(30), "two probes in flight", || async {
        let k = in_flight_keys(&db.pool).await;
        (k.len() == 2).then_some(k)
    })
    .await;
    let before = done_keys(&db.pool).await;
    w.signal("TERM");
    let status = w.wait_exit(Duration::from_secs(25));
    assert!(
        status.success(),
        "exit 0 after draining; logs:\n{}",
        w.logs()
    );
    let after = done_keys(&db.pool).await;
    for k in &running {
        assert!(after.contains(k), "in-flight {k} finished during the drain");
    }
    let allowed: BTreeSet<String> = running.union(&before).cloned().collect();
    assert!(
        after.is_subset(&allowed),
        "nothing new was claimed after SIGTERM: {after:?} vs {allowed:?}"
    );
    let leased: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM hollo_task_message_v1 WHERE lease_owner IS NOT NULL",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(leased, 0, "no message is left leased by the stopped worker");
    assert_eq!(
        probe::stats(&db.pool).await.unwrap().pending as usize,
        8 - after.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_drain_deadline_hands_unfinished_work_back_without_an_attempt() {
    let db = fresh_db().await;
    probe::enqueue(
        &db.pool,
        probe_queue(),
        "slow",
        1,
        60_000,
        0,
        Duration::ZERO,
    )
    .await
    .unwrap();
    let mut w = Hollo::serve(&worker_env(&db.url, &[("SHUTDOWN_DRAIN_SECONDS", "1")]));
    eventually(
        Duration::from_secs(30),
        "the slow probe in flight",
        || async { (in_flight_keys(&db.pool).await.len() == 1).then_some(()) },
    )
    .await;
    w.signal("TERM");
    assert!(w.wait_exit(Duration::from_secs(15)).success());
    let (attempts, leased, ready): (i32, bool, bool) = sqlx::query_as(
        "SELECT attempts, lease_owner IS NOT NULL, due <= now() FROM hollo_task_message_v1",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(
        (attempts, leased, ready),
        (0, false, true),
        "released at once, no failure recorded"
    );
}

#[test]
fn unknown_node_type_is_a_clear_startup_error() {
    let out = run(&["serve"], &[("NODE_TYPE", "foo")]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("NODE_TYPE") && err.contains("all, web, worker"),
        "{err}"
    );
}

#[test]
fn bad_numbers_are_startup_errors() {
    for (var, value) in [
        ("DATABASE_POOL_MAX", "-1"),
        ("TASK_CONCURRENCY", "lots"),
        ("QUEUE_LEASE_SECONDS", "0"),
        ("SHUTDOWN_PRESTOP_SECONDS", "301"),
        ("SHUTDOWN_PRESTOP_SECONDS", "soon"),
    ] {
        let out = run(&["serve"], &[(var, value)]);
        assert!(!out.status.success(), "{var}={value} must fail");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(var) && err.contains(value), "{var}: {err}");
    }
}

/// R-ROLE, bad env values: one-shot commands wait a bounded time (`DATABASE_WAIT_SECONDS`) for an
/// unreachable database, then fail with a clear error and a non-zero exit.
#[test]
fn one_shot_commands_give_up_on_an_unreachable_database() {
    let port = free_port();
    let url = format!("postgres://hollo:secret@127.0.0.1:{port}/hollo");
    for args in [&["migrate"][..], &["account", "create", "alice"][..]] {
        let mut child = Hollo::spawn(
            args,
            &[
                ("DATABASE_URL", url.as_str()),
                ("DATABASE_WAIT_SECONDS", "2"),
                ("SECRET_KEY", "process-test-secret-0123456789abcdef"),
                ("RUST_LOG", "warn"),
            ],
        );
        let status = child.wait_exit(Duration::from_secs(30));
        assert!(!status.success(), "{args:?} must fail");
        let err = child.logs();
        assert!(
            err.contains("database unreachable for 2 s") && err.contains("DATABASE_WAIT_SECONDS"),
            "{args:?}: {err}"
        );
        assert!(
            !err.contains("secret"),
            "the password never reaches the output"
        );
    }
}

/// R-ROLE, bad env values: a log filter that does not parse is an error, not a silent `info`.
#[test]
fn an_invalid_log_filter_is_a_startup_error() {
    for (var, value) in [("RUST_LOG", "info,[[[bad"), ("LOG_LEVEL", "hollo=loud")] {
        let out = support::process::command(&["version"], &[])
            .env_remove("RUST_LOG")
            .env(var, value)
            .output()
            .expect("run hollo");
        assert!(!out.status.success(), "{var}={value} must fail");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(var) && err.contains(value), "{var}: {err}");
    }
}

#[tokio::test]
async fn an_unreachable_database_is_retried_with_clear_logs_until_stopped() {
    let port = free_port();
    let url = format!("postgres://hollo:secret@127.0.0.1:{port}/hollo");
    let mut w = Hollo::serve(&[
        ("DATABASE_URL", url.as_str()),
        ("NODE_TYPE", "worker"),
        ("HEALTH_PORT", "0"),
    ]);
    eventually(Duration::from_secs(20), "two retry log lines", || async {
        (w.logs().matches("database unreachable; retrying").count() >= 2).then_some(())
    })
    .await;
    assert!(
        w.child.try_wait().expect("try_wait").is_none(),
        "still running, not crash-looping"
    );
    assert!(
        !w.logs().contains("secret"),
        "the password never reaches the logs"
    );
    w.signal("TERM");
    assert!(w.wait_exit(Duration::from_secs(10)).success());
}

#[tokio::test]
async fn an_outdated_schema_refuses_to_serve_and_names_the_fix() {
    let db = fresh_db_with(false).await;
    let mut w = Hollo::serve(&[
        ("DATABASE_URL", db.url.as_str()),
        ("NODE_TYPE", "worker"),
        ("HEALTH_PORT", "0"),
    ]);
    let status = w.wait_exit(Duration::from_secs(30));
    assert!(!status.success());
    assert!(w.logs().contains("run `hollo migrate`"), "{}", w.logs());

    let out = run(&["migrate"], &[("DATABASE_URL", db.url.as_str())]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: i64 = sqlx::query_scalar("SELECT max(version) FROM _sqlx_migrations")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(v, hollo_runtime::db::expected_schema_version());
}

#[tokio::test]
async fn web_node_serves_health_version_and_a_protected_admin_status() {
    let db = fresh_db().await;
    let port = free_port();
    let port_s = port.to_string();
    let w = Hollo::serve(&[
        ("DATABASE_URL", db.url.as_str()),
        ("NODE_TYPE", "web"),
        ("PORT", &port_s),
        ("ADMIN_TOKEN", "s3cret"),
    ]);
    eventually(Duration::from_secs(30), "web /readyz", || async {
        http_get(port, "/readyz", None).filter(|(s, _)| *s == 200)
    })
    .await;
    assert!(
        !w.logs().contains(WORKER_STARTED),
        "a web node starts no consumer"
    );
    assert_eq!(http_get(port, "/healthz", None).map(|r| r.0), Some(200));
    let (_, version) = http_get(port, "/api/version", None).expect("version");
    let v: serde_json::Value = serde_json::from_str(&version).expect("json");
    assert_eq!(
        v["taskDefinitionVersion"],
        hollo_runtime::tasks::TASK_DEFINITION_VERSION
    );
    assert_eq!(
        http_get(port, "/api/admin/status", None).map(|r| r.0),
        Some(401)
    );
    assert_eq!(
        http_get(port, "/api/admin/status", Some("wrong")).map(|r| r.0),
        Some(401)
    );
    let (status, body) = http_get(port, "/api/admin/status", Some("s3cret")).expect("status");
    assert_eq!(status, 200, "{body}");
    let s: serde_json::Value = serde_json::from_str(&body).expect("json");
    let nodes = s["nodes"].as_array().expect("nodes");
    assert!(
        nodes
            .iter()
            .any(|n| n["role"] == "web" && n["state"] == "live"),
        "{body}"
    );
    assert_eq!(s["queues"].as_array().map(|q| q.len()), Some(2));
    let (status, body) = http_get(port, "/nope", None).expect("404");
    assert_eq!(status, 404);
    assert!(body.contains("\"error\""), "{body}");
    // A web node registers and enqueues but never claims (R-ROLE-1).
    probe::enqueue(&db.pool, probe_queue(), "web", 3, 0, 0, Duration::ZERO)
        .await
        .unwrap();
    let claims: i64 =
        sqlx::query_scalar("SELECT COALESCE(sum(claims), 0)::bigint FROM hollo_task_message_v1")
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert_eq!(claims, 0);
}

/// One request on an open (keep-alive) connection: the status, the head lower-cased, the body.
fn keep_alive_get(s: &mut TcpStream, path: &str) -> std::io::Result<(u16, String, String)> {
    write!(s, "GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n")?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = s.read(&mut chunk)?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + len {
        let n = s.read(&mut chunk)?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = String::from_utf8_lossy(&buf[head_end..head_end + len]).into_owned();
    Ok((status, head, body))
}

fn keep_alive_connection(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s
}

/// R-SHUT-3: after SIGTERM a web node is not ready at once but keeps serving — on open
/// connections and new ones — for `SHUTDOWN_PRESTOP_SECONDS`, telling every client
/// `Connection: close` so keep-alive clients reconnect through the Service (which by then
/// routes elsewhere); only then does it stop accepting, and it exits 0.
#[tokio::test]
async fn after_sigterm_a_web_node_is_unready_but_serves_with_connection_close_for_the_prestop_delay()
 {
    const PRESTOP: Duration = Duration::from_secs(4);
    let db = fresh_db().await;
    let port = free_port();
    let port_s = port.to_string();
    let prestop_s = PRESTOP.as_secs().to_string();
    let mut w = Hollo::serve(&[
        ("DATABASE_URL", db.url.as_str()),
        ("NODE_TYPE", "web"),
        ("PORT", &port_s),
        ("SHUTDOWN_PRESTOP_SECONDS", &prestop_s),
        ("SHUTDOWN_DRAIN_SECONDS", "10"),
    ]);
    eventually(Duration::from_secs(30), "web /readyz", || async {
        http_get(port, "/readyz", None).filter(|(s, _)| *s == 200)
    })
    .await;
    let mut kept = keep_alive_connection(port);
    let (status, head, _) = keep_alive_get(&mut kept, "/healthz").expect("first request");
    assert_eq!(status, 200);
    assert!(!head.contains("connection: close"), "kept alive: {head}");

    w.signal("TERM");
    let term = std::time::Instant::now();
    let (status, body) = eventually(Duration::from_secs(3), "/readyz 503", || async {
        http_get(port, "/readyz", None).filter(|(s, _)| *s == 503)
    })
    .await;
    assert!(body.contains("shutting down"), "{body}");
    // The open connection is still served, and told to close.
    let (status_kept, head, _) =
        keep_alive_get(&mut kept, "/healthz").expect("a request on the kept connection");
    assert_eq!(status_kept, 200, "served during the pre-stop delay");
    assert!(head.contains("connection: close"), "{head}");
    let mut rest = Vec::new();
    assert_eq!(
        kept.read_to_end(&mut rest).map(|_| rest.len()).ok(),
        Some(0),
        "the server closed the kept connection after that response"
    );
    // New connections are served too, each told to close.
    let mut fresh = keep_alive_connection(port);
    let (status_new, head, body) = keep_alive_get(&mut fresh, "/healthz").expect("a new request");
    assert_eq!(status_new, 200, "{body}");
    assert!(head.contains("connection: close"), "{head}");
    assert!(
        term.elapsed() < PRESTOP,
        "the checks above ran inside the pre-stop delay ({:?}); readyz said {status}",
        term.elapsed()
    );
    // Past the delay the listener closes and the process exits 0.
    let status = w.wait_exit(PRESTOP + Duration::from_secs(10));
    let stopped = term.elapsed();
    assert!(status.success(), "exit 0; logs:\n{}", w.logs());
    assert!(
        stopped >= PRESTOP,
        "kept serving for the whole pre-stop delay, stopped after {stopped:?}"
    );
    assert!(
        TcpStream::connect(("127.0.0.1", port)).is_err(),
        "nothing listens after the exit"
    );
    assert!(
        w.logs().contains("pre-stop delay over"),
        "logs:\n{}",
        w.logs()
    );
}

#[tokio::test]
async fn admin_endpoints_answer_403_when_no_token_is_configured() {
    let db = fresh_db().await;
    let port = free_port();
    let port_s = port.to_string();
    let _w = Hollo::serve(&[
        ("DATABASE_URL", db.url.as_str()),
        ("NODE_TYPE", "web"),
        ("PORT", &port_s),
    ]);
    eventually(Duration::from_secs(30), "web /healthz", || async {
        http_get(port, "/healthz", None).filter(|(s, _)| *s == 200)
    })
    .await;
    assert_eq!(
        http_get(port, "/api/admin/status", Some("anything")).map(|r| r.0),
        Some(403)
    );
}

#[tokio::test]
async fn worker_logs_its_start_line_once_and_serves_probes_on_the_health_port() {
    let db = fresh_db().await;
    let port = free_port();
    let port_s = port.to_string();
    let w = Hollo::serve(&[
        ("DATABASE_URL", db.url.as_str()),
        ("NODE_TYPE", "worker"),
        ("HEALTH_PORT", &port_s),
    ]);
    w.wait_log(WORKER_STARTED, Duration::from_secs(30)).await;
    eventually(Duration::from_secs(10), "worker /readyz", || async {
        http_get(port, "/readyz", None).filter(|(s, _)| *s == 200)
    })
    .await;
    assert_eq!(w.logs().matches(WORKER_STARTED).count(), 1);
    probe::enqueue(&db.pool, probe_queue(), "hp", 5, 0, 0, Duration::ZERO)
        .await
        .unwrap();
    eventually(Duration::from_secs(20), "probes done", || async {
        (probe::stats(&db.pool).await.ok()?.completed == 5).then_some(())
    })
    .await;
    let (status, metrics) = http_get(port, "/metrics", None).expect("metrics");
    assert_eq!(status, 200);
    assert!(
        metrics.contains("hollo_queue_succeeded_total{queue=\"task\",kind=\"hollo.probe.v1\"} 5"),
        "{metrics}"
    );
    assert!(
        metrics.contains("hollo_queue_enqueue_to_start_seconds_count"),
        "{metrics}"
    );
    let hb: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM hollo_node WHERE role = 'worker' AND stopped_at IS NULL",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(hb, 1, "the heartbeat row exists");
    // The web API is not served on a worker's health port.
    assert_eq!(http_get(port, "/api/version", None).map(|r| r.0), Some(404));
}

#[tokio::test]
async fn cli_version_queue_stats_and_probe_stats_print_json() {
    let db = fresh_db().await;
    let out = run(&["version", "--json"], &[]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    for key in ["version", "schemaVersion", "taskDefinitionVersion"] {
        assert!(v.get(key).is_some(), "{key} in {v}");
    }
    // The operator's version probe: the same JSON in the termination log it reads.
    let log = std::env::temp_dir().join(format!("termination-log-{}", uuid::Uuid::new_v4()));
    let log_path = log.display().to_string();
    let out = run(&["version", "--json", "--termination-log", &log_path], &[]);
    assert!(out.status.success());
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&log).expect("written")).expect("json");
    assert_eq!(written, v);
    let _ = std::fs::remove_file(&log);
    // An unwritable path is a clear error, not a silent success.
    let out = run(
        &[
            "version",
            "--json",
            "--termination-log",
            "/nonexistent/dir/log",
        ],
        &[],
    );
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("/nonexistent/dir/log"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run(
        &["probe", "enqueue", "--count", "7", "--delay-seconds", "600"],
        &[("DATABASE_URL", db.url.as_str())],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run(
        &["queue", "stats", "--json"],
        &[("DATABASE_URL", db.url.as_str())],
    );
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let task = s
        .as_array()
        .and_then(|a| a.iter().find(|q| q["queue"] == "task"))
        .expect("task queue");
    assert_eq!(
        (
            task["queued"].as_i64(),
            task["ready"].as_i64(),
            task["delayed"].as_i64()
        ),
        (Some(7), Some(0), Some(7))
    );
    let out = run(
        &["probe", "stats", "--json"],
        &[("DATABASE_URL", db.url.as_str())],
    );
    let p: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(
        p,
        serde_json::json!({"enqueued": 7, "completed": 0, "pending": 7, "failed": 0, "duplicates": 0})
    );
}

#[tokio::test]
async fn serve_without_database_url_starts_its_own_postgres_and_stops_it_on_exit() {
    let home = support::files::temp_dir("hollo-home");
    let port = free_port();
    let port_s = port.to_string();
    let home_s = home.to_string_lossy().to_string();
    // Started by its path (the test harness's CARGO_PKG_NAME, which `cargo run` sets too, blanked).
    let mut n = Hollo::serve(&[
        ("PORT", &port_s),
        ("HOLLO_HOME", &home_s),
        ("CARGO_PKG_NAME", ""),
    ]);
    eventually(
        Duration::from_secs(60),
        "the local-default node to be ready",
        || async { http_get(port, "/readyz", None).filter(|(s, _)| *s == 200) },
    )
    .await;
    // First contact: where it listens, and the command that makes the first account, written
    // as this process was started; pasted into a shell it works.
    let create = eventually(
        Duration::from_secs(10),
        "the first-contact lines",
        || async {
            n.logs()
                .lines()
                .find(|l| l.contains("account create"))
                .map(|l| l.trim().to_string())
        },
    )
    .await;
    let logs = n.logs();
    assert!(
        logs.contains(&format!("listens on 127.0.0.1:{port}"))
            && logs.contains(&format!("public address is http://localhost:{port}")),
        "{logs}"
    );
    assert_eq!(
        create,
        format!(
            "printf '%s\\n' \"$PASSWORD\" | HOLLO_HOME={home_s} {} account create alice --admin \
             --password-stdin",
            support::HOLLO
        )
    );
    // And the first-run page's one-time link, open while no account exists.
    let link = logs
        .split_whitespace()
        .find(|w| w.starts_with(&format!("http://localhost:{port}/setup?token=")))
        .unwrap_or_else(|| panic!("no first-run link in {logs}"))
        .to_string();
    let path = &link[format!("http://localhost:{port}").len()..];
    let page = http_get(port, path, None).expect("the first-run page");
    assert!(
        page.0 == 200 && page.1.contains("action=\"/setup\""),
        "{page:?}"
    );
    let created = std::process::Command::new("sh")
        .args(["-c", &create])
        .env("PASSWORD", "a first password")
        .env_remove("DATABASE_URL")
        .env_remove("SECRET_KEY")
        .output()
        .expect("run the printed command");
    let stderr = String::from_utf8_lossy(&created.stderr);
    assert!(
        created.status.success() && stderr.contains("created alice (admin)"),
        "{stderr}"
    );
    assert!(
        !String::from_utf8_lossy(&created.stdout).trim().is_empty(),
        "a token"
    );
    // An account exists: the page is closed, its link with it.
    assert_eq!(http_get(port, path, None).map(|p| p.0), Some(404));
    assert!(
        n.logs().contains(WORKER_STARTED),
        "the default role is all: {}",
        n.logs()
    );
    assert!(home.join("postgres/data/PG_VERSION").exists());
    // The local default federates too: a SECRET_KEY was generated, private to its owner.
    assert!(n.logs().contains("federation enabled"), "{}", n.logs());
    let key = std::fs::metadata(home.join("secret-key")).expect("secret-key file");
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&key.permissions()) & 0o777,
        0o600
    );
    n.signal("TERM");
    assert!(
        n.wait_exit(Duration::from_secs(40)).success(),
        "{}",
        n.logs()
    );
    assert!(
        !home.join("postgres/data/postmaster.pid").exists(),
        "the local PostgreSQL was stopped"
    );
    let _ = std::fs::remove_dir_all(&home);
}

#[tokio::test]
async fn listeners_reconnect_after_a_database_restart() {
    // A PostgreSQL of this test's own, so restarting it disturbs no other test.
    let dir = support::files::temp_dir("hollo-pg");
    let pg = hollo_runtime::db::local::LocalPostgres::new(&dir).expect("pg binaries");
    let admin = pg.ensure_started().expect("start pg");
    hollo_runtime::db::create_database_if_missing(&admin, "hollo")
        .await
        .expect("create db");
    let url = pg.url("hollo");
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .connect(&url)
        .await
        .expect("connect");
    hollo_runtime::db::migrate(&pool).await.expect("migrate");
    // Polling is set to a minute, so only a working LISTEN can pick work up within the deadline.
    let _w = Hollo::serve(&[
        ("DATABASE_URL", url.as_str()),
        ("NODE_TYPE", "worker"),
        ("HEALTH_PORT", "0"),
        ("QUEUE_POLL_MS", "60000"),
    ]);
    eventually(Duration::from_secs(30), "worker started", || async {
        _w.logs().contains(WORKER_STARTED).then_some(())
    })
    .await;
    probe::enqueue(&pool, probe_queue(), "before", 1, 0, 0, Duration::ZERO)
        .await
        .expect("enqueue");
    eventually(
        Duration::from_secs(20),
        "probe before the restart",
        || async { (probe::stats(&pool).await.ok()?.completed == 1).then_some(()) },
    )
    .await;

    pool.close().await;
    pg.stop().expect("stop pg");
    pg.ensure_started().expect("restart pg");
    eventually(
        Duration::from_secs(30),
        "the listener to reconnect",
        || async { _w.logs().contains("LISTEN connection").then_some(()) },
    )
    .await;
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .connect(&url)
        .await
        .expect("reconnect");
    // The worker wakes all consumers after reconnecting; wait until its listener is back.
    eventually(Duration::from_secs(30), "LISTEN re-established", || async {
        let n: i64 =
            sqlx::query_scalar("SELECT count(*) FROM pg_stat_activity WHERE query ILIKE 'LISTEN%'")
                .fetch_one(&pool)
                .await
                .ok()?;
        (n >= 1).then_some(())
    })
    .await;
    probe::enqueue(&pool, probe_queue(), "after", 1, 0, 0, Duration::ZERO)
        .await
        .expect("enqueue");
    eventually(
        Duration::from_secs(20),
        "probe after the restart, woken by NOTIFY",
        || async { (probe::stats(&pool).await.ok()?.completed == 2).then_some(()) },
    )
    .await;
    drop(_w);
    let _ = pg.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

/// R-API: a web node serves `/metrics` on its health port only (the public port
/// answers 404), and a scrape counts nothing: with a sample interval of an hour, the one
/// sample the node took at start is all there is after thirty scrapes.
#[tokio::test]
async fn a_web_node_serves_metrics_on_its_health_port_only_and_scrapes_count_nothing() {
    let db = fresh_db().await;
    let (port, health) = (free_port(), free_port());
    let (port_s, health_s) = (port.to_string(), health.to_string());
    let _w = Hollo::serve(&[
        ("DATABASE_URL", db.url.as_str()),
        ("NODE_TYPE", "web"),
        ("PORT", &port_s),
        ("HEALTH_PORT", &health_s),
        ("METRICS_SAMPLE_SECONDS", "3600"),
    ]);
    eventually(Duration::from_secs(30), "web /readyz", || async {
        http_get(port, "/readyz", None).filter(|(s, _)| *s == 200)
    })
    .await;
    assert_eq!(http_get(health, "/readyz", None).map(|r| r.0), Some(200));
    assert_eq!(http_get(health, "/healthz", None).map(|r| r.0), Some(200));
    let (status, body) = http_get(port, "/metrics", None).expect("public /metrics");
    assert_eq!(status, 404, "{body}");
    let samples = |text: &str| {
        text.lines().find_map(|l| {
            l.strip_prefix("hollo_queue_depth_samples_total ")?
                .parse::<f64>()
                .ok()
        })
    };
    // The start-up sample lands in the background, without any scrape asking for it.
    let first = eventually(
        Duration::from_secs(30),
        "the first depth sample",
        || async {
            let (_, text) = http_get(health, "/metrics", None)?;
            (samples(&text)? >= 1.0).then_some(text)
        },
    )
    .await;
    assert!(
        first.contains("hollo_queue_depth{queue=\"activity\",state=\"queued\"} 0"),
        "{first}"
    );
    for _ in 0..30 {
        let (status, text) = http_get(health, "/metrics", None).expect("scrape");
        assert_eq!(status, 200);
        assert_eq!(samples(&text), Some(1.0), "a scrape sampled the queues");
    }
}
