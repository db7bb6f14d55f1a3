//! Poll-expiry notifications on a real PostgreSQL (SPEC.md §7, R-POLL): never early, never
//! twice, at most 100 stored poll messages, everything recovered; plus the HTTP endpoints.
//! Time only appears as lower bounds ("not before the expiry") and polled deadlines.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test panics with its message

use crate::support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::Duration;

use hollo_runtime::federation::inbound::incoming::{Incoming, Verified};
use hollo_runtime::federation::inbound::{Activity, Outcome};
use hollo_runtime::polls::admission::{self, Admission, STORED_CAP};
use hollo_runtime::polls::{self, KIND, NewPoll, StatusEdit, recovery};
use hollo_runtime::queue::stats::queue_stats;
use hollo_runtime::queue::{NewMessage, QueueName, Registry, enqueue};
use hollo_runtime::tasks::poll_notification;
use hollo_runtime::{recovery as recovery_loop, web};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;
use support::api::Client;
use support::consumer::{Running, start_consumer};
use support::process::Hollo;
use support::{eventually, fresh_db, seed_monitoring};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

const WEEK: Duration = Duration::from_secs(7 * 86_400);
const WAIT: Duration = Duration::from_secs(120);

/// A local account with a bearer token, written directly (no key pair needed for polls).
async fn account(pool: &PgPool, name: &str) -> (Uuid, String) {
    support::account_with_token(pool, name).await
}

async fn new_poll(pool: &PgPool, author: Uuid, expires_in: i64, multiple: bool) -> Uuid {
    let p = NewPoll {
        options: vec!["a".into(), "b".into(), "c".into()],
        expires_in,
        multiple,
    };
    let (_, poll) = polls::create_status(pool, author, None, "poll?", Some(&p))
        .await
        .expect("create status");
    poll.expect("poll id")
}

/// A status of `author` (whose actor is `actor_iri`) with a two-option poll ending in an hour:
/// the status, the poll and the status's URI.
async fn hour_poll(
    pool: &PgPool,
    author: Uuid,
    actor_iri: Option<&str>,
    text: &str,
    options: [&str; 2],
    multiple: bool,
) -> (Uuid, Uuid, String) {
    let (status, poll) = polls::create_status(
        pool,
        author,
        actor_iri,
        text,
        Some(&NewPoll {
            options: options.iter().map(|o| o.to_string()).collect(),
            expires_in: 3600,
            multiple,
        }),
    )
    .await
    .unwrap();
    let uri: String = sqlx::query_scalar("SELECT uri FROM statuses WHERE id = $1")
        .bind(status)
        .fetch_one(pool)
        .await
        .unwrap();
    (status, poll.unwrap(), uri)
}

/// Sets a poll's expiry to `secs` from now (fractions allowed), as an edit would.
async fn expire_in(pool: &PgPool, poll: Uuid, secs: f64) {
    sqlx::query("UPDATE polls SET expires_at = now() + $2 * interval '1 second' WHERE id = $1")
        .bind(poll)
        .bind(secs)
        .execute(pool)
        .await
        .expect("set expiry");
}

async fn scalar(pool: &PgPool, sql: &str) -> i64 {
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_string()))
        .fetch_one(pool)
        .await
        .expect(sql)
}

async fn stored_poll_messages(pool: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM hollo_task_message_v1 WHERE kind = $1")
        .bind(KIND)
        .fetch_one(pool)
        .await
        .expect("count")
}

fn registry(chunk: Duration) -> Registry {
    let mut reg = Registry::new();
    poll_notification::register(&mut reg, chunk, None);
    reg
}

struct Worker {
    stop: CancellationToken,
    handle: tokio::task::JoinHandle<()>,
}

impl Worker {
    /// Stops at once, handing running messages back (what SIGTERM past the drain does).
    async fn kill(self) {
        self.stop.cancel();
        let _ = self.handle.await;
    }
}

/// A task consumer running the poll notifications in `chunk`s.
fn start_worker(pool: &PgPool, chunk: Duration, lease: Duration) -> Running {
    start_consumer(pool, QueueName::Task, None, 4, registry(chunk), lease)
}

fn start_recovery(pool: &PgPool, chunk: Duration, every: Duration) -> Worker {
    let stop = CancellationToken::new();
    let handle = tokio::spawn(recovery_loop::run_loop(
        pool.clone(),
        vec![Arc::new(recovery_loop::PollScan { chunk })],
        every,
        stop.clone(),
    ));
    Worker { stop, handle }
}

/// Every notification was written at or after its poll's expiry, and each poll's notified
/// set is exactly its author plus its local voters. Returns the number of notifications.
async fn assert_never_early_never_twice(pool: &PgPool) -> i64 {
    let early = scalar(
        pool,
        "SELECT count(*) FROM notifications n JOIN polls p ON p.id = n.poll_id WHERE n.created_at < p.expires_at",
    )
    .await;
    assert_eq!(early, 0, "notifications before the poll's expiry");
    let twice = scalar(
        pool,
        "SELECT count(*) FROM (SELECT 1 FROM notifications GROUP BY poll_id, account_id HAVING count(*) > 1) d",
    )
    .await;
    assert_eq!(twice, 0, "two notifications for one (poll, account)");
    let wrong = scalar(
        pool,
        "WITH want AS (SELECT p.id AS poll_id, s.account_id FROM polls p JOIN statuses s ON s.id = p.status_id
                       UNION SELECT poll_id, account_id FROM poll_votes WHERE account_id IS NOT NULL),
              got AS (SELECT poll_id, account_id FROM notifications WHERE type = 'poll')
         SELECT count(*) FROM ((SELECT * FROM want EXCEPT SELECT * FROM got)
                               UNION ALL (SELECT * FROM got EXCEPT SELECT * FROM want)) d",
    )
    .await;
    assert_eq!(wrong, 0, "notified set differs from author + local voters");
    scalar(pool, "SELECT count(*) FROM notifications").await
}

// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_far_expiry_is_stored_as_a_wakeup_of_at_most_seven_days() {
    let db = fresh_db().await;
    let (author, _) = account(&db.pool, "far").await;
    let poll = new_poll(&db.pool, author, 30 * 86_400, false).await;
    assert_eq!(
        admission::schedule(&db.pool, poll, WEEK)
            .await
            .expect("schedule"),
        Admission::Inserted
    );
    let (delay, until_due, key): (f64, f64, String) = sqlx::query_as(
        "SELECT EXTRACT(EPOCH FROM delay)::float8, EXTRACT(EPOCH FROM due - now())::float8, coalesce_key
           FROM hollo_task_message_v1 WHERE kind = $1",
    )
    .bind(KIND)
    .fetch_one(&db.pool)
    .await
    .expect("stored wakeup");
    assert!(delay <= WEEK.as_secs_f64(), "delay {delay}s");
    assert!(
        until_due <= WEEK.as_secs_f64() && until_due > WEEK.as_secs_f64() - 60.0,
        "{until_due}"
    );
    assert_eq!(key, format!("hollo.poll-notification:{poll}"));
    // A second scheduling (a vote, say) coalesces: still one stored wakeup.
    assert_eq!(
        admission::schedule(&db.pool, poll, WEEK)
            .await
            .expect("schedule"),
        Admission::Coalesced
    );
    // The seed's monitoring SQL, unchanged (support::seed_monitoring).
    let (queued, ready, delayed, pending_polls) = seed_monitoring(&db.pool).await;
    assert_eq!((queued, ready, delayed, pending_polls), (1, 0, 1, 1));
    let st = queue_stats(&db.pool, QueueName::Task).await.expect("stats");
    assert_eq!(st.pending_polls, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_wakeup_before_the_expiry_reschedules_and_notifies_only_after_it() {
    let db = fresh_db().await;
    let (author, _) = account(&db.pool, "chunky").await;
    let (voter, _) = account(&db.pool, "voter").await;
    let poll = new_poll(&db.pool, author, 3, false).await;
    polls::vote(&db.pool, None, poll, voter, &[1])
        .await
        .expect("vote");
    // 1 s chunks: the wakeup runs twice or three times before the 3 s expiry.
    let chunk = Duration::from_secs(1);
    admission::schedule(&db.pool, poll, chunk)
        .await
        .expect("schedule");
    let w = start_worker(&db.pool, chunk, Duration::from_secs(30));
    eventually(WAIT, "the poll's notifications", || async {
        (scalar(&db.pool, "SELECT count(*) FROM notifications").await == 2).then_some(())
    })
    .await;
    w.shutdown().await;
    assert_eq!(assert_never_early_never_twice(&db.pool).await, 2);
    assert_eq!(stored_poll_messages(&db.pool).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn admission_coalesces_pulls_earlier_evicts_the_latest_and_defers_at_the_cap() {
    let db = fresh_db().await;
    let (author, _) = account(&db.pool, "capped").await;
    let p = new_poll(&db.pool, author, 3600, false).await;
    assert_eq!(
        admission::schedule(&db.pool, p, WEEK).await.unwrap(),
        Admission::Inserted
    );
    // A later expiry does not move the wakeup (the handler re-reads and reschedules).
    expire_in(&db.pool, p, 7200.0).await;
    assert_eq!(
        admission::schedule(&db.pool, p, WEEK).await.unwrap(),
        Admission::Coalesced
    );
    // An earlier one pulls it earlier.
    expire_in(&db.pool, p, 60.0).await;
    assert_eq!(
        admission::schedule(&db.pool, p, WEEK).await.unwrap(),
        Admission::Advanced
    );
    let until: f64 = sqlx::query_scalar(
        "SELECT EXTRACT(EPOCH FROM due - now())::float8 FROM hollo_task_message_v1 WHERE kind = $1",
    )
    .bind(KIND)
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert!(until <= 60.0 && until > 50.0, "{until}");

    // Fill up to the cap with wakeups 1–2 h away (the latest one is p's neighbour `last`).
    let mut last = p;
    for i in 1..STORED_CAP {
        let q = new_poll(&db.pool, author, 3600 + i, false).await;
        assert_eq!(
            admission::schedule(&db.pool, q, WEEK).await.unwrap(),
            Admission::Inserted
        );
        last = q;
    }
    assert_eq!(stored_poll_messages(&db.pool).await, STORED_CAP);
    // An earlier wakeup evicts the latest-due one; the count stays at the cap.
    let early = new_poll(&db.pool, author, 30, false).await;
    assert_eq!(
        admission::schedule(&db.pool, early, WEEK).await.unwrap(),
        Admission::Evicted {
            evicted: Some(last)
        }
    );
    assert_eq!(stored_poll_messages(&db.pool).await, STORED_CAP);
    // A wakeup later than all stored ones is deferred.
    let late = new_poll(&db.pool, author, 9000, false).await;
    assert_eq!(
        admission::schedule(&db.pool, late, WEEK).await.unwrap(),
        Admission::DeferredCapacity
    );
    // Running (leased) messages are never evicted: lease them all, then try an earlier one.
    sqlx::query("UPDATE hollo_task_message_v1 SET lease_owner = gen_random_uuid() WHERE kind = $1")
        .bind(KIND)
        .execute(&db.pool)
        .await
        .unwrap();
    let earliest = new_poll(&db.pool, author, 5, false).await;
    assert_eq!(
        admission::schedule(&db.pool, earliest, WEEK).await.unwrap(),
        Admission::DeferredCapacity
    );
    assert_eq!(stored_poll_messages(&db.pool).await, STORED_CAP);
    // A notified poll needs nothing.
    sqlx::query("UPDATE polls SET notified_at = now() WHERE id = $1")
        .bind(late)
        .execute(&db.pool)
        .await
        .unwrap();
    assert_eq!(
        admission::schedule(&db.pool, late, WEEK).await.unwrap(),
        Admission::NotNeeded
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_busy_admission_lock_defers_after_one_second_and_recovery_schedules_later() {
    let db = fresh_db().await;
    let (author, _) = account(&db.pool, "locked").await;
    let poll = new_poll(&db.pool, author, 1, false).await;
    let mut holder = db.pool.begin().await.unwrap();
    sqlx::query("SELECT pg_advisory_xact_lock(1752132716, 1886350444)")
        .execute(&mut *holder)
        .await
        .unwrap();
    let started = std::time::Instant::now();
    assert_eq!(
        admission::schedule(&db.pool, poll, WEEK).await.unwrap(),
        Admission::LockTimeout
    );
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "gave up before the 1 s timeout"
    );
    assert_eq!(stored_poll_messages(&db.pool).await, 0);
    holder.rollback().await.unwrap();

    // After the expiry the scan finds it; the scan itself writes no notification.
    eventually(WAIT, "expiry", || async {
        (polls::unnotified_expired(&db.pool).await.unwrap() == 1).then_some(())
    })
    .await;
    let page = recovery::scan_page(&db.pool, WEEK).await.unwrap();
    assert_eq!((page.examined, page.scheduled), (1, 1));
    assert_eq!(
        scalar(&db.pool, "SELECT count(*) FROM notifications").await,
        0
    );
    let w = start_worker(&db.pool, WEEK, Duration::from_secs(30));
    eventually(WAIT, "the recovered notification", || async {
        (scalar(&db.pool, "SELECT count(*) FROM notifications").await == 1).then_some(())
    })
    .await;
    w.shutdown().await;
    assert_never_early_never_twice(&db.pool).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_recovery_cursor_advances_past_waiting_polls_wraps_and_pauses_on_a_busy_queue() {
    let db = fresh_db().await;
    let (author, _) = account(&db.pool, "backlog").await;
    for _ in 0..250 {
        let p = new_poll(&db.pool, author, 3600, false).await;
        expire_in(&db.pool, p, -10.0).await;
    }
    // Page 1: 100 polls, all stored (the cap is reached).
    let r = recovery::scan_page(&db.pool, WEEK).await.unwrap();
    assert_eq!((r.examined, r.scheduled, r.wrapped), (100, 100, false));
    // Page 2: the next 100, although the first 100 still wait; all deferred at the cap.
    let r = recovery::scan_page(&db.pool, WEEK).await.unwrap();
    assert_eq!((r.examined, r.scheduled, r.wrapped), (100, 0, false));
    // Page 3: the last 50, short → wraps.
    let r = recovery::scan_page(&db.pool, WEEK).await.unwrap();
    assert_eq!((r.examined, r.wrapped), (50, true));
    // Page 4 starts again from the beginning.
    let r = recovery::scan_page(&db.pool, WEEK).await.unwrap();
    assert_eq!((r.examined, r.wrapped), (100, false));
    assert_eq!(stored_poll_messages(&db.pool).await, STORED_CAP);
    assert_eq!(
        scalar(&db.pool, "SELECT count(*) FROM notifications").await,
        0
    );

    // 200 ready messages (100 poll wakeups + 100 others): recovery pauses.
    let scans: Vec<Arc<dyn recovery_loop::Scan>> =
        vec![Arc::new(recovery_loop::PollScan { chunk: WEEK })];
    assert!(
        recovery_loop::tick(&db.pool, &scans).await,
        "runs below 200 ready"
    );
    for i in 0..100 {
        enqueue(
            &db.pool,
            QueueName::Task,
            &NewMessage::new("hollo.probe.v1", json!({"key": i})),
        )
        .await
        .unwrap();
    }
    assert!(
        !recovery_loop::tick(&db.pool, &scans).await,
        "paused at 200 ready"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn random_votes_expiry_changes_duplicates_and_restarts_never_notify_early_or_twice() {
    for seed in [1u64, 2, 3] {
        let db = fresh_db().await;
        let mut rng = StdRng::seed_from_u64(seed);
        // 1 s chunks: expiries of up to 4 s are reached through reschedules too.
        let chunk = Duration::from_secs(1);
        let mut accounts_ = Vec::new();
        for i in 0..5 {
            accounts_.push(account(&db.pool, &format!("u{seed}_{i}")).await.0);
        }
        let mut polls_ = Vec::new();
        for _ in 0..12 {
            let author = accounts_[rng.gen_range(0..accounts_.len())];
            let p = new_poll(&db.pool, author, 60, rng.gen_bool(0.5)).await;
            expire_in(&db.pool, p, rng.gen_range(0.3..3.0)).await;
            admission::schedule(&db.pool, p, chunk).await.unwrap();
            polls_.push(p);
        }
        let mut workers = vec![
            start_worker(&db.pool, chunk, Duration::from_secs(3)),
            start_worker(&db.pool, chunk, Duration::from_secs(3)),
        ];
        let recov = start_recovery(&db.pool, chunk, Duration::from_millis(500));
        for _ in 0..120 {
            let p = polls_[rng.gen_range(0..polls_.len())];
            match rng.gen_range(0..6) {
                0 | 1 => {
                    let voter = accounts_[rng.gen_range(0..accounts_.len())];
                    // Rejections (ended, already voted, single choice) are part of the game.
                    if polls::vote(&db.pool, None, p, voter, &[rng.gen_range(0..3)])
                        .await
                        .is_ok()
                    {
                        admission::schedule(&db.pool, p, chunk).await.unwrap();
                    }
                }
                2 | 3 => {
                    // Earlier or later, through the same path as PUT /api/v1/statuses/{id}.
                    let status: Uuid =
                        sqlx::query_scalar("SELECT status_id FROM polls WHERE id = $1")
                            .bind(p)
                            .fetch_one(&db.pool)
                            .await
                            .unwrap();
                    let author: Uuid =
                        sqlx::query_scalar("SELECT account_id FROM statuses WHERE id = $1")
                            .bind(status)
                            .fetch_one(&db.pool)
                            .await
                            .unwrap();
                    let edit = StatusEdit {
                        expires_in: Some(rng.gen_range(1..4)),
                        has_poll: true,
                        ..StatusEdit::default()
                    };
                    if polls::edit_status(&db.pool, status, author, &edit)
                        .await
                        .is_ok()
                    {
                        admission::schedule(&db.pool, p, chunk).await.unwrap();
                    }
                }
                4 => {
                    // A duplicate message outside admission (e.g. from an old node).
                    let delay = Duration::from_millis(rng.gen_range(0..2000));
                    enqueue(
                        &db.pool,
                        QueueName::Task,
                        &NewMessage::new(KIND, json!({ "pollId": p })).delay(delay),
                    )
                    .await
                    .unwrap();
                }
                _ => {
                    // A worker restart: stop one at once, start a fresh one.
                    let i = rng.gen_range(0..workers.len());
                    workers.remove(i).shutdown().await;
                    workers.push(start_worker(&db.pool, chunk, Duration::from_secs(3)));
                }
            }
            tokio::time::sleep(Duration::from_millis(rng.gen_range(0..40))).await;
        }
        eventually(WAIT, "every poll notified", || async {
            (scalar(
                &db.pool,
                "SELECT count(*) FROM polls WHERE notified_at IS NULL",
            )
            .await
                == 0)
                .then_some(())
        })
        .await;
        // Let leftover duplicates run too: they must add nothing.
        eventually(WAIT, "the queue to drain", || async {
            (scalar(&db.pool, "SELECT count(*) FROM hollo_task_message_v1").await == 0)
                .then_some(())
        })
        .await;
        for w in workers {
            w.shutdown().await;
        }
        recov.kill().await;
        let n = assert_never_early_never_twice(&db.pool).await;
        assert!(n >= polls_.len() as i64, "seed {seed}: {n} notifications");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_burst_of_1000_polls_never_stores_more_than_100_and_notifies_each_once() {
    let db = fresh_db().await;
    // Four consumers × 4 slots, schedulers, recovery and the sampler need more than the
    // default test pool.
    let pool = PgPoolOptions::new()
        .max_connections(40)
        .connect(&db.url)
        .await
        .expect("pool");
    let (author, _) = account(&pool, "burst").await;
    let ids: Vec<Uuid> = sqlx::query_scalar(
        "WITH s AS (
            INSERT INTO statuses (id, account_id, uri, content)
            SELECT gen_random_uuid(), $1, 'urn:burst:' || g, 'burst' FROM generate_series(1, 1000) g
            RETURNING id)
         INSERT INTO polls (id, status_id, options, expires_at)
         SELECT gen_random_uuid(), s.id, '[\"a\",\"b\"]', now() + interval '2 seconds' + random() * interval '2 seconds'
           FROM s RETURNING id",
    )
    .bind(author)
    .fetch_all(&pool)
    .await
    .expect("1000 polls");
    assert_eq!(ids.len(), 1000);

    let max_seen = Arc::new(AtomicI64::new(0));
    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = {
        let (pool, max_seen, sampling) = (pool.clone(), max_seen.clone(), sampling.clone());
        tokio::spawn(async move {
            let mut samples = 0u64;
            while sampling.load(Ordering::SeqCst) {
                let n = stored_poll_messages(&pool).await;
                max_seen.fetch_max(n, Ordering::SeqCst);
                samples += 1;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            samples
        })
    };
    let workers: Vec<Running> = (0..4)
        .map(|_| start_worker(&pool, WEEK, Duration::from_secs(30)))
        .collect();
    // Web nodes schedule the burst: 8 concurrent schedulers.
    let mut schedulers = Vec::new();
    for chunk in ids.chunks(125) {
        let (pool, chunk) = (pool.clone(), chunk.to_vec());
        schedulers.push(tokio::spawn(async move {
            for id in chunk {
                admission::schedule(&pool, id, WEEK)
                    .await
                    .expect("schedule");
            }
        }));
    }
    for s in schedulers {
        s.await.expect("scheduler");
    }
    assert!(stored_poll_messages(&pool).await <= STORED_CAP);
    let recov = start_recovery(&pool, WEEK, Duration::from_millis(200));
    eventually(
        Duration::from_secs(300),
        "all 1000 polls notified",
        || async {
            (scalar(
                &pool,
                "SELECT count(*) FROM polls WHERE notified_at IS NULL",
            )
            .await
                == 0)
                .then_some(())
        },
    )
    .await;
    sampling.store(false, Ordering::SeqCst);
    let samples = sampler.await.expect("sampler");
    recov.kill().await;
    for w in workers {
        w.shutdown().await;
    }
    let max = max_seen.load(Ordering::SeqCst);
    assert!(
        max <= STORED_CAP,
        "{max} poll messages stored at one sample"
    );
    assert!(samples > 10, "only {samples} samples");
    assert_eq!(assert_never_early_never_twice(&pool).await, 1000);
    assert_eq!(
        scalar(&pool, "SELECT count(DISTINCT poll_id) FROM notifications").await,
        1000
    );
    assert_eq!(stored_poll_messages(&pool).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn remote_votes_count_once_and_never_after_the_end() {
    let db = fresh_db().await;
    let (author, _) = account(&db.pool, "remote_host").await;
    let (_, poll, uri) = hour_poll(
        &db.pool,
        author,
        Some("https://here.example/users/remote_host"),
        "vote!",
        ["red", "blue"],
        false,
    )
    .await;
    let actor = "https://there.example/users/bob";
    let vote = |id: &str, name: &str, by: &str| Incoming {
        id: id.into(),
        ty: "Create".into(),
        actor: actor.into(),
        account_id: None,
        body: json!({
            "id": id, "type": "Create", "actor": actor,
            "object": {"id": format!("{id}/note"), "type": "Note", "name": name,
                       "inReplyTo": uri, "attributedTo": by},
        }),
        processed_at: None,
    };
    let fed = hollo_runtime::federation::Federation::new(
        "https://here.example",
        "polls-test-secret-0123456789abcdef0123",
        true,
        4,
    )
    .expect("federation");
    let apply = |inc: Incoming| {
        let pool = db.pool.clone();
        let fed = &fed;
        async move {
            let mut tx = pool.begin().await.unwrap();
            let Activity::Vote { ballot, .. } = Activity::of(&inc) else {
                panic!("not read as a vote: {inc:?}");
            };
            let r = polls::remote::apply_vote(&mut tx, fed, &inc.id, &inc.actor, &ballot)
                .await
                .unwrap()
                .map(|v| Outcome::from(v).to_string());
            tx.commit().await.unwrap();
            r
        }
    };
    assert_eq!(
        apply(vote("https://there.example/a/1", "blue", actor))
            .await
            .as_deref(),
        Some("poll vote stored")
    );
    assert!(
        apply(vote("https://there.example/a/2", "red", actor))
            .await
            .unwrap()
            .contains("already voted")
    );
    assert!(
        apply(vote("https://there.example/a/3", "green", actor))
            .await
            .unwrap()
            .contains("no option")
    );
    assert!(
        apply(vote(
            "https://there.example/a/4",
            "red",
            "https://there.example/users/eve"
        ))
        .await
        .unwrap()
        .contains("not attributed")
    );
    // Not a vote on our poll: left to the usual inbox processing.
    let mut other = vote("https://there.example/a/5", "red", actor);
    other.body["object"]["inReplyTo"] = json!("https://elsewhere.example/notes/1");
    assert_eq!(apply(other).await, None);
    expire_in(&db.pool, poll, -1.0).await;
    assert!(
        apply(vote(
            "https://there.example/a/6",
            "red",
            "https://there.example/users/bob"
        ))
        .await
        .unwrap()
        .contains("ended")
    );
    let mut conn = db.pool.acquire().await.unwrap();
    let p = serde_json::to_value(
        hollo_runtime::mastodon::poll::of_poll(&mut conn, poll, None)
            .await
            .unwrap()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(p["votes_count"], 1);
    assert_eq!(p["options"][1]["votes_count"], 1);
    assert_eq!(p["expired"], true);
}

// ---------------------------------------------------------------------------------------------
// HTTP

struct Http {
    base: String,
    /// The health router (`/metrics`) of the same state.
    health: String,
}

impl Http {
    async fn start(pool: &PgPool) -> Http {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let health_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let health = format!("http://{}", health_listener.local_addr().unwrap());
        let state = web::AppState::new(pool.clone(), None);
        let health_app = web::health_router(state.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, web::router(state)).await;
        });
        tokio::spawn(async move {
            let _ = axum::serve(health_listener, health_app).await;
        });
        Http { base, health }
    }

    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        token: Option<&str>,
        body: Option<&str>,
    ) -> (u16, Value) {
        let api = Client::at(&self.base, token);
        match body {
            Some(b) => api.raw(method, path, "application/json", b).await,
            None => api.bare(method, path).await,
        }
        .parts()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn http_polls_votes_expiry_edits_and_notifications() {
    use reqwest::Method;
    let db = fresh_db().await;
    let http = Http::start(&db.pool).await;
    let (_, alice) = account(&db.pool, "alice").await;
    let (_, bob) = account(&db.pool, "bob").await;

    let (code, st) = http
        .call(Method::POST, "/api/v1/statuses", Some(&alice),
            Some(r#"{"status":"Tea or coffee?","poll":{"options":["tea","coffee"],"expires_in":3600}}"#))
        .await;
    assert_eq!(code, 200, "{st}");
    let status_id = st["id"].as_str().unwrap().to_string();
    let poll_id = st["poll"]["id"].as_str().unwrap().to_string();
    assert_eq!(
        st["poll"]["options"][0],
        json!({"title": "tea", "votes_count": 0})
    );
    assert_eq!(st["poll"]["voted"], false);
    assert_eq!(stored_poll_messages(&db.pool).await, 1);

    // Bad input: 4xx with {"error"} and nothing written.
    for (token, body, want) in [
        (None, r#"{"status":"x"}"#, 401),
        (Some("nope"), r#"{"status":"x"}"#, 401),
        (Some(alice.as_str()), "{not json", 400),
        (
            Some(alice.as_str()),
            r#"{"status":"x","poll":{"options":["one"],"expires_in":60}}"#,
            422,
        ),
        (
            Some(alice.as_str()),
            r#"{"status":"x","poll":{"options":["a","b"],"expires_in":-1}}"#,
            422,
        ),
        (
            Some(alice.as_str()),
            r#"{"status":"x","poll":{"options":["a","b"]}}"#,
            422,
        ),
        (Some(alice.as_str()), r#"{}"#, 422),
    ] {
        let (code, err) = http
            .call(Method::POST, "/api/v1/statuses", token, Some(body))
            .await;
        assert_eq!(code, want, "{body}: {err}");
        assert!(err["error"].is_string(), "{err}");
    }
    let big = format!(r#"{{"status":"{}"}}"#, "x".repeat(100_000));
    let (code, err) = http
        .call(Method::POST, "/api/v1/statuses", Some(&alice), Some(&big))
        .await;
    assert_eq!(code, 413, "{err}");
    assert_eq!(scalar(&db.pool, "SELECT count(*) FROM statuses").await, 1);
    assert_eq!(scalar(&db.pool, "SELECT count(*) FROM polls").await, 1);

    // Votes.
    let votes = format!("/api/v1/polls/{poll_id}/votes");
    for (body, want) in [
        (r#"{"choices":[5]}"#, 422),
        (r#"{"choices":[0,1]}"#, 422),
        (r#"{"choices":[]}"#, 422),
        (r#"{"choice":0}"#, 422),
        ("[", 400),
    ] {
        let (code, err) = http
            .call(Method::POST, &votes, Some(&bob), Some(body))
            .await;
        assert_eq!(code, want, "{body}: {err}");
    }
    assert_eq!(scalar(&db.pool, "SELECT count(*) FROM poll_votes").await, 0);
    let (code, p) = http
        .call(
            Method::POST,
            &votes,
            Some(&bob),
            Some(r#"{"choices":["1"]}"#),
        )
        .await;
    assert_eq!(code, 200, "{p}");
    assert_eq!(
        (
            p["voted"].clone(),
            p["own_votes"].clone(),
            p["votes_count"].clone()
        ),
        (json!(true), json!([1]), json!(1))
    );
    let (code, _) = http
        .call(Method::POST, &votes, Some(&bob), Some(r#"{"choices":[0]}"#))
        .await;
    assert_eq!(code, 422, "a second vote");
    let (code, _) = http
        .call(
            Method::POST,
            &format!("/api/v1/polls/{}/votes", Uuid::new_v4()),
            Some(&bob),
            Some(r#"{"choices":[0]}"#),
        )
        .await;
    assert_eq!(code, 404);
    let (code, _) = http
        .call(Method::GET, "/api/v1/polls/not-a-uuid", None, None)
        .await;
    assert_eq!(code, 404);
    let (code, p) = http
        .call(Method::GET, &format!("/api/v1/polls/{poll_id}"), None, None)
        .await;
    assert_eq!(code, 200);
    assert_eq!(p["options"][1]["votes_count"], 1);
    assert!(
        p.get("voted").is_none(),
        "anonymous reads have no own votes"
    );
    assert_eq!(
        stored_poll_messages(&db.pool).await,
        1,
        "the vote coalesced"
    );

    // Expiry edits: only the author, only poll.expires_in, only before the end.
    let edit = format!("/api/v1/statuses/{status_id}");
    let (code, _) = http
        .call(
            Method::PUT,
            &edit,
            Some(&bob),
            Some(r#"{"poll":{"expires_in":2}}"#),
        )
        .await;
    assert_eq!(code, 403);
    let (code, _) = http
        .call(
            Method::PUT,
            &edit,
            Some(&alice),
            Some(r#"{"poll":{"options":["x","y"],"expires_in":2}}"#),
        )
        .await;
    assert_eq!(code, 422);
    let (code, st) = http
        .call(
            Method::PUT,
            &edit,
            Some(&alice),
            Some(r#"{"poll":{"expires_in":2}}"#),
        )
        .await;
    assert_eq!(code, 200, "{st}");
    let until: f64 = sqlx::query_scalar(
        "SELECT EXTRACT(EPOCH FROM due - now())::float8 FROM hollo_task_message_v1 WHERE kind = $1",
    )
    .bind(KIND)
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert!(
        until <= 2.0,
        "the earlier expiry pulled the wakeup earlier: {until}"
    );

    let (code, n) = http
        .call(Method::GET, "/api/v1/notifications", Some(&alice), None)
        .await;
    assert_eq!((code, n), (200, json!([])));
    let w = start_worker(&db.pool, WEEK, Duration::from_secs(30));
    for token in [&alice, &bob] {
        let list = eventually(WAIT, "a poll notification", || async {
            let (_, n) = http
                .call(Method::GET, "/api/v1/notifications", Some(token), None)
                .await;
            n.as_array().filter(|a| !a.is_empty()).cloned()
        })
        .await;
        assert_eq!(list.len(), 1);
        assert_eq!(list[0]["type"], "poll");
        assert_eq!(list[0]["status"]["id"], json!(status_id));
        assert_eq!(list[0]["status"]["poll"]["expired"], true);
        assert_eq!(list[0]["account"]["username"], "alice");
    }
    w.shutdown().await;
    assert_never_early_never_twice(&db.pool).await;
    let (code, _) = http
        .call(
            Method::PUT,
            &edit,
            Some(&alice),
            Some(r#"{"poll":{"expires_in":60}}"#),
        )
        .await;
    assert_eq!(code, 422, "an ended poll keeps its end");
    let (code, _) = http
        .call(
            Method::POST,
            &votes,
            Some(&alice),
            Some(r#"{"choices":[0]}"#),
        )
        .await;
    assert_eq!(code, 422, "no votes after the end");
    let (code, _) = http
        .call(
            Method::GET,
            "/api/v1/notifications?limit=abc",
            Some(&alice),
            None,
        )
        .await;
    assert_eq!(code, 422, "a bad limit, as every Mastodon list answers it");
    let text = reqwest::get(format!("{}/metrics", http.health))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        text.contains("hollo_poll_notification_enqueue_attempts_total{outcome=\"coalesced\"}"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_remote_vote_goes_through_the_inbox_task_and_is_not_stored_as_a_post() {
    use hollo_runtime::config::{Env, QueueConfig};
    use hollo_runtime::federation::{Federation, inbound};
    let db = fresh_db().await;
    let fed = Arc::new(
        Federation::new(
            "http://localhost:39999",
            "polls-test-secret-0123456789abcdef0123",
            true,
            4,
        )
        .expect("federation"),
    );
    let (author, _) = account(&db.pool, "carol").await;
    let (_, poll, uri) = hour_poll(
        &db.pool,
        author,
        Some(&fed.actor_iri("carol")),
        "which?",
        ["left", "right"],
        true,
    )
    .await;
    let actor = "https://there.example/users/dan";
    for (i, name) in ["left", "right", "right"].iter().enumerate() {
        let id = format!("https://there.example/activities/{i}");
        let body = json!({
            "id": id, "type": "Create", "actor": actor,
            "object": {"id": format!("{id}/note"), "type": "Note", "name": name,
                       "inReplyTo": uri, "attributedTo": actor, "to": [fed.actor_iri("carol")]},
        });
        let verified = Verified {
            id: &id,
            ty: "Create",
            actor,
            body: &body,
        };
        inbound::incoming::store(&db.pool, None, &format!("{actor}#main-key"), &verified)
            .await
            .expect("store");
    }
    let q = QueueConfig::from_env(&Env::from_pairs([])).expect("queue config");
    let consumer = start_consumer(
        &db.pool,
        QueueName::Activity,
        None,
        10,
        hollo_runtime::tasks::registry(&q, Some(fed.clone())),
        Duration::from_secs(30),
    );
    eventually(WAIT, "the three votes processed", || async {
        (scalar(
            &db.pool,
            "SELECT count(*) FROM inbox_activities WHERE processed_at IS NOT NULL",
        )
        .await
            == 3)
            .then_some(())
    })
    .await;
    consumer.shutdown().await;
    // The two votes for "right" race (the consumer runs them concurrently): one of them wins.
    let outcomes: Vec<String> =
        sqlx::query_scalar("SELECT outcome FROM inbox_activities ORDER BY outcome DESC")
            .fetch_all(&db.pool)
            .await
            .unwrap();
    assert_eq!(
        outcomes,
        vec![
            "poll vote stored",
            "poll vote stored",
            "ignored: vote already stored"
        ]
    );
    assert_eq!(
        scalar(&db.pool, "SELECT count(*) FROM remote_posts").await,
        0
    );
    let mut conn = db.pool.acquire().await.unwrap();
    let p = serde_json::to_value(
        hollo_runtime::mastodon::poll::of_poll(&mut conn, poll, None)
            .await
            .unwrap()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        (p["votes_count"].clone(), p["voters_count"].clone()),
        (json!(2), json!(1))
    );
}

// ---------------------------------------------------------------------------------------------
// The binary: recovery runs on worker nodes (at start and every interval), never on web nodes.

fn free_port() -> String {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port().to_string())
        .expect("free port")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn worker_nodes_recover_expired_polls_and_web_nodes_do_not() {
    let db = fresh_db().await;
    let (author, _) = account(&db.pool, "proc").await;
    // Expired, never scheduled: only recovery can find it.
    let poll = new_poll(&db.pool, author, 3600, false).await;
    expire_in(&db.pool, poll, -5.0).await;

    let web = Hollo::serve(&[
        ("NODE_TYPE", "web"),
        ("DATABASE_URL", &db.url),
        ("PORT", &free_port()),
        ("RECOVERY_INTERVAL_SECONDS", "1"),
    ]);
    eventually(WAIT, "the web node listening", || async {
        web.logs().contains("listening for HTTP").then_some(())
    })
    .await;
    // Three recovery intervals: a web node must not have scheduled anything.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(stored_poll_messages(&db.pool).await, 0, "{}", web.logs());
    drop(web);

    let worker = Hollo::serve(&[
        ("NODE_TYPE", "worker"),
        ("DATABASE_URL", &db.url),
        ("HEALTH_PORT", &free_port()),
        ("RECOVERY_INTERVAL_SECONDS", "1"),
        ("QUEUE_POLL_MS", "200"),
    ]);
    eventually(WAIT, "the worker notifying the recovered poll", || async {
        (scalar(&db.pool, "SELECT count(*) FROM notifications").await == 1).then_some(())
    })
    .await;
    assert!(
        worker.logs().contains("Worker started"),
        "{}",
        worker.logs()
    );
    assert_never_early_never_twice(&db.pool).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_failed_executions_end_the_message_and_recovery_schedules_the_poll_again() {
    let db = fresh_db().await;
    let (author, _) = account(&db.pool, "flaky").await;
    let poll = new_poll(&db.pool, author, 1, false).await;
    admission::schedule(&db.pool, poll, WEEK).await.unwrap();
    // Every run fails transiently while the notifications table is away.
    sqlx::query("ALTER TABLE notifications RENAME TO notifications_away")
        .execute(&db.pool)
        .await
        .unwrap();
    let w = start_worker(&db.pool, WEEK, Duration::from_secs(30));
    let attempts: i32 = eventually(WAIT, "the message to fail for good", || async {
        sqlx::query_scalar("SELECT attempts FROM hollo_failed_message WHERE kind = $1")
            .bind(KIND)
            .fetch_optional(&db.pool)
            .await
            .unwrap()
    })
    .await;
    assert_eq!(attempts, 3, "three executions in total");
    assert_eq!(stored_poll_messages(&db.pool).await, 0);
    sqlx::query("ALTER TABLE notifications_away RENAME TO notifications")
        .execute(&db.pool)
        .await
        .unwrap();
    let recov = start_recovery(&db.pool, WEEK, Duration::from_millis(200));
    eventually(WAIT, "the recovered notification", || async {
        (scalar(&db.pool, "SELECT count(*) FROM notifications").await == 1).then_some(())
    })
    .await;
    recov.kill().await;
    w.shutdown().await;
    assert_never_early_never_twice(&db.pool).await;
}

// ---------------------------------------------------------------------------------------------
// Blocks, and remote polls: a real node (`Instance`), the test peer as their server.

mod across_servers {
    use super::*;
    use reqwest::Method;
    use support::api::{Client, call_ok, received, remote_post_id, users};
    use support::node::Instance;
    use support::peer::Peer;

    const PUBLIC: &str = "https://www.w3.org/ns/activitystreams#Public";

    /// Waits until the inbox processed the activity `id`; its outcome.
    async fn processed(inst: &Instance, id: &str) -> String {
        eventually(WAIT, "the activity processed", || async {
            sqlx::query_scalar(
                "SELECT outcome FROM inbox_activities WHERE id = $1 AND processed_at IS NOT NULL",
            )
            .bind(id)
            .fetch_optional(&inst.pool)
            .await
            .unwrap()
        })
        .await
    }

    /// Delivers `activity` signed by the peer's `/users/{author}` to our shared inbox; the
    /// outcome once processed.
    async fn deliver(inst: &Instance, peer: &Peer, author: &str, activity: &Value) -> String {
        let status = peer
            .post_as(author, &format!("{}/inbox", inst.base), activity)
            .await;
        assert_eq!(status, 202, "{activity}");
        processed(inst, activity["id"].as_str().unwrap()).await
    }

    /// The peer's `/users/{author}` votes `name` on our status `uri`, as Mastodon sends it.
    fn remote_vote(peer: &Peer, author: &str, uri: &str, name: &str) -> Value {
        let actor = peer.actor_of(author);
        let note = peer.new_id("votes");
        json!({
            "id": format!("{note}/activity"), "type": "Create", "actor": actor,
            "object": {"id": note, "type": "Note", "name": name, "inReplyTo": uri,
                       "attributedTo": actor, "to": [uri.rsplit_once("/statuses/").unwrap().0]},
        })
    }

    async fn votes_stored(inst: &Instance, poll: &str) -> i64 {
        sqlx::query_scalar("SELECT count(*) FROM poll_votes WHERE poll_id = $1::uuid")
            .bind(poll)
            .fetch_one(&inst.pool)
            .await
            .unwrap()
    }

    /// A vote across a block is refused, whichever side blocked, on our polls as on Mastodon
    /// (its `PollPolicy#vote?`): a local voter gets a 403 (or, where the block hides the post
    /// from them, the 404 of a poll they cannot see), a remote vote is ignored; nothing is
    /// counted. Once the block is lifted, the vote counts.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn votes_across_a_block_are_refused_either_way() {
        let inst = Instance::start("all", &[]).await;
        let peer = Peer::start().await;
        let [(alice, _, alice_api), (bob, _, bob_api)] = users(&inst, ["alice", "bob"]).await;
        let st = alice_api
            .posted(&json!({"status": "Tea or coffee?",
                            "poll": {"options": ["tea", "coffee"], "expires_in": 3600}}))
            .await;
        let poll = st["poll"]["id"].as_str().unwrap().to_string();
        let votes = format!("/api/v1/polls/{poll}/votes");

        for (blocker, blocked) in [(&alice_api, &bob), (&bob_api, &alice)] {
            let path = format!("/api/v1/accounts/{}/block", blocked.id);
            call_ok(blocker, Method::POST, &path, json!({})).await;
            let a = bob_api
                .call(Method::POST, &votes, &json!({"choices": [0]}))
                .await;
            assert!(
                matches!(a.status, 403 | 404),
                "{} is blocked: bob's vote answered {} {}",
                blocked.username,
                a.status,
                a.body
            );
            assert!(a.body["error"].is_string(), "{}", a.body);
            assert_eq!(votes_stored(&inst, &poll).await, 0, "a vote across a block");
            let path = format!("/api/v1/accounts/{}/unblock", blocked.id);
            call_ok(blocker, Method::POST, &path, json!({})).await;
        }
        let a = bob_api
            .call(Method::POST, &votes, &json!({"choices": [0]}))
            .await;
        assert_eq!(a.status, 200, "once unblocked: {}", a.body);

        // Remote voters: one alice blocks, one that blocks alice.
        let uri = st["uri"].as_str().unwrap();
        let mallory = peer.actor_of("mallory");
        let mallory_id = support::api::resolve_id(&alice_api, &peer.handle_of("mallory")).await;
        let path = format!("/api/v1/accounts/{mallory_id}/block");
        call_ok(&alice_api, Method::POST, &path, json!({})).await;
        let outcome = deliver(
            &inst,
            &peer,
            "mallory",
            &remote_vote(&peer, "mallory", uri, "tea"),
        )
        .await;
        assert!(outcome.contains("block"), "mallory's vote: {outcome}");
        let block = json!({
            "id": peer.new_id("blocks"), "type": "Block", "actor": peer.actor_of("trent"),
            "object": inst.fed.actor_iri("alice"),
        });
        deliver(&inst, &peer, "trent", &block).await;
        let outcome = deliver(
            &inst,
            &peer,
            "trent",
            &remote_vote(&peer, "trent", uri, "tea"),
        )
        .await;
        assert!(outcome.contains("block"), "trent's vote: {outcome}");
        assert_eq!(votes_stored(&inst, &poll).await, 1, "only bob's vote");
        let n: i64 = sqlx::query_scalar("SELECT count(*) FROM remote_posts")
            .fetch_one(&inst.pool)
            .await
            .unwrap();
        assert_eq!(
            n, 0,
            "a refused vote is not stored as a post either ({mallory})"
        );
        inst.shutdown().await;
    }

    /// A `Question` of the peer's `/users/{author}` at `id`: options `(name, count)` as
    /// `oneOf` (or `anyOf` when `multiple`), with `extra` merged in.
    fn question(
        peer: &Peer,
        author: &str,
        id: &str,
        options: &[(&str, i64)],
        multiple: bool,
        extra: Value,
    ) -> Value {
        let options: Vec<Value> = options
            .iter()
            .map(|(name, n)| {
                json!({"type": "Note", "name": name,
                       "replies": {"type": "Collection", "totalItems": n}})
            })
            .collect();
        let mut q = json!({
            "id": id, "type": "Question", "attributedTo": peer.actor_of(author),
            "content": "<p>Which one?</p>", "published": "2026-12-01T10:00:00Z",
            "to": [PUBLIC], "cc": [peer.iri(&format!("/users/{author}/followers"))],
        });
        q[if multiple { "anyOf" } else { "oneOf" }] = json!(options);
        for (k, v) in extra.as_object().expect("an object") {
            q[k] = v.clone();
        }
        q
    }

    /// An `Update` of `object` by the peer's `/users/{by}`.
    fn update(peer: &Peer, by: &str, object: Value) -> Value {
        json!({"id": peer.new_id("updates"), "type": "Update", "actor": peer.actor_of(by),
               "to": [PUBLIC], "object": object})
    }

    fn create_by(peer: &Peer, by: &str, object: Value) -> Value {
        let mut c = peer.create(object);
        c["actor"] = json!(peer.actor_of(by));
        c
    }

    fn in_an_hour() -> String {
        (chrono::Utc::now() + chrono::Duration::hours(1)).to_rfc3339()
    }

    /// (title, votes) of each option of the Poll entity `p`.
    fn tally_of(p: &Value) -> Vec<(String, i64)> {
        p["options"]
            .as_array()
            .expect("options")
            .iter()
            .map(|o| {
                (
                    o["title"].as_str().unwrap().to_string(),
                    o["votes_count"].as_i64().unwrap(),
                )
            })
            .collect()
    }

    fn pairs(v: &[(&str, i64)]) -> Vec<(String, i64)> {
        v.iter().map(|(t, n)| (t.to_string(), *n)).collect()
    }

    /// A remote poll (issue 61): shown in its status and at `/api/v1/polls/:id` with the
    /// origin's options and counts; a vote is counted at once and sent as Mastodon sends it
    /// (one `Create` of a `Note` named as the option, in reply to the poll, to its author
    /// alone); a second vote, a bad choice and a vote after the end are refused; the author's
    /// `Update`s refresh the counts and close it (no edit), and an `Update` from anyone else —
    /// another account of its server, or another server — changes nothing.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn a_remote_poll_is_shown_voted_on_and_refreshed_by_its_author_only() {
        let inst = Instance::start("all", &[]).await;
        let peer = Peer::start().await;
        let other = Peer::start_on("127.0.0.2").await;
        let [(_, _, alice_api), (_, _, bob_api)] = users(&inst, ["alice", "bob"]).await;
        let q = peer.new_id("questions");
        let end = in_an_hour();
        let first = question(
            &peer,
            "peer",
            &q,
            &[("a", 1), ("b", 2), ("c", 0)],
            false,
            json!({"endTime": end, "votersCount": 3}),
        );
        let outcome = deliver(&inst, &peer, "peer", &create_by(&peer, "peer", first)).await;
        assert_eq!(outcome, "Question stored");
        let sid = remote_post_id(&inst, &q, "the question").await.to_string();
        let st = alice_api.get(&format!("/api/v1/statuses/{sid}")).await.body;
        let p = &st["poll"];
        assert_eq!(tally_of(p), pairs(&[("a", 1), ("b", 2), ("c", 0)]), "{st}");
        assert_eq!(
            (
                &p["votes_count"],
                &p["voters_count"],
                &p["multiple"],
                &p["expired"]
            ),
            (&json!(3), &json!(3), &json!(false), &json!(false)),
            "{p}"
        );
        assert_eq!((&p["voted"], &p["own_votes"]), (&json!(false), &json!([])));
        let ends = chrono::DateTime::parse_from_rfc3339(p["expires_at"].as_str().unwrap());
        let end_sent = chrono::DateTime::parse_from_rfc3339(&end).unwrap();
        assert_eq!(ends.unwrap().timestamp(), end_sent.timestamp());
        let poll = p["id"].as_str().unwrap().to_string();
        let anon = Client::new(&inst, None)
            .get(&format!("/api/v1/polls/{poll}"))
            .await;
        assert_eq!(anon.status, 200, "{}", anon.body);
        assert_eq!(tally_of(&anon.body), tally_of(p));
        assert!(anon.body.get("voted").is_none(), "{}", anon.body);

        // Votes: bad choices refused; one counted at once and sent.
        let votes = format!("/api/v1/polls/{poll}/votes");
        for bad in [
            json!({"choices": [3]}),
            json!({"choices": [0, 1]}),
            json!({"choices": [-1]}),
        ] {
            let a = alice_api.call(Method::POST, &votes, &bad).await;
            assert_eq!(a.status, 422, "{bad}: {}", a.body);
        }
        let a = alice_api
            .call(Method::POST, &votes, &json!({"choices": [1]}))
            .await;
        assert_eq!(a.status, 200, "{}", a.body);
        assert_eq!(tally_of(&a.body), pairs(&[("a", 1), ("b", 3), ("c", 0)]));
        assert_eq!(
            (
                &a.body["voted"],
                &a.body["own_votes"],
                &a.body["votes_count"],
                &a.body["voters_count"]
            ),
            (&json!(true), &json!([1]), &json!(4), &json!(4)),
            "{}",
            a.body
        );
        let create = received(&peer, "Create", |b| b["object"]["inReplyTo"] == q.as_str()).await;
        let alice = inst.fed.actor_iri("alice");
        let o = &create["object"];
        assert_eq!(
            (&create["actor"], &o["type"], &o["name"], &o["attributedTo"]),
            (&json!(alice), &json!("Note"), &json!("b"), &json!(alice)),
            "{create}"
        );
        assert_eq!(
            create["to"],
            json!([peer.actor()]),
            "to the author alone: {create}"
        );
        assert_eq!(o["to"], json!([peer.actor()]), "{create}");
        assert!(
            create.get("cc").is_none() && o.get("cc").is_none(),
            "addressed to no one else: {create}"
        );
        let again = alice_api
            .call(Method::POST, &votes, &json!({"choices": [0]}))
            .await;
        assert_eq!(again.status, 422, "a second vote: {}", again.body);
        assert_eq!(peer.count_of("Create"), 1, "one vote, one Create");

        // Updates from anyone but the author change nothing.
        let theirs = question(
            &peer,
            "eve",
            &q,
            &[("a", 900), ("b", 0), ("c", 0)],
            false,
            json!({"endTime": end, "votersCount": 900}),
        );
        let outcome = deliver(&inst, &peer, "eve", &update(&peer, "eve", theirs)).await;
        assert!(outcome.starts_with("ignored"), "eve's update: {outcome}");
        let forged = question(
            &peer,
            "peer",
            &q,
            &[("a", 900), ("b", 0), ("c", 0)],
            false,
            json!({"endTime": end, "votersCount": 900}),
        );
        let outcome = deliver(&inst, &other, "peer", &update(&other, "peer", forged)).await;
        assert!(
            outcome.starts_with("ignored"),
            "another server's update: {outcome}"
        );
        let p = bob_api.get(&format!("/api/v1/polls/{poll}")).await.body;
        assert_eq!(tally_of(&p), pairs(&[("a", 1), ("b", 3), ("c", 0)]), "{p}");

        // The author's new counts: shown, and no edit.
        let counted = question(
            &peer,
            "peer",
            &q,
            &[("a", 1), ("b", 4), ("c", 1)],
            false,
            json!({"endTime": end, "votersCount": 6}),
        );
        let outcome = deliver(&inst, &peer, "peer", &update(&peer, "peer", counted)).await;
        assert_eq!(outcome, "Question poll counts updated");
        let st = alice_api.get(&format!("/api/v1/statuses/{sid}")).await.body;
        assert_eq!(
            tally_of(&st["poll"]),
            pairs(&[("a", 1), ("b", 4), ("c", 1)])
        );
        assert_eq!(st["poll"]["voters_count"], 6);
        assert_eq!(
            st["poll"]["own_votes"],
            json!([1]),
            "alice's vote is still hers"
        );
        assert!(st["edited_at"].is_null(), "new counts are no edit: {st}");

        // Closed by its author: the closing totals; no more votes.
        let closed = question(
            &peer,
            "peer",
            &q,
            &[("a", 2), ("b", 4), ("c", 1)],
            false,
            json!({"endTime": end, "closed": chrono::Utc::now().to_rfc3339(), "votersCount": 7}),
        );
        deliver(&inst, &peer, "peer", &update(&peer, "peer", closed)).await;
        let p = bob_api.get(&format!("/api/v1/polls/{poll}")).await.body;
        assert_eq!(p["expired"], true, "{p}");
        assert_eq!(tally_of(&p), pairs(&[("a", 2), ("b", 4), ("c", 1)]));
        assert_eq!(
            (&p["votes_count"], &p["voters_count"]),
            (&json!(7), &json!(7))
        );
        let late = bob_api
            .call(Method::POST, &votes, &json!({"choices": [0]}))
            .await;
        assert_eq!(late.status, 422, "a vote after the end: {}", late.body);
        assert_eq!(
            peer.count_of("Create"),
            1,
            "nothing sent for a refused vote"
        );
        inst.shutdown().await;
    }

    /// A remote poll of several choices: a vote for two options is two `Create`s; when the
    /// poll ends, its local voter is notified (its author is not ours), no one else.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn a_vote_for_several_options_sends_each_and_its_voter_hears_of_the_end() {
        let inst = Instance::start("all", &[]).await;
        let peer = Peer::start().await;
        let [(alice, _, alice_api), (bob, _, _)] = users(&inst, ["alice", "bob"]).await;
        let q = peer.new_id("questions");
        let end = (chrono::Utc::now() + chrono::Duration::seconds(8)).to_rfc3339();
        let poll = question(
            &peer,
            "peer",
            &q,
            &[("x", 0), ("y", 1), ("z", 0)],
            true,
            json!({"endTime": end}),
        );
        deliver(&inst, &peer, "peer", &create_by(&peer, "peer", poll)).await;
        let sid = remote_post_id(&inst, &q, "the question").await.to_string();
        let st = alice_api.get(&format!("/api/v1/statuses/{sid}")).await.body;
        let p = &st["poll"];
        assert_eq!(
            (&p["multiple"], &p["voters_count"]),
            (&json!(true), &Value::Null),
            "{p}"
        );
        let votes = format!("/api/v1/polls/{}/votes", p["id"].as_str().unwrap());
        let a = alice_api
            .call(Method::POST, &votes, &json!({"choices": [0, 2]}))
            .await;
        assert_eq!(a.status, 200, "{}", a.body);
        assert_eq!(tally_of(&a.body), pairs(&[("x", 1), ("y", 1), ("z", 1)]));
        assert_eq!(a.body["own_votes"], json!([0, 2]));
        eventually(WAIT, "both votes at the peer", || async {
            (peer.count_of("Create") == 2).then_some(())
        })
        .await;
        let mut names: Vec<String> = peer
            .bodies()
            .iter()
            .filter(|b| b["type"] == "Create")
            .map(|b| b["object"]["name"].as_str().unwrap().to_string())
            .collect();
        names.sort();
        assert_eq!(names, ["x", "z"]);

        let n: Value = eventually(WAIT, "alice's poll notification", || async {
            let list = alice_api
                .get("/api/v1/notifications?types[]=poll")
                .await
                .body;
            list.as_array().and_then(|l| l.first().cloned())
        })
        .await;
        assert_eq!(n["status"]["id"], json!(sid), "{n}");
        assert_eq!(n["status"]["poll"]["expired"], true, "{n}");
        assert_eq!(n["account"]["acct"], json!(peer.handle()), "{n}");
        let others: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM notifications WHERE type = 'poll' AND account_id <> $1",
        )
        .bind(alice.id)
        .fetch_one(&inst.pool)
        .await
        .unwrap();
        assert_eq!(
            others, 0,
            "only the voter is notified (not {})",
            bob.username
        );
        inst.shutdown().await;
    }

    /// A remote poll without end (GoToSocial's may have none) takes votes until its author
    /// closes it; new options are a new poll (as on Mastodon, the votes for the old go), and
    /// an edit.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn an_endless_remote_poll_closes_when_its_author_says_and_new_options_are_a_new_poll() {
        let inst = Instance::start("all", &[]).await;
        let peer = Peer::start().await;
        let [(_, _, alice_api)] = users(&inst, ["alice"]).await;
        let q = peer.new_id("questions");
        let first = question(&peer, "peer", &q, &[("p", 0), ("q", 0)], false, json!({}));
        deliver(&inst, &peer, "peer", &create_by(&peer, "peer", first)).await;
        let sid = remote_post_id(&inst, &q, "the question").await.to_string();
        let st = alice_api.get(&format!("/api/v1/statuses/{sid}")).await.body;
        assert!(st["poll"]["expires_at"].is_null(), "{st}");
        assert_eq!(st["poll"]["expired"], false);
        let poll = st["poll"]["id"].as_str().unwrap().to_string();
        let votes = format!("/api/v1/polls/{poll}/votes");
        let a = alice_api
            .call(Method::POST, &votes, &json!({"choices": [0]}))
            .await;
        assert_eq!(a.status, 200, "{}", a.body);

        let changed = question(
            &peer,
            "peer",
            &q,
            &[("p", 0), ("q", 0), ("r", 0)],
            false,
            json!({}),
        );
        let outcome = deliver(&inst, &peer, "peer", &update(&peer, "peer", changed)).await;
        assert_eq!(outcome, "Question updated");
        let st = alice_api.get(&format!("/api/v1/statuses/{sid}")).await.body;
        assert_eq!(
            tally_of(&st["poll"]),
            pairs(&[("p", 0), ("q", 0), ("r", 0)])
        );
        assert_eq!(
            (&st["poll"]["voted"], &st["poll"]["own_votes"]),
            (&json!(false), &json!([]))
        );
        assert!(st["edited_at"].is_string(), "new options are an edit: {st}");

        let closed = question(
            &peer,
            "peer",
            &q,
            &[("p", 0), ("q", 0), ("r", 1)],
            false,
            json!({"closed": true}),
        );
        deliver(&inst, &peer, "peer", &update(&peer, "peer", closed)).await;
        let p = alice_api.get(&format!("/api/v1/polls/{poll}")).await.body;
        assert_eq!(p["expired"], true, "{p}");
        assert!(p["expires_at"].is_string(), "{p}");
        let late = alice_api
            .call(Method::POST, &votes, &json!({"choices": [2]}))
            .await;
        assert_eq!(late.status, 422, "{}", late.body);
        inst.shutdown().await;
    }

    /// GoToSocial sends every `Update` of a post under one id (`<post>/activity#Update`): each
    /// new count and the close refresh the poll (before, only the first was read: the others
    /// were taken for redeliveries of it), while a real redelivery still changes nothing.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn gotosocial_updates_under_one_id_each_refresh_the_poll() {
        let inst = Instance::start("all", &[]).await;
        let peer = Peer::start().await;
        let [(_, _, alice_api)] = users(&inst, ["alice"]).await;
        let q = peer.iri("/users/peer/statuses/01GTSPOLL");
        let end = in_an_hour();
        let poll = |counts: [i64; 2], extra: Value| {
            let mut extra = extra;
            extra["endTime"] = json!(end);
            extra["votersCount"] = json!(counts.iter().sum::<i64>());
            question(
                &peer,
                "peer",
                &q,
                &[("cats", counts[0]), ("dogs", counts[1])],
                false,
                extra,
            )
        };
        deliver(
            &inst,
            &peer,
            "peer",
            &create_by(&peer, "peer", poll([0, 0], json!({}))),
        )
        .await;
        let sid = remote_post_id(&inst, &q, "the question").await.to_string();
        let one_id = |object: Value| {
            let mut u = update(&peer, "peer", object);
            u["id"] = json!(format!("{q}/activity#Update"));
            u
        };
        let shown = |want: [i64; 2], expired: bool| {
            let api = &alice_api;
            let path = format!("/api/v1/statuses/{sid}");
            async move {
                eventually(WAIT, "the update shown", || async {
                    let p = api.get(&path).await.body["poll"].clone();
                    let counts = tally_of(&p).iter().map(|(_, n)| *n).collect::<Vec<_>>();
                    (counts == want && p["expired"] == expired).then_some(())
                })
                .await
            }
        };
        let inbox = format!("{}/inbox", inst.base);
        let second = one_id(poll([1, 1], json!({})));
        for (update, want) in [
            (one_id(poll([1, 0], json!({}))), [1, 0]),
            (second.clone(), [1, 1]),
        ] {
            assert_eq!(peer.post_as("peer", &inbox, &update).await, 202);
            shown(want, false).await;
        }
        assert_eq!(
            peer.post_as("peer", &inbox, &second).await,
            202,
            "a redelivery"
        );
        let closed = one_id(poll(
            [2, 1],
            json!({"closed": chrono::Utc::now().to_rfc3339()}),
        ));
        assert_eq!(peer.post_as("peer", &inbox, &closed).await, 202);
        shown([2, 1], true).await;
        let stored: i64 =
            sqlx::query_scalar("SELECT count(*) FROM inbox_activities WHERE id LIKE $1 || '%'")
                .bind(format!("{q}/activity#Update"))
                .fetch_one(&inst.pool)
                .await
                .unwrap();
        assert_eq!(stored, 3, "three Updates, the redelivery not again");
        inst.shutdown().await;
    }
}
