//! `hollo-bench`: throughput and enqueue-to-start latency of the queue engine on a real
//! PostgreSQL, with durable settings (`synchronous_commit=on`, the server's default).
//!
//! Modes: `drain` pre-inserts `--jobs` no-op messages and times how fast `--workers` consumers
//! (each with `--concurrency` slots, as separate worker processes would be) empty the queue;
//! `steady` enqueues at `--rate` per second for `--seconds` while they work, which is where
//! enqueue-to-start latency means something. The last line is machine-readable.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::{Parser, ValueEnum};
use hollo_runtime::db;
use hollo_runtime::metrics::Metrics;
use hollo_runtime::queue::consumer::{Consumer, InFlight};
use hollo_runtime::queue::stats::queue_stats;
use hollo_runtime::queue::{
    JobContext, KindSpec, NewMessage, QueueName, Registry, TaskError, enqueue_many, listener,
};
use sqlx::postgres::PgPoolOptions;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

#[derive(Clone, Copy, ValueEnum)]
enum Mode {
    Drain,
    Steady,
}

#[derive(Parser)]
#[command(
    name = "hollo-bench",
    about = "Queue engine benchmark on a real PostgreSQL"
)]
struct Args {
    #[arg(long, value_enum, default_value = "drain")]
    mode: Mode,
    /// Messages to pre-insert (drain mode).
    #[arg(long, default_value_t = 20_000)]
    jobs: u64,
    /// Consumers, each with its own node id and pool, as separate worker processes would be.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Slots per consumer.
    #[arg(long, default_value_t = 10)]
    concurrency: usize,
    /// Messages per second to enqueue (steady mode).
    #[arg(long, default_value_t = 1000)]
    rate: u64,
    /// Duration of the steady run.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Database to use; default: a throwaway database on the local PostgreSQL under target/.
    #[arg(long, env = "BENCH_DATABASE_URL")]
    database_url: Option<String>,
}

const KIND: &str = "hollo.bench.v1";

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    if args.workers == 0 || args.concurrency == 0 {
        bail!("--workers and --concurrency must be at least 1");
    }
    let admin = match &args.database_url {
        Some(u) => u.clone(),
        None => {
            let dir = std::env::current_dir()?.join("target/bench-pg");
            tokio::task::spawn_blocking(move || {
                db::local::LocalPostgres::new(dir)?.ensure_started()
            })
            .await??
        }
    };
    let name = format!("bench_{}", uuid::Uuid::new_v4().simple());
    db::create_database_if_missing(&admin, &name).await?;
    let url = with_database(&admin, &name);
    let setup = PgPoolOptions::new()
        .max_connections(4)
        .connect(&url)
        .await
        .context("connecting")?;
    db::migrate(&setup).await?;

    let latencies: Arc<Mutex<Vec<f64>>> =
        Arc::new(Mutex::new(Vec::with_capacity(args.jobs as usize)));
    let mut registry = Registry::new();
    {
        let lat = latencies.clone();
        registry.register(
            KindSpec::new(KIND, QueueName::Activity),
            move |ctx: JobContext, _p: serde_json::Value| {
                let lat = lat.clone();
                async move {
                    let waited = (chrono::Utc::now() - ctx.msg.ready_at)
                        .num_microseconds()
                        .unwrap_or(0) as f64
                        / 1000.0;
                    if let Ok(mut l) = lat.lock() {
                        l.push(waited.max(0.0));
                    }
                    Ok::<(), TaskError>(())
                }
            },
        );
    }

    let body = serde_json::json!({});
    if let Mode::Drain = args.mode {
        let t = Instant::now();
        let mut n = 0;
        while n < args.jobs {
            let batch: Vec<NewMessage> = (n..(n + 5000).min(args.jobs))
                .map(|_| NewMessage::new(KIND, body.clone()))
                .collect();
            n += batch.len() as u64;
            enqueue_many(&setup, QueueName::Activity, &batch).await?;
        }
        eprintln!(
            "enqueued {} in {:.2} s ({:.0}/s, bulk)",
            args.jobs,
            t.elapsed().as_secs_f64(),
            args.jobs as f64 / t.elapsed().as_secs_f64()
        );
        // Latency in drain mode counts from when the consumers start, not from insertion.
        sqlx::query("UPDATE hollo_activity_message_v1 SET ready_at = now() + interval '1 second'")
            .execute(&setup)
            .await?;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }

    let stop = CancellationToken::new();
    let abort = CancellationToken::new();
    let mut handles = Vec::new();
    for _ in 0..args.workers {
        let pool = PgPoolOptions::new()
            .max_connections((args.concurrency as u32 + 4).min(30))
            .connect(&url)
            .await?;
        let c = Consumer {
            queue: QueueName::Activity,
            limit: args.concurrency,
            registry: registry.clone(),
            pool,
            item_locks: None,
            node: uuid::Uuid::new_v4(),
            lease: Duration::from_secs(30),
            poll: Duration::from_secs(5),
            metrics: Metrics::new(),
        };
        // Each consumer listens like a worker process would (LISTEN/NOTIFY wake-ups).
        let wake = Arc::new(Notify::new());
        let wakes = std::collections::HashMap::from([(QueueName::Activity, wake.clone())]);
        handles.push(tokio::spawn(listener::run(
            listener::Source::Pool(c.pool.clone()),
            wakes,
            stop.clone(),
        )));
        handles.push(tokio::spawn(c.run(
            wake,
            stop.clone(),
            abort.clone(),
            InFlight::default(),
        )));
    }

    let start = Instant::now();
    let total = match args.mode {
        Mode::Drain => {
            loop {
                let s = queue_stats(&setup, QueueName::Activity).await?;
                if s.queued == 0 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            args.jobs
        }
        Mode::Steady => {
            let tick = Duration::from_millis(10);
            let per_tick = (args.rate as f64 * tick.as_secs_f64()).max(1.0);
            let mut sent = 0u64;
            let mut owed = 0.0;
            let mut interval = tokio::time::interval(tick);
            while start.elapsed() < Duration::from_secs(args.seconds) {
                interval.tick().await;
                owed += per_tick;
                let n = owed.floor() as u64;
                owed -= n as f64;
                let batch: Vec<NewMessage> = (0..n)
                    .map(|_| NewMessage::new(KIND, body.clone()))
                    .collect();
                enqueue_many(&setup, QueueName::Activity, &batch).await?;
                sent += n;
            }
            loop {
                if queue_stats(&setup, QueueName::Activity).await?.queued == 0 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            sent
        }
    };
    let elapsed = start.elapsed().as_secs_f64();
    stop.cancel();
    abort.cancel();
    for h in handles {
        let _ = h.await;
    }
    let mut lat = latencies.lock().map(|l| l.clone()).unwrap_or_default();
    lat.sort_by(|a, b| a.total_cmp(b));
    let rss_kb = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
        })
        .unwrap_or(0);
    setup.close().await;
    let _ = drop_database(&admin, &name).await;
    println!(
        "mode={} jobs={} workers={} concurrency={} elapsed_s={:.3} jobs_s={:.0} latency_ms_p50={:.2} latency_ms_p99={:.2} latency_ms_max={:.2} peak_rss_kb={}",
        match args.mode {
            Mode::Drain => "drain",
            Mode::Steady => "steady",
        },
        total,
        args.workers,
        args.concurrency,
        elapsed,
        total as f64 / elapsed,
        percentile(&lat, 0.50),
        percentile(&lat, 0.99),
        lat.last().copied().unwrap_or(0.0),
        rss_kb
    );
    Ok(())
}

fn with_database(admin: &str, db: &str) -> String {
    let (base, query) = match admin.find('?') {
        Some(q) => admin.split_at(q),
        None => (admin, ""),
    };
    match base.rfind('/') {
        Some(slash) if slash > base.find("://").map(|i| i + 2).unwrap_or(0) => {
            format!("{}/{db}{query}", &base[..slash])
        }
        _ => format!("{base}/{db}{query}"),
    }
}

async fn drop_database(admin: &str, name: &str) -> Result<()> {
    use sqlx::{ConnectOptions, Executor};
    let mut conn = db::connect_options(admin)?.connect().await?;
    conn.execute(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"
    )))
    .await?;
    Ok(())
}
