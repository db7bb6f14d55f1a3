//! The HTTP edge of a web node against hostile or broken clients (R-API): bodies are not read
//! before authentication and are bounded per route, stalled connections are closed, the
//! connection cap refuses cleanly, NUL characters never reach PostgreSQL, and every error is
//! `{"error": …}`. Raw sockets where the point is what the server does before the client has
//! finished sending.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test panics with its message

use crate::support;

use std::time::{Duration, Instant};

use hollo_runtime::config::HttpLimits;
use hollo_runtime::web;
use serde_json::{Value, json};
use sqlx::PgPool;
use support::node::Instance;
use support::{account_with_token, eventually};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Longest any single expectation here waits; the limits under test are 1–2 s.
const DEADLINE: Duration = Duration::from_secs(15);

/// A web node (tests/support/node.rs) with `http` as its `HTTP_*` settings.
async fn start(http: HttpLimits) -> Instance {
    let secs = |d: Duration| d.as_secs().to_string();
    let (header, idle, body, cap) = (
        secs(http.header_timeout),
        secs(http.idle_timeout),
        secs(http.body_timeout),
        http.max_connections.to_string(),
    );
    Instance::start(
        "web",
        &[
            ("ADMIN_TOKEN", "admin-secret"),
            ("HTTP_HEADER_TIMEOUT_SECONDS", header.as_str()),
            ("HTTP_IDLE_TIMEOUT_SECONDS", idle.as_str()),
            ("HTTP_BODY_TIMEOUT_SECONDS", body.as_str()),
            ("HTTP_MAX_CONNECTIONS", cap.as_str()),
        ],
    )
    .await
}

/// Sends `head` (and `body`) on a fresh connection, then reads until the server closes or a
/// full response with a body has arrived; fails after [`DEADLINE`]. Returns the status and the
/// body parsed as JSON.
async fn raw(srv: &Instance, head: &str, body: &[u8]) -> (u16, Value) {
    let mut s = TcpStream::connect(srv.addr()).await.expect("connect");
    s.write_all(head.as_bytes()).await.expect("head");
    // The server may answer and close before taking all of it: that is the point.
    let _ = s.write_all(body).await;
    let text = tokio::time::timeout(DEADLINE, read_response(&mut s))
        .await
        .unwrap_or_else(|_| panic!("no answer within {DEADLINE:?} to {head:?}"));
    parse_response(&text)
}

/// Reads one response: the head, then `content-length` bytes of body.
async fn read_response(s: &mut TcpStream) -> String {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        if let Some(end) = find(&buf, b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let len = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            if buf.len() >= end + 4 + len {
                return String::from_utf8_lossy(&buf[..end + 4 + len]).to_string();
            }
        }
        match s.read(&mut chunk).await {
            Ok(0) | Err(_) => return String::from_utf8_lossy(&buf).to_string(),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn parse_response(text: &str) -> (u16, Value) {
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP response: {text:?}"));
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

fn assert_error(status: u16, body: &Value, want: u16, what: &str) {
    assert_eq!(status, want, "{what}: {body}");
    assert!(
        body["error"].is_string(),
        "{what}: not a JSON error: {body}"
    );
}

/// Waits until the server closes `s`, failing after [`DEADLINE`]; returns how long it took.
async fn closed_within(s: &mut TcpStream) -> Duration {
    let start = Instant::now();
    let mut sink = [0u8; 1024];
    loop {
        match tokio::time::timeout(DEADLINE, s.read(&mut sink)).await {
            Err(_) => panic!("the connection stayed open for {DEADLINE:?}"),
            Ok(Ok(0)) | Ok(Err(_)) => return start.elapsed(),
            Ok(Ok(_)) => {}
        }
    }
}

async fn api(
    srv: &Instance,
    method: reqwest::Method,
    path: &str,
    auth: Option<&str>,
    body: Option<String>,
) -> (u16, Value) {
    let mut req = reqwest::Client::new().request(method, format!("{}{path}", srv.base));
    if let Some(a) = auth {
        req = req.header("authorization", a);
    }
    if let Some(b) = body {
        req = req.header("content-type", "application/json").body(b);
    }
    let resp = req.send().await.expect("request");
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

// ---------------------------------------------------------------------------------------------
// Item 4: authentication before bodies; a limit per route.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unauthenticated_posts_are_refused_before_their_body_is_read() {
    let srv = start(HttpLimits::default()).await;
    // Each request declares a body far above any limit and sends 1 KiB of it: the answer can
    // only come before the rest, which never comes.
    let declared = 512 * 1024 * 1024;
    for (path, want) in [
        ("/api/v1/statuses", 401),
        ("/api/v1/follows", 401),
        ("/api/v1/reply-collections", 401),
        (
            "/api/v1/polls/0190d0c4-8a4c-7000-8000-000000000000/votes",
            401,
        ),
        ("/api/v1/imports?type=blocks", 401),
        ("/api/v1/admin/cleanups", 401),
        ("/users/nobody/inbox", 404),
        ("/inbox", 401),
    ] {
        let head = format!(
            "POST {path} HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n\
             authorization: Bearer wrong\r\ncontent-length: {declared}\r\n\r\n"
        );
        let (status, body) = raw(&srv, &head, &[b'{'; 1024]).await;
        assert_error(status, &body, want, path);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_route_has_its_own_body_limit() {
    let srv = start(HttpLimits::default()).await;
    let (_, token) = account_with_token(&srv.pool, "lim").await;
    let auth = format!("Bearer {token}");
    let json_max = web::body::JSON_MAX_BYTES;

    // JSON APIs: 64 KiB. Over it by a byte is 413, as a declared length (refused unread) and
    // as a body without one.
    for path in [
        "/api/v1/statuses",
        "/api/v1/follows",
        "/api/v1/reply-collections",
    ] {
        let head = format!(
            "POST {path} HTTP/1.1\r\nhost: localhost\r\nauthorization: {auth}\r\n\
             content-length: {}\r\n\r\n",
            json_max + 1
        );
        let (status, body) = raw(&srv, &head, b"").await;
        assert_error(status, &body, 413, &format!("{path} declared"));
        let big = format!(r#"{{"status":"{}"}}"#, "x".repeat(json_max));
        let head = format!(
            "POST {path} HTTP/1.1\r\nhost: localhost\r\nauthorization: {auth}\r\n\
             transfer-encoding: chunked\r\n\r\n"
        );
        let chunked = format!("{:x}\r\n{big}\r\n0\r\n\r\n", big.len());
        let (status, body) = raw(&srv, &head, chunked.as_bytes()).await;
        assert_error(status, &body, 413, &format!("{path} chunked"));
    }
    assert_eq!(
        scalar(&srv.pool, "SELECT count(*) FROM statuses").await,
        0,
        "nothing stored"
    );

    // The inbox: 1 MiB. A request that passes the signature's header and date checks (done
    // before reading) is refused 413 over the limit; under it, the digest is checked (401).
    let inbox_max = web::activitypub::MAX_INBOX_BYTES;
    let date = httpdate::fmt_http_date(std::time::SystemTime::now());
    let signed_head = |len: usize| {
        format!(
            "POST /inbox HTTP/1.1\r\nhost: localhost\r\ndate: {date}\r\n\
             digest: SHA-256=AAAA\r\nsignature: keyId=\"http://127.0.0.1:9/key\",\
             algorithm=\"rsa-sha256\",headers=\"(request-target) host date digest\",\
             signature=\"AAAA\"\r\ncontent-length: {len}\r\n\r\n"
        )
    };
    let (status, body) = raw(&srv, &signed_head(inbox_max + 1), b"").await;
    assert_error(status, &body, 413, "inbox over 1 MiB");
    let (status, body) = raw(&srv, &signed_head(inbox_max), &vec![b' '; inbox_max]).await;
    assert_error(
        status,
        &body,
        401,
        "inbox at 1 MiB reaches the digest check",
    );

    // The import upload: IMPORT_MAX_MIB (10 MiB by default), declared larger → 413 unread.
    let head = format!(
        "POST /api/v1/imports?type=blocks HTTP/1.1\r\nhost: localhost\r\nauthorization: {auth}\r\n\
         content-length: {}\r\n\r\n",
        1024 * 1024 * 1024
    );
    let (status, body) = raw(&srv, &head, b"a@b.example\n").await;
    assert_error(status, &body, 413, "import over IMPORT_MAX_MIB");
    assert!(
        body["error"]
            .as_str()
            .unwrap_or_default()
            .contains("IMPORT_MAX_MIB"),
        "{body}"
    );
    // …and a bigger upload than 64 KiB is fine there.
    let csv: String = (0..5000).map(|i| format!("u{i}@b.example\n")).collect();
    assert!(csv.len() > json_max);
    let resp = reqwest::Client::new()
        .post(format!("{}/api/v1/imports?type=blocks", srv.base))
        .header("authorization", &auth)
        .body(csv)
        .send()
        .await
        .expect("import");
    assert_eq!(resp.status().as_u16(), 202);
}

async fn scalar(pool: &PgPool, sql: &'static str) -> i64 {
    sqlx::query_scalar(sql).fetch_one(pool).await.expect(sql)
}

// ---------------------------------------------------------------------------------------------
// Item 5: timeouts and the connection cap.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stalls_in_its_header_is_closed() {
    let srv = start(HttpLimits {
        header_timeout: Duration::from_secs(1),
        ..HttpLimits::default()
    })
    .await;
    let mut s = TcpStream::connect(srv.addr()).await.expect("connect");
    s.write_all(b"GET /healthz HTTP/1.1\r\nhost: loc")
        .await
        .expect("half a head");
    let took = closed_within(&mut s).await;
    assert!(took >= Duration::from_millis(900), "closed early: {took:?}");
    // An idle keep-alive connection is closed the same way.
    let mut s = TcpStream::connect(srv.addr()).await.expect("connect");
    s.write_all(b"GET /healthz HTTP/1.1\r\nhost: localhost\r\n\r\n")
        .await
        .expect("request");
    closed_within(&mut s).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_on_which_nothing_moves_is_closed_after_the_idle_timeout() {
    let srv = start(HttpLimits {
        header_timeout: Duration::from_secs(120),
        idle_timeout: Duration::from_secs(1),
        ..HttpLimits::default()
    })
    .await;
    let mut s = TcpStream::connect(srv.addr()).await.expect("connect");
    s.write_all(b"GET /healthz HTTP/1.1\r\n")
        .await
        .expect("half a head");
    let took = closed_within(&mut s).await;
    assert!(took < Duration::from_secs(60), "{took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_does_not_arrive_in_time_is_a_408() {
    let srv = start(HttpLimits {
        body_timeout: Duration::from_secs(1),
        ..HttpLimits::default()
    })
    .await;
    let (_, token) = account_with_token(&srv.pool, "slow").await;
    for path in ["/api/v1/statuses", "/api/v1/imports?type=blocks"] {
        let head = format!(
            "POST {path} HTTP/1.1\r\nhost: localhost\r\nauthorization: Bearer {token}\r\n\
             content-length: 100\r\n\r\n"
        );
        let (status, body) = raw(&srv, &head, br#"{"status":"#).await;
        assert_error(status, &body, 408, path);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_connection_cap_new_connections_get_503_and_healthz_answers_once_one_frees() {
    let cap = 4;
    let srv = start(HttpLimits {
        max_connections: cap,
        ..HttpLimits::default()
    })
    .await;
    // Fill the cap with connections that stall in their head (served: each holds a slot).
    let mut held = Vec::new();
    for _ in 0..cap {
        let mut s = TcpStream::connect(srv.addr()).await.expect("connect");
        s.write_all(b"GET /healthz HTTP/1.1\r\n")
            .await
            .expect("half");
        held.push(s);
    }
    let probe = "GET /healthz HTTP/1.1\r\nhost: localhost\r\n\r\n";
    let refused = eventually(DEADLINE, "a refusal at the cap", || async {
        let (status, body) = raw(&srv, probe, b"").await;
        (status == 503).then_some(body)
    })
    .await;
    assert!(refused["error"].is_string(), "{refused}");
    // Free one slot: /healthz answers again.
    drop(held.pop());
    let (status, body) = eventually(DEADLINE, "/healthz after a slot freed", || async {
        let (status, body) = raw(&srv, probe, b"").await;
        (status == 200).then_some((status, body))
    })
    .await;
    assert_eq!((status, body), (200, json!({"status": "ok"})));
}

// ---------------------------------------------------------------------------------------------
// Item 10: NUL characters.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nul_characters_are_refused_before_they_reach_postgresql() {
    let srv = start(HttpLimits::default()).await;
    let (_, token) = account_with_token(&srv.pool, "nul").await;
    let auth = format!("Bearer {token}");
    for path in [
        "/users/%00",
        "/users/%00/outbox",
        "/.well-known/webfinger?resource=acct:%00@localhost",
        "/api/v1/imports/%00",
        "/api/v1/notifications?max_id=%00",
    ] {
        let (status, body) = api(&srv, reqwest::Method::GET, path, Some(&auth), None).await;
        assert_error(status, &body, 400, path);
    }
    for (path, body) in [
        ("/api/v1/statuses", r#"{"status":"a\u0000b"}"#),
        (
            "/api/v1/statuses",
            r#"{"status":"x","poll":{"options":["a\u0000","b"],"expires_in":60}}"#,
        ),
        ("/api/v1/follows", r#"{"account":"a\u0000@b.example"}"#),
        (
            "/api/v1/reply-collections",
            r#"{"url":"https://b.example/\u0000"}"#,
        ),
    ] {
        let (status, err) = api(
            &srv,
            reqwest::Method::POST,
            path,
            Some(&auth),
            Some(body.into()),
        )
        .await;
        assert_error(status, &err, 400, body);
    }
    let resp = reqwest::Client::new()
        .post(format!("{}/api/v1/imports?type=blocks", srv.base))
        .header("authorization", &auth)
        .body(b"a@b.example\n\x00c@d.example\n".to_vec())
        .send()
        .await
        .expect("import");
    let status = resp.status().as_u16();
    let body: Value = resp.json().await.unwrap_or(Value::Null);
    assert_error(status, &body, 422, "import with NUL");
    assert_eq!(scalar(&srv.pool, "SELECT count(*) FROM statuses").await, 0);
    assert_eq!(
        scalar(&srv.pool, "SELECT count(*) FROM import_jobs").await,
        0
    );
}

// ---------------------------------------------------------------------------------------------
// Item 11: error shapes, echoes, limits, the bearer scheme, ids.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_error_is_json_whatever_refused_it() {
    let srv = start(HttpLimits::default()).await;
    let (_, token) = account_with_token(&srv.pool, "shape").await;
    let auth = format!("Bearer {token}");
    let (status, body) = api(
        &srv,
        reqwest::Method::POST,
        "/api/v1/follows",
        Some(&auth),
        Some(r#"{"account":"a@b.example","account":"c@d.example"}"#.into()),
    )
    .await;
    assert_error(status, &body, 400, "duplicate field");
    assert!(
        body["error"]
            .as_str()
            .unwrap_or_default()
            .contains("duplicate"),
        "{body}"
    );
    let (status, body) = api(
        &srv,
        reqwest::Method::POST,
        "/api/v1/statuses",
        Some(&auth),
        Some("{\"status\":".into()),
    )
    .await;
    assert_error(status, &body, 400, "JSON syntax");
    let (status, body) = api(&srv, reqwest::Method::DELETE, "/healthz", None, None).await;
    assert_error(status, &body, 405, "method not allowed");
    let long = format!("/healthz?{}", "a".repeat(web::edge::MAX_URI_BYTES));
    let (status, body) = api(&srv, reqwest::Method::GET, &long, None, None).await;
    assert_error(status, &body, 414, "long URI");
    let (status, body) = raw(
        &srv,
        &format!(
            "GET /healthz HTTP/1.1\r\nhost: localhost\r\nx-big: {}\r\n\r\n",
            "b".repeat(web::edge::MAX_HEADER_BYTES)
        ),
        b"",
    )
    .await;
    assert_error(status, &body, 431, "big headers");
    let (status, body) = api(
        &srv,
        reqwest::Method::GET,
        "/api/v1/notifications?limit=abc&limit=",
        Some(&auth),
        None,
    )
    .await;
    assert!((400..500).contains(&status), "{status} {body}");
    assert!(body["error"].is_string(), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn imports_quote_bad_cells_briefly_and_bookmark_urls_are_bounded() {
    let srv = start(HttpLimits::default()).await;
    let (_, token) = account_with_token(&srv.pool, "quote").await;
    let import = |ty: &'static str, body: Vec<u8>| {
        let (base, token) = (srv.base.clone(), token.clone());
        async move {
            let resp = reqwest::Client::new()
                .post(format!("{base}/api/v1/imports?type={ty}"))
                .bearer_auth(token)
                .body(body)
                .send()
                .await
                .expect("import");
            let status = resp.status().as_u16();
            (status, resp.json::<Value>().await.unwrap_or(Value::Null))
        }
    };
    let huge = format!("{}\n", "x".repeat(5 * 1024 * 1024)).into_bytes();
    let (status, body) = import("blocks", huge).await;
    assert_error(status, &body, 422, "a 5 MB bad cell");
    let msg = body["error"].as_str().unwrap_or_default();
    assert!(msg.len() < 300, "the cell is echoed: {} bytes", msg.len());
    let long_url = format!("https://a.example/{}\n", "p".repeat(3000)).into_bytes();
    let (status, body) = import("bookmarks", long_url).await;
    assert_error(status, &body, 422, "a 3000-byte bookmark URL");
    assert!(
        body["error"]
            .as_str()
            .unwrap_or_default()
            .contains("longer than"),
        "{body}"
    );
    assert_eq!(
        scalar(&srv.pool, "SELECT count(*) FROM import_jobs").await,
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bearer_scheme_is_case_insensitive_for_accounts_and_the_admin() {
    let srv = start(HttpLimits::default()).await;
    let (_, token) = account_with_token(&srv.pool, "casey").await;
    for scheme in ["Bearer", "bearer", "BEARER"] {
        let (status, body) = api(
            &srv,
            reqwest::Method::GET,
            "/api/v1/accounts/verify_credentials",
            Some(&format!("{scheme} {token}")),
            None,
        )
        .await;
        assert_eq!(
            (status, &body["username"]),
            (200, &json!("casey")),
            "{scheme}"
        );
        let (status, body) = api(
            &srv,
            reqwest::Method::GET,
            "/api/admin/status",
            Some(&format!("{scheme} admin-secret")),
            None,
        )
        .await;
        assert_eq!(status, 200, "{scheme}: {body}");
    }
    let (status, body) = api(
        &srv,
        reqwest::Method::GET,
        "/api/v1/accounts/verify_credentials",
        Some(&format!("Basic {token}")),
        None,
    )
    .await;
    assert_error(status, &body, 401, "another scheme");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_id_is_a_404_on_every_route() {
    let srv = start(HttpLimits::default()).await;
    let (_, token) = account_with_token(&srv.pool, "ids").await;
    let user = format!("Bearer {token}");
    for (path, auth) in [
        ("/api/v1/statuses/nope", user.as_str()),
        ("/api/v1/statuses/nope/context", &user),
        ("/api/v1/polls/nope", &user),
        ("/api/v1/imports/nope", &user),
        ("/api/v1/reply-collections/nope", &user),
        ("/api/v1/admin/cleanups/nope", "Bearer admin-secret"),
        ("/users/ids/statuses/nope", &user),
    ] {
        let (status, body) = api(&srv, reqwest::Method::GET, path, Some(auth), None).await;
        assert_error(status, &body, 404, path);
    }
}
