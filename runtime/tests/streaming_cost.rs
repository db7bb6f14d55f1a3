//! What a public post costs the database per open stream (R-API: 300 streams used to
//! cost 2 733 statements for one post, ~9 per stream, each stream rendering the status for
//! itself). The public streams' payload is now rendered once per node and event, so a stream
//! more costs no statement.
//!
//! Statements are counted as sqlx reports them: it logs every statement it sends at TRACE
//! under the target `sqlx::query` (the node's pools log at TRACE), and this binary installs a
//! subscriber that counts those events. The count covers the whole process, so this binary
//! holds this one test and its node is a web node (no queue consumers polling beside it).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test panics with its message

#[path = "it/support/mod.rs"]
mod support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{Value, json};
use support::api::users;
use support::node::Instance;
use support::stream::{Socket, connect};
use tokio_tungstenite::tungstenite::Message;
use tracing_subscriber::Layer;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

const WAIT: Duration = Duration::from_secs(30);
/// Streams open for the second measurement.
const STREAMS: usize = 20;

static STATEMENTS: AtomicU64 = AtomicU64::new(0);

struct CountStatements;

impl<S: tracing::Subscriber> Layer<S> for CountStatements {
    fn on_event(&self, _: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        STATEMENTS.fetch_add(1, Ordering::Relaxed);
    }
}

/// Reads `ws` until the `update` of `id` arrives.
async fn until_update(ws: &mut Socket, id: &str) -> Value {
    let start = Instant::now();
    loop {
        let left = WAIT
            .checked_sub(start.elapsed())
            .expect("the update in time");
        let m = tokio::time::timeout(left, ws.next())
            .await
            .expect("the update in time")
            .expect("stream open")
            .expect("message");
        let Message::Text(t) = m else { continue };
        let v: Value = serde_json::from_str(t.as_str()).expect("JSON");
        if v["event"] == "update" {
            let p: Value = serde_json::from_str(v["payload"].as_str().expect("payload")).unwrap();
            if p["id"] == json!(id) {
                return p;
            }
        }
    }
}

/// Statements the process sent from posting a public status until every stream had it.
async fn cost_of_a_post(base: &str, token: &str, streams: &mut [Socket]) -> u64 {
    let before = STATEMENTS.load(Ordering::SeqCst);
    let posted: Value = reqwest::Client::new()
        .post(format!("{base}/api/v1/statuses"))
        .bearer_auth(token)
        .json(&json!({"status": "hello #streams", "visibility": "public"}))
        .send()
        .await
        .expect("post")
        .json()
        .await
        .expect("status");
    let id = posted["id"].as_str().expect("id").to_string();
    for ws in streams.iter_mut() {
        let p = until_update(ws, &id).await;
        assert_eq!(
            p["content"], posted["content"],
            "the same status for everyone"
        );
    }
    STATEMENTS.load(Ordering::SeqCst) - before
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_public_post_costs_no_statement_per_stream() {
    tracing_subscriber::registry()
        .with(
            CountStatements.with_filter(
                tracing_subscriber::filter::Targets::new()
                    .with_target("sqlx::query", tracing::Level::TRACE),
            ),
        )
        .try_init()
        .expect("the only subscriber of this binary");
    let inst = Instance::start(
        "web",
        &[
            ("STREAMS_PER_TOKEN", "64"),
            ("METRICS_SAMPLE_SECONDS", "3600"),
        ],
    )
    .await;
    let [(_, alice, _), (_, carol, _)] = users(&inst, ["alice", "carol"]).await;
    let base = inst.base.clone();

    let mut streams = vec![connect(&base, "stream=public", &carol).await];
    // Warm-up (connections, prepared statements), then the cheaper of two posts: a heartbeat
    // may fall into one window.
    cost_of_a_post(&base, &alice, &mut streams).await;
    let one = cost_of_a_post(&base, &alice, &mut streams)
        .await
        .min(cost_of_a_post(&base, &alice, &mut streams).await);
    assert!(one > 0, "statements are counted");

    for _ in 1..STREAMS {
        streams.push(connect(&base, "stream=public", &carol).await);
    }
    cost_of_a_post(&base, &alice, &mut streams).await;
    let many = cost_of_a_post(&base, &alice, &mut streams)
        .await
        .min(cost_of_a_post(&base, &alice, &mut streams).await);
    let per_stream = (many as f64 - one as f64) / (STREAMS - 1) as f64;
    eprintln!(
        "statements for one public post: {one} with 1 stream, {many} with {STREAMS} streams \
         ({per_stream:.2} per additional stream)"
    );
    assert!(
        per_stream < 0.5,
        "{per_stream:.2} statements per stream ({one} with 1 stream, {many} with {STREAMS})"
    );
    inst.shutdown().await;
}
