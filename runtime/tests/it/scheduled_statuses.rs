//! Scheduled statuses (R-MAPI-6: `scheduled_at`, `/api/v1/scheduled_statuses`) over HTTP on a
//! real node and PostgreSQL: the bad requests first, then publication by a worker — never
//! before `scheduled_at`, exactly once, also when the worker is SIGKILLed mid-publish.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test panics with its message

use crate::support;

use chrono::{DateTime, TimeDelta, Utc};
use reqwest::Method;
use serde_json::{Value, json};
use support::api::{Client, WAIT, assert_error, id, users};
use support::eventually;
use support::multipart::upload_png;
use support::node::Instance;
use uuid::Uuid;

const KIND: &str = "hollo.scheduled-status.v1";

fn at(seconds: i64) -> String {
    (Utc::now() + TimeDelta::seconds(seconds)).to_rfc3339()
}

fn time(v: &Value) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(v.as_str().expect("a time"))
        .expect("RFC 3339")
        .with_timezone(&Utc)
}

/// Every bad request is refused with a clear 422/404 and stores nothing; another account
/// sees none of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_schedules_are_refused_and_nothing_is_stored() {
    let dir = support::files::temp_dir("hollo-scheduled");
    let inst = Instance::start("web", &[("FS_STORAGE_PATH", dir.to_str().unwrap())]).await;
    let [(_, alice_token, alice), (_, _, bob)] = users(&inst, ["alice", "bob"]).await;

    for (body, what) in [
        (
            json!({ "status": "x", "scheduled_at": "tomorrow" }),
            "ISO 8601",
        ),
        (
            json!({ "status": "x", "scheduled_at": "2026-13-45T99:00:00Z" }),
            "ISO 8601",
        ),
        // Mastodon's five minutes (the default offset).
        (
            json!({ "status": "x", "scheduled_at": at(60) }),
            "300 seconds",
        ),
        (json!({ "status": "", "scheduled_at": at(3600) }), "blank"),
        (
            json!({ "status": "x", "scheduled_at": at(3600), "visibility": "everyone" }),
            "visibility",
        ),
        (
            json!({ "status": "x".repeat(600), "scheduled_at": at(3600) }),
            "character limit",
        ),
        (
            json!({ "status": "x", "scheduled_at": at(3600),
                    "media_ids": [Uuid::new_v4().to_string()] }),
            "not found",
        ),
    ] {
        let a = alice.post(&body).await;
        assert_error(&a, 422, what);
    }
    // A reply to what alice cannot see: the same 404 as a post.
    let a = alice
        .post(&json!({ "status": "x", "scheduled_at": at(3600),
                        "in_reply_to_id": Uuid::now_v7().to_string() }))
        .await;
    assert_eq!(a.status, 404, "{}", a.body);
    assert_eq!(
        inst.count("SELECT count(*) FROM scheduled_statuses").await,
        0
    );
    assert_eq!(inst.count("SELECT count(*) FROM statuses").await, 0);

    // A good one, with an upload it keeps and an Idempotency-Key.
    let media = upload_png(&inst.base, &alice_token).await;
    let body = json!({ "status": "later", "scheduled_at": at(86_400), "visibility": "unlisted",
                       "media_ids": [id(&media)], "poll": null });
    let send = |key: &'static str| {
        let body = body.clone();
        let alice = &alice;
        async move {
            alice
                .send(
                    alice
                        .http
                        .post(format!("{}/api/v1/statuses", alice.base))
                        .header("idempotency-key", key)
                        .json(&body),
                )
                .await
        }
    };
    let first = send("k1").await.assert_ok();
    let s = first.body;
    assert_eq!(s["params"]["text"], "later");
    assert_eq!(s["params"]["visibility"], "unlisted");
    assert_eq!(s["params"]["media_ids"], json!([id(&media)]));
    assert_eq!(s["media_attachments"][0]["id"], media["id"]);
    assert!(
        s.get("content").is_none(),
        "a ScheduledStatus, not a Status: {s}"
    );
    let again = send("k1").await;
    assert_eq!(again.body["id"], s["id"], "the retry answers the first one");
    assert_eq!(
        inst.count("SELECT count(*) FROM scheduled_statuses").await,
        1
    );
    let sid = id(&s);

    // The upload it keeps can be neither deleted nor attached to another post meanwhile.
    let del = alice
        .act(Method::DELETE, &format!("/api/v1/media/{}", id(&media)))
        .await;
    assert_eq!(del.status, 404, "{}", del.body);
    let other = alice
        .post(&json!({ "status": "now", "media_ids": [id(&media)] }))
        .await;
    assert_error(&other, 422, "already attached");

    // Bob sees none of it: list, read, move, cancel.
    let list = bob.get("/api/v1/scheduled_statuses").await;
    assert_eq!(list.body, json!([]));
    let path = format!("/api/v1/scheduled_statuses/{sid}");
    assert_eq!(bob.get(&path).await.status, 404);
    let moved = bob
        .call(Method::PUT, &path, &json!({ "scheduled_at": at(7200) }))
        .await;
    assert_eq!(moved.status, 404);
    assert_eq!(bob.act(Method::DELETE, &path).await.status, 404);
    assert_eq!(
        alice
            .get("/api/v1/scheduled_statuses/not-an-id")
            .await
            .status,
        404
    );

    // Alice: a move too soon, into the past or to nothing is refused; a good move is kept.
    for (body, what) in [
        (json!({ "scheduled_at": at(10) }), "300 seconds"),
        (json!({ "scheduled_at": at(-3600) }), "future"),
        (json!({}), "missing"),
        (json!({ "scheduled_at": "soon" }), "ISO 8601"),
    ] {
        assert_error(&alice.call(Method::PUT, &path, &body).await, 422, what);
    }
    let when = at(2 * 86_400);
    let moved = alice
        .call(Method::PUT, &path, &json!({ "scheduled_at": when }))
        .await
        .assert_ok();
    assert_eq!(
        time(&moved.body["scheduled_at"]).timestamp(),
        time(&json!(when)).timestamp()
    );
    let list = alice.get("/api/v1/scheduled_statuses").await;
    assert_eq!(list.body.as_array().unwrap().len(), 1, "{}", list.body);

    // Mastodon's daily limit (25 on one day): the 26th of that day is refused.
    // Noon of that day: every time below (up to 500 s later) is on the same UTC day whatever
    // the hour the test runs at (from now + 3 days it crossed midnight just before 00:00 UTC).
    let day = (Utc::now() + TimeDelta::days(3))
        .date_naive()
        .and_hms_opt(12, 0, 0)
        .expect("noon")
        .and_utc();
    for i in 0..24 {
        let t = (day + TimeDelta::seconds(i)).to_rfc3339();
        alice
            .post(&json!({ "status": format!("d{i}"), "scheduled_at": t }))
            .await
            .assert_ok();
    }
    // The one moved two days ahead may share that day; count what that day holds.
    let on_day = inst
        .count(&format!(
            "SELECT count(*) FROM scheduled_statuses
              WHERE date_trunc('day', scheduled_at AT TIME ZONE 'UTC')
                  = date_trunc('day', '{}'::timestamptz AT TIME ZONE 'UTC')",
            day.to_rfc3339()
        ))
        .await;
    for i in on_day..25 {
        let t = (day + TimeDelta::seconds(100 + i)).to_rfc3339();
        alice
            .post(&json!({ "status": format!("e{i}"), "scheduled_at": t }))
            .await
            .assert_ok();
    }
    let t = (day + TimeDelta::seconds(500)).to_rfc3339();
    let over = alice
        .post(&json!({ "status": "one too many", "scheduled_at": t }))
        .await;
    assert_error(&over, 422, "per day");

    // Cancelling gives the upload back: it can be deleted now.
    alice.act(Method::DELETE, &path).await.assert_ok();
    assert_eq!(alice.get(&path).await.status, 404);
    alice
        .act(Method::DELETE, &format!("/api/v1/media/{}", id(&media)))
        .await
        .assert_ok();
    // A time already past is an ordinary post, as Mastodon's.
    let now = alice
        .posted(&json!({ "status": "right away", "scheduled_at": at(-60) }))
        .await;
    assert_eq!(now["content"], "<p>right away</p>");
    inst.shutdown().await;
}

/// A scheduled post with a poll and an image is published by a worker at its time, never
/// before, once; its poll counts from publication and its upload is the status's.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_worker_publishes_at_the_time_once() {
    let dir = support::files::temp_dir("hollo-scheduled");
    let env = [
        ("FS_STORAGE_PATH", dir.to_str().unwrap()),
        ("SCHEDULED_STATUS_MIN_SECONDS", "1"),
    ];
    let mut inst = Instance::start("web", &env).await;
    let (alice, alice_token) = inst.account("alice").await;
    let api = Client::new(&inst, Some(&alice_token));
    let media = upload_png(&inst.base, &alice_token).await;
    let with_media = api
        .posted(
            &json!({ "status": "scheduled #later", "scheduled_at": at(4),
                         "media_ids": [id(&media)] }),
        )
        .await;
    let with_poll = api
        .posted(&json!({ "status": "which?", "scheduled_at": at(5),
                         "poll": { "options": ["a", "b"], "expires_in": 600 } }))
        .await;
    // Moved later: the first wakeup comes early and only waits again.
    let later = api
        .posted(&json!({ "status": "moved", "scheduled_at": at(3) }))
        .await;
    let moved_to = at(8);
    api.call(
        Method::PUT,
        &format!("/api/v1/scheduled_statuses/{}", id(&later)),
        &json!({ "scheduled_at": moved_to }),
    )
    .await
    .assert_ok();
    // Nothing is published by a web node.
    assert_eq!(inst.count("SELECT count(*) FROM statuses").await, 0);

    inst.worker(&[]).await;
    let statuses = format!("/api/v1/accounts/{}/statuses", alice.id);
    let posted = eventually(WAIT, "all three are published", || async {
        let a = api.get(&statuses).await;
        (a.body.as_array().map(Vec::len) == Some(3)).then_some(a.body)
    })
    .await;
    let find = |text: &str| -> Value {
        posted
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["content"].as_str().unwrap_or_default().contains(text))
            .cloned()
            .unwrap_or_else(|| panic!("{text} in {posted}"))
    };
    for (s, scheduled) in [
        (find("scheduled"), &with_media),
        (find("which?"), &with_poll),
        (find("moved"), &json!({ "scheduled_at": moved_to })),
    ] {
        assert!(
            time(&s["created_at"]) >= time(&scheduled["scheduled_at"]) - TimeDelta::milliseconds(1),
            "never early: {s} vs {scheduled}"
        );
    }
    let s = find("scheduled");
    assert_eq!(s["media_attachments"][0]["id"], media["id"]);
    assert_eq!(s["tags"][0]["name"], "later");
    let p = find("which?");
    let expires = time(&p["poll"]["expires_at"]);
    let created = time(&p["created_at"]);
    assert!(
        (expires - created - TimeDelta::seconds(600))
            .num_seconds()
            .abs()
            <= 1,
        "the poll runs from publication: {p}"
    );
    assert_eq!(
        inst.count("SELECT count(*) FROM scheduled_statuses").await,
        0
    );
    assert_eq!(
        inst.count("SELECT count(*) FROM statuses").await,
        3,
        "once each"
    );
    let left = format!("SELECT count(*) FROM hollo_task_message_v1 WHERE kind = '{KIND}'");
    eventually(WAIT, "every wakeup is completed", || async {
        (inst.count(&left).await == 0).then_some(())
    })
    .await;
    // A duplicate wakeup (a redelivery) publishes nothing again.
    let mut tx = inst.pool.begin().await.unwrap();
    hollo_runtime::queue::enqueue(
        &mut *tx,
        hollo_runtime::queue::QueueName::Task,
        &hollo_runtime::queue::NewMessage::new(
            KIND,
            json!({ "scheduledStatusId": id(&with_media) }),
        ),
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    eventually(WAIT, "the duplicate is run", || async {
        (inst.count(&left).await == 0).then_some(())
    })
    .await;
    assert_eq!(
        inst.count("SELECT count(*) FROM statuses").await,
        3,
        "never twice"
    );
    inst.shutdown().await;
}

/// The poll-expiry standard: a worker SIGKILLed while it publishes (held on the scheduled
/// row's lock, so the kill lands inside the task) publishes nothing; once its lease lapses
/// another worker publishes it, exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_worker_killed_mid_publish_publishes_once() {
    let inst = Instance::start("web", &[("SCHEDULED_STATUS_MIN_SECONDS", "1")]).await;
    let (_, alice_token) = inst.account("alice").await;
    let api = Client::new(&inst, Some(&alice_token));
    let s = api
        .posted(&json!({ "status": "survives", "scheduled_at": at(2) }))
        .await;
    support::expiry::KilledMidTask {
        lock: "SELECT 1 FROM scheduled_statuses FOR UPDATE",
        kind: KIND,
        done: "SELECT count(*) FROM statuses WHERE content LIKE '%survives%'",
        before: 0,
        after: 1,
    }
    .check(&inst)
    .await;
    let published: DateTime<Utc> =
        sqlx::query_scalar("SELECT created_at FROM statuses WHERE content LIKE '%survives%'")
            .fetch_one(&inst.pool)
            .await
            .unwrap();
    assert!(published >= time(&s["scheduled_at"]) - TimeDelta::milliseconds(1));
    assert_eq!(
        inst.count("SELECT count(*) FROM scheduled_statuses").await,
        0
    );
    inst.shutdown().await;
}

/// A wakeup a moment early waits again, whenever in that moment the time passes: 60 statuses
/// due 10 to 600 ms after their wakeups are all published, once, none early. (The handler once
/// read the clock twice, decided "early" and then, in the same breath, "not early any more",
/// and completed the wakeup without a new one: the status was never published. `wake` itself
/// makes such wakeups — its delay counts from a clock read after its transaction began.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn wakeups_a_moment_early_still_publish() {
    let mut inst = Instance::start("web", &[("SCHEDULED_STATUS_MIN_SECONDS", "1")]).await;
    let (alice, alice_token) = inst.account("alice").await;
    let api = Client::new(&inst, Some(&alice_token));
    const N: usize = 60;
    for i in 0..N {
        // Spread over days: at most 25 on one day (Mastodon's DAILY_LIMIT).
        let when = at(3600 + 86_400 * (i as i64 / 20));
        api.posted(&json!({ "status": format!("edge {i}"), "scheduled_at": when }))
            .await;
    }
    inst.worker(&[]).await;

    // Every row due 10·k ms from now (about the pace one worker publishes them at), every wakeup due now, announced at commit.
    let mut tx = inst.pool.begin().await.unwrap();
    let due: Vec<(Uuid, String, DateTime<Utc>)> = sqlx::query_as(
        "UPDATE scheduled_statuses s
            SET scheduled_at = clock_timestamp() + n.k * interval '10 ms'
           FROM (SELECT id, row_number() OVER (ORDER BY id) AS k FROM scheduled_statuses) n
          WHERE n.id = s.id
         RETURNING s.id, s.params ->> 'text', s.scheduled_at",
    )
    .fetch_all(&mut *tx)
    .await
    .unwrap();
    assert_eq!(due.len(), N);
    for (id, _, _) in &due {
        hollo_runtime::queue::enqueue(
            &mut *tx,
            hollo_runtime::queue::QueueName::Task,
            &hollo_runtime::queue::NewMessage::new(KIND, json!({ "scheduledStatusId": id }))
                .coalesce(hollo_runtime::statuses::scheduled::wakeup_key(*id)),
        )
        .await
        .unwrap();
    }
    tx.commit().await.unwrap();

    let published = eventually(WAIT, "every status is published", || async {
        let rows: Vec<(String, DateTime<Utc>)> =
            sqlx::query_as("SELECT content, created_at FROM statuses WHERE account_id = $1")
                .bind(alice.id)
                .fetch_all(&inst.pool)
                .await
                .unwrap();
        (rows.len() >= N).then_some(rows)
    })
    .await;
    assert_eq!(published.len(), N, "once each");
    for (_, text, scheduled_at) in &due {
        let (_, created) = published
            .iter()
            .find(|(content, _)| content == text)
            .unwrap_or_else(|| panic!("{text} in {published:?}"));
        assert!(
            *created >= *scheduled_at - TimeDelta::milliseconds(1),
            "never early: {text} at {created}, due {scheduled_at}"
        );
    }
    assert_eq!(
        inst.count("SELECT count(*) FROM scheduled_statuses").await,
        0
    );
    inst.shutdown().await;
}
