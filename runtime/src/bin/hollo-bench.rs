//! `hollo-bench`: throughput and enqueue-to-start latency of the queue engine on a real
//! PostgreSQL, with durable settings (`synchronous_commit=on` by default).
//!
//! Modes: `drain` pre-inserts `--jobs` no-op messages and times how fast `--workers` worker
//! *processes* (each with `--concurrency` slots) empty the queue; `steady` enqueues at `--rate`
//! per second for `--seconds` while they work, which is where enqueue-to-start latency means
//! something. `--backlog N` puts N due messages of a kind no worker takes ahead of them (the
//! rows one consumer leaves for another on a shared table). Workers are this binary re-executed in a hidden child mode, so each has its own
//! address space and its peak RSS (VmHWM) is what a real worker process of the engine would
//! use. The last line is machine-readable.
//!
//! Parent ↔ child protocol on stdin/stdout, one line each: the child prints `ready` once its
//! pool and LISTEN are up; the parent writes `go <unix micros>` (latency counts from the later
//! of that instant and the message's `ready_at`), later `stop`; the child drains, then prints
//! `lat <ms>` per message it started and a final `rss_kb <VmHWM>`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::{Parser, ValueEnum};
use hollo_runtime::db;
use hollo_runtime::metrics::Metrics;
use hollo_runtime::queue::consumer::{Consumer, InFlight};
use hollo_runtime::queue::{
    JobContext, KindSpec, NewMessage, QueueName, Registry, TaskError, enqueue_many,
};
use sqlx::PgPool;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
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
    /// Worker processes, each with its own node id, pool and LISTEN connection.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Slots per worker process (Hollo's defaults: 10 activity, 4 task).
    #[arg(long, default_value_t = 10)]
    concurrency: usize,
    /// Connections per worker process (a real worker has 20 general + 4 item-lock ones).
    #[arg(long, default_value_t = 20)]
    pool: u32,
    /// Handler time in ms (an I/O-bound handler sleeps); 0 is a no-op handler.
    #[arg(long, default_value_t = 0)]
    handler_ms: u64,
    /// Messages per second to enqueue (steady mode).
    #[arg(long, default_value_t = 1000)]
    rate: u64,
    /// Duration of the steady run.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// `synchronous_commit` for every connection (benchmark durable settings unless told).
    #[arg(long, default_value = "on")]
    synchronous_commit: String,
    /// Due messages of another kind, which no worker here runs, inserted before the run: the
    /// backlog one consumer leaves for another on a shared table (deliveries behind a flood
    /// of inbox activities, or the other way round). Each claim has to get past it.
    #[arg(long, default_value_t = 0)]
    backlog: u64,
    /// Database to use; default: a throwaway database on the local PostgreSQL under target/.
    #[arg(long, env = "BENCH_DATABASE_URL")]
    database_url: Option<String>,
    /// Internal: run as one worker process on this database URL.
    #[arg(long, hide = true)]
    child: Option<String>,
}

const KIND: &str = "hollo.bench.v1";
/// The kind of `--backlog`: registered by no worker of the run.
const OTHER_KIND: &str = "hollo.bench-other.v1";
const QUEUE: QueueName = QueueName::Activity;

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

/// Clock ticks per second of `/proc/*/stat` times (USER_HZ): 100 on every Linux we run on.
const TICKS_PER_S: f64 = 100.0;

/// Fields of `/proc/<pid>/stat` after the command name (which may contain spaces).
fn proc_stat(pid: &str) -> Option<Vec<String>> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 2..];
    Some(rest.split_whitespace().map(str::to_string).collect())
}

/// A numeric field of `proc_stat`'s output (0 when absent).
fn field(f: &[String], i: usize) -> f64 {
    f.get(i).and_then(|v| v.parse().ok()).unwrap_or(0.0)
}

/// CPU seconds (user + system, fields 14 and 15 of stat) this process has used so far.
fn own_cpu_s() -> f64 {
    proc_stat("self").map_or(0.0, |f| field(&f, 11) + field(&f, 12)) / TICKS_PER_S
}

/// CPU seconds PostgreSQL has used so far, when it runs on this machine: the postmaster's
/// reaped children (finished backends) plus every live child (backends, WAL writer,
/// checkpointer, autovacuum). `None` when the server is elsewhere.
fn postgres_cpu_s(postmaster: u32) -> Option<f64> {
    let parent = postmaster.to_string();
    let pm = proc_stat(&parent)?;
    // Reaped children's time: cutime and cstime.
    let mut total = field(&pm, 13) + field(&pm, 14);
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        if let Some(f) = proc_stat(pid)
            && f.get(1) == Some(&parent)
        {
            total += field(&f, 11) + field(&f, 12);
        }
    }
    Some(total / TICKS_PER_S)
}

/// The postmaster of the server `pool` talks to, if that server runs on this machine.
async fn local_postmaster(pool: &PgPool) -> Option<u32> {
    let backend: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(pool)
        .await
        .ok()?;
    proc_stat(&backend.to_string())?.get(1)?.parse().ok()
}

async fn connect(url: &str, max: u32, sync_commit: &str) -> Result<PgPool> {
    let opts = db::connect_options(url)?.options([("synchronous_commit", sync_commit)]);
    db::pool_options(max)
        .connect_with(opts)
        .await
        .context("connecting")
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    if args.workers == 0 || args.concurrency == 0 || args.pool == 0 {
        bail!("--workers, --concurrency and --pool must be at least 1");
    }
    if !matches!(
        args.synchronous_commit.as_str(),
        "on" | "off" | "local" | "remote_write" | "remote_apply"
    ) {
        bail!("--synchronous-commit must be on, off, local, remote_write or remote_apply");
    }
    match args.child.clone() {
        Some(url) => child(args, &url).await,
        None => parent(args).await,
    }
}

/// One worker process: a consumer with its own pool and LISTEN connection, as `hollo serve`
/// with `NODE_TYPE=worker` would run it, and a handler that only records its start latency.
async fn child(args: Args, url: &str) -> Result<()> {
    let pool = connect(url, args.pool, &args.synchronous_commit).await?;
    let latencies: Arc<Mutex<Vec<f64>>> = Default::default();
    let runs = Arc::new(AtomicU64::new(0));
    // Set once the parent says go; latency counts from then at the earliest.
    let go_at: Arc<Mutex<chrono::DateTime<chrono::Utc>>> =
        Arc::new(Mutex::new(chrono::DateTime::<chrono::Utc>::MIN_UTC));
    let mut registry = Registry::new();
    {
        let (lat, go_at, runs) = (latencies.clone(), go_at.clone(), runs.clone());
        let sleep = Duration::from_millis(args.handler_ms);
        registry.register(
            KindSpec::new(KIND, QUEUE),
            move |ctx: JobContext, _p: serde_json::Value| {
                let (lat, go_at) = (lat.clone(), go_at.clone());
                runs.fetch_add(1, Ordering::Relaxed);
                async move {
                    let from = go_at.lock().map(|g| *g).unwrap_or(ctx.msg.ready_at);
                    let waited = (chrono::Utc::now() - ctx.msg.ready_at.max(from))
                        .num_microseconds()
                        .unwrap_or(0) as f64
                        / 1000.0;
                    if let Ok(mut l) = lat.lock() {
                        l.push(waited.max(0.0));
                    }
                    if !sleep.is_zero() {
                        tokio::time::sleep(sleep).await;
                    }
                    Ok::<(), TaskError>(())
                }
            },
        );
    }
    let stop = CancellationToken::new();
    let abort = CancellationToken::new();
    let wake = Arc::new(Notify::new());
    let mut subs = db::listen::Subscriptions::default();
    subs.wake(QUEUE.channel(), wake.clone());
    let listen = tokio::spawn(db::listen::run(
        db::listen::Source::Pool(pool.clone()),
        subs,
        stop.clone(),
    ));
    let consumer = Consumer {
        queue: QUEUE,
        slot_pool: None,
        limit: args.concurrency,
        registry,
        pool: pool.clone(),
        item_locks: None,
        node: uuid::Uuid::new_v4(),
        lease: Duration::from_secs(30),
        poll: Duration::from_secs(5),
        metrics: Metrics::new(),
    };

    let mut stdin = BufReader::new(tokio::io::stdin()).lines();
    let mut stdout = tokio::io::stdout();
    stdout.write_all(b"ready\n").await?;
    stdout.flush().await?;
    let go = stdin.next_line().await?.unwrap_or_default();
    let micros: i64 = go
        .strip_prefix("go ")
        .and_then(|s| s.trim().parse().ok())
        .context("expected `go <unix micros>` from the parent")?;
    if let (Ok(mut g), Some(t)) = (
        go_at.lock(),
        chrono::DateTime::from_timestamp_micros(micros),
    ) {
        *g = t;
    }
    let cpu_at_go = own_cpu_s();
    let run = tokio::spawn(consumer.run(wake, stop.clone(), abort.clone(), InFlight::default()));
    // Progress for the parent, so it need not poll the queue table while we work (each poll
    // walks the dead index entries at the queue's head and would tax the server measured).
    let progress = tokio::spawn(async move {
        let mut out = tokio::io::stdout();
        let mut last = 0;
        loop {
            tokio::time::sleep(Duration::from_millis(5)).await;
            let n = runs.load(Ordering::Relaxed);
            if n != last {
                last = n;
                if out
                    .write_all(format!("ran {n}\n").as_bytes())
                    .await
                    .is_err()
                    || out.flush().await.is_err()
                {
                    return;
                }
            }
        }
    });
    // `stop` or end of input: drain and report.
    let _ = stdin.next_line().await;
    stop.cancel();
    let timer = {
        let abort = abort.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(10)).await;
            abort.cancel();
        })
    };
    let _ = run.await;
    timer.abort();
    progress.abort();
    let _ = progress.await;
    let _ = listen.await;
    pool.close().await;
    let lat = latencies.lock().map(|l| l.clone()).unwrap_or_default();
    let mut out = String::with_capacity(lat.len() * 8 + 32);
    for l in lat {
        out.push_str(&format!("lat {l:.3}\n"));
    }
    out.push_str(&format!("cpu_s {:.3}\n", own_cpu_s() - cpu_at_go));
    out.push_str(&format!(
        "rss_kb {}\n",
        hollo_runtime::metrics::peak_rss_kb()
    ));
    stdout.write_all(out.as_bytes()).await?;
    stdout.flush().await?;
    Ok(())
}

struct Worker {
    proc: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    /// The worker's stdout lines, except `ran N` progress, which goes into `ran`.
    lines: tokio::sync::mpsc::UnboundedReceiver<String>,
}

/// Reads a worker's stdout: progress lines add to the shared count of handler runs, the rest
/// is forwarded in order.
fn read_worker(
    stdout: tokio::process::ChildStdout,
    ran: Arc<AtomicU64>,
) -> tokio::sync::mpsc::UnboundedReceiver<String> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut lines = BufReader::new(stdout).lines();
        let mut mine = 0;
        while let Ok(Some(line)) = lines.next_line().await {
            match line
                .strip_prefix("ran ")
                .and_then(|n| n.parse::<u64>().ok())
            {
                Some(n) => {
                    ran.fetch_add(n.saturating_sub(mine), Ordering::Relaxed);
                    mine = mine.max(n);
                }
                None => {
                    if tx.send(line).is_err() {
                        return;
                    }
                }
            }
        }
    });
    rx
}

async fn parent(args: Args) -> Result<()> {
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
    let result = run_parent(&args, &url).await;
    let _ = drop_database(&admin, &name).await;
    result
}

async fn run_parent(args: &Args, url: &str) -> Result<()> {
    let setup = connect(url, 2, &args.synchronous_commit).await?;
    db::migrate(&setup).await?;
    let body = serde_json::json!({});
    // The backlog first: older, so it is due before every message of the run.
    enqueue_bulk(&setup, OTHER_KIND, args.backlog, &body).await?;
    let backlog_due: chrono::DateTime<chrono::Utc> = sqlx::query_scalar(sqlx::AssertSqlSafe(
        format!("SELECT coalesce(max(due), 'epoch') FROM {}", QUEUE.table()),
    ))
    .fetch_one(&setup)
    .await?;
    if let Mode::Drain = args.mode {
        enqueue_bulk(&setup, KIND, args.jobs, &body).await?;
    }
    if args.backlog > 0 || matches!(args.mode, Mode::Drain) {
        // A fair start: the table as a worker would find it after autovacuum.
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "VACUUM ANALYZE {}",
            QUEUE.table()
        )))
        .execute(&setup)
        .await?;
    }

    let exe = std::env::current_exe()?;
    let mut workers = Vec::with_capacity(args.workers);
    let ran = Arc::new(AtomicU64::new(0));
    for _ in 0..args.workers {
        let mut proc = tokio::process::Command::new(&exe)
            .arg("--child")
            .arg(url)
            .args(["--concurrency", &args.concurrency.to_string()])
            .args(["--pool", &args.pool.to_string()])
            .args(["--handler-ms", &args.handler_ms.to_string()])
            .args(["--synchronous-commit", &args.synchronous_commit])
            .env_remove("BENCH_DATABASE_URL")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .context("spawning a worker process")?;
        let stdin = proc.stdin.take().context("worker stdin")?;
        let stdout = proc.stdout.take().context("worker stdout")?;
        workers.push(Worker {
            proc,
            stdin,
            lines: read_worker(stdout, ran.clone()),
        });
    }
    for w in &mut workers {
        match w.lines.recv().await {
            Some(l) if l == "ready" => {}
            other => bail!("worker process did not start: {other:?}"),
        }
    }

    // WAL written per job is the noise-free part of the cost (a shared 2-vCPU machine makes
    // timings noisy): every claim, completion and index entry shows up in it.
    let wal_start: String = sqlx::query_scalar("SELECT pg_current_wal_lsn()::text")
        .fetch_one(&setup)
        .await?;
    // CPU is the other noise-resistant cost: what the server and the workers burn per job.
    let postmaster = local_postmaster(&setup).await;
    let pg_cpu_start = postmaster.and_then(postgres_cpu_s);
    let go = format!("go {}\n", chrono::Utc::now().timestamp_micros());
    let start = Instant::now();
    for w in &mut workers {
        w.stdin.write_all(go.as_bytes()).await?;
        w.stdin.flush().await?;
    }
    // One index probe, not count(*): a seq scan of the whole queue every few ms would take a
    // sizeable share of a 2-vCPU machine away from the workers being measured. The probe
    // starts past the backlog (every message of the run is due after it, and claims only
    // move `due` later), so it never walks the backlog either.
    let any_sql = format!(
        "SELECT EXISTS (SELECT 1 FROM {} WHERE due > $1 ORDER BY due LIMIT 1)",
        QUEUE.table()
    );
    let wait_empty = || async {
        loop {
            let any: bool = sqlx::query_scalar(sqlx::AssertSqlSafe(any_sql.clone()))
                .bind(backlog_due)
                .fetch_one(&setup)
                .await?;
            if !any {
                return Ok::<(), anyhow::Error>(());
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    };
    let total = match args.mode {
        Mode::Drain => {
            // Every message has started (at least once) before the queue can be empty.
            while ran.load(Ordering::Relaxed) < args.jobs {
                if workers
                    .iter_mut()
                    .any(|w| matches!(w.proc.try_wait(), Ok(Some(_))))
                {
                    bail!("a worker process exited during the run");
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            wait_empty().await?;
            args.jobs
        }
        Mode::Steady => {
            let tick = Duration::from_millis(10);
            let per_tick = args.rate as f64 * tick.as_secs_f64();
            let mut sent = 0u64;
            let mut owed = 0.0;
            let mut interval = tokio::time::interval(tick);
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
            while start.elapsed() < Duration::from_secs(args.seconds) {
                interval.tick().await;
                owed += per_tick;
                let n = owed.floor() as u64;
                owed -= n as f64;
                if n == 0 {
                    continue;
                }
                let batch: Vec<NewMessage> = (0..n)
                    .map(|_| NewMessage::new(KIND, body.clone()))
                    .collect();
                enqueue_many(&setup, QUEUE, &batch).await?;
                sent += n;
            }
            wait_empty().await?;
            sent
        }
    };
    let elapsed = start.elapsed().as_secs_f64();
    let pg_cpu = match (postmaster.and_then(postgres_cpu_s), pg_cpu_start) {
        (Some(end), Some(start)) => Some(end - start),
        _ => None,
    };
    let wal_bytes: f64 = sqlx::query_scalar(
        "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::text::pg_lsn)::float8",
    )
    .bind(&wal_start)
    .fetch_one(&setup)
    .await?;
    setup.close().await;

    let mut lat = Vec::with_capacity(total as usize);
    let mut rss = Vec::with_capacity(workers.len());
    let mut worker_cpu = 0.0;
    for w in &mut workers {
        w.stdin.write_all(b"stop\n").await?;
        w.stdin.flush().await?;
    }
    for mut w in workers {
        while let Some(line) = w.lines.recv().await {
            if let Some(v) = line.strip_prefix("lat ") {
                lat.push(v.parse::<f64>().context("worker latency line")?);
            } else if let Some(v) = line.strip_prefix("cpu_s ") {
                worker_cpu += v.parse::<f64>().context("worker cpu line")?;
            } else if let Some(v) = line.strip_prefix("rss_kb ") {
                rss.push(v.parse::<u64>().context("worker rss line")?);
            }
        }
        let status = w.proc.wait().await?;
        if !status.success() {
            bail!("a worker process failed: {status}");
        }
    }
    lat.sort_by(|a, b| a.total_cmp(b));
    let mode = match args.mode {
        Mode::Drain => "drain",
        Mode::Steady => "steady",
    };
    eprintln!("handler runs: {} (≥ jobs: at-least-once)", lat.len());
    println!(
        "mode={mode} jobs={total} backlog={} workers={} concurrency={} handler_ms={} synchronous_commit={} elapsed_s={:.3} jobs_s={:.0} latency_ms_p50={:.2} latency_ms_p99={:.2} latency_ms_max={:.2} wal_bytes_per_job={:.0} worker_cpu_us_per_job={:.1} pg_cpu_us_per_job={} peak_rss_kb={} worker_peak_rss_kb={}",
        args.backlog,
        args.workers,
        args.concurrency,
        args.handler_ms,
        args.synchronous_commit,
        elapsed,
        total as f64 / elapsed,
        percentile(&lat, 0.50),
        percentile(&lat, 0.99),
        lat.last().copied().unwrap_or(0.0),
        wal_bytes / total.max(1) as f64,
        worker_cpu * 1e6 / total.max(1) as f64,
        pg_cpu.map_or("na".to_string(), |c| format!(
            "{:.1}",
            c * 1e6 / total.max(1) as f64
        )),
        rss.iter().max().copied().unwrap_or(0),
        rss.iter()
            .map(|r| r.to_string())
            .collect::<Vec<_>>()
            .join(","),
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

/// Enqueues `n` messages of `kind` in batches of 5 000.
async fn enqueue_bulk(
    pool: &PgPool,
    kind: &'static str,
    n: u64,
    body: &serde_json::Value,
) -> Result<()> {
    let t = Instant::now();
    let mut done = 0;
    while done < n {
        let batch: Vec<NewMessage> = (done..(done + 5000).min(n))
            .map(|_| NewMessage::new(kind, body.clone()))
            .collect();
        done += batch.len() as u64;
        enqueue_many(pool, QUEUE, &batch).await?;
    }
    if n > 0 {
        eprintln!(
            "enqueued {n} {kind} in {:.2} s ({:.0}/s, bulk)",
            t.elapsed().as_secs_f64(),
            n as f64 / t.elapsed().as_secs_f64()
        );
    }
    Ok(())
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
