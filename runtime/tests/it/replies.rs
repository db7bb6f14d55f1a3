//! Remote reply collection (R-RPL) against a test remote server on 127.0.0.1 that serves
//! scripted collections, records every request's arrival time and checks our signature. Each
//! test has its own database; workers run in-process (task consumers with the collector) except
//! in the SIGKILL test, which runs the real binary.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test panics with its message

use crate::support;

use std::time::{Duration, Instant};

use hollo_runtime::accounts::Account;
use hollo_runtime::config::ReplyConfig;
use hollo_runtime::tasks::replies::{self, recovery};
use serde_json::{Value, json};
use support::eventually;
use support::node::Instance;
use support::peer::{Peer, Reply};
use support::process::Hollo;
use uuid::Uuid;

const SECRET: &str = "replies-test-secret-0123456789abcdef";
const WAIT: Duration = Duration::from_secs(30);

fn fast_config() -> ReplyConfig {
    ReplyConfig {
        max_depth: 2,
        max_items: 100,
        max_requests: 200,
        host_interval: Duration::from_millis(50),
        cooldown: Duration::from_secs(300),
        retry_after_default: Duration::from_secs(300),
        lease: Duration::from_secs(900),
        recovery_interval: Duration::from_secs(60),
    }
}

// The test remote server is support::peer::Peer (its documents, scripted answers and hits).

// ---------------------------------------------------------------------------------------------
// Our instance: web router and any number of in-process task workers.

/// A web node on a fresh database (tests/support/node.rs); reply-collection workers are worker
/// nodes configured by `REPLY_*` settings, as in production.
async fn instance() -> Instance {
    Instance::start("web", &[("SECRET_KEY", SECRET)]).await
}

/// An instance, a remote server and alice, whose key the remote expects on signed fetches;
/// alice's token.
async fn with_remote() -> (Instance, Peer, Account, String) {
    let inst = instance().await;
    let remote = Peer::start().await;
    let (alice, token) = inst.account("alice").await;
    remote.expect_key(&alice.public_key_pem);
    (inst, remote, alice, token)
}

/// As `with_remote`, with the remote's post at `path` stored here: the post's IRI and its
/// `replies` collection's.
async fn with_stored_post(path: &str) -> (Instance, Peer, Account, String, String) {
    let (inst, remote, alice, _) = with_remote().await;
    let (_, post, replies_iri) = store_post(&inst, &remote, path).await;
    (inst, remote, alice, post, replies_iri)
}

/// `cfg` as the environment a worker node reads it from.
fn reply_env(cfg: &ReplyConfig) -> Vec<(&'static str, String)> {
    vec![
        ("REPLY_MAX_DEPTH", cfg.max_depth.to_string()),
        ("REPLY_MAX_ITEMS", cfg.max_items.to_string()),
        ("REPLY_MAX_REQUESTS", cfg.max_requests.to_string()),
        (
            "REPLY_HOST_INTERVAL_MS",
            cfg.host_interval.as_millis().to_string(),
        ),
        ("REPLY_COOLDOWN_SECONDS", cfg.cooldown.as_secs().to_string()),
        (
            "REPLY_RETRY_AFTER_SECONDS",
            cfg.retry_after_default.as_secs().to_string(),
        ),
        ("REPLY_LEASE_SECONDS", cfg.lease.as_secs().to_string()),
        (
            "RECOVERY_INTERVAL_SECONDS",
            cfg.recovery_interval.as_secs().to_string(),
        ),
    ]
}

/// What the reply tests add to the shared instance (an inherent impl: `support` is part of
/// this test crate).
impl Instance {
    /// A worker node with the collector configured as `cfg`.
    async fn reply_worker(&mut self, cfg: &ReplyConfig) {
        self.reply_worker_with(cfg, &[]).await
    }

    /// A worker with more settings (e.g. `ALLOW_PRIVATE_ADDRESS=false`).
    async fn reply_worker_with(&mut self, cfg: &ReplyConfig, extra: &[(&str, &str)]) {
        let env = reply_env(cfg);
        let mut pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        pairs.extend_from_slice(extra);
        self.worker(&pairs).await;
    }

    async fn api(&self, method: &str, path: &str, token: &str, body: Option<&str>) -> (u16, Value) {
        let client = reqwest::Client::new();
        let url = format!("{}{path}", self.base);
        let mut req = match method {
            "POST" => client.post(url),
            _ => client.get(url),
        };
        if !token.is_empty() {
            req = req.bearer_auth(token);
        }
        if let Some(b) = body {
            req = req
                .header("content-type", "application/json")
                .body(b.to_string());
        }
        let resp = req.send().await.expect("request");
        let code = resp.status().as_u16();
        (code, resp.json().await.unwrap_or(Value::Null))
    }

    async fn job(&self, id: Uuid) -> JobRow {
        sqlx::query_as(
            "SELECT status, error, pages_fetched, requests, items_stored, attempts
               FROM reply_collection_jobs WHERE id = $1",
        )
        .bind(id)
        .fetch_one(&self.pool)
        .await
        .expect("job")
    }

    async fn until_status(&self, id: Uuid, want: &[&str]) -> JobRow {
        eventually(WAIT, &format!("job {id} to reach {want:?}"), || async {
            let j = self.job(id).await;
            want.contains(&j.status.as_str()).then_some(j)
        })
        .await
    }
}

#[derive(Debug, sqlx::FromRow)]
struct JobRow {
    status: String,
    error: Option<String>,
    pages_fetched: i32,
    requests: i32,
    items_stored: i32,
    attempts: i32,
}

/// A post of the remote with a replies collection, stored as the inbox would store it.
async fn store_post(inst: &Instance, remote: &Peer, path: &str) -> (Uuid, String, String) {
    let iri = remote.iri(path);
    let replies = format!("{iri}/replies");
    // The inbox stores a post's author before the post.
    hollo_runtime::federation::actors::actor::fetch_actor(
        &inst.pool,
        &inst.fed,
        &remote.iri("/users/bob"),
        None,
        None,
    )
    .await
    .expect("the author");
    let id: Uuid = sqlx::query_scalar(
        "INSERT INTO remote_posts (iri, actor, content, replies_iri, body)
         VALUES ($1, $2, 'root', $3, '{}') RETURNING id",
    )
    .bind(&iri)
    .bind(remote.iri("/users/bob"))
    .bind(&replies)
    .fetch_one(&inst.pool)
    .await
    .expect("post");
    (id, iri, replies)
}

async fn request(inst: &Instance, account: &Account, post: &str, replies_iri: &str) -> Uuid {
    replies::request(&inst.pool, post, replies_iri, Some(account.id), 2)
        .await
        .expect("request")
        .id()
}

// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn collections_are_walked_inline_and_by_iri_to_depth_2_storing_each_reply_once() {
    let (mut inst, remote, _alice, token) = with_remote().await;
    let (post_id, post, _) = store_post(&inst, &remote, "/notes/1").await;
    // From here the remote serves actors only to signed GETs (as under authorized fetch).
    remote.set_access(support::peer::ActorAccess::SignedOnly);
    // Root collection: `first` inline with two inline replies, `next` by IRI with one reply by
    // IRI and a duplicate of an inline one. r1 has its own replies (depth 2) by IRI; r1a has
    // replies too, but depth 3 is never fetched.
    let r1 = remote.note(
        "/notes/r1",
        &post,
        Some(json!({ "id": remote.iri("/notes/r1/replies"), "type": "Collection" })),
    );
    remote.doc(
        "/notes/1/replies",
        json!({
            "id": remote.iri("/notes/1/replies"), "type": "OrderedCollection",
            "first": {
                "type": "OrderedCollectionPage", "orderedItems": [r1, remote.note("/notes/r2", &post, None)],
                "next": remote.iri("/notes/1/replies-page-2"),
            },
        }),
    );
    remote.doc(
        "/notes/1/replies-page-2",
        json!({ "type": "OrderedCollectionPage", "orderedItems": [remote.iri("/notes/r3"), remote.note("/notes/r2", &post, None)] }),
    );
    // r3 is carol's, whom we have not met: her actor is fetched so the reply can be shown.
    let mut r3 = remote.note("/notes/r3", &post, None);
    r3["attributedTo"] = json!(remote.iri("/users/carol"));
    remote.doc("/notes/r3", r3);
    remote.doc(
        "/notes/r1/replies",
        json!({
            "type": "Collection",
            "first": { "type": "CollectionPage", "items": [
                remote.note("/notes/r1a", &remote.iri("/notes/r1"),
                    Some(json!({ "id": remote.iri("/notes/r1a/replies"), "type": "Collection" }))),
            ]},
        }),
    );
    remote.doc(
        "/notes/r1a/replies",
        json!({ "type": "Collection", "items": [] }),
    );
    inst.reply_worker(&fast_config()).await;

    // Viewing the post requests the collection; viewing it again does not make a second job.
    let (code, ctx) = inst
        .api(
            "GET",
            &format!("/api/v1/statuses/{post_id}/context"),
            &token,
            None,
        )
        .await;
    assert_eq!(code, 200, "{ctx}");
    let job: Uuid = ctx["replyCollection"]["id"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .expect("a job is requested");
    let (code, again) = inst
        .api(
            "GET",
            &format!("/api/v1/statuses/{post_id}/context"),
            &token,
            None,
        )
        .await;
    assert_eq!(code, 200);
    assert_eq!(again["replyCollection"]["id"], ctx["replyCollection"]["id"]);

    let j = inst
        .until_status(job, &["completed", "partial", "failed"])
        .await;
    assert_eq!(j.status, "completed", "{j:?}");
    assert_eq!(j.items_stored, 4, "r1, r2, r3 and r1a: {j:?}");
    // Root collection, page 2, r3 by IRI, carol, r1's collection. Never r1a's (depth 3).
    assert_eq!(j.requests, 5, "{j:?}");
    assert!(
        !remote.actor_gets().is_empty() && remote.actor_gets().iter().all(|g| g.verified.is_ok()),
        "carol was fetched with a signature: {:?}",
        remote.actor_gets()
    );
    let carol: i64 = sqlx::query_scalar("SELECT count(*) FROM remote_actors WHERE iri = $1")
        .bind(remote.iri("/users/carol"))
        .fetch_one(&inst.pool)
        .await
        .expect("count");
    assert_eq!(carol, 1, "the reply's author is stored");
    let hits = remote.hits();
    assert!(hits.iter().all(|h| h.signed.is_ok()), "{hits:?}");
    assert!(
        !hits.iter().any(|h| h.path == "/notes/r1a/replies"),
        "{hits:?}"
    );
    assert_eq!(
        inst.count("SELECT count(*) FROM remote_posts").await,
        5,
        "the post and four replies, each once"
    );

    let (code, shown) = inst
        .api(
            "GET",
            &format!("/api/v1/reply-collections/{job}"),
            &token,
            None,
        )
        .await;
    assert_eq!(code, 200);
    assert_eq!(shown["status"], "completed");
    assert_eq!(shown["pagesFetched"], j.pages_fetched);
    assert_eq!(shown["itemsStored"], 4);
    assert!(shown["nextAttemptAt"].is_null());
    let (_, ctx) = inst
        .api(
            "GET",
            &format!("/api/v1/statuses/{post_id}/context"),
            &token,
            None,
        )
        .await;
    assert_eq!(
        ctx["descendants"].as_array().map(Vec::len),
        Some(4),
        "{ctx}"
    );
    assert_eq!(
        inst.count("SELECT count(*) FROM reply_collection_jobs")
            .await,
        1
    );

    // Within the cooldown a new request changes nothing; after it, the same job runs again
    // and finds nothing new to store.
    sqlx::query("UPDATE reply_collection_jobs SET cooldown_until = now()")
        .execute(&inst.pool)
        .await
        .expect("end cooldown");
    let (code, body) = inst
        .api(
            "POST",
            "/api/v1/reply-collections",
            &token,
            Some(&json!({ "url": post }).to_string()),
        )
        .await;
    assert_eq!(code, 202, "{body}");
    assert_eq!(body["id"], json!(job));
    let j = inst.until_status(job, &["completed", "failed"]).await;
    assert_eq!(
        (j.status.as_str(), j.items_stored),
        ("completed", 0),
        "{j:?}"
    );
    assert_eq!(inst.count("SELECT count(*) FROM remote_posts").await, 5);
    let (code, _) = inst
        .api(
            "POST",
            "/api/v1/reply-collections",
            &token,
            Some(&json!({ "url": post }).to_string()),
        )
        .await;
    assert_eq!(code, 200, "cooling down: the existing job is shown");

    // The depth-2 reply's context: its ancestors, the thread's root first.
    let r1a: Uuid = sqlx::query_scalar("SELECT id FROM remote_posts WHERE iri = $1")
        .bind(remote.iri("/notes/r1a"))
        .fetch_one(&inst.pool)
        .await
        .expect("r1a");
    let (code, ctx) = inst
        .api(
            "GET",
            &format!("/api/v1/statuses/{r1a}/context"),
            &token,
            None,
        )
        .await;
    assert_eq!(code, 200, "{ctx}");
    let up: Vec<&str> = ctx["ancestors"]
        .as_array()
        .expect("ancestors")
        .iter()
        .filter_map(|a| a["uri"].as_str())
        .collect();
    assert_eq!(
        up,
        [post.as_str(), remote.iri("/notes/r1").as_str()],
        "{ctx}"
    );
    let (_, root) = inst
        .api(
            "GET",
            &format!("/api/v1/statuses/{post_id}/context"),
            &token,
            None,
        )
        .await;
    assert_eq!(root["ancestors"], json!([]), "the root has none");
    inst.shutdown().await;
}

/// A collection of `n` inline replies split into pages of 2 linked by IRI.
fn paged(remote: &Peer, post: &str, prefix: &str, n: usize) {
    let pages = n.div_ceil(2);
    for p in 0..pages {
        let items: Vec<Value> = (p * 2..(p * 2 + 2).min(n))
            .map(|i| remote.note(&format!("{prefix}/r{i}"), post, None))
            .collect();
        let mut page = json!({ "type": "OrderedCollectionPage", "orderedItems": items });
        if p + 1 < pages {
            page["next"] = json!(remote.iri(&format!("{prefix}/page{}", p + 1)));
        }
        let path = if p == 0 {
            format!("{prefix}/replies")
        } else {
            format!("{prefix}/page{p}")
        };
        remote.doc(&path, page);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn item_and_request_caps_end_the_job_as_partial() {
    let (mut inst, remote, alice, _) = with_remote().await;
    let (_, post_a, _) = store_post(&inst, &remote, "/a").await;
    let (_, post_b, _) = store_post(&inst, &remote, "/b").await;
    paged(&remote, &post_a, "/a", 10);
    paged(&remote, &post_b, "/b", 10);
    let cfg = ReplyConfig {
        max_items: 3,
        max_requests: 3,
        ..fast_config()
    };
    inst.reply_worker(&cfg).await;
    let a = request(&inst, &alice, &post_a, &remote.iri("/a/replies")).await;
    let j = inst
        .until_status(a, &["completed", "partial", "failed"])
        .await;
    assert_eq!((j.status.as_str(), j.items_stored), ("partial", 3), "{j:?}");
    assert_eq!(j.requests, 2, "{j:?}");

    let cfg = ReplyConfig {
        max_items: 100,
        max_requests: 2,
        ..fast_config()
    };
    inst.reply_worker(&cfg).await;
    // Only the second worker can take it: stop the first.
    inst.workers()[0].begin_shutdown();
    let b = request(&inst, &alice, &post_b, &remote.iri("/b/replies")).await;
    let j = inst
        .until_status(b, &["completed", "partial", "failed"])
        .await;
    assert_eq!(j.status, "partial", "{j:?}");
    assert_eq!((j.requests, j.items_stored), (2, 4), "{j:?}");
    let b_hits = remote
        .hits()
        .iter()
        .filter(|h| h.path.starts_with("/b/"))
        .count();
    assert_eq!(b_hits, 2);
    inst.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_workers_never_hit_one_host_faster_than_the_interval() {
    let (mut inst, remote, alice, _) = with_remote().await;
    let interval = Duration::from_millis(400);
    let cfg = ReplyConfig {
        host_interval: interval,
        ..fast_config()
    };
    let mut jobs = Vec::new();
    for k in 0..3 {
        let prefix = format!("/p{k}");
        let (_, post, _) = store_post(&inst, &remote, &prefix).await;
        paged(&remote, &post, &prefix, 6);
        jobs.push(
            request(
                &inst,
                &alice,
                &post,
                &remote.iri(&format!("{prefix}/replies")),
            )
            .await,
        );
    }
    inst.reply_worker(&cfg).await;
    inst.reply_worker(&cfg).await;
    for j in &jobs {
        let r = inst
            .until_status(*j, &["completed", "partial", "failed"])
            .await;
        assert_eq!(
            (r.status.as_str(), r.items_stored),
            ("completed", 6),
            "{r:?}"
        );
    }
    let mut times: Vec<Instant> = remote.hits().iter().map(|h| h.at).collect();
    times.sort();
    assert_eq!(times.len(), 9, "three pages per job");
    for w in times.windows(2) {
        assert!(
            w[1] - w[0] >= interval,
            "two requests to one host {:?} apart",
            w[1] - w[0]
        );
    }
    inst.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_429_with_retry_after_is_retried_no_earlier_than_it_says() {
    let (mut inst, remote, alice, token) = with_remote().await;
    let (_, post, replies_iri) = store_post(&inst, &remote, "/n").await;
    paged(&remote, &post, "/n", 2);
    remote.script_doc("/n/replies", [Reply::RetryAfter(429, 3)]);
    inst.reply_worker(&fast_config()).await;
    let job = request(&inst, &alice, &post, &replies_iri).await;
    let waiting = eventually(WAIT, "the job to go back to waiting", || async {
        let j = inst.job(job).await;
        (j.status == "waiting" && j.error.is_some()).then_some(j)
    })
    .await;
    assert_eq!(waiting.error.as_deref(), Some("HTTP 429"));
    let (_, shown) = inst
        .api(
            "GET",
            &format!("/api/v1/reply-collections/{job}"),
            &token,
            None,
        )
        .await;
    assert!(shown["nextAttemptAt"].is_string(), "{shown}");
    let j = inst.until_status(job, &["completed", "failed"]).await;
    assert_eq!(
        (j.status.as_str(), j.items_stored, j.attempts),
        ("completed", 2, 2),
        "{j:?}"
    );
    let hits = remote.hits();
    assert_eq!(hits.len(), 2, "{hits:?}");
    assert!(
        hits[1].at - hits[0].at >= Duration::from_secs(3),
        "retried after {:?}",
        hits[1].at - hits[0].at
    );
    inst.shutdown().await;
}

/// R-AP-1: a remote's `Retry-After` is input. An absurd one used to overflow the interval
/// arithmetic, leaving the job `processing` for its whole lease with no error recorded; now it
/// is clamped (12 h, as deliveries) and the job waits with the 429 recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_absurd_retry_after_is_clamped_and_the_429_recorded() {
    let (mut inst, remote, alice, post, replies_iri) = with_stored_post("/n").await;
    remote.script_doc("/n/replies", [Reply::RetryAfter(429, u64::MAX)]);
    inst.reply_worker(&fast_config()).await;
    let job = request(&inst, &alice, &post, &replies_iri).await;
    let waiting = eventually(WAIT, "the job to go back to waiting", || async {
        let j = inst.job(job).await;
        (j.status == "waiting" && j.error.is_some()).then_some(j)
    })
    .await;
    assert_eq!(waiting.error.as_deref(), Some("HTTP 429"));
    let (wait_s, host_cooldown_s): (f64, f64) = sqlx::query_as(
        "SELECT EXTRACT(EPOCH FROM j.next_attempt_at - now())::float8,
                EXTRACT(EPOCH FROM h.cooldown_until - now())::float8
           FROM reply_collection_jobs j JOIN reply_collection_hosts h ON h.host = j.host
          WHERE j.id = $1",
    )
    .bind(job)
    .fetch_one(&inst.pool)
    .await
    .expect("times");
    for (what, s) in [("job", wait_s), ("host", host_cooldown_s)] {
        assert!(
            (11.0 * 3600.0..=12.0 * 3600.0 + 60.0).contains(&s),
            "{what} waits {s} s"
        );
    }
    inst.shutdown().await;
}

/// A 429 in the middle of a walk: the next attempt resumes at the refused page instead of
/// re-walking (and re-spending the request cap on) the pages it had already stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_429_mid_walk_resumes_at_the_refused_page() {
    let (mut inst, remote, alice, post, replies_iri) = with_stored_post("/m").await;
    paged(&remote, &post, "/m", 6); // /m/replies → /m/page1 → /m/page2, two replies each
    remote.script_doc("/m/page2", [Reply::RetryAfter(429, 1)]);
    inst.reply_worker(&fast_config()).await;
    let job = request(&inst, &alice, &post, &replies_iri).await;
    let j = inst
        .until_status(job, &["completed", "partial", "failed"])
        .await;
    assert_eq!(
        (j.status.as_str(), j.items_stored, j.attempts),
        ("completed", 6, 2),
        "{j:?}"
    );
    let paths: Vec<String> = remote.hits().into_iter().map(|h| h.path).collect();
    assert_eq!(
        paths,
        ["/m/replies", "/m/page1", "/m/page2", "/m/page2"],
        "each page fetched once, the refused one again"
    );
    assert_eq!(j.requests, 4, "requests add up over the attempts");
    let frontier: Option<Value> =
        sqlx::query_scalar("SELECT frontier FROM reply_collection_jobs WHERE id = $1")
            .bind(job)
            .fetch_one(&inst.pool)
            .await
            .expect("frontier");
    assert_eq!(frontier, None, "a finished walk leaves no frontier");
    inst.shutdown().await;
}

/// A frontier this version cannot read (another version's, or damaged) costs a re-walk from
/// the top, not the job.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_unreadable_frontier_walks_from_the_top() {
    let (mut inst, remote, alice, post, replies_iri) = with_stored_post("/u").await;
    paged(&remote, &post, "/u", 4);
    let job = request(&inst, &alice, &post, &replies_iri).await;
    sqlx::query(
        "UPDATE reply_collection_jobs SET frontier = '[\"not\", \"a frontier\"]' WHERE id = $1",
    )
    .bind(job)
    .execute(&inst.pool)
    .await
    .expect("damage the frontier");
    inst.reply_worker(&fast_config()).await;
    let j = inst
        .until_status(job, &["completed", "partial", "failed"])
        .await;
    assert_eq!(
        (j.status.as_str(), j.items_stored),
        ("completed", 4),
        "{j:?}"
    );
    let paths: Vec<String> = remote.hits().into_iter().map(|h| h.path).collect();
    assert_eq!(paths, ["/u/replies", "/u/page1"]);
    inst.shutdown().await;
}

/// A thread's replies come from many servers: a reply listed by IRI on another server is not
/// skipped but handed to a job of its own, paced by that server's host row, with the depth left
/// and the same signing account — and its own replies are walked from there.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_reply_on_another_server_is_collected_by_a_job_of_its_own() {
    let mut inst = instance().await;
    let a = Peer::start().await;
    let b = Peer::start().await;
    let (alice, _) = inst.account("alice").await;
    a.expect_key(&alice.public_key_pem);
    b.expect_key(&alice.public_key_pem);
    let (_, post, replies_iri) = store_post(&inst, &a, "/t").await;
    let elsewhere = b.iri("/notes/b1");
    a.doc(
        "/t/replies",
        json!({ "type": "OrderedCollectionPage",
                "orderedItems": [a.note("/t/r1", &post, None), elsewhere] }),
    );
    b.doc(
        "/notes/b1",
        b.note(
            "/notes/b1",
            &post,
            Some(json!({ "type": "Collection", "items": [b.note("/notes/b1a", &b.iri("/notes/b1"), None)] })),
        ),
    );
    inst.reply_worker(&fast_config()).await;
    let job = request(&inst, &alice, &post, &replies_iri).await;
    let j = inst
        .until_status(job, &["completed", "partial", "failed"])
        .await;
    assert_eq!(
        (j.status.as_str(), j.items_stored),
        ("completed", 1),
        "{j:?}"
    );
    let child: Uuid = eventually(WAIT, "the other server's job", || async {
        sqlx::query_scalar::<_, Uuid>("SELECT id FROM reply_collection_jobs WHERE replies_iri = $1")
            .bind(&elsewhere)
            .fetch_optional(&inst.pool)
            .await
            .ok()
            .flatten()
    })
    .await;
    let c = inst
        .until_status(child, &["completed", "partial", "failed"])
        .await;
    assert_eq!(
        (c.status.as_str(), c.items_stored),
        ("completed", 2),
        "{c:?}"
    );
    let (host, depth, account, post_of): (String, i32, Option<Uuid>, String) = sqlx::query_as(
        "SELECT host, max_depth, account_id, post_iri FROM reply_collection_jobs WHERE id = $1",
    )
    .bind(child)
    .fetch_one(&inst.pool)
    .await
    .expect("child job");
    assert_eq!(
        Some(host),
        b.iri("").strip_prefix("http://").map(str::to_string)
    );
    assert_eq!((depth, account, post_of), (2, Some(alice.id), post.clone()));
    let stored = inst
        .count("SELECT count(*) FROM remote_posts WHERE iri LIKE '%/notes/b1%'")
        .await;
    assert_eq!(stored, 2, "the reply on the other server and its own reply");
    // Each server saw only its own documents, every request signed.
    assert!(
        a.hits()
            .iter()
            .all(|h| h.path.starts_with("/t/") && h.signed.is_ok())
    );
    let b_hits = b.hits();
    assert_eq!(b_hits.len(), 1, "{b_hits:?}");
    assert!(b_hits[0].signed.is_ok(), "{b_hits:?}");
    inst.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_500_fails_the_job_with_its_message() {
    let (mut inst, remote, alice, post, replies_iri) = with_stored_post("/n").await;
    remote.script_doc("/n/replies", [Reply::Status(500)]);
    inst.reply_worker(&fast_config()).await;
    let job = request(&inst, &alice, &post, &replies_iri).await;
    let j = inst.until_status(job, &["completed", "failed"]).await;
    assert_eq!(j.status, "failed");
    let err = j.error.unwrap_or_default();
    assert!(
        err.contains("HTTP 500") && err.contains("/n/replies"),
        "{err}"
    );
    assert_eq!(remote.hits().len(), 1, "no retry after a 500");
    assert_eq!(
        inst.count(
            "SELECT count(*) FROM reply_collection_hosts WHERE processing_job_id IS NOT NULL"
        )
        .await,
        0,
        "the host lease is released"
    );
    inst.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_job_no_account_asked_for_is_fetched_signed_as_the_instance_actor() {
    let mut inst = instance().await;
    let remote = Peer::start().await;
    // No local account at all: the instance actor still signs.
    let instance = inst
        .fed
        .instance_key(&inst.pool)
        .await
        .expect("instance key")
        .clone();
    remote.expect_key(&instance.public_key_pem);
    let (_, post, replies_iri) = store_post(&inst, &remote, "/n").await;
    remote.doc("/n/replies", json!({ "type": "Collection", "items": [] }));
    inst.reply_worker(&fast_config()).await;
    let job = replies::request(&inst.pool, &post, &replies_iri, None, 2)
        .await
        .expect("request")
        .id();
    let j = inst.until_status(job, &["completed", "failed"]).await;
    assert_eq!(j.status, "completed", "{j:?}");
    let hits = remote.hits();
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert!(hits.iter().all(|h| h.signed.is_ok()), "{hits:?}");
    assert_eq!(
        instance.signing.key_id,
        format!("{}/actor#main-key", inst.base)
    );
    inst.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_allow_private_address_the_guard_refuses_and_the_job_fails() {
    let (mut inst, remote, alice, post, replies_iri) = with_stored_post("/n").await;
    paged(&remote, &post, "/n", 2);
    // Same instance and keys, but a worker whose fetch guard refuses loopback.
    inst.reply_worker_with(&fast_config(), &[("ALLOW_PRIVATE_ADDRESS", "false")])
        .await;
    let job = request(&inst, &alice, &post, &replies_iri).await;
    let j = inst.until_status(job, &["completed", "failed"]).await;
    assert_eq!(j.status, "failed");
    // What the job shows says that the remote was not reached, not what the guard found
    // (issue 61 F7: the address a name resolves to is an oracle for internal names).
    let error = j.error.unwrap_or_default();
    assert_eq!(
        error,
        format!("GET {replies_iri}: server unreachable or refused"),
    );
    let (_, token) = inst.account("bob").await;
    let (code, view) = inst
        .api(
            "GET",
            &format!("/api/v1/reply-collections/{job}"),
            &token,
            None,
        )
        .await;
    assert_eq!(code, 200, "{view}");
    assert_eq!(view["error"], error.as_str());
    assert!(
        remote.hits().is_empty(),
        "nothing reached the loopback server"
    );
    inst.shutdown().await;
}

/// Issue 61 F7: requesting the replies of a post whose name resolves to an internal address
/// answered 422 "cannot fetch …: refused: localhost: 127.0.0.1 is a loopback … address": the
/// API told what an internal name resolves to. Every fetch failure is one generic 502 now,
/// the same for a name that resolves to a refused address and one that does not resolve.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_post_that_cannot_be_fetched_is_a_generic_502() {
    let inst = Instance::start(
        "web",
        &[("SECRET_KEY", SECRET), ("ALLOW_PRIVATE_ADDRESS", "false")],
    )
    .await;
    let (_, token) = inst.account("alice").await;
    let mut answers = Vec::new();
    for url in [
        "https://localhost/notes/1",
        "https://no-such-host.invalid/notes/1",
        "https://10.0.0.1/notes/1",
    ] {
        let body = json!({ "url": url }).to_string();
        let (code, err) = inst
            .api("POST", "/api/v1/reply-collections", &token, Some(&body))
            .await;
        let text = err["error"].as_str().unwrap_or_default().to_string();
        for leak in [
            "127.0.0.1",
            "::1",
            "loopback",
            "resolve",
            "ALLOW_PRIVATE_ADDRESS",
            url,
        ] {
            assert!(!text.contains(leak), "{url}: {err}");
        }
        answers.push((code, text));
    }
    assert_eq!(answers[0].0, 502, "{answers:?}");
    assert!(answers.iter().all(|a| *a == answers[0]), "{answers:?}");
    assert_eq!(
        inst.count("SELECT count(*) FROM reply_collection_jobs")
            .await,
        0
    );
    inst.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn shutdown_returns_a_running_collection_to_waiting() {
    let (mut inst, remote, alice, post, replies_iri) = with_stored_post("/n").await;
    paged(&remote, &post, "/n", 2);
    remote.script_doc("/n/replies", [Reply::Hang]);
    inst.reply_worker(&fast_config()).await;
    let job = request(&inst, &alice, &post, &replies_iri).await;
    eventually(WAIT, "the first request", || async {
        (!remote.hits().is_empty()).then_some(())
    })
    .await;
    assert_eq!(inst.job(job).await.status, "processing");
    inst.workers()[0].begin_shutdown();
    let j = inst.until_status(job, &["waiting"]).await;
    assert!(j.error.is_none(), "{j:?}");
    // Its wake-up is queued again: another worker picks it up (the hang was scripted once).
    inst.reply_worker(&fast_config()).await;
    let j = inst.until_status(job, &["completed", "failed"]).await;
    assert_eq!(
        (j.status.as_str(), j.items_stored),
        ("completed", 2),
        "{j:?}"
    );
    inst.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// Recovery.

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn recovery_dispatches_at_most_50_one_per_host_after_commit_and_never_fetches() {
    let inst = instance().await;
    let remote = Peer::start().await;
    let cfg = fast_config();
    // 60 hosts with two jobs each, created inside one transaction without queue messages.
    let mut tx = inst.pool.begin().await.expect("tx");
    for h in 0..60 {
        for k in 0..2 {
            let iri = format!("http://h{h}.invalid/notes/{k}");
            replies::request_in(&mut tx, &iri, &format!("{iri}/replies"), None, 2)
                .await
                .expect("request_in");
        }
    }
    // And one on the test remote: the scan must not touch it.
    let post = remote.iri("/notes/x");
    replies::request_in(&mut tx, &post, &format!("{post}/replies"), None, 2)
        .await
        .expect("request_in");
    let before = recovery::scan(&inst.pool, &cfg).await.expect("scan");
    assert_eq!(before.dispatched, 0, "uncommitted jobs are invisible");
    tx.commit().await.expect("commit");

    let r = recovery::scan(&inst.pool, &cfg).await.expect("scan");
    assert_eq!(r.dispatched, 50, "{r:?}");
    let queued = inst
        .count("SELECT count(*) FROM hollo_task_message_v1 WHERE kind = 'hollo.remote-reply-collect.v1'")
        .await;
    assert_eq!(queued, 50);
    let hosts = inst
        .count(
            "SELECT count(DISTINCT j.host) FROM hollo_task_message_v1 m
               JOIN reply_collection_jobs j ON j.id = (m.message->'data'->>'jobId')::uuid",
        )
        .await;
    assert_eq!(hosts, 50, "one job per host");
    // The next scan takes other hosts, never a second job of a host already dispatched.
    let r2 = recovery::scan(&inst.pool, &cfg).await.expect("scan");
    assert_eq!(r2.dispatched, 11, "{r2:?}");
    let per_host_max = inst
        .count(
            "SELECT COALESCE(max(n), 0) FROM (SELECT j.host, count(*) AS n FROM hollo_task_message_v1 m
               JOIN reply_collection_jobs j ON j.id = (m.message->'data'->>'jobId')::uuid GROUP BY j.host) x",
        )
        .await;
    assert_eq!(per_host_max, 1);
    assert!(remote.hits().is_empty(), "the scan fetched something");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn recovery_reclaims_100_expired_jobs_and_100_orphaned_hosts_and_pauses_when_busy() {
    let inst = instance().await;
    let cfg = fast_config();
    sqlx::query(
        "INSERT INTO reply_collection_jobs (id, post_iri, replies_iri, host, max_depth, status, claim, lease_until,
                                            next_dispatch_at)
         SELECT gen_random_uuid(), 'http://e.invalid/' || i, 'http://e.invalid/' || i || '/replies',
                'e' || i || '.invalid', 2, 'processing', 1, now() - interval '1 minute', now() + interval '1 hour'
           FROM generate_series(1, 120) i",
    )
    .execute(&inst.pool)
    .await
    .expect("expired jobs");
    sqlx::query(
        "INSERT INTO reply_collection_hosts (host, processing_job_id, processing_started_at)
         SELECT 'o' || i || '.invalid', gen_random_uuid(), now() FROM generate_series(1, 130) i",
    )
    .execute(&inst.pool)
    .await
    .expect("orphaned hosts");

    // A busy queue pauses the scan: nothing changes.
    sqlx::query(
        "INSERT INTO hollo_task_message_v1 (id, message, delay, created, due, ready_at, kind)
         SELECT gen_random_uuid(), '{\"type\":\"task\",\"taskName\":\"hollo.other.v1\"}', interval '0', now(), now(), now(),
                'hollo.other.v1' FROM generate_series(1, 200)",
    )
    .execute(&inst.pool)
    .await
    .expect("busy queue");
    let r = recovery::scan(&inst.pool, &cfg).await.expect("scan");
    assert!(r.paused, "{r:?}");
    assert_eq!(
        inst.count("SELECT count(*) FROM reply_collection_jobs WHERE status = 'processing'")
            .await,
        120
    );
    sqlx::query("DELETE FROM hollo_task_message_v1 WHERE kind = 'hollo.other.v1'")
        .execute(&inst.pool)
        .await
        .expect("drain");

    let r = recovery::scan(&inst.pool, &cfg).await.expect("scan");
    assert_eq!((r.expired, r.orphaned), (100, 100), "{r:?}");
    assert_eq!(r.dispatched, 50, "{r:?}");
    let r = recovery::scan(&inst.pool, &cfg).await.expect("scan");
    assert_eq!((r.expired, r.orphaned), (20, 30), "{r:?}");
}

// ---------------------------------------------------------------------------------------------
// Bad input.

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_input_and_unfetchable_posts_are_refused_and_store_nothing() {
    let (inst, remote, _alice, token) = with_remote().await;
    remote.doc(
        "/nothread",
        json!({ "id": remote.iri("/nothread"), "type": "Note" }),
    );
    let post = |b: &'static str| b.to_string();
    let cases: Vec<(&str, String, &str, Option<String>, u16)> = vec![
        (
            "POST",
            "/api/v1/reply-collections".to_string(),
            "",
            Some(post(r#"{"url":"https://x.example/1"}"#)),
            401,
        ),
        (
            "POST",
            "/api/v1/reply-collections".to_string(),
            "wrong-token",
            Some(post(r#"{"url":"https://x.example/1"}"#)),
            401,
        ),
        (
            "POST",
            "/api/v1/reply-collections".to_string(),
            &token,
            Some(post("not json")),
            400,
        ),
        (
            "POST",
            "/api/v1/reply-collections".to_string(),
            &token,
            Some(post(r#"{"uri":"x"}"#)),
            400,
        ),
        (
            "POST",
            "/api/v1/reply-collections".to_string(),
            &token,
            Some(post(r#"{"url":42}"#)),
            400,
        ),
        (
            "POST",
            "/api/v1/reply-collections".to_string(),
            &token,
            Some(post(r#"{"url":"not a url"}"#)),
            422,
        ),
        (
            "POST",
            "/api/v1/reply-collections".to_string(),
            &token,
            Some(post(r#"{"url":"ftp://x.example/1"}"#)),
            422,
        ),
        (
            "POST",
            "/api/v1/reply-collections".to_string(),
            &token,
            Some(json!({ "url": format!("{}/users/alice/1", inst.base) }).to_string()),
            422,
        ),
        (
            "POST",
            "/api/v1/reply-collections".to_string(),
            &token,
            // A remote that cannot be fetched is a 502 (the remote's fault, not the input's).
            Some(json!({ "url": remote.iri("/missing") }).to_string()),
            502,
        ),
        (
            "POST",
            "/api/v1/reply-collections".to_string(),
            &token,
            Some(json!({ "url": remote.iri("/nothread") }).to_string()),
            422,
        ),
        (
            "POST",
            "/api/v1/reply-collections".to_string(),
            &token,
            Some(json!({ "url": "http://169.254.169.254/latest/meta-data/" }).to_string()),
            502,
        ),
        (
            "GET",
            "/api/v1/reply-collections/not-a-uuid".to_string(),
            &token,
            None,
            404, // a malformed id names nothing: 404 on every route
        ),
        (
            "GET",
            format!("/api/v1/reply-collections/{}", Uuid::new_v4()),
            &token,
            None,
            404,
        ),
        (
            "GET",
            format!("/api/v1/reply-collections/{}", Uuid::new_v4()),
            "",
            None,
            401,
        ),
        (
            "GET",
            "/api/v1/statuses/nope/context".to_string(),
            &token,
            None,
            404,
        ),
        (
            "GET",
            format!("/api/v1/statuses/{}/context", Uuid::new_v4()),
            &token,
            None,
            404,
        ),
    ];
    for (method, path, tok, body, want) in cases {
        let (code, body_json) = inst.api(method, &path, tok, body.as_deref()).await;
        assert_eq!(code, want, "{method} {path} {body:?}: {body_json}");
        assert!(
            body_json["error"].is_string(),
            "{method} {path}: {body_json}"
        );
    }
    assert_eq!(
        inst.count("SELECT count(*) FROM reply_collection_jobs")
            .await,
        0
    );
    assert_eq!(inst.count("SELECT count(*) FROM remote_posts").await, 0);
    assert_eq!(
        inst.count("SELECT count(*) FROM hollo_task_message_v1")
            .await,
        0
    );
}

// ---------------------------------------------------------------------------------------------
// A worker killed mid-collection (real binary).

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_worker_killed_mid_collection_is_finished_by_another_after_the_lease() {
    let (inst, remote, alice, post, replies_iri) = with_stored_post("/n").await;
    paged(&remote, &post, "/n", 4);
    remote.script_doc("/n/page1", [Reply::Hang]);
    let env = inst.process_env(
        "worker",
        &[
            ("ALLOW_PRIVATE_ADDRESS", "true"),
            ("WORKER_POOL_MAX", "4"),
            ("ITEM_LOCK_POOL_SIZE", "1"),
            ("QUEUE_POLL_MS", "200"),
            ("REPLY_LEASE_SECONDS", "3"),
            ("RECOVERY_INTERVAL_SECONDS", "1"),
            ("REPLY_HOST_INTERVAL_MS", "100"),
        ],
    );
    let job = request(&inst, &alice, &post, &replies_iri).await;
    let first = Hollo::serve(&env);
    eventually(WAIT, "the first worker to reach page 1", || async {
        remote
            .hits()
            .iter()
            .any(|h| h.path == "/n/page1")
            .then_some(())
    })
    .await;
    let (status, lease_until): (String, Option<chrono::DateTime<chrono::Utc>>) =
        sqlx::query_as("SELECT status, lease_until FROM reply_collection_jobs WHERE id = $1")
            .bind(job)
            .fetch_one(&inst.pool)
            .await
            .expect("job");
    assert_eq!(status, "processing");
    let lease_until = lease_until.expect("a lease");
    drop(first); // SIGKILL mid-request
    let _second = Hollo::serve(&env);
    let j = eventually(
        Duration::from_secs(60),
        "the second worker to finish",
        || async {
            let j = inst.job(job).await;
            (j.status == "completed").then_some(j)
        },
    )
    .await;
    assert_eq!((j.items_stored, j.attempts), (4, 2), "{j:?}");
    // The second worker resumes at the page the first one died on (the saved frontier): the
    // first page is not walked again, and the retry comes only after the lease ran out.
    let hits = remote.hits();
    let paths: Vec<&str> = hits.iter().map(|h| h.path.as_str()).collect();
    assert_eq!(paths, ["/n/replies", "/n/page1", "/n/page1"], "{hits:?}");
    let retried = &hits[2];
    assert!(
        retried.wall >= lease_until,
        "reclaimed at {} before the lease ended at {lease_until}",
        retried.wall
    );
    let hits = remote.hits();
    assert!(hits.iter().all(|h| h.signed.is_ok()), "{hits:?}");
}
