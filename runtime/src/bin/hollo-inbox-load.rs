//! `hollo-inbox-load`: the sending side of `bench/inbox` (R-AP-2). It is one remote actor,
//! `sender`, on a loopback address: it serves its actor document (with its public key) so the
//! server under test can verify signatures, pre-signs `--count` distinct `Create(Note)`
//! activities to `--target` (draft-cavage, body digest, as Mastodon signs), then — on `go` from
//! stdin — POSTs them with `--concurrency` connections as fast as the server accepts them.
//!
//! Signing happens before the clock starts: the bench measures the receiver, not us. One
//! warm-up activity is sent first (also before the clock), so the receiver's key fetch is not
//! in the figures either; both implementations cache the key after it.
//!
//! Protocol on stdout: `ready` once the activities are signed and the actor is served; after
//! `go`, one JSON line: accepted, refused (non-2xx, with the first few statuses), elapsed
//! seconds from the first request to the last response, response time p50 / p99 / max in ms.
//! The actor stays served until stdin closes.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result, bail};
use axum::Router;
use axum::http::header;
use axum::routing::get;
use clap::Parser;
use futures::StreamExt;
use hollo_runtime::federation::{crypto::keys, transport::signature};
use reqwest::header::{HeaderMap, HeaderValue};
use reqwest::{Method, Url};
use serde_json::json;
use tokio::io::AsyncBufReadExt;

#[derive(Parser)]
#[command(
    name = "hollo-inbox-load",
    about = "Signed inbox load for the inbox benchmark"
)]
struct Args {
    /// The inbox to POST to, e.g. http://127.0.0.1:3000/users/bench/inbox.
    #[arg(long)]
    target: Url,
    /// Distinct activities to send.
    #[arg(long, default_value_t = 10_000)]
    count: usize,
    /// Requests in flight at once (one keep-alive connection each).
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// The sender's loopback address and port.
    #[arg(long, default_value = "127.0.0.9")]
    sender_ip: IpAddr,
    #[arg(long, default_value_t = 18090)]
    sender_port: u16,
    /// Instead of sending: time this many request signatures (as a delivery signs one) on one
    /// core, print `sign_us <microseconds per signature>` and exit (bench/fanout's bound).
    #[arg(long)]
    sign_cost: Option<usize>,
}

struct Signed {
    body: Vec<u8>,
    headers: HeaderMap,
}

fn activity(origin: &str, actor: &str, i: usize) -> serde_json::Value {
    let note = format!("{origin}/users/sender/notes/{i}");
    json!({
        "@context": "https://www.w3.org/ns/activitystreams",
        "id": format!("{note}/activity"), "type": "Create", "actor": actor,
        "to": ["https://www.w3.org/ns/activitystreams#Public"],
        "object": {
            "id": note, "type": "Note", "attributedTo": actor,
            "to": ["https://www.w3.org/ns/activitystreams#Public"],
            "content": format!("<p>inbox bench {i}</p>"),
            "published": "2026-12-01T00:00:00Z",
        },
    })
}

fn sign(key: &signature::SigningKey, target: &Url, body: Vec<u8>) -> Result<Signed> {
    let mut headers = HeaderMap::new();
    signature::sign_request_at(
        key,
        &Method::POST,
        target,
        Some(&body),
        &mut headers,
        SystemTime::now(),
    )
    .map_err(|e| anyhow::anyhow!("signing: {e}"))?;
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/activity+json"),
    );
    Ok(Signed { body, headers })
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    if args.count == 0 || args.concurrency == 0 {
        bail!("--count and --concurrency must be at least 1");
    }
    if !args.sender_ip.is_loopback() {
        bail!("--sender-ip must be a loopback address");
    }
    let origin = format!("http://{}:{}", args.sender_ip, args.sender_port);
    let actor = format!("{origin}/users/sender");
    let private = keys::generate().context("generating the sender's key")?;
    let pem = keys::public_key_pem(&private).context("encoding the sender's key")?;
    let key = signature::SigningKey::new(format!("{actor}#main-key"), &private)
        .map_err(|e| anyhow::anyhow!(e))?;
    if let Some(n) = args.sign_cost {
        let body = serde_json::to_vec(&activity(&origin, &actor, 0))?;
        let started = Instant::now();
        for _ in 0..n.max(1) {
            sign(&key, &args.target, body.clone())?;
        }
        println!(
            "sign_us {:.1}",
            started.elapsed().as_secs_f64() * 1e6 / n.max(1) as f64
        );
        return Ok(());
    }

    let doc = json!({
        "@context": ["https://www.w3.org/ns/activitystreams", "https://w3id.org/security/v1"],
        "id": actor, "type": "Person", "preferredUsername": "sender",
        "inbox": format!("{actor}/inbox"),
        "publicKey": {"id": key.key_id, "owner": actor, "publicKeyPem": pem},
    });
    let body = Arc::new(serde_json::to_vec(&doc)?);
    let app = Router::new().route(
        "/users/sender",
        get(move || {
            let body = body.clone();
            async move {
                (
                    [(header::CONTENT_TYPE, "application/activity+json")],
                    (*body).clone(),
                )
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind(SocketAddr::new(args.sender_ip, args.sender_port))
        .await
        .context("binding the sender's address")?;
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });

    let warmup = sign(
        &key,
        &args.target,
        serde_json::to_vec(&activity(&origin, &actor, usize::MAX))?,
    )?;
    let signed: Vec<Signed> = (0..args.count)
        .map(|i| {
            sign(
                &key,
                &args.target,
                serde_json::to_vec(&activity(&origin, &actor, i))?,
            )
        })
        .collect::<Result<_>>()?;
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(args.concurrency)
        .timeout(Duration::from_secs(60))
        .build()?;
    let send = |s: &Signed| {
        client
            .post(args.target.clone())
            .headers(s.headers.clone())
            .body(s.body.clone())
            .send()
    };
    let warm = send(&warmup).await.context("the warm-up request")?;
    if !warm.status().is_success() {
        bail!("the warm-up activity was refused: {}", warm.status());
    }
    println!("ready");

    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    match lines.next_line().await? {
        Some(l) if l.trim() == "go" => {}
        other => bail!("expected `go` on stdin, got {other:?}"),
    }
    let start = Instant::now();
    let results: Vec<(u16, f64)> = futures::stream::iter(signed.iter())
        .map(|s| async {
            let t = Instant::now();
            let status = match send(s).await {
                Ok(r) => r.status().as_u16(),
                Err(_) => 0,
            };
            (status, t.elapsed().as_secs_f64() * 1000.0)
        })
        .buffer_unordered(args.concurrency)
        .collect()
        .await;
    let elapsed = start.elapsed().as_secs_f64();
    let mut times: Vec<f64> = results.iter().map(|(_, ms)| *ms).collect();
    times.sort_by(f64::total_cmp);
    let accepted = results
        .iter()
        .filter(|(s, _)| (200..300).contains(s))
        .count();
    let refused: Vec<u16> = results
        .iter()
        .filter(|(s, _)| !(200..300).contains(s))
        .map(|(s, _)| *s)
        .take(10)
        .collect();
    println!(
        "{}",
        json!({"accepted": accepted, "refused": results.len() - accepted,
               "refused_statuses": refused, "elapsed_s": elapsed,
               "p50_ms": percentile(&times, 0.5), "p99_ms": percentile(&times, 0.99),
               "max_ms": times.last().copied().unwrap_or(0.0)})
    );
    while lines.next_line().await?.is_some() {}
    Ok(())
}
