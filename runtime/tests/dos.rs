//! Denial of service against a real `hollo` process (issue 28 item 3): one request must not
//! abort the node. Process-level on purpose: a stack overflow aborts the whole process, so
//! only a separate process shows it.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test panics with its message

mod support;

use std::time::Duration;

use reqwest::StatusCode;
use support::process::Hollo;
use support::{account_with_token, eventually, fresh_db};

const SECRET: &str = "dos-test-secret-0123456789abcdef0123";

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// A web node on a fresh database, serving once `/readyz` answers.
async fn web_node(extra: &[(&str, &str)]) -> (Hollo, sqlx::PgPool, String) {
    let db = fresh_db().await;
    let port = free_port().to_string();
    let base = format!("http://127.0.0.1:{port}");
    let mut env = vec![
        ("DATABASE_URL", db.url.as_str()),
        ("NODE_TYPE", "web"),
        ("PORT", port.as_str()),
        ("HEALTH_PORT", "0"),
        ("PUBLIC_URL", base.as_str()),
        ("SECRET_KEY", SECRET),
        ("RUST_LOG", "warn"),
    ];
    env.extend_from_slice(extra);
    let node = Hollo::serve(&env);
    let http = reqwest::Client::new();
    eventually(Duration::from_secs(60), "web /readyz", || async {
        let r = http.get(format!("{base}/readyz")).send().await.ok()?;
        (r.status() == StatusCode::OK).then_some(())
    })
    .await;
    (node, db.pool, base)
}

/// Issue 28 item 3: a 45 KB urlencoded body with a key nested 15 000 deep overflowed a worker's
/// stack and aborted the process. Both routes that read bracket keys refuse it (4xx, JSON
/// error), as is a JSON body nested 60 000 deep, and the same node then still serves: its
/// health check and an authenticated API call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deeply_nested_bodies_are_refused_and_the_node_keeps_serving() {
    let (mut node, pool, base) = web_node(&[]).await;
    let (_, token) = account_with_token(&pool, "alice").await;
    let http = reqwest::Client::new();
    let form = format!("status=hi&poll{}=1", "[a]".repeat(15_000));
    assert!(form.len() > 45_000 && form.len() < 64 * 1024);
    let json = format!("{}{}", "[".repeat(30_000), "]".repeat(30_000));
    for (path, content_type, body) in [
        (
            "/api/v1/statuses",
            "application/x-www-form-urlencoded",
            &form,
        ),
        (
            "/api/v1/markers",
            "application/x-www-form-urlencoded",
            &form,
        ),
        ("/api/v1/statuses", "application/json", &json),
        ("/api/v1/markers", "application/json", &json),
    ] {
        let resp = http
            .post(format!("{base}{path}"))
            .bearer_auth(&token)
            .header("content-type", content_type)
            .body(body.clone())
            .send()
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "{path} ({content_type}): no answer ({e}); logs:\n{}",
                    node.logs()
                )
            });
        let status = resp.status();
        let error: serde_json::Value = resp.json().await.expect("a JSON error");
        assert!(
            status.is_client_error(),
            "{path} ({content_type}): {status} {error}"
        );
        assert!(error["error"].is_string(), "{error}");
    }
    assert!(
        node.child.try_wait().expect("try_wait").is_none(),
        "the node is still running; logs:\n{}",
        node.logs()
    );
    let health = http.get(format!("{base}/healthz")).send().await.unwrap();
    assert_eq!(health.status(), StatusCode::OK);
    let me = http
        .get(format!("{base}/api/v1/accounts/verify_credentials"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(me.status(), StatusCode::OK);
    let me: serde_json::Value = me.json().await.unwrap();
    assert_eq!(me["username"], "alice");
}
