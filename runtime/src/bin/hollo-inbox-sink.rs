//! `hollo-inbox-sink`: the remote side of `bench/fanout` (R-AP-2). It plays `--hosts` remote
//! servers, each on its own loopback address (`127.1.x.y`, one port for all), and answers every
//! `POST` to an inbox with 202 after `--latency-ms`, as a busy remote server would. Loopback
//! only: nothing listens on another interface.
//!
//! Every `--sample`th request has its HTTP signature checked for real (draft-cavage, the key
//! fetched from the signer's `keyId` once and cached, digest and date checked as our inbox
//! does); a signature that does not verify fails the run, so a bench cannot get fast by
//! sending garbage. Deliveries are counted per (inbox, activity id): when `--expect` distinct
//! ones have arrived it prints one JSON line with the first and last arrival times (unix µs),
//! and keeps counting duplicates until stdin closes, then prints the final tally.
//!
//! Protocol on stdout: `ready` once every address is bound, then `{"event":"done",…}`, then on
//! EOF of stdin `{"event":"final",…}`.

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::routing::post;
use clap::Parser;
use hollo_runtime::federation::transport::signature;
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;
use tokio::sync::OnceCell;

#[derive(Parser)]
#[command(
    name = "hollo-inbox-sink",
    about = "Remote inboxes for the fan-out benchmark"
)]
struct Args {
    /// Remote hosts, one loopback address each (host i is `host_ip(i)`).
    #[arg(long, default_value_t = 1000)]
    hosts: u32,
    /// The port every host listens on.
    #[arg(long, default_value_t = 18080)]
    port: u16,
    /// Time each inbox takes before answering 202.
    #[arg(long, default_value_t = 20)]
    latency_ms: u64,
    /// Distinct deliveries (inbox, activity) that complete the run.
    #[arg(long)]
    expect: u64,
    /// Verify the signature of one request in this many (1: all).
    #[arg(long, default_value_t = 50)]
    sample: u64,
}

/// Host `i`'s address: `127.1.0.1`, `127.1.0.2`, … (250 per third octet, never .0 or .255).
pub fn host_ip(i: u32) -> Ipv4Addr {
    let third = 1 + i / 250 / 250;
    Ipv4Addr::new(
        127,
        third as u8,
        ((i / 250) % 250) as u8,
        (i % 250 + 1) as u8,
    )
}

struct Sink {
    latency: Duration,
    expect: u64,
    sample: u64,
    requests: AtomicU64,
    verified: AtomicU64,
    seen: Mutex<Seen>,
    keys: Mutex<HashMap<String, Arc<OnceCell<String>>>>,
    http: reqwest::Client,
}

#[derive(Default)]
struct Seen {
    deliveries: HashSet<(String, String)>,
    duplicates: u64,
    bad: Vec<String>,
    bad_total: u64,
    first_us: Option<u128>,
    last_us: u128,
    done: bool,
}

fn now_us() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros())
        .unwrap_or(0)
}

impl Sink {
    /// The signer's PEM, fetched once per key id (concurrent first requests wait for one fetch).
    async fn key(&self, key_id: &str) -> Result<String> {
        let cell = {
            let mut keys = self.keys.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
            keys.entry(key_id.to_string()).or_default().clone()
        };
        let pem = cell
            .get_or_try_init(|| async {
                let doc: Value = self
                    .http
                    .get(key_id)
                    .header("accept", "application/activity+json")
                    .send()
                    .await?
                    .error_for_status()?
                    .json()
                    .await?;
                find_pem(&doc, key_id).context("no publicKeyPem for the key id in the document")
            })
            .await?;
        Ok(pem.clone())
    }

    async fn check(&self, uri: &Uri, headers: &HeaderMap, body: &[u8]) -> Result<()> {
        let path = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
        let pending =
            signature::prepare_verification("post", path, headers, Some(body), SystemTime::now())
                .map_err(|e| anyhow::anyhow!("signature: {e}"))?;
        let pem = self.key(&pending.key_id).await?;
        pending
            .verify_pem(&pem)
            .map_err(|e| anyhow::anyhow!("signature by {}: {e}", pending.key_id))
    }
}

/// The PEM of `key_id` in an actor (or key) document: `publicKey` as object or array.
fn find_pem(doc: &Value, key_id: &str) -> Option<String> {
    let keys = match doc.get("publicKey") {
        Some(Value::Array(a)) => a.clone(),
        Some(k) => vec![k.clone()],
        None => vec![doc.clone()],
    };
    keys.iter()
        .find(|k| k.get("id").and_then(Value::as_str) == Some(key_id))
        .and_then(|k| k.get("publicKeyPem").and_then(Value::as_str))
        .map(str::to_string)
}

async fn inbox(
    State(sink): State<Arc<Sink>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    let n = sink.requests.fetch_add(1, Ordering::Relaxed);
    let host = headers
        .get("host")
        .and_then(|h| h.to_str().ok())
        .unwrap_or("?")
        .to_string();
    let verdict = match serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|v| v.get("id").and_then(Value::as_str).map(str::to_string))
    {
        None => Err(anyhow::anyhow!("body is not an activity with an id")),
        Some(id) if n % sink.sample == 0 => sink.check(&uri, &headers, &body).await.map(|()| {
            sink.verified.fetch_add(1, Ordering::Relaxed);
            id
        }),
        Some(id) => Ok(id),
    };
    tokio::time::sleep(sink.latency).await;
    let at = now_us();
    let Ok(mut seen) = sink.seen.lock() else {
        return StatusCode::INTERNAL_SERVER_ERROR;
    };
    match verdict {
        Err(e) => {
            seen.bad_total += 1;
            if seen.bad.len() < 20 {
                seen.bad.push(format!("{host}{}: {e:#}", uri.path()));
            }
            return StatusCode::UNAUTHORIZED;
        }
        Ok(id) => {
            if !seen
                .deliveries
                .insert((format!("{host}{}", uri.path()), id))
            {
                seen.duplicates += 1;
            }
        }
    }
    seen.first_us.get_or_insert(at);
    seen.last_us = at;
    if !seen.done && seen.deliveries.len() as u64 >= sink.expect {
        seen.done = true;
        println!(
            "{}",
            json!({"event": "done", "first_us": seen.first_us, "last_us": seen.last_us,
                   "deliveries": seen.deliveries.len(),
                   "requests": sink.requests.load(Ordering::Relaxed),
                   "verified": sink.verified.load(Ordering::Relaxed), "bad": seen.bad_total})
        );
    }
    StatusCode::ACCEPTED
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    if args.hosts == 0 || args.hosts > 250 * 250 * 10 || args.sample == 0 || args.expect == 0 {
        bail!("--hosts must be 1..=625000, --sample and --expect at least 1");
    }
    let sink = Arc::new(Sink {
        latency: Duration::from_millis(args.latency_ms),
        expect: args.expect,
        sample: args.sample,
        requests: AtomicU64::new(0),
        verified: AtomicU64::new(0),
        seen: Mutex::new(Seen::default()),
        keys: Mutex::new(HashMap::new()),
        http: reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()?,
    });
    let app = Router::new()
        .route("/inbox", post(inbox))
        .route("/users/{name}/inbox", post(inbox))
        .with_state(sink.clone());
    for i in 0..args.hosts {
        let addr = SocketAddr::new(IpAddr::V4(host_ip(i)), args.port);
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("binding {addr} (raise `ulimit -n` for many hosts)"))?;
        let app = app.clone();
        tokio::spawn(async move {
            let _ = axum::serve(
                listener,
                app.into_make_service_with_connect_info::<SocketAddr>(),
            )
            .await;
        });
    }
    println!("ready");
    // Runs until the driver closes stdin, then reports duplicates and bad requests seen since.
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    while lines.next_line().await?.is_some() {}
    let seen = sink.seen.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
    println!(
        "{}",
        json!({"event": "final", "deliveries": seen.deliveries.len(), "duplicates": seen.duplicates,
               "requests": sink.requests.load(Ordering::Relaxed),
               "verified": sink.verified.load(Ordering::Relaxed),
               "bad": seen.bad_total, "bad_examples": seen.bad})
    );
    Ok(())
}
