//! The queue engine against a real PostgreSQL (SPEC.md §2): exactly-once handling across
//! workers, leases, limits that count only ready messages, retry policies, coalescing and the
//! seed's monitoring SQL.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test panics with its message

use crate::support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use hollo_runtime::queue::claim::{self, ClaimBranch};
use hollo_runtime::queue::message::Claimed;
use hollo_runtime::queue::stats::queue_stats;
use hollo_runtime::queue::{
    Enqueued, JobContext, KindSpec, NewMessage, QueueName, Registry, RetryPolicy, TaskError,
    enqueue, enqueue_many,
};
use hollo_runtime::tasks::probe;
use serde::Deserialize;
use sqlx::PgPool;
use support::consumer::{Running, start_consumer};
use support::{eventually, fresh_db, seed_monitoring};
use uuid::Uuid;

fn start(
    pool: &PgPool,
    queue: QueueName,
    limit: usize,
    registry: Registry,
    lease: Duration,
) -> Running {
    start_consumer(pool, queue, None, limit, registry, lease)
}

/// A task consumer of the logging handler, 4 at a time.
fn start_logging(db: &support::TestDb, lease: Duration) -> Running {
    start(
        &db.pool,
        QueueName::Task,
        4,
        logging_registry("test.log.v1", QueueName::Task),
        lease,
    )
}

/// A task consumer of the probes, `limit` at a time, with a 30 s lease.
fn start_probes(db: &support::TestDb, limit: usize) -> Running {
    start(
        &db.pool,
        QueueName::Task,
        limit,
        probe_registry(),
        Duration::from_secs(30),
    )
}

/// Waits (up to `deadline`) until the probes' stats satisfy `done`.
async fn until_probes(
    db: &support::TestDb,
    deadline: Duration,
    what: &str,
    done: impl Fn(&probe::ProbeStats) -> bool,
) {
    eventually(deadline, what, || async {
        let s = probe::stats(&db.pool).await.ok()?;
        done(&s).then_some(())
    })
    .await;
}

/// Waits (up to `deadline`) until the count `sql` reads is `n`.
async fn until_count(db: &support::TestDb, deadline: Duration, what: &str, sql: &str, n: i64) {
    eventually(deadline, what, || async {
        let got: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_string()))
            .fetch_one(&db.pool)
            .await
            .ok()?;
        (got == n).then_some(())
    })
    .await;
}

fn probe_registry() -> Registry {
    let mut reg = Registry::new();
    probe::register(&mut reg);
    reg
}

#[derive(Deserialize)]
struct Keyed {
    key: String,
}

/// The table the logging handler writes each run to.
async fn create_exec_log(db: &support::TestDb) {
    sqlx::query("CREATE TABLE exec_log (key text NOT NULL, node uuid NOT NULL)")
        .execute(&db.pool)
        .await
        .unwrap();
}

/// `exec_log` and `n` task messages for the logging handler, keys `{prefix}0` … .
async fn logged_backlog(db: &support::TestDb, n: i64, prefix: &str) {
    create_exec_log(db).await;
    let msgs: Vec<NewMessage> = (0..n)
        .map(|i| {
            NewMessage::new(
                "test.log.v1",
                serde_json::json!({ "key": format!("{prefix}{i}") }),
            )
        })
        .collect();
    enqueue_many(&db.pool, QueueName::Task, &msgs)
        .await
        .unwrap();
}

/// A handler that logs every execution (not only the first), completing through the batcher.
fn logging_registry(kind: &'static str, queue: QueueName) -> Registry {
    let mut reg = Registry::new();
    reg.register(
        KindSpec::new(kind, queue),
        |ctx: JobContext, p: Keyed| async move {
            sqlx::query("INSERT INTO exec_log (key, node) VALUES ($1, $2)")
                .bind(&p.key)
                .bind(ctx.node_id)
                .execute(&ctx.pool)
                .await?;
            Ok(())
        },
    );
    reg
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_message_is_handled_exactly_once_across_workers() {
    let db = fresh_db().await;
    let n = 900;
    logged_backlog(&db, n, "k").await;
    let workers: Vec<Running> = (0..3)
        .map(|_| start_logging(&db, Duration::from_secs(30)))
        .collect();
    eventually(
        Duration::from_secs(60),
        "all messages handled and deleted",
        || async {
            let s = queue_stats(&db.pool, QueueName::Task).await.ok()?;
            (s.queued == 0).then_some(())
        },
    )
    .await;
    let (total, distinct, nodes): (i64, i64, i64) =
        sqlx::query_as("SELECT count(*), count(DISTINCT key), count(DISTINCT node) FROM exec_log")
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert_eq!((total, distinct), (n, n), "each message ran exactly once");
    assert!(
        nodes >= 2,
        "work was shared between workers (nodes used: {nodes})"
    );
    for w in workers {
        w.shutdown().await;
    }
}

/// `n` probe tasks (`key`), all claimed by a new node for `lease`: the node, the claim
/// branches (probes only, up to `n`) and what it claimed.
async fn claimed_probes(
    db: &support::TestDb,
    key: &str,
    n: usize,
    lease: Duration,
) -> (Uuid, Vec<ClaimBranch>, Vec<Claimed>) {
    probe::enqueue(
        &db.pool,
        QueueName::Task,
        key,
        n as u64,
        0,
        0,
        Duration::ZERO,
    )
    .await
    .unwrap();
    let node = Uuid::new_v4();
    let all = vec![ClaimBranch {
        kinds: vec![probe::KIND.into()],
        limit: n,
    }];
    let got = claim::claim(&db.pool, QueueName::Task, node, lease, n, &all)
        .await
        .unwrap();
    (node, all, got)
}

/// Up to `n` messages claimed by another new node, for 30 s.
async fn claim_elsewhere(db: &support::TestDb, n: usize, all: &[ClaimBranch]) -> Vec<Claimed> {
    claim::claim(
        &db.pool,
        QueueName::Task,
        Uuid::new_v4(),
        Duration::from_secs(30),
        n,
        all,
    )
    .await
    .unwrap()
}

#[tokio::test]
async fn a_lease_that_ends_makes_the_message_claimable_without_using_an_attempt() {
    let db = fresh_db().await;
    // A worker claims it and "dies": it never completes nor renews.
    let (_dead, all, got) = claimed_probes(&db, "lease", 1, Duration::from_secs(1)).await;
    assert_eq!(got.len(), 1);
    // While leased it is not claimable by anyone else.
    let other = claim_elsewhere(&db, 1, &all).await;
    assert!(
        other.is_empty(),
        "a leased message must not be claimed twice"
    );
    let s = queue_stats(&db.pool, QueueName::Task).await.unwrap();
    assert_eq!((s.queued, s.ready, s.in_flight), (1, 0, 1));

    let w = start_probes(&db, 4);
    let stats = eventually(
        Duration::from_secs(20),
        "the probe recorded after lease expiry",
        || async {
            let s = probe::stats(&db.pool).await.ok()?;
            (s.completed == 1).then_some(s)
        },
    )
    .await;
    assert_eq!((stats.pending, stats.failed, stats.duplicates), (0, 0, 0));
    let (attempts, node): (i32, Uuid) =
        sqlx::query_as("SELECT attempts, node_id FROM hollo_probe_result")
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert_eq!(
        attempts, 1,
        "the dead worker's run is not a recorded failure"
    );
    assert_eq!(node, w.node);
    w.shutdown().await;
}

#[tokio::test]
async fn released_messages_are_claimable_at_once_with_no_attempt_recorded() {
    let db = fresh_db().await;
    let (node, all, got) = claimed_probes(&db, "rel", 3, Duration::from_secs(600)).await;
    let ids: Vec<Uuid> = got.iter().map(|m| m.id).collect();
    assert_eq!(
        claim::release(&db.pool, QueueName::Task, node, &ids)
            .await
            .unwrap(),
        3
    );
    let again = claim_elsewhere(&db, 3, &all).await;
    assert_eq!(again.len(), 3);
    assert!(again.iter().all(|m| m.attempts == 0 && m.claims == 2));
}

#[tokio::test]
async fn renewal_extends_every_held_lease_in_one_statement() {
    let db = fresh_db().await;
    let (node, _, got) = claimed_probes(&db, "renew", 5, Duration::from_secs(2)).await;
    let ids: Vec<Uuid> = got.iter().map(|m| m.id).collect();
    assert_eq!(
        claim::renew(
            &db.pool,
            QueueName::Task,
            node,
            Duration::from_secs(600),
            &ids
        )
        .await
        .unwrap(),
        5
    );
    let min_left: f64 = sqlx::query_scalar("SELECT EXTRACT(EPOCH FROM min(created + delay) - now())::float8 FROM hollo_task_message_v1")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert!(
        min_left > 500.0,
        "leases now end in ~600 s (min left {min_left})"
    );
    // Another node cannot renew leases it does not hold.
    assert_eq!(
        claim::renew(
            &db.pool,
            QueueName::Task,
            Uuid::new_v4(),
            Duration::from_secs(600),
            &ids
        )
        .await
        .unwrap(),
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn delayed_messages_never_occupy_a_slot() {
    let db = fresh_db().await;
    probe::enqueue(
        &db.pool,
        QueueName::Task,
        "later",
        10,
        0,
        0,
        Duration::from_secs(3600),
    )
    .await
    .unwrap();
    probe::enqueue(&db.pool, QueueName::Task, "now", 20, 20, 0, Duration::ZERO)
        .await
        .unwrap();
    let w = start_probes(&db, 2);
    until_probes(
        &db,
        Duration::from_secs(30),
        "the 20 ready probes to finish",
        |s| s.completed == 20,
    )
    .await;
    let s = queue_stats(&db.pool, QueueName::Task).await.unwrap();
    assert_eq!((s.queued, s.ready, s.delayed, s.in_flight), (10, 0, 10, 0));
    let later: i64 =
        sqlx::query_scalar("SELECT count(*) FROM hollo_probe_result WHERE key LIKE 'later-%'")
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert_eq!(later, 0);
    w.shutdown().await;
}

#[derive(Default)]
struct Gauge {
    now: AtomicUsize,
    max: AtomicUsize,
}

impl Gauge {
    fn enter(&self) {
        let n = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.max.fetch_max(n, Ordering::SeqCst);
    }
    fn leave(&self) {
        self.now.fetch_sub(1, Ordering::SeqCst);
    }
    fn max(&self) -> usize {
        self.max.load(Ordering::SeqCst)
    }
    fn now(&self) -> usize {
        self.now.load(Ordering::SeqCst)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn per_process_limits_hold_under_load() {
    let db = fresh_db().await;
    let tasks = Arc::new(Gauge::default());
    let replies = Arc::new(Gauge::default());
    let activities = Arc::new(Gauge::default());
    let mut task_reg = Registry::new().lane("replies", QueueName::Task, 2);
    {
        let t = tasks.clone();
        task_reg.register(
            KindSpec::new("test.plain.v1", QueueName::Task),
            move |_ctx, _p: serde_json::Value| {
                let t = t.clone();
                async move {
                    t.enter();
                    tokio::time::sleep(Duration::from_millis(40)).await;
                    t.leave();
                    Ok::<(), TaskError>(())
                }
            },
        );
        let (t, r) = (tasks.clone(), replies.clone());
        task_reg.register(
            KindSpec::new("test.reply.v1", QueueName::Task).lane("replies"),
            move |_ctx, _p: serde_json::Value| {
                let (t, r) = (t.clone(), r.clone());
                async move {
                    t.enter();
                    r.enter();
                    tokio::time::sleep(Duration::from_millis(40)).await;
                    r.leave();
                    t.leave();
                    Ok::<(), TaskError>(())
                }
            },
        );
    }
    let mut act_reg = Registry::new();
    {
        let a = activities.clone();
        act_reg.register(
            KindSpec::new("test.activity.v1", QueueName::Activity),
            move |_ctx, _p: serde_json::Value| {
                let a = a.clone();
                async move {
                    a.enter();
                    tokio::time::sleep(Duration::from_millis(40)).await;
                    a.leave();
                    Ok::<(), TaskError>(())
                }
            },
        );
    }
    // Replies first so they crowd the head of the queue: the lane must still cap them at 2.
    let replies_msgs: Vec<NewMessage> = (0..40)
        .map(|_| NewMessage::new("test.reply.v1", serde_json::json!({})))
        .collect();
    let plain_msgs: Vec<NewMessage> = (0..40)
        .map(|_| NewMessage::new("test.plain.v1", serde_json::json!({})))
        .collect();
    let act_msgs: Vec<NewMessage> = (0..150)
        .map(|_| NewMessage::new("test.activity.v1", serde_json::json!({})))
        .collect();
    enqueue_many(&db.pool, QueueName::Task, &replies_msgs)
        .await
        .unwrap();
    enqueue_many(&db.pool, QueueName::Task, &plain_msgs)
        .await
        .unwrap();
    enqueue_many(&db.pool, QueueName::Activity, &act_msgs)
        .await
        .unwrap();

    let t = start(
        &db.pool,
        QueueName::Task,
        4,
        task_reg,
        Duration::from_secs(30),
    );
    let a = start(
        &db.pool,
        QueueName::Activity,
        10,
        act_reg,
        Duration::from_secs(30),
    );
    eventually(Duration::from_secs(60), "both queues drained", || async {
        let ts = queue_stats(&db.pool, QueueName::Task).await.ok()?;
        let as_ = queue_stats(&db.pool, QueueName::Activity).await.ok()?;
        (ts.queued == 0 && as_.queued == 0).then_some(())
    })
    .await;
    assert!(
        tasks.max() <= 4,
        "task slots: at most 4 at once, saw {}",
        tasks.max()
    );
    assert!(
        replies.max() <= 2,
        "reply lane: at most 2 at once, saw {}",
        replies.max()
    );
    assert!(
        activities.max() <= 10,
        "activity slots: at most 10 at once, saw {}",
        activities.max()
    );
    // The limits are used, not just respected: free slots are filled.
    assert_eq!(replies.max(), 2, "reply lane filled");
    assert_eq!(tasks.max(), 4, "task slots filled");
    assert_eq!(activities.max(), 10, "activity slots filled");
    t.shutdown().await;
    a.shutdown().await;
}

/// A slot pool (deliveries, R-AP-2) has slots of its own: its kinds never take the queue's
/// slots, so a fan-out held up by slow hosts cannot stall the queue's other work, and its own
/// limit is both respected and filled.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_slot_pool_runs_beside_the_queue_slots_not_inside_them() {
    let db = fresh_db().await;
    create_exec_log(&db).await;
    let pooled = Arc::new(Gauge::default());
    // Pooled handlers hold their slot until the test opens the gate.
    let (gate, gate_rx) = tokio::sync::watch::channel(false);
    let mut reg = logging_registry("test.log.v1", QueueName::Activity).slot_pool(
        "outbound",
        QueueName::Activity,
        5,
    );
    {
        let p = pooled.clone();
        reg.register(
            KindSpec::new("test.pooled.v1", QueueName::Activity).slot_pool("outbound"),
            move |_ctx, _p: serde_json::Value| {
                let (p, mut rx) = (p.clone(), gate_rx.clone());
                async move {
                    p.enter();
                    let _ = rx.wait_for(|open| *open).await;
                    p.leave();
                    Ok::<(), TaskError>(())
                }
            },
        );
    }
    let pooled_msgs: Vec<NewMessage> = (0..8)
        .map(|_| NewMessage::new("test.pooled.v1", serde_json::json!({})))
        .collect();
    enqueue_many(&db.pool, QueueName::Activity, &pooled_msgs)
        .await
        .unwrap();
    enqueue(
        &db.pool,
        QueueName::Activity,
        &NewMessage::new("test.log.v1", serde_json::json!({"key": "plain"})),
    )
    .await
    .unwrap();
    // The queue's own consumer has one slot and must never run a pooled kind.
    let own = start(
        &db.pool,
        QueueName::Activity,
        1,
        reg.clone(),
        Duration::from_secs(30),
    );
    until_count(
        &db,
        Duration::from_secs(30),
        "the plain message handled while nothing of the pool runs",
        "SELECT count(*) FROM exec_log",
        1,
    )
    .await;
    assert_eq!(pooled.max(), 0, "the queue's slots ran a pooled kind");
    let pool_run = start_consumer(
        &db.pool,
        QueueName::Activity,
        Some("outbound"),
        5,
        reg,
        Duration::from_secs(30),
    );
    eventually(
        Duration::from_secs(30),
        "the pool's 5 slots all busy",
        || async { (pooled.now() == 5).then_some(()) },
    )
    .await;
    gate.send_replace(true);
    eventually(Duration::from_secs(30), "the queue drained", || async {
        let s = queue_stats(&db.pool, QueueName::Activity).await.ok()?;
        (s.queued == 0).then_some(())
    })
    .await;
    assert_eq!(pooled.max(), 5, "the pool's limit: at most 5 at once");
    own.shutdown().await;
    pool_run.shutdown().await;
}

#[tokio::test]
async fn fixed_retry_records_failures_then_succeeds() {
    let db = fresh_db().await;
    probe::enqueue(&db.pool, QueueName::Task, "flaky", 1, 0, 2, Duration::ZERO)
        .await
        .unwrap();
    let w = start_probes(&db, 4);
    until_probes(
        &db,
        Duration::from_secs(20),
        "the flaky probe to succeed",
        |s| s.completed == 1,
    )
    .await;
    let attempts: i32 = sqlx::query_scalar("SELECT attempts FROM hollo_probe_result")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(
        attempts, 3,
        "two recorded failures, success on the third run"
    );
    w.shutdown().await;
}

#[tokio::test]
async fn fixed_retry_gives_up_after_its_recorded_failures() {
    let db = fresh_db().await;
    // The probe's policy is 5 recorded failures; this one would need 10.
    probe::enqueue(
        &db.pool,
        QueueName::Task,
        "doomed",
        1,
        0,
        10,
        Duration::ZERO,
    )
    .await
    .unwrap();
    let w = start_probes(&db, 4);
    until_probes(
        &db,
        Duration::from_secs(20),
        "the probe to fail for good",
        |s| s.failed == 1 && s.pending == 0,
    )
    .await;
    let (attempts, error): (i32, String) =
        sqlx::query_as("SELECT attempts, error FROM hollo_failed_message")
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert_eq!(attempts, 5);
    assert!(error.contains("fails on purpose"), "{error}");
    assert_eq!(probe::stats(&db.pool).await.unwrap().completed, 0);
    w.shutdown().await;
}

#[tokio::test]
async fn exponential_retry_backs_off_and_stops_after_max_attempts() {
    let db = fresh_db().await;
    sqlx::query("CREATE TABLE runs (at timestamptz NOT NULL DEFAULT clock_timestamp())")
        .execute(&db.pool)
        .await
        .unwrap();
    let mut reg = Registry::new();
    let policy = RetryPolicy::Exponential {
        initial: Duration::from_millis(200),
        factor: 2.0,
        max_attempts: 3,
        cap: Duration::from_secs(60),
        jitter: 0.1,
    };
    reg.register(
        KindSpec::new("test.always-fails.v1", QueueName::Activity).retry(policy),
        |ctx: JobContext, _p: serde_json::Value| async move {
            sqlx::query("INSERT INTO runs DEFAULT VALUES")
                .execute(&ctx.pool)
                .await?;
            Err(TaskError::Transient("remote said 503".into()))
        },
    );
    enqueue(
        &db.pool,
        QueueName::Activity,
        &NewMessage::new("test.always-fails.v1", serde_json::json!({})),
    )
    .await
    .unwrap();
    let w = start(
        &db.pool,
        QueueName::Activity,
        10,
        reg,
        Duration::from_secs(30),
    );
    until_count(
        &db,
        Duration::from_secs(20),
        "the message to be given up",
        "SELECT count(*) FROM hollo_failed_message",
        1,
    )
    .await;
    let gaps: Vec<f64> = sqlx::query_scalar("SELECT EXTRACT(EPOCH FROM at - lag(at) OVER (ORDER BY at))::float8 FROM runs ORDER BY at OFFSET 1")
        .fetch_all(&db.pool)
        .await
        .unwrap();
    assert_eq!(gaps.len(), 2, "three runs in total");
    // Never early: each wait is at least the policy's delay minus its 10 % jitter.
    assert!(gaps[0] >= 0.18, "first back-off {gaps:?}");
    assert!(gaps[1] >= 0.36, "second back-off doubles {gaps:?}");
    let attempts: i32 = sqlx::query_scalar("SELECT attempts FROM hollo_failed_message")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(attempts, 3);
    w.shutdown().await;
}

#[tokio::test]
async fn a_malformed_payload_fails_permanently_without_retries() {
    let db = fresh_db().await;
    enqueue(
        &db.pool,
        QueueName::Task,
        &NewMessage::new(probe::KIND, serde_json::json!({ "sleepMs": "soon" })),
    )
    .await
    .unwrap();
    let w = start_probes(&db, 4);
    let (attempts, error): (i32, String) = eventually(
        Duration::from_secs(20),
        "the bad payload to be failed",
        || async {
            sqlx::query_as("SELECT attempts, error FROM hollo_failed_message")
                .fetch_optional(&db.pool)
                .await
                .ok()?
        },
    )
    .await;
    assert_eq!(attempts, 1);
    assert!(
        error.contains("malformed hollo.probe.v1 payload"),
        "{error}"
    );
    w.shutdown().await;
}

#[tokio::test]
async fn coalescing_keeps_one_message_and_only_moves_it_earlier() {
    let db = fresh_db().await;
    let msg = |secs| {
        NewMessage::new("test.poll.v1", serde_json::json!({"pollId": 1}))
            .delay(Duration::from_secs(secs))
            .coalesce("poll:1")
    };
    let first = enqueue(&db.pool, QueueName::Task, &msg(100)).await.unwrap();
    assert!(matches!(first, Enqueued::Inserted(_)));
    assert_eq!(
        enqueue(&db.pool, QueueName::Task, &msg(200)).await.unwrap(),
        Enqueued::Coalesced
    );
    let earlier = enqueue(&db.pool, QueueName::Task, &msg(10)).await.unwrap();
    assert_eq!(earlier, Enqueued::Advanced(first.id().unwrap()));
    let (rows, left): (i64, f64) =
        sqlx::query_as("SELECT count(*), EXTRACT(EPOCH FROM max(created + delay) - now())::float8 FROM hollo_task_message_v1")
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert_eq!(rows, 1);
    assert!(left > 5.0 && left <= 10.5, "due in ~10 s, got {left}");
    let due_matches: bool =
        sqlx::query_scalar("SELECT bool_and(due = created + delay) FROM hollo_task_message_v1")
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert!(due_matches, "due mirrors created + delay");
}

#[tokio::test]
async fn the_seed_monitoring_sql_gives_the_same_numbers_as_queue_stats() {
    let db = fresh_db().await;
    probe::enqueue(&db.pool, QueueName::Task, "r", 5, 0, 0, Duration::ZERO)
        .await
        .unwrap();
    probe::enqueue(
        &db.pool,
        QueueName::Task,
        "d",
        3,
        0,
        0,
        Duration::from_secs(600),
    )
    .await
    .unwrap();
    let poll = NewMessage::new(
        "hollo.poll-notification.v1",
        serde_json::json!({"pollId": 7}),
    )
    .delay(Duration::from_secs(60))
    .coalesce("hollo.poll-notification:7");
    enqueue(&db.pool, QueueName::Task, &poll).await.unwrap();
    let all = vec![ClaimBranch {
        kinds: vec![probe::KIND.into()],
        limit: 2,
    }];
    assert_eq!(
        claim::claim(
            &db.pool,
            QueueName::Task,
            Uuid::new_v4(),
            Duration::from_secs(60),
            2,
            &all
        )
        .await
        .unwrap()
        .len(),
        2
    );

    // Verbatim from the seed (000_…/001_…: support::seed_monitoring).
    let (queued, ready, delayed, pending_polls) = seed_monitoring(&db.pool).await;
    let s = queue_stats(&db.pool, QueueName::Task).await.unwrap();
    assert_eq!(
        (s.queued, s.ready, s.delayed, s.pending_polls),
        (queued, ready, delayed, pending_polls)
    );
    assert_eq!((queued, ready, delayed, pending_polls), (9, 3, 6, 1));
    assert_eq!(s.in_flight, 2);
}

#[tokio::test]
async fn a_claim_carries_fenced_completions_in_the_same_statement() {
    let db = fresh_db().await;
    let msgs: Vec<NewMessage> = (0..4)
        .map(|i| NewMessage::new(probe::KIND, serde_json::json!({ "key": format!("c{i}") })))
        .collect();
    enqueue_many(&db.pool, QueueName::Task, &msgs)
        .await
        .unwrap();
    let node = Uuid::new_v4();
    let all = vec![ClaimBranch {
        kinds: vec![probe::KIND.into()],
        limit: 4,
    }];
    let lease = Duration::from_secs(600);
    let first = claim::claim(&db.pool, QueueName::Task, node, lease, 2, &all)
        .await
        .unwrap();
    assert_eq!(first.len(), 2);
    // One genuine completion and one with a stale fencing token (as if another claim had
    // happened since): only the genuine one may delete its row.
    let done = vec![
        (first[0].id, first[0].claims),
        (first[1].id, first[1].claims + 7),
    ];
    let second = claim::claim_and_complete(&db.pool, QueueName::Task, node, lease, 2, &all, &done)
        .await
        .unwrap();
    assert_eq!(second.len(), 2, "the claim part still fills the free slots");
    let left: Vec<Uuid> = sqlx::query_scalar("SELECT id FROM hollo_task_message_v1 ORDER BY id")
        .fetch_all(&db.pool)
        .await
        .unwrap();
    assert!(!left.contains(&first[0].id), "the completion committed");
    assert!(left.contains(&first[1].id), "a stale token deletes nothing");
    assert_eq!(left.len(), 3);

    // A lease that ran out before its completion was written: the row is due again, but the
    // completion wins — it is deleted, not claimed a second time by the same statement.
    sqlx::query("UPDATE hollo_task_message_v1 SET due = now() - interval '1 s' WHERE id = $1")
        .bind(second[0].id)
        .execute(&db.pool)
        .await
        .unwrap();
    let third = claim::claim_and_complete(
        &db.pool,
        QueueName::Task,
        node,
        lease,
        4,
        &all,
        &[(second[0].id, second[0].claims)],
    )
    .await
    .unwrap();
    assert!(third.iter().all(|m| m.id != second[0].id));
    let gone: bool =
        sqlx::query_scalar("SELECT NOT EXISTS (SELECT 1 FROM hollo_task_message_v1 WHERE id = $1)")
            .bind(second[0].id)
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert!(gone);

    // Nothing to claim (no branch has room) still writes the completions it carries.
    let none = claim::claim_and_complete(
        &db.pool,
        QueueName::Task,
        node,
        lease,
        1,
        &[],
        &[(second[1].id, second[1].claims)],
    )
    .await
    .unwrap();
    assert!(none.is_empty());
    let gone: bool =
        sqlx::query_scalar("SELECT NOT EXISTS (SELECT 1 FROM hollo_task_message_v1 WHERE id = $1)")
            .bind(second[1].id)
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert!(gone, "completions are written even when nothing is claimed");
}

/// Completions whose statement fails (claim and batcher alike) are written again later, not
/// lost, and the messages do not run twice meanwhile: the rows stay leased to their worker.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn completions_that_fail_to_commit_are_written_again_not_lost() {
    let db = fresh_db().await;
    // Injected fault: every DELETE on the queue fails while `fail_deletes.on` is true.
    for stmt in [
        "CREATE TABLE fail_deletes (on_ boolean NOT NULL)",
        "INSERT INTO fail_deletes VALUES (true)",
        "CREATE FUNCTION fail_delete() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
           IF (SELECT on_ FROM fail_deletes) THEN RAISE EXCEPTION 'injected delete failure'; END IF;
           RETURN OLD;
         END $$",
        "CREATE TRIGGER fail_delete BEFORE DELETE ON hollo_task_message_v1
           FOR EACH ROW EXECUTE FUNCTION fail_delete()",
    ] {
        sqlx::query(stmt).execute(&db.pool).await.unwrap();
    }
    let n = 12;
    logged_backlog(&db, n, "f").await;
    let w = start_logging(&db, Duration::from_secs(30));
    // Only the first claim can succeed (every later one carries completions that fail).
    eventually(Duration::from_secs(20), "the first slots ran", || async {
        let ran: i64 = sqlx::query_scalar("SELECT count(*) FROM exec_log")
            .fetch_one(&db.pool)
            .await
            .ok()?;
        (ran >= 4).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let queued = queue_stats(&db.pool, QueueName::Task).await.unwrap().queued;
    assert_eq!(queued, n, "no completion could commit, so no row is gone");
    sqlx::query("UPDATE fail_deletes SET on_ = false")
        .execute(&db.pool)
        .await
        .unwrap();
    eventually(
        Duration::from_secs(30),
        "all messages handled and deleted once deletes work again",
        || async {
            let s = queue_stats(&db.pool, QueueName::Task).await.ok()?;
            (s.queued == 0).then_some(())
        },
    )
    .await;
    let (total, distinct): (i64, i64) =
        sqlx::query_as("SELECT count(*), count(DISTINCT key) FROM exec_log")
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert_eq!(
        (total, distinct),
        (n, n),
        "each message ran exactly once: failed completions were retried, not re-run"
    );
    w.shutdown().await;
}

/// A consumer keeps its claim connection while the queue has a backlog (no pool round trip
/// per claim). Killing that connection's backend mid-backlog costs one failed claim: the
/// consumer takes another connection and every message still runs and is deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_claim_connection_killed_mid_backlog_is_replaced_and_nothing_is_lost() {
    let db = fresh_db().await;
    let n = 3000;
    logged_backlog(&db, n, "c").await;
    let w = start_logging(&db, Duration::from_secs(2));
    until_count(
        &db,
        Duration::from_secs(30),
        "the backlog being drained",
        "SELECT least(count(*), 100) FROM exec_log",
        100,
    )
    .await;
    // Only the backends whose last statement was a claim.
    let (left, killed): (i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM hollo_task_message_v1),
                (SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
                  WHERE datname = current_database() AND pid <> pg_backend_pid()
                    AND query LIKE 'WITH done AS%')",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert!(left > 0, "the kill came while the backlog lasted");
    assert!(killed >= 1, "a claim connection was killed");
    until_count(
        &db,
        Duration::from_secs(60),
        "every message deleted after the kill",
        "SELECT count(*) FROM hollo_task_message_v1",
        0,
    )
    .await;
    let distinct: i64 = sqlx::query_scalar("SELECT count(DISTINCT key) FROM exec_log")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(distinct, n, "every message ran");
    w.shutdown().await;
}

/// `db::pool_options`: a connection idle for less than `PING_IF_IDLE_FOR` is handed out
/// without a round trip, an older one is checked first, so a connection that died while idle
/// (here: its backend terminated) is replaced instead of failing the next statement.
#[tokio::test]
async fn a_pooled_connection_that_died_while_idle_is_replaced() {
    let db = fresh_db().await;
    let pool = hollo_runtime::db::pool_options(1)
        .connect(&db.url)
        .await
        .unwrap();
    let first: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&pool)
        .await
        .unwrap();
    let killed: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1)")
        .bind(first)
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert!(killed);
    // Idle past the window, so the pool checks the connection before handing it out.
    tokio::time::sleep(hollo_runtime::db::PING_IF_IDLE_FOR + Duration::from_millis(200)).await;
    let second: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&pool)
        .await
        .expect("the dead connection is replaced, not handed out");
    assert_ne!(first, second, "a new backend serves the pool");
}

/// R-Q-1: a wake-up names the kind it enqueued, so a consumer that runs other kinds of the same
/// queue (the deliveries' slot pool beside the inbox) is not woken to claim for nothing; an
/// empty payload (an older node) and a reconnect still wake everyone.
#[tokio::test]
async fn a_wake_up_reaches_only_the_consumers_of_its_kind() {
    use hollo_runtime::db::listen::{self, Source, Subscriptions};
    use tokio::sync::Notify;

    let db = fresh_db().await;
    let ch = QueueName::Task.channel();
    let (mine, every) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let mut subs = Subscriptions::default();
    subs.wake_for(ch, ["test.mine".to_string()].into(), mine.clone());
    subs.wake(ch, every.clone());
    let stop = tokio_util::sync::CancellationToken::new();
    let listening = tokio::spawn(listen::run(
        Source::Pool(db.pool.clone()),
        subs,
        stop.clone(),
    ));
    let woken = |n: &Arc<Notify>, what: &'static str| {
        let n = n.clone();
        async move {
            tokio::time::timeout(Duration::from_secs(10), n.notified())
                .await
                .unwrap_or_else(|_| panic!("{what} was never woken"))
        }
    };
    // Connecting wakes both.
    woken(&mine, "the filtered subscriber at connect").await;
    woken(&every, "the plain subscriber at connect").await;

    // Enqueues one message per kind, through `enqueue` for one and `enqueue_many` for more.
    let send = |kinds: &'static [&'static str]| {
        let pool = db.pool.clone();
        async move {
            let msgs: Vec<NewMessage> = kinds
                .iter()
                .map(|k| NewMessage::new(*k, serde_json::json!({})))
                .collect();
            if let [one] = msgs.as_slice() {
                enqueue(&pool, QueueName::Task, one).await.unwrap();
            } else {
                enqueue_many(&pool, QueueName::Task, &msgs).await.unwrap();
            }
        }
    };

    // Another kind, one row and a batch: only the plain subscriber hears it. The listener
    // hands a burst to its subscribers in order, so once `every` is woken, `mine` has been
    // passed.
    send(&["test.other"]).await;
    woken(&every, "the plain subscriber by test.other").await;
    send(&["test.other", "test.other"]).await;
    woken(&every, "the plain subscriber by a batch of test.other").await;
    assert!(
        futures::FutureExt::now_or_never(mine.notified()).is_none(),
        "a consumer of test.mine was woken by test.other"
    );

    // Its own kind (in a batch with another, and alone) and an empty payload wake it.
    send(&["test.other", "test.mine"]).await;
    woken(&mine, "the filtered subscriber by its kind in a batch").await;
    send(&["test.mine"]).await;
    woken(&mine, "the filtered subscriber by its kind").await;
    sqlx::query("SELECT pg_notify($1, '')")
        .bind(ch)
        .execute(&db.pool)
        .await
        .unwrap();
    woken(&mine, "the filtered subscriber by an empty payload").await;
    stop.cancel();
    let _ = listening.await;
}

/// Every scan of the message table in `plan` (EXPLAIN's JSON), as (index, rows read past).
fn table_scans(plan: &serde_json::Value, table: &str, out: &mut Vec<(String, u64)>) {
    if plan["Relation Name"] == table {
        out.push((
            plan["Index Name"].as_str().unwrap_or("(none)").to_string(),
            plan["Rows Removed by Filter"].as_u64().unwrap_or(0),
        ));
    }
    for child in plan["Plans"].as_array().into_iter().flatten() {
        table_scans(child, table, out);
    }
}

/// R-Q-3: deliveries have slots of their own, so the activity table holds rows one consumer
/// leaves for the other. A claim reads its own kinds only: with 3 000 due messages of another
/// kind ahead of them, it gets its own messages, oldest first across its kinds, and its scans
/// read no row of the other kind (they walked all 3 000 when the activity table had only its
/// `due` index: `hollo-bench --backlog` in the README).
#[tokio::test]
async fn a_claim_reads_only_its_own_kinds_however_many_others_are_due() {
    let db = fresh_db().await;
    let queue = QueueName::Activity;
    let body = serde_json::json!({});
    let others: Vec<NewMessage> = (0..3000)
        .map(|_| NewMessage::new("hollo.inbox.v1", body.clone()))
        .collect();
    enqueue_many(&db.pool, queue, &others).await.unwrap();
    for kind in ["hollo.deliver.v1", "hollo.probe-activity.v1"] {
        let mine: Vec<NewMessage> = (0..5)
            .map(|_| NewMessage::new(kind, body.clone()))
            .collect();
        enqueue_many(&db.pool, queue, &mine).await.unwrap();
    }
    sqlx::query(sqlx::AssertSqlSafe(format!("ANALYZE {}", queue.table())))
        .execute(&db.pool)
        .await
        .unwrap();
    let branch = ClaimBranch {
        kinds: vec!["hollo.probe-activity.v1".into(), "hollo.deliver.v1".into()],
        limit: 7,
    };

    // The plan, run for real and rolled back.
    let sql = claim::statement(queue, 7, &[&branch]).unwrap();
    let mut tx = db.pool.begin().await.unwrap();
    let plan: serde_json::Value = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "EXPLAIN (ANALYZE, FORMAT JSON) {sql}"
    )))
    .bind(7i64)
    .bind(Uuid::new_v4())
    .bind(30.0f64)
    .bind(Vec::<Uuid>::new())
    .bind(Vec::<i32>::new())
    .bind(7i64)
    .fetch_one(&mut *tx)
    .await
    .unwrap();
    tx.rollback().await.unwrap();
    let mut scans = Vec::new();
    table_scans(&plan[0]["Plan"], queue.table(), &mut scans);
    // The claim's scans (the others are the primary-key lookups of the update and of the
    // completions).
    let claims: Vec<&str> = scans
        .iter()
        .map(|(index, _)| index.as_str())
        .filter(|index| index.ends_with("_due"))
        .collect();
    assert_eq!(
        claims, ["hollo_activity_message_v1_kind_due"; 2],
        "one (kind, due) scan per kind: {scans:?}\n{plan:#}"
    );
    assert!(
        scans.iter().all(|(_, past)| *past == 0),
        "rows of another kind read: {scans:?}\n{plan:#}"
    );

    // The claim itself: 7 of its 10, the 5 deliveries (enqueued first) then 2 probes.
    let got = claim::claim(
        &db.pool,
        queue,
        Uuid::new_v4(),
        Duration::from_secs(30),
        7,
        &[branch],
    )
    .await
    .unwrap();
    let kinds: Vec<&str> = got.iter().map(|m| m.kind.as_str()).collect();
    assert_eq!(kinds.len(), 7, "{kinds:?}");
    assert_eq!(
        kinds.iter().filter(|k| **k == "hollo.deliver.v1").count(),
        5,
        "oldest first across the branch's kinds: {kinds:?}"
    );
}

/// A branch of many kinds shares one scan (`kind IN (…)`) and still claims only those kinds;
/// a kind name that could not stand in SQL as a literal is refused before anything runs.
#[tokio::test]
async fn many_kinds_share_a_scan_and_odd_kind_names_are_refused() {
    let db = fresh_db().await;
    let queue = QueueName::Task;
    let body = serde_json::json!({});
    let kinds: Vec<String> = (0..6).map(|i| format!("hollo.test-{i}.v1")).collect();
    let mut batch: Vec<NewMessage> = Vec::new();
    for _ in 0..3 {
        batch.extend(
            ["hollo.test-0.v1", "hollo.test-5.v1", "hollo.elsewhere.v1"]
                .map(|k| NewMessage::new(k, body.clone())),
        );
    }
    enqueue_many(&db.pool, queue, &batch).await.unwrap();
    let node = Uuid::new_v4();
    let lease = Duration::from_secs(30);
    let branch = ClaimBranch { kinds, limit: 10 };
    let got = claim::claim(&db.pool, queue, node, lease, 10, &[branch])
        .await
        .unwrap();
    assert_eq!(got.len(), 6);
    assert!(
        got.iter().all(|m| m.kind != "hollo.elsewhere.v1"),
        "{got:?}"
    );

    for bad in ["x'; DROP TABLE accounts; --", "a b", "", "kind\\"] {
        let branch = ClaimBranch {
            kinds: vec![bad.to_string()],
            limit: 1,
        };
        let err = claim::claim(&db.pool, queue, node, lease, 1, &[branch])
            .await
            .unwrap_err();
        assert!(
            matches!(&err, sqlx::Error::InvalidArgument(m) if m.contains("kind name")),
            "{bad:?}: {err}"
        );
    }
    let left: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT count(*) FROM {} WHERE lease_owner IS NULL",
        queue.table()
    )))
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(left, 3, "only the unclaimed other kind is left");
}
