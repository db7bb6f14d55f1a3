//! Import and cleanup jobs (R-JOB, SPEC.md §5) on a real PostgreSQL, each test with its own
//! database. Follows go to a test fediverse peer on 127.0.0.1 that serves any number of
//! accounts (WebFinger + actor documents) and records every activity its inboxes receive. The
//! 1,000-follow test runs three real worker processes and kills one mid-run.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test panics with its message

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use hollo_runtime::queue::{QueueName, enqueue_many};
use hollo_runtime::tasks::jobs::{self, JobsConfig, NewJob};
use hollo_runtime::tasks::{cleanups, imports};
use serde_json::{Value, json};
use sqlx::PgPool;
use support::api::Client;
use support::eventually;
use support::node::Instance;
use support::peer::Peer;
use support::process::Hollo;
use uuid::Uuid;

const SECRET: &str = "jobs-test-secret-0123456789abcdef0123";
const ADMIN: &str = "admin-token-for-tests";
const WAIT: Duration = Duration::from_secs(90);

// The test peer is support::peer::Peer: `acct:<name>@<peer>` for any name; names starting
// with `missing` are unknown (404), `down` always answer 503, `flaky` answer 503 twice.

// ---------------------------------------------------------------------------------------------
// Our instance: the web router on a free port; workers in-process (or real processes).

/// A web node (`RUNTIME_ENV`, `FS_STORAGE_PATH` and import limits as given) and, at will,
/// worker nodes of other environments on the same database (tests/support/node.rs).
async fn instance(environment: &str, storage: Option<PathBuf>) -> Instance {
    instance_with(environment, storage, &[]).await
}

async fn instance_with(
    environment: &str,
    storage: Option<PathBuf>,
    extra: &[(&str, &str)],
) -> Instance {
    let storage = storage.map(|p| p.display().to_string());
    let mut env = vec![
        ("SECRET_KEY", SECRET),
        ("ADMIN_TOKEN", ADMIN),
        ("RUNTIME_ENV", environment),
    ];
    if let Some(dir) = &storage {
        env.push(("FS_STORAGE_PATH", dir.as_str()));
    }
    env.extend_from_slice(extra);
    Instance::start("web", &env).await
}

/// What the job tests add to the shared instance (an inherent impl: `support` is part of this
/// test crate).
impl Instance {
    /// A worker node of `environment` (with `FS_STORAGE_PATH` when given): the task queue
    /// (4 slots, 4 item-lock connections), the activity queue and recovery, as in production.
    async fn worker_in(&mut self, environment: &str, storage: Option<PathBuf>) {
        let storage = storage.map(|p| p.display().to_string());
        let mut env = vec![("RUNTIME_ENV", environment)];
        if let Some(dir) = &storage {
            env.push(("FS_STORAGE_PATH", dir.as_str()));
        }
        self.worker(&env).await;
    }

    async fn import(&self, token: &str, query: &str, body: Vec<u8>) -> (u16, Value) {
        Client::bearer(self, token)
            .raw(
                reqwest::Method::POST,
                &format!("/api/v1/imports?{query}"),
                "text/csv",
                body,
            )
            .await
            .parts()
    }

    async fn request(
        &self,
        method: reqwest::Method,
        path: &str,
        token: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let api = Client::bearer(self, token);
        match body {
            Some(b) => api.call(method, path, &b).await,
            None => api.bare(method, path).await,
        }
        .parts()
    }

    /// Polls the job until every item has a final outcome; returns its view.
    async fn until_final(&self, path: &str, token: &str) -> Value {
        eventually(WAIT, "every item has a final outcome", || async {
            let (_, v) = self.request(reqwest::Method::GET, path, token, None).await;
            let done =
                v["succeeded"].as_i64()? + v["failed"].as_i64()? + v["cancelled"].as_i64()?;
            (done == v["total"].as_i64()?
                && matches!(v["status"].as_str()?, "completed" | "cancelled" | "failed"))
            .then_some(v)
        })
        .await
    }

    async fn no_job_rows(&self) {
        assert_eq!(self.count("SELECT count(*) FROM import_jobs").await, 0);
        assert_eq!(self.count("SELECT count(*) FROM import_job_items").await, 0);
        assert_eq!(self.count("SELECT count(*) FROM cleanup_jobs").await, 0);
        assert_eq!(
            self.count("SELECT count(*) FROM hollo_task_message_v1")
                .await,
            0
        );
    }
}

/// A multipart/form-data body with one file field, as browsers send an upload.
fn multipart(field: &str, content: &[u8]) -> (String, Vec<u8>) {
    support::multipart::form(&[(field, Some(("export.csv", "text/csv")), content)])
}

fn follows_csv(peer: &Peer, names: impl IntoIterator<Item = String>) -> Vec<u8> {
    let mut s = String::from("Account address,Show boosts,Notify on new posts,Languages\n");
    for n in names {
        s.push_str(&format!("{},true,false,\n", peer.handle_of(&n)));
    }
    s.into_bytes()
}

// ---------------------------------------------------------------------------------------------
// Bad input: 4xx with a clear message, nothing stored.

/// `jobs::recover` of imports in `environment`.
async fn recover(inst: &Instance, environment: &str) -> Option<usize> {
    jobs::recover(&inst.pool, imports::FAMILY, environment)
        .await
        .expect("recover")
}

/// Every task message is lost (as after a restore of an older backup).
async fn lose_task_messages(inst: &Instance) {
    sqlx::query("DELETE FROM hollo_task_message_v1")
        .execute(&inst.pool)
        .await
        .expect("lose");
}

/// Every import's next dispatch is overdue.
async fn make_dispatches_due(inst: &Instance) {
    sqlx::query("UPDATE import_jobs SET next_dispatch_at = now() - interval '5 minutes'")
        .execute(&inst.pool)
        .await
        .expect("due");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_inputs_are_rejected_and_leave_no_rows() {
    let inst = instance("production", None).await;
    let (_, token) = inst.account("mallory").await;

    let cases: Vec<(&str, Vec<u8>, u16, &str)> = vec![
        ("type=following", Vec::new(), 422, "empty"),
        ("type=following", b"  \n\n".to_vec(), 422, "empty"),
        (
            "type=following",
            b"Account address,Show boosts\n".to_vec(),
            422,
            "no rows",
        ),
        (
            "type=following",
            b"alice@a.example\nnot an address\n".to_vec(),
            422,
            "line 2",
        ),
        (
            "type=following",
            b"\xff\xfe\x00garbage".to_vec(),
            422,
            "UTF-8",
        ),
        (
            "type=following",
            b"a@b.example,perhaps\n".to_vec(),
            422,
            "true or false",
        ),
        (
            "type=bookmarks",
            b"javascript:alert(1)\n".to_vec(),
            422,
            "URL",
        ),
        (
            "type=contacts",
            b"a@b.example\n".to_vec(),
            400,
            "unknown import type",
        ),
        ("", b"a@b.example\n".to_vec(), 400, "missing `type`"),
        (
            "type=blocks&mode=replace",
            b"a@b.example\n".to_vec(),
            400,
            "unknown mode",
        ),
        (
            "type=blocks",
            vec![b'a'; hollo_runtime::config::ImportLimits::default().max_bytes + 1],
            413,
            "larger than 10 MiB",
        ),
    ];
    for (query, body, want, needle) in cases {
        let (status, v) = inst.import(&token, query, body).await;
        assert_eq!(status, want, "{query}: {v}");
        let msg = v["error"].as_str().unwrap_or_default();
        assert!(
            msg.contains(needle),
            "{query}: {msg:?} should mention {needle:?}"
        );
    }
    // No token, a wrong token.
    let (status, _) = inst
        .import("", "type=blocks", b"a@b.example\n".to_vec())
        .await;
    assert_eq!(status, 401);
    let (status, _) = inst
        .import("nope", "type=blocks", b"a@b.example\n".to_vec())
        .await;
    assert_eq!(status, 401);
    // A multipart form without the file field.
    let (ctype, form) = multipart("other", b"a@b.example\n");
    let resp = Client::bearer(&inst, &token)
        .raw(
            reqwest::Method::POST,
            "/api/v1/imports?type=blocks",
            &ctype,
            form,
        )
        .await;
    assert_eq!(resp.status, 400);

    // Cleanups: admin token, known kind, sane window.
    let admin = |body: Value| {
        inst.request(
            reqwest::Method::POST,
            "/api/v1/admin/cleanups",
            ADMIN,
            Some(body),
        )
    };
    let (s, v) = admin(json!({"kind": "everything"})).await;
    assert_eq!(s, 400, "{v}");
    let (s, v) = admin(json!({"kind": "remote_posts"})).await;
    assert_eq!(s, 422, "{v}");
    let (s, v) = admin(json!({"kind": "remote_posts", "olderThanDays": -3})).await;
    assert_eq!(s, 422, "{v}");
    let (s, v) = admin(json!({"kind": "media"})).await;
    assert_eq!(s, 422, "{v}");
    assert!(
        v["error"]
            .as_str()
            .unwrap_or_default()
            .contains("FS_STORAGE_PATH")
    );
    let (s, _) = inst
        .request(
            reqwest::Method::POST,
            "/api/v1/admin/cleanups",
            &token,
            Some(json!({"kind": "media"})),
        )
        .await;
    assert_eq!(s, 401, "account tokens are not admin tokens");
    let resp = reqwest::Client::new()
        .post(format!("{}/api/v1/admin/cleanups", inst.base))
        .bearer_auth(ADMIN)
        .body("{not json")
        .send()
        .await
        .expect("post");
    assert_eq!(resp.status().as_u16(), 400);

    inst.no_job_rows().await;
}

// ---------------------------------------------------------------------------------------------
// De-duplication (R-JOB-7).

/// IMPORT_MAX_MIB / IMPORT_MAX_ROWS as a node applies them: one row over the row limit is a
/// 422 naming the limit, one byte over the size limit a 413; neither leaves a row behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configured_import_limits_refuse_bigger_uploads_and_store_nothing() {
    let inst = instance_with(
        "production",
        None,
        &[("IMPORT_MAX_MIB", "1"), ("IMPORT_MAX_ROWS", "2")],
    )
    .await;
    let (_, token) = inst.account("hana").await;
    let (status, v) = inst
        .import(
            &token,
            "type=blocks",
            b"a@b.example\nc@d.example\n".to_vec(),
        )
        .await;
    assert_eq!(status, 202, "two rows fit: {v}");
    let before = inst.count("SELECT count(*) FROM import_job_items").await;
    let (status, v) = inst
        .import(
            &token,
            "type=mutes",
            b"a@b.example\nc@d.example\ne@f.example\n".to_vec(),
        )
        .await;
    assert_eq!(status, 422, "{v}");
    assert!(
        v["error"]
            .as_str()
            .unwrap_or_default()
            .contains("more than 2 rows"),
        "{v}"
    );
    let (status, v) = inst
        .import(&token, "type=mutes", vec![b'a'; 1024 * 1024 + 1])
        .await;
    assert_eq!(status, 413, "{v}");
    assert!(
        v["error"]
            .as_str()
            .unwrap_or_default()
            .contains("larger than 1 MiB"),
        "{v}"
    );
    assert_eq!(
        inst.count("SELECT count(*) FROM import_job_items").await,
        before,
        "refused uploads store nothing"
    );
    assert_eq!(inst.count("SELECT count(*) FROM import_jobs").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_bytes_return_the_running_job_but_start_fresh_after_a_failure() {
    let inst = instance("production", None).await;
    let (_, token) = inst.account("dana").await;
    let body = b"a@b.example\nc@d.example\n".to_vec();

    let (s1, first) = inst.import(&token, "type=blocks", body.clone()).await;
    assert_eq!(s1, 202, "{first}");
    assert_eq!(first["status"], "pending");
    assert_eq!(first["total"], 2);
    assert_eq!(first["succeeded"], 0);
    let id = first["id"].as_str().expect("id").to_string();

    // While queued: the same job, and nothing more stored.
    let (s2, again) = inst.import(&token, "type=blocks", body.clone()).await;
    assert_eq!(s2, 200, "{again}");
    assert_eq!(again["id"], id.as_str());
    assert_eq!(inst.count("SELECT count(*) FROM import_jobs").await, 1);
    assert_eq!(inst.count("SELECT count(*) FROM import_job_items").await, 2);

    // Another type or other bytes are other jobs.
    let (s, other) = inst.import(&token, "type=mutes", body.clone()).await;
    assert_eq!(s, 202);
    assert_ne!(other["id"], id.as_str());

    // After a failure the same bytes start a fresh job.
    sqlx::query("UPDATE import_jobs SET status = 'failed' WHERE id = $1::uuid")
        .bind(&id)
        .execute(&inst.pool)
        .await
        .expect("fail it");
    let (s3, fresh) = inst.import(&token, "type=blocks", body.clone()).await;
    assert_eq!(s3, 202, "{fresh}");
    assert_ne!(fresh["id"], id.as_str());

    // Completed counts as existing too.
    sqlx::query("UPDATE import_jobs SET status = 'completed' WHERE id = $1::uuid")
        .bind(fresh["id"].as_str())
        .execute(&inst.pool)
        .await
        .expect("complete it");
    let (s4, done) = inst.import(&token, "type=blocks", body).await;
    assert_eq!(s4, 200);
    assert_eq!(done["id"], fresh["id"]);

    // Another account's view of it is a 404.
    let (_, other_token) = inst.account("eve").await;
    let (s, _) = inst
        .request(
            reqwest::Method::GET,
            &format!("/api/v1/imports/{id}"),
            &other_token,
            None,
        )
        .await;
    assert_eq!(s, 404);
}

// ---------------------------------------------------------------------------------------------
// Execution: follows, options, failures.

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn imported_follows_are_resolved_stored_and_delivered_with_their_stored_ids() {
    let mut inst = instance("production", None).await;
    let peer = Peer::start().await;
    let (alice, token) = inst.account("alice").await;
    inst.worker_in("production", None).await;

    let mut csv = String::from("Account address,Show boosts,Notify on new posts,Languages\n");
    for i in 0..20 {
        csv.push_str(&format!(
            "{},false,true,\"en,ja\"\n",
            peer.handle_of(&format!("u{i}"))
        ));
    }
    csv.push_str(&format!("{},true,false,\n", peer.handle_of("missing1")));
    // Multipart, as Mastodon's web client sends it.
    let (ctype, form) = multipart("data", csv.as_bytes());
    let resp = reqwest::Client::new()
        .post(format!(
            "{}/api/v1/imports?type=following&mode=merge",
            inst.base
        ))
        .bearer_auth(&token)
        .header("content-type", ctype)
        .body(form)
        .send()
        .await
        .expect("post");
    assert_eq!(resp.status().as_u16(), 202);
    let job: Value = resp.json().await.expect("json");
    assert_eq!(job["total"], 21);
    let path = format!("/api/v1/imports/{}", job["id"].as_str().expect("id"));

    let v = inst.until_final(&path, &token).await;
    assert_eq!(v["status"], "completed", "{v}");
    assert_eq!(v["succeeded"], 20);
    assert_eq!(
        v["failed"], 1,
        "the unknown account fails at once (404 is not transient)"
    );
    let (attempts, error): (i32, String) =
        sqlx::query_as("SELECT attempts, error FROM import_job_items WHERE status = 'failed'")
            .fetch_one(&inst.pool)
            .await
            .expect("failed item");
    assert_eq!(attempts, 1);
    assert!(error.contains("HTTP 404"), "{error}");

    let rows: Vec<(String, String, bool, bool, Vec<String>)> = sqlx::query_as(
        "SELECT target_iri, follow_activity_id, show_reblogs, notify, languages FROM follows WHERE account_id = $1",
    )
    .bind(alice.id)
    .fetch_all(&inst.pool)
    .await
    .expect("follows");
    assert_eq!(rows.len(), 20);
    assert!(rows.iter().all(|r| !r.2 && r.3 && r.4 == ["en", "ja"]));
    let effects = inst.count("SELECT count(*) FROM import_job_effects").await;
    assert_eq!(effects, 20, "one stored activity per confirmed follow");
    let stored: BTreeMap<String, String> = rows.into_iter().map(|r| (r.0, r.1)).collect();
    let got = eventually(WAIT, "20 Follows delivered", || async {
        let f = peer.follows();
        (f.len() == 20).then_some(f)
    })
    .await;
    for (target, ids) in got {
        assert_eq!(stored.get(&target), Some(&ids[0]), "{target}");
        assert!(
            ids.iter().all(|i| i == &ids[0]),
            "one activity id per follow: {ids:?}"
        );
    }
    inst.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn transient_failures_retry_every_5s_and_fail_after_5_recorded_failures() {
    let mut inst = instance("production", None).await;
    let peer = Peer::start().await;
    let (_, token) = inst.account("fred").await;
    inst.worker_in("production", None).await;
    let body = follows_csv(&peer, ["flaky1".to_string(), "down1".to_string()]);
    let (s, job) = inst.import(&token, "type=following", body).await;
    assert_eq!(s, 202, "{job}");
    let path = format!("/api/v1/imports/{}", job["id"].as_str().expect("id"));
    let v = inst.until_final(&path, &token).await;
    assert_eq!(v["succeeded"], 1, "{v}");
    assert_eq!(v["failed"], 1, "{v}");
    let items: Vec<(String, String, i32, Option<String>)> = sqlx::query_as(
        "SELECT data->>'account', status, attempts, error FROM import_job_items ORDER BY id",
    )
    .fetch_all(&inst.pool)
    .await
    .expect("items");
    assert_eq!(items[0].1, "completed");
    assert_eq!(items[0].2, 2, "two recorded failures before it worked");
    assert_eq!(items[1].1, "failed");
    assert_eq!(items[1].2, 5, "fails on the 5th recorded failure");
    assert!(
        items[1]
            .3
            .as_deref()
            .unwrap_or_default()
            .contains("failed 5 times")
    );
    let hits = peer.webfinger_hits("down1");
    assert_eq!(hits, Some(5), "no attempt after the 5th failure");
    inst.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// Cancellation (R-JOB-5).

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cancel_mid_run_starts_no_new_items_and_prepared_follows_still_arrive() {
    let mut inst = instance("production", None).await;
    let peer = Peer::start().await;
    peer.set_webfinger_delay(Duration::from_millis(150));
    let (carol, token) = inst.account("carol").await;
    inst.worker_in("production", None).await;
    let body = follows_csv(&peer, (0..80).map(|i| format!("c{i}")));
    let (s, job) = inst.import(&token, "type=following", body).await;
    assert_eq!(s, 202, "{job}");
    let path = format!("/api/v1/imports/{}", job["id"].as_str().expect("id"));
    eventually(WAIT, "a few follows done", || async {
        let (_, v) = inst
            .request(reqwest::Method::GET, &path, &token, None)
            .await;
        (v["succeeded"].as_i64()? >= 5).then_some(())
    })
    .await;
    let (s, v) = inst
        .request(reqwest::Method::DELETE, &path, &token, None)
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["status"], "cancelled");
    let at_cancel = v["succeeded"].as_i64().expect("succeeded");

    let v = inst.until_final(&path, &token).await;
    // Only items already running when the job was cancelled (4 slots) could still finish.
    let succeeded = v["succeeded"].as_i64().expect("succeeded");
    assert!(succeeded <= at_cancel + 4, "{at_cancel} then {v}");
    assert!(v["cancelled"].as_i64().expect("cancelled") > 0, "{v}");
    assert_eq!(v["status"], "cancelled");
    assert_eq!(v["total"], 80);
    // Nothing is left queued for this job's items.
    inst.until_count(
        "no item messages left",
        "SELECT count(*) FROM hollo_task_message_v1 WHERE kind = 'hollo.import-item.v1'",
        |c| c == 0,
    )
    .await;

    // Every follow confirmed before or during the cancellation is still delivered.
    let stored: BTreeMap<String, String> =
        sqlx::query_as("SELECT target_iri, follow_activity_id FROM follows WHERE account_id = $1")
            .bind(carol.id)
            .fetch_all(&inst.pool)
            .await
            .expect("follows")
            .into_iter()
            .collect();
    assert_eq!(stored.len() as i64, succeeded);
    let got = eventually(WAIT, "prepared Follows delivered", || async {
        let f = peer.follows();
        (f.len() == stored.len()).then_some(f)
    })
    .await;
    for (target, ids) in got {
        assert_eq!(stored.get(&target), Some(&ids[0]));
    }
    // One worker runs at most 4 items at once (R-JOB-1), and it does run them in parallel.
    let most = peer.lookups_max();
    assert!((2..=4).contains(&most), "items at once: {most}");
    // Cancelling again is fine; the API says so.
    let (s, _) = inst
        .request(reqwest::Method::DELETE, &path, &token, None)
        .await;
    assert_eq!(s, 200);
    inst.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn overwrite_replaces_follows_mutes_and_blocks_undoing_the_follows_and_blocks_not_in_the_file()
 {
    let mut inst = instance("production", None).await;
    let peer = Peer::start().await;
    let (hana, token) = inst.account("hana").await;
    inst.worker_in("production", None).await;
    let run = |ty: &'static str, mode: &'static str, names: &'static [&'static str]| {
        let body = match ty {
            "following" => follows_csv(&peer, names.iter().map(|n| n.to_string())),
            // Mastodon's blocks export: one address per line, no header.
            "blocks" => names
                .iter()
                .map(|n| format!("{}\n", peer.handle_of(n)))
                .collect::<String>()
                .into_bytes(),
            _ => names
                .iter()
                .map(|n| format!("{},true\n", peer.handle_of(n)))
                .collect::<String>()
                .into_bytes(),
        };
        let inst = &inst;
        let token = &token;
        async move {
            let (s, job) = inst
                .import(token, &format!("type={ty}&mode={mode}"), body)
                .await;
            assert_eq!(s, 202, "{job}");
            let path = format!("/api/v1/imports/{}", job["id"].as_str().expect("id"));
            let v = inst.until_final(&path, token).await;
            assert_eq!(v["status"], "completed", "{v}");
        }
    };
    run("following", "merge", &["o1", "o2"]).await;
    run("mutes", "merge", &["o1", "o2"]).await;
    let first: String = sqlx::query_scalar(
        "SELECT follow_activity_id FROM follows WHERE account_id = $1 AND target_iri LIKE '%/users/o1'",
    )
    .bind(hana.id)
    .fetch_one(&inst.pool)
    .await
    .expect("o1 follow");
    run("blocks", "merge", &["b1", "b2"]).await;
    let block: String = sqlx::query_scalar(
        "SELECT block_activity_id FROM account_blocks WHERE account_id = $1 AND target_iri LIKE '%/users/b1'",
    )
    .bind(hana.id)
    .fetch_one(&inst.pool)
    .await
    .expect("b1 block");
    run("following", "overwrite", &["o2", "o3"]).await;
    run("mutes", "overwrite", &["o3"]).await;
    run("blocks", "overwrite", &["b2"]).await;

    let targets = |table: &'static str| {
        let pool = inst.pool.clone();
        async move {
            let sql = format!(
                "SELECT regexp_replace(target_iri, '^.*/users/', '') FROM {table} WHERE account_id = $1 ORDER BY 1"
            );
            sqlx::query_scalar::<_, String>(sqlx::AssertSqlSafe(sql))
                .bind(hana.id)
                .fetch_all(&pool)
                .await
                .expect("targets")
        }
    };
    assert_eq!(targets("follows").await, ["o2", "o3"]);
    assert_eq!(targets("account_mutes").await, ["o3"]);
    assert_eq!(targets("account_blocks").await, ["b2"]);
    // o2 was followed once: the overwrite did not send a second Follow.
    let undo = eventually(WAIT, "the Undo of o1's follow", || async {
        peer.bodies()
            .into_iter()
            .find(|a| a["type"] == "Undo" && a["object"]["type"] == "Follow")
    })
    .await;
    assert_eq!(undo["object"]["id"], first.as_str());
    // b1's block, gone from the file, is undone remotely with the id it was delivered under.
    let unblock = eventually(WAIT, "the Undo of b1's block", || async {
        peer.bodies()
            .into_iter()
            .find(|a| a["type"] == "Undo" && a["object"]["type"] == "Block")
    })
    .await;
    assert_eq!(unblock["object"]["id"], block.as_str());
    assert!(
        unblock["object"]["object"]
            .as_str()
            .is_some_and(|t| t.ends_with("/users/b1")),
        "{unblock}"
    );
    let undos = peer.received().iter().filter(|a| a.ty() == "Undo").count();
    assert_eq!(undos, 2, "one Undo per removed follow or block");
    let follows = peer.follows();
    assert_eq!(
        follows.values().map(Vec::len).sum::<usize>(),
        3,
        "{follows:?}"
    );
    inst.shutdown().await;
}

/// A work that hangs on its first run: the per-kind time limit aborts it and records a
/// failure; the retry succeeds (R-JOB-12).
struct Hangs(Arc<AtomicUsize>);

impl jobs::Work for Hangs {
    fn run<'a>(
        &'a self,
        _tx: &'a mut sqlx::PgConnection,
        _pool: &'a PgPool,
        _job: &'a jobs::JobRow,
        _item_id: i32,
        _data: &'a Value,
    ) -> futures::future::BoxFuture<'a, Result<Option<String>, jobs::ItemError>> {
        Box::pin(async move {
            if self.0.fetch_add(1, Ordering::SeqCst) == 0 {
                tokio::time::sleep(Duration::from_secs(3600)).await;
            }
            Ok(Some("done".into()))
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_item_over_its_kinds_time_limit_is_aborted_and_recorded_as_a_failure() {
    let inst = instance("production", None).await;
    let fam = jobs::Family {
        name: "slow",
        dispatch_kind: "hollo.test-slow-dispatch.v1",
        item_kind: "hollo.test-slow-item.v1",
        item_limit: Duration::from_secs(1),
        ..cleanups::FAMILY
    };
    let mut reg = hollo_runtime::queue::Registry::new();
    let runs = Arc::new(AtomicUsize::new(0));
    jobs::register(
        &mut reg,
        fam,
        Arc::new(Hangs(runs.clone())),
        JobsConfig::default(),
    );
    let mut tx = inst.pool.begin().await.expect("tx");
    let created = jobs::create(
        &mut tx,
        fam,
        NewJob {
            account_id: None,
            kind: "slow".into(),
            mode: "delete".into(),
            params: json!({}),
            content_sha256: None,
            environment: "production".into(),
            items: vec![json!({})],
        },
    )
    .await
    .expect("create");
    tx.commit().await.expect("commit");
    let jobs::Created::New(id) = created else {
        panic!("new job expected")
    };
    let consumer = support::consumer::start_consumer(
        &inst.pool,
        QueueName::Task,
        None,
        4,
        reg,
        Duration::from_secs(30),
    );
    let v = eventually(WAIT, "the slow job completes", || async {
        let v = jobs::show(&inst.pool, fam, id).await.ok()??;
        (v.status == "completed").then_some(v)
    })
    .await;
    assert_eq!(v.succeeded, 1);
    let attempts: i32 =
        sqlx::query_scalar("SELECT attempts FROM cleanup_job_items WHERE job_id = $1")
            .bind(id)
            .fetch_one(&inst.pool)
            .await
            .expect("attempts");
    assert_eq!(attempts, 1, "the aborted run is one recorded failure");
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    consumer.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// Recovery (R-JOB-4, 8, 9, 10).

async fn register_job(pool: &PgPool, account: Uuid, env: &str, items: usize) -> Uuid {
    let mut tx = pool.begin().await.expect("tx");
    let created = jobs::create(
        &mut tx,
        imports::FAMILY,
        NewJob {
            account_id: Some(account),
            kind: "bookmarks".into(),
            mode: "merge".into(),
            params: json!({}),
            content_sha256: Some(Uuid::new_v4().to_string()),
            environment: env.into(),
            items: (0..items)
                .map(|i| json!({ "url": format!("https://x.example/notes/{i}") }))
                .collect(),
        },
    )
    .await
    .expect("create");
    tx.commit().await.expect("commit");
    match created {
        jobs::Created::New(id) => id,
        jobs::Created::Existing(id) => id,
    }
}

async fn dispatches(pool: &PgPool) -> BTreeSet<String> {
    sqlx::query_scalar::<_, String>(
        "SELECT message->'data'->>'jobId' FROM hollo_task_message_v1 WHERE kind = 'hollo.import-dispatch.v1'",
    )
    .fetch_all(pool)
    .await
    .expect("dispatches")
    .into_iter()
    .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recovery_in_staging_never_touches_production_jobs() {
    let mut inst = instance("production", None).await;
    let (acct, _) = inst.account("olga").await;
    let prod = register_job(&inst.pool, acct.id, "production", 2).await;
    let staging = register_job(&inst.pool, acct.id, "staging", 2).await;
    // A job from before environments were recorded belongs to production.
    let legacy = register_job(&inst.pool, acct.id, "production", 2).await;
    sqlx::query("UPDATE import_jobs SET environment = NULL WHERE id = $1")
        .bind(legacy)
        .execute(&inst.pool)
        .await
        .expect("null env");
    // Lost messages, and dispatches overdue.
    lose_task_messages(&inst).await;
    make_dispatches_due(&inst).await;

    assert_eq!(recover(&inst, "staging").await, Some(1));
    assert_eq!(
        dispatches(&inst.pool).await,
        BTreeSet::from([staging.to_string()])
    );
    // The scan itself ran nothing.
    assert_eq!(
        inst.count("SELECT count(*) FROM import_job_items WHERE status <> 'pending'")
            .await,
        0
    );

    // Production's legacy job is an incomplete upload, and a dispatch of it reaches a staging
    // worker (the queue is shared): staging must not fail production's job.
    sqlx::query("DELETE FROM import_job_items WHERE job_id = $1 AND id = 2")
        .bind(legacy)
        .execute(&inst.pool)
        .await
        .expect("truncate");
    enqueue_many(
        &inst.pool,
        QueueName::Task,
        &[imports::FAMILY.dispatch_message(legacy)],
    )
    .await
    .expect("dispatch");
    inst.worker_in("staging", None).await;
    eventually(
        WAIT,
        "staging's job completes and the stray dispatch is consumed",
        || async {
            let s: String = sqlx::query_scalar("SELECT status FROM import_jobs WHERE id = $1")
                .bind(staging)
                .fetch_one(&inst.pool)
                .await
                .ok()?;
            (s == "completed" && !dispatches(&inst.pool).await.contains(&legacy.to_string()))
                .then_some(())
        },
    )
    .await;
    let others: Vec<String> =
        sqlx::query_scalar("SELECT status FROM import_jobs WHERE id = ANY($1) ORDER BY id")
            .bind(vec![prod, legacy])
            .fetch_all(&inst.pool)
            .await
            .expect("statuses");
    assert_eq!(others, ["pending", "pending"], "not failed, not run");
    assert_eq!(
        inst.count(
            "SELECT count(*) FROM import_job_items i JOIN import_jobs j ON j.id = i.job_id
                     WHERE j.environment IS DISTINCT FROM 'staging' AND i.status <> 'pending'"
        )
        .await,
        0
    );

    // The queue is shared: a staging worker still running could take production's fresh
    // dispatches before they are read here. It stops first.
    inst.stop_worker().await;
    assert_eq!(recover(&inst, "production").await, Some(2));
    assert!(
        dispatches(&inst.pool)
            .await
            .is_superset(&BTreeSet::from([prod.to_string(), legacy.to_string()]))
    );
    inst.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recovery_leaves_moving_jobs_alone_and_pauses_on_a_deep_queue() {
    let inst = instance("production", None).await;
    let (acct, _) = inst.account("pat").await;
    let running = register_job(&inst.pool, acct.id, "production", 2).await;
    lose_task_messages(&inst).await;
    // Another worker is running it: its heartbeat pushed the next dispatch out.
    sqlx::query(
        "UPDATE import_jobs SET status = 'processing', dispatched = true, updated_at = now(),
                next_dispatch_at = now() + interval '1 minute' WHERE id = $1",
    )
    .bind(running)
    .execute(&inst.pool)
    .await
    .expect("running");
    assert_eq!(recover(&inst, "production").await, Some(0));
    let status: String = sqlx::query_scalar("SELECT status FROM import_jobs WHERE id = $1")
        .bind(running)
        .fetch_one(&inst.pool)
        .await
        .expect("status");
    assert_eq!(
        status, "processing",
        "boot recovery never fails a job another worker runs"
    );

    // Stalled (no heartbeat for a minute): recovered — re-dispatched, not failed.
    sqlx::query("UPDATE import_jobs SET next_dispatch_at = now() - interval '1 second', updated_at = now() - interval '2 minutes'")
        .execute(&inst.pool)
        .await
        .expect("stall");
    // …but not while 200 messages are ready.
    let probes: Vec<_> = (0..200)
        .map(|i| {
            hollo_runtime::queue::NewMessage::new(
                "hollo.probe.v1",
                json!({ "key": format!("p{i}") }),
            )
        })
        .collect();
    enqueue_many(&inst.pool, QueueName::Task, &probes)
        .await
        .expect("probes");
    assert_eq!(recover(&inst, "production").await, None);
    lose_task_messages(&inst).await;
    assert_eq!(recover(&inst, "production").await, Some(1));
    assert_eq!(
        dispatches(&inst.pool).await,
        BTreeSet::from([running.to_string()])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_incomplete_legacy_upload_fails_asking_to_resubmit() {
    let mut inst = instance("production", None).await;
    let (acct, token) = inst.account("lena").await;
    let job = register_job(&inst.pool, acct.id, "production", 3).await;
    // An older version staged the file and stored only part of it.
    sqlx::query("DELETE FROM import_job_items WHERE job_id = $1 AND id > 1")
        .bind(job)
        .execute(&inst.pool)
        .await
        .expect("truncate");
    inst.worker_in("production", None).await;
    let path = format!("/api/v1/imports/{job}");
    let v = eventually(WAIT, "the job fails", || async {
        let (_, v) = inst
            .request(reqwest::Method::GET, &path, &token, None)
            .await;
        (v["status"] == "failed").then_some(v)
    })
    .await;
    assert!(
        v["error"].as_str().unwrap_or_default().contains("resubmit"),
        "{v}"
    );
    assert_eq!(v["succeeded"], 0, "nothing of it ran");
    assert_eq!(
        (v["failed"].as_i64(), v["total"].as_i64()),
        (Some(1), Some(3))
    );
    inst.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// Cleanups.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_post_cleanup_deletes_old_unbookmarked_posts_in_batches() {
    let mut inst = instance("production", None).await;
    let (acct, _) = inst.account("root").await;
    sqlx::query(
        "INSERT INTO remote_posts (iri, actor, body, created_at)
         SELECT 'https://r.example/notes/' || g, 'https://r.example/users/a', '{}', now() - interval '40 days'
           FROM generate_series(1, 1200) g",
    )
    .execute(&inst.pool)
    .await
    .expect("old posts");
    sqlx::query(
        "INSERT INTO remote_posts (iri, actor, body) SELECT 'https://r.example/new/' || g, 'https://r.example/users/a', '{}'
           FROM generate_series(1, 10) g",
    )
    .execute(&inst.pool)
    .await
    .expect("new posts");
    sqlx::query(
        "INSERT INTO bookmarks (account_id, post_iri) VALUES ($1, 'https://r.example/notes/7')",
    )
    .bind(acct.id)
    .execute(&inst.pool)
    .await
    .expect("bookmark");
    inst.worker_in("production", None).await;
    let (s, job) = inst
        .request(
            reqwest::Method::POST,
            "/api/v1/admin/cleanups",
            ADMIN,
            Some(json!({"kind": "remote_posts", "olderThanDays": 30})),
        )
        .await;
    assert_eq!(s, 202, "{job}");
    let path = format!("/api/v1/admin/cleanups/{}", job["id"].as_str().expect("id"));
    let v = inst.until_final(&path, ADMIN).await;
    assert_eq!(v["status"], "completed", "{v}");
    assert_eq!(v["total"], 3, "1,199 posts in batches of 500: {v}");
    assert_eq!(v["succeeded"], 3);
    assert_eq!(inst.count("SELECT count(*) FROM remote_posts").await, 11);
    assert_eq!(
        inst.count("SELECT count(*) FROM remote_posts WHERE iri = 'https://r.example/notes/7'")
            .await,
        1,
        "a bookmarked post stays"
    );
    inst.shutdown().await;
}

/// R-OP-OPS: `hollo cleanup remote-posts` (what the operator's CronJob runs) starts the
/// same job through `cleanups::start`, which the workers carry out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cleanup_started_like_the_cli_does_is_carried_out_by_the_workers() {
    let mut inst = instance("production", None).await;
    sqlx::query(
        "INSERT INTO remote_posts (iri, actor, body, created_at)
         SELECT 'https://r.example/notes/' || g, 'https://r.example/users/a', '{}', now() - interval '40 days'
           FROM generate_series(1, 20) g",
    )
    .execute(&inst.pool)
    .await
    .expect("old posts");
    inst.worker_in("production", None).await;
    let created = cleanups::start(&inst.pool, "production", "remote_posts", Some(30))
        .await
        .expect("start");
    let jobs::Created::New(id) = created else {
        panic!("a new job, got {created:?}");
    };
    let v = inst
        .until_final(&format!("/api/v1/admin/cleanups/{id}"), ADMIN)
        .await;
    assert_eq!(v["status"], "completed", "{v}");
    assert_eq!(inst.count("SELECT count(*) FROM remote_posts").await, 0);
    assert!(
        cleanups::start(&inst.pool, "production", "remote_posts", Some(0))
            .await
            .is_err(),
        "days are checked as the API checks them"
    );
    inst.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn media_cleanup_deletes_only_old_orphans_with_strict_keys() {
    let dir = support::files::temp_dir("hollo-media");
    let old = std::time::SystemTime::now() - Duration::from_secs(2 * 3600);
    let put = |rel: &str, aged: bool| {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(&p, b"x").expect("write");
        if aged {
            std::fs::File::options()
                .write(true)
                .open(&p)
                .and_then(|f| f.set_modified(old))
                .expect("age");
        }
        p
    };
    let (a, b, c) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
    let orphan = put(&format!("media/{a}/original.png"), true);
    let orphan_thumb = put(&format!("media/{a}/thumbnail.webp"), true);
    let kept = put(&format!("media/{b}/original.jpg"), true);
    let fresh = put(&format!("media/{c}/original.png"), false);
    let odd = put(&format!("media/{c}/Original.PNG"), true);
    let elsewhere = put("config/secret.txt", true);

    let mut inst = instance("production", Some(dir.clone())).await;
    sqlx::query("INSERT INTO media_files (key) VALUES ($1)")
        .bind(format!("media/{b}/original.jpg"))
        .execute(&inst.pool)
        .await
        .expect("media row");
    inst.worker_in("production", Some(dir.clone())).await;
    let (s, job) = inst
        .request(
            reqwest::Method::POST,
            "/api/v1/admin/cleanups",
            ADMIN,
            Some(json!({"kind": "media"})),
        )
        .await;
    assert_eq!(s, 202, "{job}");
    let path = format!("/api/v1/admin/cleanups/{}", job["id"].as_str().expect("id"));
    let v = inst.until_final(&path, ADMIN).await;
    assert_eq!(v["status"], "completed", "{v}");
    assert_eq!(v["total"], 2, "the scan and one batch of keys: {v}");
    assert!(!orphan.exists() && !orphan_thumb.exists());
    assert!(kept.exists(), "referenced");
    assert!(fresh.exists(), "younger than the grace period");
    assert!(odd.exists(), "not of the strict key shape");
    assert!(elsewhere.exists(), "outside media/");
    inst.shutdown_removing(dir).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cleanup_can_be_cancelled_and_shown() {
    let inst = instance("production", None).await;
    let (s, job) = inst
        .request(
            reqwest::Method::POST,
            "/api/v1/admin/cleanups",
            ADMIN,
            Some(json!({"kind": "remote_posts", "olderThanDays": 7})),
        )
        .await;
    assert_eq!(s, 202, "{job}");
    let path = format!("/api/v1/admin/cleanups/{}", job["id"].as_str().expect("id"));
    let (s, v) = inst
        .request(reqwest::Method::DELETE, &path, ADMIN, None)
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["status"], "cancelled");
    assert_eq!(v["cancelled"], 1);
    let (s, v) = inst.request(reqwest::Method::GET, &path, ADMIN, None).await;
    assert_eq!((s, v["status"].as_str()), (200, Some("cancelled")));
    let (s, _) = inst
        .request(reqwest::Method::GET, &path, "wrong", None)
        .await;
    assert_eq!(s, 401);
}

// ---------------------------------------------------------------------------------------------
// The real binary: 1,000 follows, three workers, one killed mid-run.

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_thousand_follows_on_three_workers_survive_a_kill_and_deliver_once_per_id() {
    let inst = instance("production", None).await;
    let peer = Peer::start().await;
    let (ivan, token) = inst.account("ivan").await;
    let env = inst.process_env(
        "worker",
        &[
            ("ALLOW_PRIVATE_ADDRESS", "true"),
            ("QUEUE_LEASE_SECONDS", "3"),
            ("QUEUE_POLL_MS", "200"),
            ("WORKER_POOL_MAX", "8"),
        ],
    );
    let body = follows_csv(&peer, (0..1000).map(|i| format!("f{i}")));
    let (s, job) = inst.import(&token, "type=following", body).await;
    assert_eq!(s, 202, "{job}");
    let path = format!("/api/v1/imports/{}", job["id"].as_str().expect("id"));

    let victim = Hollo::serve(&env);
    let _b = Hollo::serve(&env);
    let _c = Hollo::serve(&env);
    eventually(WAIT, "the import is under way", || async {
        let (_, v) = inst
            .request(reqwest::Method::GET, &path, &token, None)
            .await;
        (v["succeeded"].as_i64()? >= 150).then_some(())
    })
    .await;
    drop(victim); // SIGKILL mid-run, items and deliveries in flight

    let v = eventually(Duration::from_secs(300), "1,000 final outcomes", || async {
        let (_, v) = inst
            .request(reqwest::Method::GET, &path, &token, None)
            .await;
        (v["status"] == "completed").then_some(v)
    })
    .await;
    assert_eq!(v["succeeded"], 1000, "{v}");
    assert_eq!(v["failed"], 0, "{v}");
    assert_eq!(v["cancelled"], 0, "{v}");
    assert_eq!(
        inst.count("SELECT count(*) FROM import_job_items WHERE attempts > 0")
            .await,
        0,
        "the kill consumed no attempt"
    );
    let stored: BTreeMap<String, String> =
        sqlx::query_as("SELECT target_iri, follow_activity_id FROM follows WHERE account_id = $1")
            .bind(ivan.id)
            .fetch_all(&inst.pool)
            .await
            .expect("follows")
            .into_iter()
            .collect();
    assert_eq!(stored.len(), 1000);
    assert_eq!(
        inst.count("SELECT count(*) FROM outbox_activities WHERE type = 'Follow'")
            .await,
        1000
    );
    let got = eventually(
        Duration::from_secs(120),
        "every Follow delivered",
        || async {
            let f = peer.follows();
            (f.len() == 1000
                && inst
                    .count("SELECT count(*) FROM deliveries WHERE state <> 'delivered'")
                    .await
                    == 0)
                .then_some(f)
        },
    )
    .await;
    let mut redelivered = 0;
    for (target, ids) in &got {
        // Exactly one activity per follow; a delivery cut by the kill may arrive again, always
        // with the same stored id (R-JOB-6).
        let distinct: BTreeSet<&String> = ids.iter().collect();
        assert_eq!(distinct.len(), 1, "{target}: {ids:?}");
        assert_eq!(stored.get(target), Some(&ids[0]), "{target}");
        redelivered += ids.len() - 1;
    }
    assert!(
        redelivered <= 10,
        "only deliveries in flight at the kill repeat: {redelivered}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_process_recovers_a_job_whose_dispatch_was_lost_at_start() {
    let inst = instance("production", None).await;
    let (acct, token) = inst.account("rita").await;
    let job = register_job(&inst.pool, acct.id, "production", 3).await;
    let staging = register_job(&inst.pool, acct.id, "staging", 3).await;
    // The messages are lost (e.g. a restore of an older backup) and the jobs are overdue.
    lose_task_messages(&inst).await;
    make_dispatches_due(&inst).await;
    let _w = Hollo::serve(&inst.process_env("worker", &[("QUEUE_POLL_MS", "200")]));
    // The scan at start re-enqueues the dispatch; the worker then runs the items.
    let path = format!("/api/v1/imports/{job}");
    let v = inst.until_final(&path, &token).await;
    assert_eq!(
        (v["status"].as_str(), v["succeeded"].as_i64()),
        (Some("completed"), Some(3)),
        "{v}"
    );
    assert_eq!(
        inst.count("SELECT count(*) FROM bookmarks").await,
        3,
        "the production job's rows"
    );
    let (s, v) = inst
        .request(
            reqwest::Method::GET,
            &format!("/api/v1/imports/{staging}"),
            &token,
            None,
        )
        .await;
    assert_eq!(
        (s, v["status"].as_str()),
        (200, Some("pending")),
        "another environment's job waits"
    );
}
