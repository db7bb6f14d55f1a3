//! R-API (all but the streaming part), each attack tried first, over HTTP against
//! a real node and PostgreSQL: a read-only token starting a reply collection, an oversize
//! `Idempotency-Key`, a burst of statuses past the per-account write limit, and a status whose
//! mentions would make us fetch from many hosts it names, again and again.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test panics with its message

use crate::support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;
use support::api::{Client, assert_error, token_with_scopes, users};
use support::node::Instance;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn starting_a_reply_collection_needs_a_write_scope() {
    let inst = Instance::start("web", &[]).await;
    let (alice, _) = inst.account("alice").await;

    // A read-only token may read collections, not start one (which fetches and stores).
    let read_only = Client::new(
        &inst,
        Some(&token_with_scopes(&inst, alice.id, "read").await),
    );
    let a = read_only
        .call(
            reqwest::Method::POST,
            "/api/v1/reply-collections",
            &json!({"url": "https://r.example/notes/1"}),
        )
        .await;
    assert_error(&a, 403, "a read-only token");
    assert_eq!(
        inst.count("SELECT count(*) FROM reply_collection_jobs")
            .await,
        0
    );

    inst.shutdown().await;
}

/// An 8 KB `Idempotency-Key` answered 503 "database unavailable" (past what PostgreSQL can
/// index): now 422 before the database, nothing stored; 256 bytes still names its status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversize_idempotency_key_is_refused_422() {
    let inst = Instance::start("web", &[]).await;
    let (_, token) = inst.account("alice").await;
    let client = Client::new(&inst, Some(&token));
    // Random, so PostgreSQL cannot compress it below its index's row limit.
    let long: String = (0..256)
        .map(|_| uuid::Uuid::new_v4().simple().to_string())
        .collect();
    let a = client
        .send(
            client
                .http
                .post(format!("{}/api/v1/statuses", inst.base))
                .header("idempotency-key", &long)
                .json(&json!({"status": "hello"})),
        )
        .await;
    assert_error(&a, 422, "an 8 KB Idempotency-Key");
    assert!(
        a.body["error"]
            .as_str()
            .unwrap()
            .contains("Idempotency-Key"),
        "{}",
        a.body
    );
    assert_eq!(inst.count("SELECT count(*) FROM statuses").await, 0);
    // 256 bytes is fine, and names its status on a retry.
    let key = "k".repeat(256);
    let mut ids = Vec::new();
    for _ in 0..2 {
        let a = client
            .send(
                client
                    .http
                    .post(format!("{}/api/v1/statuses", inst.base))
                    .header("idempotency-key", &key)
                    .json(&json!({"status": "hello"})),
            )
            .await
            .assert_ok();
        ids.push(a.body["id"].clone());
    }
    assert_eq!(ids[0], ids[1]);
    inst.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statuses_past_the_write_limit_are_refused_429_with_retry_after() {
    let inst = Instance::start(
        "web",
        &[
            ("STATUS_RATE_LIMIT", "5"),
            ("STATUS_RATE_PERIOD_SECONDS", "3600"),
        ],
    )
    .await;
    let [(_, token, _), (_, bob_token, _)] = users(&inst, ["alice", "bob"]).await;
    let client = Arc::new(Client::new(&inst, Some(&token)));
    // Twenty at once: exactly five pass, however they race.
    let burst = (0..20).map(|i| {
        let client = client.clone();
        tokio::spawn(async move {
            let resp = client
                .http
                .post(format!("{}/api/v1/statuses", client.base))
                .bearer_auth(client.token.as_deref().unwrap())
                .json(&json!({"status": format!("post {i}")}))
                .send()
                .await
                .unwrap();
            let retry_after = resp
                .headers()
                .get("retry-after")
                .map(|v| v.to_str().unwrap().parse::<u64>().unwrap());
            (resp.status().as_u16(), retry_after)
        })
    });
    let mut ok = 0;
    for r in futures::future::join_all(burst).await {
        match r.unwrap() {
            (200, _) => ok += 1,
            (429, Some(wait)) => assert!((1..=720).contains(&wait), "Retry-After {wait}"),
            other => panic!("unexpected answer {other:?}"),
        }
    }
    assert_eq!(ok, 5, "the bucket's size");
    assert_eq!(inst.count("SELECT count(*) FROM statuses").await, 5);
    // Another account has a bucket of its own.
    let bob = Client::new(&inst, Some(&bob_token));
    bob.posted(&json!({"status": "mine"})).await;
    inst.shutdown().await;
}

/// A server that answers every request with `status` and counts the connections it gets.
async fn counting_server(status: &'static str) -> (String, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = conn.read(&mut buf).await;
                let answer =
                    format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
                let _ = conn.write_all(answer.as_bytes()).await;
            });
        }
    });
    (addr.to_string(), hits)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mentions_make_few_lookups_and_failures_are_remembered() {
    let inst = Instance::start("web", &[]).await;
    let (_, token) = inst.account("alice").await;
    let client = Client::new(&inst, Some(&token));
    let (host, hits) = counting_server("404 Not Found").await;

    // Ten handles the poster names on a server of their choosing: at most three lookups.
    let ten: Vec<String> = (0..10).map(|i| format!("@u{i}@{host}")).collect();
    client
        .posted(&json!({"status": format!("hi {}", ten.join(" "))}))
        .await;
    let first = hits.load(Ordering::SeqCst);
    assert!(
        (1..=3).contains(&first),
        "{first} lookups for ten unknown handles"
    );
    // A handle that failed is not asked again (which of the ten were asked depends on the
    // order their cache reads finished, so a fresh one).
    client
        .posted(&json!({"status": format!("one @solo@{host}")}))
        .await;
    let asked = hits.load(Ordering::SeqCst);
    assert_eq!(asked, first + 1, "one lookup for one unknown handle");
    client
        .posted(&json!({"status": format!("again @solo@{host}")}))
        .await;
    assert_eq!(
        hits.load(Ordering::SeqCst),
        asked,
        "failed lookups are remembered"
    );

    // A host that fails as a whole (here 503 to WebFinger): after one failure no other handle
    // on it is tried.
    let (down, down_hits) = counting_server("503 Service Unavailable").await;
    client
        .posted(&json!({"status": format!("hey @a@{down}")}))
        .await;
    let asked = down_hits.load(Ordering::SeqCst);
    assert!(asked >= 1, "the host was asked once");
    client
        .posted(&json!({"status": format!("hey @b@{down} @c@{down}")}))
        .await;
    assert_eq!(
        down_hits.load(Ordering::SeqCst),
        asked,
        "an unreachable host is remembered"
    );
    inst.shutdown().await;
}
